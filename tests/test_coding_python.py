"""mcpgym.servers.coding runs exactly the server's interpreter in the sandbox (issue 11: shared libpython).

A Python built with a shared libpython (pyenv, several distributions) finds it through its rpath:
the sandbox mounts the installation at its own path, so the interpreter inside loads its own
library (not the system's libpython of the same minor version, nor none at all: status 127).
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import anyio
import pytest

from mcpgym.servers.coding import Sandbox, Task
from mcpgym.servers.coding._host.interpreter import Interpreter, grade
from mcpgym.servers.coding._host.workspace import Workspace
from tests.coding.helpers import QUICK, new_sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


PROBE = (
    "import sys\n"
    "print(sys.version)\n"
    "print(sorted({line.split()[-1] for line in open('/proc/self/maps') if 'libpython' in line}))\n"
)
OTHERS = sorted(Path.home().glob(".pyenv/versions/3.1[1-9]*/bin/python3"))  # what this machine also has
ADD = Task("mine/add", "def add(a, b):\n", "def check(candidate):\n    assert candidate(2, 3) == 5\n", "add")


def own_libpython() -> list[str]:
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return []
    maps = Path("/proc/self/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in maps if "libpython" in line})


async def sandboxed(sandbox: Sandbox) -> list[str]:
    workspace = Workspace(sandbox.new_uid(), 1 << 16)
    interpreter = Interpreter(sandbox, workspace.root, workspace.uid)
    try:
        reply = await interpreter.run(PROBE)
    finally:
        await interpreter.close()
        await workspace.remove()
        sandbox.release_uid(workspace.uid)
    assert not reply.is_error, reply.text
    return reply.text.splitlines()


async def test_the_sandbox_runs_the_servers_own_interpreter_and_its_own_libpython() -> None:
    version, libraries = await sandboxed(new_sandbox(QUICK))
    assert version == sys.version
    assert libraries == repr(own_libpython())


@pytest.mark.parametrize("python", OTHERS, ids=[p.parent.parent.name for p in OTHERS])
async def test_every_installed_python_runs_itself_in_the_sandbox_and_grades(python: Path) -> None:
    sandbox = new_sandbox(QUICK, python=python)
    version, libraries = await sandboxed(sandbox)
    assert version.split()[0] == python.parent.parent.name  # e.g. 3.12.1
    assert libraries == repr([f"{sandbox.libdir}/libpython{version[:4].rstrip('.')}.so.1.0"])
    with anyio.fail_after(30):
        assert (await grade(sandbox, ADD, "def add(a, b):\n    return a + b\n")).reward == 1.0

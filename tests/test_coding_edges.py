"""mcpgym.servers.coding edge cases found in review: resources outside the rlimits, forged protocol lines,
zygote lifetime, uids shared between server processes, deep trees, cancelled calls."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

import mcpgym
from mcpgym._isolation import uids as _uids
from mcpgym.servers.coding import Limits, Sandbox, Task
from mcpgym.servers.coding._host.grader import _Zygote, grader
from mcpgym.servers.coding._host.interpreter import Interpreter, grade
from mcpgym.servers.coding._host.workspace import Workspace
from tests.coding.helpers import QUICK, coding, new_sandbox

# The squatter's interpreter: one a uid other than root's can run (not under /root/.pyenv, 0700).
_SYSTEM_PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SANDBOX = new_sandbox(QUICK)
ADD = Task(
    task_id="mine/add",
    prompt="def add(a, b):\n",
    test="def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 5) == 5\n",
    entry_point="add",
)
BOUNDED = Limits(**{**QUICK.__dict__, "workspace_bytes": 4 << 20, "workspace_files": 64})


async def run(env: mcpgym.AsyncEnv, code: str) -> mcpgym.StepResult[object]:
    return await env.call_tool("run_python", {"code": code})  # type: ignore[return-value]


@pytest.mark.skipif(not SANDBOX.protections.workspace_quota, reason="a workspace tmpfs needs a root server")
async def test_tmp_is_read_only_and_the_workspace_has_a_size_and_file_quota() -> None:
    async with mcpgym.connect(coding(BOUNDED)) as env:
        await env.reset(seed=0)
        probe = "import os, tempfile\nprint(os.environ['TMPDIR'] == os.getcwd() == tempfile.gettempdir())"
        assert (await run(env, probe)).text.strip() == "True"
        if SANDBOX.protections.isolation == "bwrap":
            tmp = await run(env, "open('/tmp/x', 'wb')")
            assert tmp.is_error and ("Read-only file system" in tmp.text or "PermissionError" in tmp.text)
        full = await run(env, "for i in range(8):\n    open(f'f{i}', 'wb').write(b'x' * ((1 << 20) - 1))")
        assert full.is_error and "No space left on device" in full.text
        many = await run(env, "import os\nfor i in range(100):\n    os.mkdir(f'd{i}')")
        assert many.is_error and "No space left on device" in many.text
        refused = await env.call_tool("write_file", {"path": "more.txt", "content": "x" * 1000})
        assert refused.is_error and "No space left on device" in refused.text


@pytest.mark.skipif(not SANDBOX.protections.workspace_quota, reason="a grading tmpfs needs a root server")
async def test_what_a_submission_writes_is_bounded_in_total() -> None:
    sandbox = new_sandbox(BOUNDED)
    fill = "for i in range(8):\n    open(f'f{i}', 'wb').write(b'x' * ((1 << 20) - 1))\n"
    verdict = await grade(sandbox, ADD, fill + "def add(a, b):\n    return a + b\n")
    assert verdict.detail == "failed OSError"
    assert (await grade(sandbox, ADD, "def add(a, b):\n    return a + b\n")).reward == 1.0


def forge(verdict: str) -> str:
    return f"import os\nos.write(3, b'{verdict}\\n')\nos._exit(0)\n"


async def test_a_forged_verdict_of_any_kind_earns_nothing_with_or_without_partial_credit() -> None:
    sandbox = new_sandbox(QUICK)
    for partial in (False, True):
        for line in ("passed", "partial 2/2", "partial 1/2", "partial 6579558/538993512"):
            verdict = await grade(sandbox, ADD, forge(line), partial=partial)
            assert verdict.reward == 0.0, (line, partial, verdict)
            assert "solution_exited" in verdict.signals


FORGED_MARKER = r"""
import sys, os
f = sys._getframe()
while 'header' not in f.f_locals:  # the worker's loop: it holds this call's token
    f = f.f_back
os.write(1, b'\0' + f.f_locals['token'] + b' ')
while True:
    os.write(1, b'x' * (1 << 16))
"""


async def test_a_forged_end_of_call_marker_without_a_newline_is_a_flood() -> None:
    async with mcpgym.connect(coding()) as env:
        await env.reset(seed=0)
        await run(env, "kept = 1")
        result = await run(env, FORGED_MARKER)
        assert result.is_error and "bytes of output; the process tree was killed" in result.text, result.text
        assert "fresh interpreter" in (await run(env, "1")).text


def zygote_from_a_thread_that_exited(sandbox: Sandbox, loop: object) -> _Zygote:
    started: list[_Zygote] = []
    thread = threading.Thread(target=lambda: started.append(_Zygote.start(sandbox, loop)))
    thread.start()
    thread.join()
    assert thread.native_id is not None
    while os.path.exists(f"/proc/self/task/{thread.native_id}"):  # the kernel has not finished the thread's exit
        os.sched_yield()
    return started[0]


async def test_the_zygote_outlives_the_thread_that_started_it() -> None:
    """anyio retires idle worker threads; a zygote tied to its starter thread's life died with it."""
    sandbox = new_sandbox(QUICK)
    zygote = zygote_from_a_thread_that_exited(sandbox, anyio.lowlevel.current_token().native_token)
    grader(sandbox)._zygote = zygote
    assert (await grade(sandbox, ADD, "def add(a, b):\n    return a + b\n")).reward == 1.0
    assert grader(sandbox)._zygote is zygote and zygote.process.poll() is None


# A process left under a uid, as sandboxed code may leave it: dumpable, or not (then the files in
# /proc/PID are root's; the directory itself keeps the process's uid, which is what the scan reads).
_SQUATTERS = {
    "dumpable": "import sys\nprint(flush=True)\nsys.stdin.read()",
    "not dumpable": "import ctypes, sys\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\nprint(flush=True)\nsys.stdin.read()",
}


@pytest.mark.skipif(not SANDBOX.protections.own_uid, reason="uids of their own need a root server")
@pytest.mark.parametrize("squatter_kind", list(_SQUATTERS))
def test_uids_are_claimed_host_wide_and_a_uid_with_live_processes_is_skipped(
    monkeypatch: pytest.MonkeyPatch, squatter_kind: str, own_locks: Path
) -> None:
    """Every server process counts uids from the same base: a fresh one must skip what another holds.
    The holder and this test share a lock directory of their own, so coding servers elsewhere on
    the machine cannot take the uids the assertion counts."""
    claim = (
        "import sys\nfrom mcpgym.servers.coding import Sandbox\nfrom mcpgym._isolation import uids\n"
        "print(Sandbox().new_uid(), *uids._RESERVE, flush=True)\nsys.stdin.read()"
    )
    with subprocess.Popen([sys.executable, "-c", claim], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        batch = [int(uid) for uid in holder.stdout.readline().split()]  # the batch it reserved
        held = min(batch)
        squatting = max(batch) + 1  # the first uid past that batch
        squat = [_SYSTEM_PYTHON, "-I", "-S", "-c", _SQUATTERS[squatter_kind]]
        # Left behind by an earlier server (its stdin a pipe of ours: it ends with the test).
        with subprocess.Popen(squat, user=squatting, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as squatter:
            assert squatter.stdout is not None and squatter.stdout.readline() == b"\n"  # running, prctl done
            owner = os.stat(f"/proc/{squatter.pid}/status").st_uid
            assert owner == (0 if squatter_kind == "not dumpable" else squatting)  # the premise
            # Count on from where that process's count from the base found its batch: uids below
            # it may be free by now (a sandbox of another test that ran under one has exited
            # since), and would be handed out before the ones this test is about.
            monkeypatch.setattr(_uids, "_NEXT", itertools.count(held - _uids._BASE))
            reserve: deque[int] = deque()
            monkeypatch.setattr(_uids, "_RESERVE", reserve)  # none reserved yet, as in that process
            sandbox = new_sandbox(QUICK)
            claimed: list[int] = []
            while not claimed or claimed[-1] < squatting:  # uids are handed out in increasing order
                uid = sandbox.new_uid()
                assert uid is not None
                claimed.append(uid)
            squatter.kill()
        holder.stdin.close()
    # Past the holder's batch and the squatter's uid, and neither handed out on the way.
    assert claimed[-1] > squatting and not {*batch, squatting} & set(claimed)
    for uid in (*claimed, *reserve):
        sandbox.release_uid(uid)


@pytest.mark.skipif(not SANDBOX.protections.own_uid or shutil.which("unshare") is None, reason="unshare needs root")
async def test_the_cpu_limit_fires_under_unshare_where_the_worker_would_be_pid_1(tmp_path: Path) -> None:
    """A pid namespace's init gets no default-action signals (SIGXCPU included) from inside it."""
    sandbox = Sandbox(Limits(timeout=10.0, cpu_seconds=1), "unshare")
    os.chmod(tmp_path, 0o777)
    interpreter = Interpreter(sandbox, tmp_path, None)  # the server's uid: see the RFC on /root/.pyenv
    try:
        assert (await interpreter.run("import os\nos.getpid() != 1")).text.strip() == "True"
        busy = await interpreter.run("while True:\n    pass")
        assert busy.is_error and "SIGXCPU" in busy.text, busy.text
    finally:
        await interpreter.close()


def deep_chain(root: Path, depth: int) -> None:
    """`depth` nested directories (sandboxed code makes them with relative mkdir/chdir: no path limit)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)


async def test_a_very_deep_tree_is_listed_to_a_depth_limit_and_removed() -> None:
    workspace = Workspace(None, 1 << 16)
    await anyio.to_thread.run_sync(deep_chain, workspace.root, 3000)
    listing = workspace.list()
    assert listing[0] == "d/" and "deeper than" in listing[-1] and len(listing) < 100
    await workspace.remove()
    assert not await anyio.Path(workspace.root).exists()


async def test_a_cancelled_call_kills_the_interpreter_instead_of_leaving_it_busy(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o777)
    interpreter = Interpreter(SANDBOX, tmp_path, None)
    try:
        await interpreter.run("x = 1")  # the worker is up: the next request goes straight down its pipe
        async with anyio.create_task_group() as tg:
            tg.start_soon(interpreter.run, "while True:\n    pass")
            await anyio.wait_all_tasks_blocked()  # sent; waiting for the answer
            tg.cancel_scope.cancel()
        with anyio.fail_after(QUICK.timeout / 2):  # not stuck behind the old loop until the timeout
            after = await interpreter.run("1 + 1")
        assert not after.is_error and "fresh interpreter" in after.text and after.text.endswith("2\n")
    finally:
        await interpreter.close()


@pytest.mark.skipif(not SANDBOX.protections.namespaces, reason="the launcher's tree is its pid namespace")
async def test_closing_a_worker_never_signals_the_group_of_a_reaped_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the launcher is reaped its pid may be reused (a new session leader's group id): the
    kill must have ended with the namespace, not with a killpg on that number."""
    signalled: list[int] = []
    killpg = os.killpg

    def recording(pgid: int, signum: int) -> None:
        signalled.append(pgid)
        killpg(pgid, signum)

    monkeypatch.setattr(os, "killpg", recording)
    workspace = Workspace(None, 1 << 16)
    interpreter = Interpreter(SANDBOX, workspace.root, None)
    try:
        assert (await interpreter.run("1 + 1")).text.strip() == "2"
        worker = interpreter._worker
        assert worker is not None
        launcher = worker.process.pid
    finally:
        await interpreter.close()
        await workspace.remove()
    assert worker.process.returncode is not None  # the premise: it was reaped by the close
    assert launcher not in signalled

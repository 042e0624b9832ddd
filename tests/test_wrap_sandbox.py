"""The wrapped server's sandbox under attack (#23 item 5) and what it lets real servers do (#24).

A wrapped server is untrusted code a policy drives: it nests directories past the recursion
limit, fills the disk, reads what root can read, paginates forever, answers with hundreds of
MiB. Each test fails on the sandbox before #23 (6921b4e..c4225d0). They need bubblewrap and a root
host (as CI and scripts/setup.sh have): they fail, never skip, without them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import mcpgym
from mcpgym.wrapping import FileCheck, Sandbox, TaskSpec, Verify, prepare, wrap
from tests.wrap_envs import FILESYSTEM, HERE, uid_locks_in

pytestmark = pytest.mark.anyio

SERVER = [sys.executable, str(HERE / "wrap_server.py")]
HOSTILE = [sys.executable, str(HERE / "wrap_hostile.py")]


@pytest.fixture(autouse=True, scope="module")
def own_uid_locks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Uids claimed here are locked in a directory of this module's, not the host's (#23 item 8)."""
    with uid_locks_in(tmp_path_factory.mktemp("uid-locks")):
        yield


@pytest.fixture(autouse=True)
def root_with_bubblewrap() -> None:
    box = Sandbox()
    if box.mode != "bwrap" or os.geteuid() != 0:
        pytest.fail("these tests need bubblewrap and a root host (scripts/setup.sh --test; CI runs as root)")
    assert box.own_uid and box.quota and not isinstance(box.cgroups, str), box.report()


async def test_a_deep_tree_leaves_the_episode_scorable_and_is_removed() -> None:
    task = TaskSpec(
        id="note",
        prompt="Write note.txt saying hi, and nothing else at the top.",
        verify=Verify(files={"note.txt": FileCheck(equals="hi")}, only=["note.txt", "a/*"]),
    )
    Env = wrap([str(FILESYSTEM), "{workspace}"], tasks=[task], max_steps=4)
    async with mcpgym.connect(Env) as env:
        ws = (await env.reset()).observation["workspace"]
        deep = await env.call_tool("create_directory", {"path": ws + "/a" * 1000})
        assert not deep.is_error, deep.text  # the premise: one call made 1,000 levels
        assert not deep.done and (await env.state()).info["checks"]  # scored, not raised
        step = await env.call_tool("write_file", {"path": f"{ws}/note.txt", "content": "hi"})
        assert not step.is_error and step.done and step.reward == 1.0, (await env.state()).info
        await env.reset()
        assert not _exists(ws)  # removed, however deep


async def test_each_workspace_has_a_quota_in_bytes_and_files() -> None:
    box = Sandbox(workspace_bytes=1 << 20, workspace_files=64)
    Env = wrap([str(FILESYSTEM), "{workspace}"], sandbox=box, tools=["write_file", "create_directory"])
    async with mcpgym.connect(Env) as env:
        ws = (await env.reset()).observation["workspace"]
        assert "tmpfs of 1048576 bytes" in (await env.state()).info["sandbox"]["workspace"]
        big = await env.call_tool("write_file", {"path": f"{ws}/big.txt", "content": "x" * (2 << 20)})
        assert big.is_error and "ENOSPC" in big.text
        assert os.statvfs(ws).f_blocks * os.statvfs(ws).f_frsize <= 1 << 20
        many = [await env.call_tool("create_directory", {"path": f"{ws}/d{i}"}) for i in range(80)]
        assert any(r.is_error for r in many) and sum(not r.is_error for r in many) < 64


async def test_run_as_root_each_server_is_an_unprivileged_uid_of_its_own() -> None:
    Env = wrap(SERVER, tools=["shell"])
    probe = "id -u; id -G; grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; unshare -U true 2>&1 || echo no-userns"
    async with mcpgym.connect(Env) as one, mcpgym.connect(Env) as two:
        await one.reset()
        await two.reset()
        seen = [(await env.call_tool("shell", {"command": probe})).text.split("\n") for env in (one, two)]
    uids = [int(lines[0]) for lines in seen]
    assert 0 not in uids and uids[0] != uids[1], seen
    for lines in seen:
        assert lines[1] == lines[0]  # no supplementary groups (root's are gone)
        assert all(line.split()[1] == "0000000000000000" for line in lines[2:4]), lines  # no capabilities
        assert "no-userns" in lines, lines  # and no way to make a user namespace to get some


@pytest.fixture
def etc_secret() -> Iterator[Path]:
    """A root-only file under /etc with a name no denylist knows (as a deployment drops them)."""
    secret = Path(f"/etc/mcpgym-test-secret-{uuid.uuid4().hex}")
    secret.write_text("token")
    secret.chmod(0o600)
    yield secret
    secret.unlink()


async def test_etc_is_an_allowlist_so_a_root_only_secret_is_never_seen(etc_secret: Path) -> None:
    Env = wrap(SERVER, tools=["peek", "shell"])
    async with mcpgym.connect(Env) as env:
        await env.reset()
        stolen = await env.call_tool("peek", {"path": str(etc_secret)})
        assert stolen.is_error and "token" not in stolen.text
        for path in ("/etc/shadow", "/etc/ssh", "/root/.bashrc", "/home", "/var"):
            assert "No such file" in (await env.call_tool("shell", {"command": f"ls {path}"})).text, path
        assert (await env.call_tool("peek", {"path": "/etc/passwd"})).text.startswith("root:")


async def test_each_episode_has_a_memory_cgroup(tmp_path: Path) -> None:
    limit = 96 << 20
    marker = f"mcpgym-test-{uuid.uuid4().hex}"
    Env = wrap([*SERVER, "--marker", marker], sandbox=Sandbox(memory_bytes=limit), tools=["shell", "increment"])
    hog = '/usr/bin/python3 -c \'b = bytearray(300 << 20); b[::4096] = b"x" * len(b[::4096]); print("kept")\''
    async with mcpgym.connect(Env) as env:
        await env.reset()
        (pid,) = _host_pids(marker)
        group, limit_set = _memory_group(pid)
        assert f"/mcpgym-{os.getpid()}/" in str(group) and limit_set == limit
        # Over the limit the kernel OOM-kills inside the group (the hog, or the server with it:
        # then the episode ends), never anything outside it.
        assert "kept" not in (await env.call_tool("shell", {"command": hog})).text
        await env.reset()
        assert (await env.call_tool("increment")).text == "1"


def _exists(path: str) -> bool:
    return os.path.exists(path)


def _memory_group(pid: int) -> tuple[Path, int]:
    """The memory cgroup a host process is in (v1 or v2), and its limit."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    v1 = [x for x in lines if ":memory:" in x]
    if v1:
        group = Path("/sys/fs/cgroup/memory") / v1[0].split(":", 2)[2].lstrip("/")
        return group, int((group / "memory.limit_in_bytes").read_text())
    group = Path("/sys/fs/cgroup") / next(x for x in lines if x.startswith("0::")).split(":", 2)[2].lstrip("/")
    return group, int((group / "memory.max").read_text())


def _host_pids(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmdline and cmdline[0].endswith(b"python") and marker.encode() in cmdline:
                found.append(int(entry))
    return found


def test_a_tools_list_that_paginates_forever_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"tools/list went on past 100 pages"):
        anyio.run(prepare, wrap([*HOSTILE, "paginate"]))  # wrap() starts nothing: the first listing refuses


async def test_a_huge_result_is_an_error_and_the_episode_goes_on() -> None:
    from mcpgym._wrap._stdio import MESSAGE_LIMIT

    Env = wrap([*HOSTILE, "giant"])
    async with mcpgym.connect(Env) as env:
        await env.reset()
        huge = await env.call_tool("go", {"size": MESSAGE_LIMIT + 1024})
        assert huge.is_error and not huge.done and f"over the limit of {MESSAGE_LIMIT} bytes" in huge.text
        small = await env.call_tool("go", {"size": 10})
        assert not small.is_error and small.text == "x" * 10


async def test_read_only_paths_environment_and_network_per_wrap(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("extra")
    for path in (tmp_path, shared):
        path.chmod(0o755)
    plain = wrap(SERVER, tools=["peek"])
    box = Sandbox(read_only=(str(shared),), env={"WHERE": "{workspace}/state", "ID": "{instance}"}, network=True)
    extended = wrap(SERVER, sandbox=box, tools=["peek", "shell"])
    async with mcpgym.connect(plain) as env:
        await env.reset()
        assert (await env.call_tool("peek", {"path": str(shared / "data.txt")})).is_error
    async with mcpgym.connect(extended) as env:
        ws = (await env.reset()).observation["workspace"]
        assert (await env.call_tool("peek", {"path": str(shared / "data.txt")})).text == "extra"
        said = (await env.call_tool("shell", {"command": 'echo "$WHERE $ID"'})).text.split()
        assert said == [f"{ws}/state", Path(ws).name]
        assert (await env.state()).info["sandbox"]["network"] == "on"


def test_the_cli_takes_read_only_paths_env_and_network(tmp_path: Path) -> None:
    from mcpgym._cli import main as cli
    from mcpgym._cli.wrap import _sandbox

    argv = ["wrap", "--ro-bind", str(tmp_path), "--env", "A={workspace}/a", "--network", "--", *SERVER]
    box = _sandbox(_parse(argv))
    assert box.read_only == (str(tmp_path),) and dict(box.env) == {"A": "{workspace}/a"} and box.network
    for bad, said in ((["--env", "NOVALUE"], "expected KEY=VALUE"), (["--ro-bind", "/no/such"], "no such file")):
        with pytest.raises(SystemExit, match=said):
            cli.main(["wrap", *bad, "--", *SERVER])


def _parse(argv: list[str]) -> Any:
    import argparse

    from mcpgym._cli import wrap as wrap_command

    parser = argparse.ArgumentParser()
    wrap_command.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_npx_without_network_fails_at_once_and_says_what_to_do() -> None:
    with pytest.raises(RuntimeError) as caught:
        anyio.run(prepare, wrap(["npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31"], start_timeout=25))
    said = str(caught.value)
    assert "exited before it answered initialize" in said, said  # not a 25 s wait for initialize
    assert "npx fetches the server at run time" in said and "npm install" in said


@pytest.fixture
def venv_with_pth(tmp_path: Path) -> tuple[Path, Path]:
    """A virtualenv whose packages come through a `.pth` path line (as editable installs do),
    with a `.pth` line of code that leaves a mark on the host if it ever runs there."""
    tmp_path.chmod(0o755)  # run as root, the server is a uid of its own: its program must be readable
    venv, marker = tmp_path / "venv", tmp_path / "pth-ran-on-the-host"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # type: ignore[attr-defined]
    site = next((venv / "lib").glob("python3*/site-packages"))
    ours = sysconfig.get_paths()["purelib"]  # where `mcp` is
    (site / "deps.pth").write_text(f"{ours}\nimport pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    return venv, marker


async def test_a_virtualenvs_pth_paths_are_shown_and_its_code_never_runs_on_the_host(
    venv_with_pth: tuple[Path, Path],
) -> None:
    venv, marker = venv_with_pth
    Env = wrap([str(venv / "bin" / "python"), str(HERE / "wrap_server.py")], tools=["increment"])
    assert not _exists(str(marker))  # finding the installation ran none of the package's code
    async with mcpgym.connect(Env) as env:
        await env.reset()
        assert (await env.call_tool("increment")).text == "1"
    assert not _exists(str(marker))  # and in the sandbox it could not reach the host


def test_the_installation_is_found_through_links_shebangs_and_env(tmp_path: Path) -> None:
    from mcpgym._wrap._sandbox import program_paths

    venv = Path(sys.prefix)  # the test's own virtualenv (its base Python is elsewhere)
    long_form = tmp_path / "pkg" / "bin" / "server"  # pip's form for a #! line too long for the kernel
    long_form.parent.mkdir(parents=True)
    long_form.write_text(f"#!/bin/sh\n'''exec' '{venv}/bin/python' \"$0\" \"$@\"\n' '''\nprint(1)\n")
    long_form.chmod(0o755)
    via_env = tmp_path / "node_modules" / "srv" / "index.js"
    via_env.parent.mkdir(parents=True)
    via_env.write_text("#!/usr/bin/env node\n")
    via_env.chmod(0o755)
    (tmp_path / "node_modules" / ".bin").mkdir()
    (tmp_path / "node_modules" / ".bin" / "srv").symlink_to(via_env)
    found = program_paths([str(long_form)])
    assert {str(venv), sys.base_prefix, str(long_form.parent)} <= found, found
    found = program_paths(["env", "A=1", str(tmp_path / "node_modules" / ".bin" / "srv")])
    assert str(tmp_path / "node_modules") in found, found


def test_the_docs_install_first_instead_of_npx_at_run_time() -> None:
    import mcpgym.wrapping
    from mcpgym._cli.wrap import _WRAP_EPILOG

    for text in (_WRAP_EPILOG, mcpgym.wrapping.__doc__ or ""):
        assert "npx" not in text and "npm install" in text

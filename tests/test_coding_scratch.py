"""mcpgym.servers.coding cleans up after a server that died: a SIGKILLed server's workspaces (and their
tmpfs mounts) are removed by the next server on the host, never a running server's."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpgym.servers.coding._host import scratch as _scratch
from mcpgym.servers.coding._host.workspace import remove_tree

ROOT = Path(__file__).resolve().parent.parent

# A stand-in for a coding server: it makes its scratch directory and one workspace with a file
# in it (a tmpfs, where this host lets the server mount one), says where, and waits on stdin.
SERVER = """
import sys
from mcpgym.servers.coding._host import scratch as _scratch
from mcpgym.servers.coding._host.workspace import Workspace, workspace_quota_works
own = _scratch.directory()
quota = (1 << 20, 64) if workspace_quota_works() else None
workspace = Workspace(None, 1 << 16, quota, parent=own)
workspace.write("deep/er/file.txt", "left behind", 1 << 10)
print(own, workspace.root, quota is not None, flush=True)
sys.stdin.read()
"""


class Server:
    def __init__(self, tmp: Path) -> None:
        env = {**os.environ, "TMPDIR": str(tmp)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        own, workspace, mounted = self.proc.stdout.readline().split()
        self.own, self.workspace, self.mounted = Path(own), Path(workspace), mounted == "True"

    def stop(self, *, kill: bool) -> None:
        if kill:
            self.proc.kill()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == (-9 if kill else 0)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        if server.proc.poll() is None:
            server.stop(kill=True)
    _scratch.sweep(tmp_path / f"mcpgym-coding-{os.geteuid()}")  # whatever a failed test left


def mounts_under(path: Path) -> list[str]:
    with open("/proc/self/mountinfo") as table:
        return [line.split()[4] for line in table if line.split()[4].startswith(str(path))]


def test_the_next_server_removes_what_a_killed_server_left_and_not_what_a_live_one_holds(
    tmp_path: Path, servers: list[Server]
) -> None:
    dead, live = Server(tmp_path), Server(tmp_path)
    servers += [dead, live]
    assert dead.own.parent == live.own.parent == tmp_path / f"mcpgym-coding-{os.geteuid()}"
    assert dead.workspace.parent == dead.own and (dead.workspace / "deep/er/file.txt").read_text() == "left behind"
    assert (os.path.ismount(dead.workspace), os.path.ismount(live.workspace)) == (dead.mounted, live.mounted)
    dead.stop(kill=True)
    assert dead.own.exists() and mounts_under(dead.own) == ([str(dead.workspace)] if dead.mounted else [])

    servers.append(Server(tmp_path))  # starting up is what sweeps

    assert not dead.own.exists() and mounts_under(dead.own) == []
    assert (live.workspace / "deep/er/file.txt").read_text() == "left behind"
    assert os.path.ismount(live.workspace) == live.mounted


def test_a_sweep_takes_a_server_once_it_has_stopped_and_a_clean_exit_leaves_nothing(
    tmp_path: Path, servers: list[Server]
) -> None:
    server = Server(tmp_path)
    servers.append(server)
    parent = server.own.parent
    assert _scratch.sweep(parent) == []  # it runs
    server.stop(kill=False)  # a normal exit, its workspace still open: left for the next sweep
    assert server.own.exists()
    assert _scratch.sweep(parent) == [server.own]
    assert not server.own.exists() and mounts_under(parent) == []
    assert sorted(p.name for p in parent.iterdir()) == [".lock"]


def test_an_empty_directory_is_removed_at_a_normal_exit(tmp_path: Path) -> None:
    code = "from mcpgym.servers.coding._host import scratch as _scratch; print(_scratch.directory())"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    own = Path(out.stdout.strip())
    assert own.parent.name == f"mcpgym-coding-{os.geteuid()}" and not own.exists()


def test_a_parent_directory_that_others_can_write_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(_scratch, "_fallback", None)
    planted = tmp_path / f"mcpgym-coding-{os.geteuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    private = _scratch.base()
    assert private != planted and private.parent == tmp_path and stat.S_IMODE(private.stat().st_mode) == 0o711
    assert f"{planted} is not a directory that only this user can change" in caplog.text
    planted.chmod(0o755)
    assert _scratch.base() == planted and stat.S_IMODE(planted.stat().st_mode) == 0o711


def test_the_parent_lets_sandboxes_pass_through_whatever_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old = os.umask(0o077)
    try:
        parent = _scratch.base()
    finally:
        os.umask(old)
    assert stat.S_IMODE(parent.stat().st_mode) == 0o711  # a sandbox uid may enter, never list


def test_a_forked_child_leaves_its_parents_directory_alone(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "from mcpgym.servers.coding._host import scratch as _scratch\n"
        "own = _scratch.directory()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sys.exit(0)  # a normal exit: runs the atexit hooks it inherited\n"
        "os.waitpid(pid, 0)\n"
        "print(own.exists(), sorted(os.listdir(own)))\n"
        "os._exit(0)  # leave it for the test to look at\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True ['.lock']"


def test_a_directory_without_a_lock_is_removed_only_when_empty(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "empty").mkdir()  # its server died between making it and locking it
    (parent / "full").mkdir()
    (parent / "full" / "f").write_text("not ours to judge")
    assert _scratch.sweep(parent) == []
    assert sorted(p.name for p in parent.iterdir()) == [".lock", "full"]


def test_removal_stops_where_a_directory_is_moved_out_of_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Code still running as the sandbox's uid moves the directory being emptied elsewhere, just
    # before the removal climbs back up through `..`: the climb must not follow it out.
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    (outside / "keep.txt").write_text("not part of the tree")
    real_open = os.open

    def moving_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == ".." and dir_fd is not None and not (outside / "b").exists():
            os.rename(os.readlink(f"/proc/self/fd/{dir_fd}"), outside / "b")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", moving_open)
    remove_tree(tree)
    monkeypatch.undo()
    assert (outside / "keep.txt").read_text() == "not part of the tree"
    assert "a directory was moved out of the tree" in caplog.text

"""mcpgym.servers.coding's first `run_python` of an episode: its worker is forked inside the episode's
memory cgroup by a server thread already waiting there (`_cradle`: made ahead, so the call does
not wait for a cgroup move), nothing of the server stays in an episode's group, and the worker
starts without modules it does not need. Needs a root server and cgroup v1 memory (this
project's machines); a missing layer fails the tests."""

from __future__ import annotations

import json
import math
import os
import resource
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpgym._isolation.cgroups import Hierarchy
from mcpgym.servers.coding import Limits
from mcpgym.servers.coding._host import cradle as _cradle
from mcpgym.servers.coding._host.interpreter import Interpreter
from mcpgym.servers.coding._host.workspace import Workspace
from tests.coding.helpers import QUICK, new_sandbox

pytestmark = pytest.mark.anyio

SANDBOX = new_sandbox(QUICK)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def hierarchy() -> Hierarchy:
    found = SANDBOX.protections.cgroups
    assert found is not None and found.version == 1, SANDBOX.protections.warnings  # the layer under test
    return found


def key() -> tuple[Hierarchy, int]:
    return hierarchy(), QUICK.episode_memory_bytes


def memory_cgroup(proc: Path) -> Path:
    """The memory cgroup directory of a process or thread (`/proc/PID` or `/proc/PID/task/TID`)."""
    for line in (proc / "cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    raise AssertionError(f"no memory cgroup for {proc}")


def cgroups_of(pids: set[int]) -> set[Path]:
    return {memory_cgroup(Path(f"/proc/{pid}")) for pid in pids}


def server_threads() -> set[int]:
    return {int(task.name) for task in Path("/proc/self/task").iterdir()}


def server_thread_cgroups() -> set[Path]:
    return {memory_cgroup(Path(f"/proc/self/task/{tid}")) for tid in server_threads()}


def other_processes(group: Path) -> set[int]:
    return {int(pid) for pid in (group / "cgroup.procs").read_text().split()} - {os.getpid()}


def tree(pid: int) -> set[int]:
    found, todo = {pid}, [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").iterdir():
            children = {int(child) for child in (task / "children").read_text().split()}
            found |= children
            todo += children
    return found


async def all_exit(pids: set[int]) -> bool:
    """Whether every process in `pids` exits within 10 s (a killed one may still be exiting; bwrap's
    launcher reports its child's end before the pid namespace's init is gone)."""
    with anyio.move_on_after(10):
        for pid in pids:
            try:
                pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                await anyio.wait_readable(pidfd)  # readable once the process has exited
            finally:
                os.close(pidfd)
        return True
    return False


async def ready() -> None:
    _cradle.prepare(*key())
    assert await anyio.to_thread.run_sync(_cradle.wait_ready, *key(), 10.0)


async def interpreter(workspace: Workspace) -> Interpreter:
    return Interpreter(SANDBOX, workspace.root, workspace.uid, cgroup=True)


async def test_the_first_worker_is_forked_in_its_episodes_cgroup_by_a_thread_waiting_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await ready()

    async def no_move(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the first worker was started outside its cgroup, to move in")

    monkeypatch.setattr(anyio, "open_process", no_move)
    workspace = Workspace(SANDBOX.new_uid(), 1 << 16)
    worker = await interpreter(workspace)
    try:
        assert not (await worker.run("x = 1")).is_error
        group, cradle = worker.group, worker._cradle
        assert group is not None and cradle is not None and cradle.group is group
        assert worker._worker is not None
        processes = tree(worker._worker.process.pid)
        assert len(processes) >= 2 and group.pids() == processes  # bwrap, its init, the interpreter
        assert cgroups_of(processes) == {group.path}
        # The forker went back to the server's cgroup: no thread of the server is left in the
        # episode's group, and the only others a thread of it is in are fresh ones no process uses
        # (the forkers', made for episodes to come).
        await cradle.wait_left()
        assert not group.holds_this_server()
        elsewhere = server_thread_cgroups() - {hierarchy().parent.parent}
        assert group.path not in elsewhere
        assert all(path.parent == hierarchy().parent and other_processes(path) == set() for path in elsewhere)
        # It lives on (bwrap --die-with-parent dies with the thread that forked it): so does the worker.
        assert cradle.forker_id in server_threads()
        assert (await worker.run("x + 1")).text == "2\n"
    finally:
        await worker.close()
        await workspace.remove()
        SANDBOX.release_uid(workspace.uid)
    assert not group.path.exists()


async def test_the_worker_runs_the_first_call_without_importing_pure_python_modules() -> None:
    # typing, json, signal and ast (with the re, enum, collections... they import) were ~9 ms of
    # the ~20 ms a worker took to start and run its first call; it uses the C modules they wrap.
    workspace = Workspace(SANDBOX.new_uid(), 1 << 16)
    worker = await interpreter(workspace)
    heavy = ["typing", "json", "signal", "ast", "re", "enum", "struct", "collections", "_ast"]
    try:
        reply = await worker.run(f"import sys\nsorted(set({heavy!r}) & set(sys.modules))")
        # Without bwrap the worker loads ctypes (which imports struct) for its mounts and seccomp filter.
        expected = ["_ast"] if SANDBOX.protections.isolation == "bwrap" else ["_ast", "struct"]
        assert reply.text == f"{expected!r}\n", reply.text  # the premise: the probe sees what the worker imported
    finally:
        await worker.close()
        await workspace.remove()
        SANDBOX.release_uid(workspace.uid)


async def test_code_reaches_the_worker_intact_whatever_its_size_or_characters() -> None:
    await ready()
    workspace = Workspace(SANDBOX.new_uid(), 1 << 16)
    worker = await interpreter(workspace)
    big = "x = '" + "\u00e9\u2603\\n\\0" * 40_000 + "'\nlen(x), x[:3]"  # ~300 KB: more than a pipe holds
    try:
        assert (await worker.run(big)).text == "(160000, 'é☃\\n')\n"
        assert worker._cradle is not None  # the premise: the first worker, forked in its cradle
        lone = await worker.run("y = '\ud800'")  # a lone surrogate (JSON can carry one) fails as Python's own
        assert lone.is_error and "UnicodeEncodeError" in lone.text and "surrogates not allowed" in lone.text
        assert (await worker.run("x[-1] == '\\0', len(x)")).text == "(True, 160000)\n"  # the same worker
    finally:
        await worker.close()
        await workspace.remove()
        SANDBOX.release_uid(workspace.uid)


@pytest.mark.parametrize(
    "limit",
    [{"memory_bytes": resource.RLIM_INFINITY}, {"timeout": math.inf}, {"file_size_bytes": resource.RLIM_INFINITY}],
    ids=["no address-space limit (-1)", "no wall-clock limit (inf)", "no file-size limit (-1)"],
)
async def test_the_worker_reads_every_limit_the_server_may_be_given(limit: dict[str, Any]) -> None:
    # Its config is a repr() literal read without `ast`: -1 (RLIM_INFINITY) is a minus and a
    # number, an infinity a name. (On 0f712bb every worker failed to start with such a limit.)
    sandbox = new_sandbox(Limits(**{**QUICK.__dict__, **limit}))
    workspace = Workspace(sandbox.new_uid(), 1 << 16)
    worker = Interpreter(sandbox, workspace.root, workspace.uid)
    try:
        reply = await worker.run("import resource\nresource.getrlimit(resource.RLIMIT_AS)[0]")
        assert not reply.is_error, reply.text
        assert reply.text == f"{sandbox.limits.memory_bytes}\n"
    finally:
        await worker.close()
        await workspace.remove()
        sandbox.release_uid(workspace.uid)


async def test_the_first_workers_death_and_timeout_are_reported_as_any_others() -> None:
    sandbox = new_sandbox(Limits(**{**QUICK.__dict__, "timeout": 0.5}))  # the same episode memory: the same cradles
    for code, said in [("import os\nos._exit(3)", "exited with status 3"), ("while True:\n    pass", "timed out")]:
        await ready()
        workspace = Workspace(sandbox.new_uid(), 1 << 16)
        worker = Interpreter(sandbox, workspace.root, workspace.uid, cgroup=True)
        try:
            reply = await worker.run(code)
            assert worker._cradle is not None  # the premise: the first worker, forked in its cradle
            assert reply.is_error and said in reply.text, reply.text
            assert worker.group is not None and await all_exit(worker.group.pids())  # nothing of it runs on
        finally:
            await worker.close()
            await workspace.remove()
            sandbox.release_uid(workspace.uid)


async def test_without_a_cgroup_made_ahead_the_worker_moves_into_its_group_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_cradle, "take", lambda hierarchy, limit: None)  # none ready (or cgroup v2)
    workspace = Workspace(SANDBOX.new_uid(), 1 << 16)
    worker = await interpreter(workspace)
    try:
        assert (await worker.run("1 + 1")).text == "2\n"
        assert worker._cradle is None and worker.group is not None and worker._worker is not None
        processes = tree(worker._worker.process.pid)
        assert worker.group.pids() == processes
        assert cgroups_of(processes) == {worker.group.path}
    finally:
        await worker.close()
        await workspace.remove()
        SANDBOX.release_uid(workspace.uid)


async def test_a_cradle_that_fails_to_start_or_is_not_used_keeps_no_server_thread_in_its_group() -> None:
    await ready()
    failing = _cradle.take(*key())
    assert failing is not None
    with pytest.raises(FileNotFoundError):
        await failing.open_process(["/nonexistent/program"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    failing.release()
    await ready()
    unused = _cradle.take(*key())
    assert unused is not None
    unused.release()
    for cradle in (failing, unused):
        await cradle.wait_left()
        assert not cradle.group.holds_this_server()
        cradle.group.remove()
        assert not cradle.group.path.exists()


async def test_a_call_cancelled_in_the_first_worker_kills_everything_in_its_group() -> None:
    await ready()
    workspace = Workspace(SANDBOX.new_uid(), 1 << 16)
    worker = await interpreter(workspace)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run, "import subprocess\nsubprocess.Popen(['sleep', '60'])\nwhile True:\n    pass")
            await anyio.wait_all_tasks_blocked()
            while worker._worker is None or len(worker._worker.group.pids() if worker._worker.group else ()) < 4:
                await anyio.wait_all_tasks_blocked()  # the premise: the call runs (and its child)
            tg.cancel_scope.cancel()
        assert worker._cradle is not None and worker.group is not None
        assert await all_exit(worker.group.pids())  # the whole tree was killed, not only the worker
        after = await worker.run("1 + 1")
        assert not after.is_error and "fresh interpreter" in after.text and after.text.endswith("2\n")
    finally:
        await worker.close()
        await workspace.remove()
        SANDBOX.release_uid(workspace.uid)


SERVER = textwrap.dedent(
    """
    import json
    import anyio, mcpgym
    from mcpgym.servers.coding import Limits, Sandbox
    from mcpgym.servers.coding._host import cradle as _cradle
    from tests.coding.helpers import QUICK, coding, new_sandbox

    async def main():
        hierarchy = new_sandbox(QUICK).protections.cgroups
        async with mcpgym.connect(coding()) as env:
            await env.reset(seed=0)
            assert (await env.call_tool("run_python", {"code": "1"})).text.strip() == "1"
        assert _cradle.wait_ready(hierarchy, QUICK.episode_memory_bytes, 10.0)
        groups = sorted(str(path) for path in hierarchy.parent.iterdir() if path.is_dir())
        print(json.dumps({"parent": str(hierarchy.parent), "groups": groups}), flush=True)

    anyio.run(main)
    """
)


def test_the_cgroups_made_ahead_are_removed_when_the_server_exits() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVER], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["groups"], "the premise: groups were made ahead"
    assert not any(Path(group).exists() for group in report["groups"])
    assert not Path(report["parent"]).exists()


def test_a_worker_forked_by_a_cradle_dies_with_its_server() -> None:
    script = textwrap.dedent(
        """
        import sys
        import anyio
        from mcpgym.servers.coding import Limits, Sandbox
        from mcpgym.servers.coding._host import cradle as _cradle
        from mcpgym.servers.coding._host.interpreter import Interpreter
        from mcpgym.servers.coding._host.workspace import Workspace
        from tests.coding.helpers import QUICK, new_sandbox

        async def main():
            sandbox = new_sandbox(QUICK)
            _cradle.prepare(sandbox.protections.cgroups, QUICK.episode_memory_bytes)
            assert _cradle.wait_ready(sandbox.protections.cgroups, QUICK.episode_memory_bytes, 10.0)
            workspace = Workspace(sandbox.new_uid(), 1 << 16)
            worker = Interpreter(sandbox, workspace.root, workspace.uid, cgroup=True)
            assert not (await worker.run("x = 1")).is_error and worker._cradle is not None
            print(worker._worker.process.pid, flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)

        anyio.run(main)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, text=True
    ) as server:
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            assert line.strip().isdigit(), line
            pidfd = os.pidfd_open(int(line))  # the worker's launcher (bwrap), not our child
        finally:
            server.send_signal(signal.SIGKILL)
    try:
        readable, _, _ = select.select([pidfd], [], [], 10.0)  # readable when it has exited
        assert readable == [pidfd], "the worker outlived its server"
    finally:
        os.close(pidfd)


OUT_OF_MEMORY = textwrap.dedent(
    """
    import json, threading
    import anyio
    from mcpgym.servers.coding import Limits, Sandbox
    from mcpgym.servers.coding._host import cradle as _cradle
    from mcpgym._isolation.cgroups import Hierarchy
    from mcpgym.servers.coding._host.interpreter import Interpreter
    from mcpgym.servers.coding._host.workspace import Workspace
    from tests.coding.helpers import QUICK, new_sandbox

    SMALL = 64 << 20  # the episode's memory cgroup; RLIMIT_AS (1 GiB) is not what stops the code
    leave = threading.Event()
    bring_back = Hierarchy.bring_back_thread

    def held(self):  # the forker stays in the episode's group until the episode has run out of memory
        leave.wait(30)
        bring_back(self)

    Hierarchy.bring_back_thread = held

    async def main():
        sandbox = new_sandbox(Limits(**{**QUICK.__dict__, "memory_bytes": 1 << 30, "episode_memory_bytes": SMALL}))
        _cradle.prepare(sandbox.protections.cgroups, SMALL)
        assert _cradle.wait_ready(sandbox.protections.cgroups, SMALL, 10.0)
        workspace = Workspace(sandbox.new_uid(), 1 << 16)
        worker = Interpreter(sandbox, workspace.root, workspace.uid, cgroup=True)
        try:
            reply = await worker.run("data = b'x' * (256 << 20)")
            group = worker.group
            report = {
                "cradle": worker._cradle is not None,
                "server_in_group": group.holds_this_server(),
                "oom_kills": (group.path / "memory.oom_control").read_text().split()[-1],
                "reply": reply.text,
                "is_error": reply.is_error,
            }
            leave.set()
            report["next"] = (await worker.run("1 + 1")).text
        finally:
            leave.set()
            await worker.close()
            await workspace.remove()
            sandbox.release_uid(workspace.uid)
        print(json.dumps(report), flush=True)

    anyio.run(main)
    """
)


def test_an_episode_out_of_memory_while_a_forker_is_in_its_group_kills_its_own_processes_only() -> None:
    """While a forker thread is in an episode's group (cgroup v1), `cgroup.procs` lists the server;
    the group's OOM killer must still choose among the episode's processes only (it picks thread
    group leaders, and the server's leader is not in the group), and the server serves on."""
    done = subprocess.run(
        [sys.executable, "-c", OUT_OF_MEMORY], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert done.returncode == 0, (done.returncode, done.stderr)  # -9: the kernel killed the server
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["cradle"] and report["server_in_group"], report  # the premise: the forker was in the group
    assert int(report["oom_kills"]) >= 1, report  # the premise: the group's OOM killer ran
    assert report["is_error"] and "SIGKILL" in report["reply"], report
    assert report["next"].endswith("2\n") and "fresh interpreter" in report["next"], report

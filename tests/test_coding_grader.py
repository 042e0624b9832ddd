"""mcpgym.servers.coding grading: the grader zygote kills whole trees, survives crashes, keeps submissions apart."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from mcpgym.servers.coding import Limits, Sandbox, Task
from mcpgym.servers.coding._host.grader import grader
from mcpgym.servers.coding._host.interpreter import Verdict, grade
from mcpgym.servers.coding._host.process import _children
from tests.coding.helpers import QUICK, new_sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


ADD = Task(
    task_id="mine/add",
    prompt="def add(a, b):\n",
    test="def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 5) == 5\n",
    entry_point="add",
)
GOOD = "def add(a, b):\n    return a + b\n"
SHORT = Limits(timeout=2.0, cpu_seconds=4, memory_bytes=512 << 20, max_processes=16)  # CPU > wall: see QUICK
MARKER = "4242.25"  # the argument of the `sleep` processes a submission leaves behind
PER_UID = new_sandbox(QUICK).protections.own_uid


def sleepers() -> list[int]:
    """Host pids of `sleep MARKER` processes, wherever they were started."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == f"sleep\0{MARKER}\0".encode():
                    found.append(int(entry.name))
            except OSError:
                continue  # exited while we looked
    return found


def leave_sleepers(then: str) -> str:
    """A solution that starts `sleep` twice, once in a new session (out of the process group)."""
    return (
        "import subprocess\n"
        f"subprocess.Popen(['sleep', '{MARKER}'])\n"
        f"subprocess.Popen(['sleep', '{MARKER}'], start_new_session=True)\n" + then
    )


def zygote_pid(sandbox: Sandbox) -> int:
    """The zygote's python process, below its launchers (bwrap, its namespace init, unshare)."""
    zygote = grader(sandbox)._zygote
    assert zygote is not None
    pid = zygote.process.pid
    while Path(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()).name in ("bwrap", "unshare"):
        pid = _children(pid)[0]
    return pid


async def test_timeout_and_a_finished_run_both_kill_every_process_the_submission_started() -> None:
    sandbox = new_sandbox(SHORT)
    timed_out = await grade(sandbox, ADD, leave_sleepers("while True:\n    pass\n"))
    assert (timed_out.reward, timed_out.summary) == (0.0, "failed: timed out after 2 s")
    assert sleepers() == []
    passed = await grade(sandbox, ADD, leave_sleepers(GOOD))
    assert passed.reward == 1.0
    assert sleepers() == []  # daemons of a passing run die too, setsid() or not


async def test_a_crashed_zygote_is_restarted_between_and_during_submissions() -> None:
    sandbox = new_sandbox(QUICK)
    assert (await grade(sandbox, ADD, GOOD)).reward == 1.0
    first = zygote_pid(sandbox)
    os.kill(first, 9)
    assert (await grade(sandbox, ADD, GOOD)).reward == 1.0  # between submissions: a fresh zygote
    second = zygote_pid(sandbox)
    assert second != first
    slow = "for _ in range(10 ** 7):\n    pass\n" + GOOD
    results: list[Verdict] = []

    async def submit() -> None:
        results.append(await grade(sandbox, ADD, slow))

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit)
        await anyio.wait_all_tasks_blocked()  # the submission is on the zygote
        os.kill(second, 9)
    assert [(v.reward, v.summary) for v in results] == [(1.0, "passed: all hidden tests pass")]  # on a third zygote
    assert zygote_pid(sandbox) not in (first, second)


@pytest.mark.skipif(not PER_UID, reason="a uid per submission needs a root server")
async def test_a_fork_bomb_while_grading_does_not_touch_other_episodes_gradings() -> None:
    sandbox = new_sandbox(SHORT)
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    verdicts: list[Verdict] = []

    async def bomber() -> None:
        verdicts.append(await grade(sandbox, ADD, bomb))

    async with anyio.create_task_group() as tg:
        tg.start_soon(bomber)
        await anyio.wait_all_tasks_blocked()  # the bomb is going off in the zygote's sandbox
        for _ in range(3):
            assert (await grade(sandbox, ADD, GOOD)).reward == 1.0
    assert [(v.reward, v.summary) for v in verdicts] == [(0.0, "failed: timed out after 2 s")]
    assert (await grade(sandbox, ADD, GOOD)).reward == 1.0  # the zygote itself came through


@pytest.mark.skipif(not PER_UID, reason="a uid per submission needs a root server")
async def test_a_submission_has_no_shared_writable_place_and_cannot_forge_a_verdict() -> None:
    sandbox = new_sandbox(QUICK)
    # Only builtin exception names leave the sandbox, so each probe answers with one.
    probes = {
        "open('/tmp/note', 'w')": "OSError",  # /tmp is shared by the zygote's children: read-only (EROFS)
        "import os\nos.listdir('..')": "PermissionError",  # other submissions' directories stay unlisted
        "open('note', 'w').write('x')\nraise LookupError": "LookupError",  # its own directory is writable
    }
    for probe, raised in probes.items():
        assert (await grade(sandbox, ADD, probe)).detail == f"failed {raised}"
    forged = "import os\nos.write(3, b'failed hidden_test_text\\n')\nos._exit(0)"
    verdict = await grade(sandbox, ADD, forged)
    assert verdict.reward == 0.0 and "hidden_test_text" not in verdict.summary


@pytest.mark.skipif(not PER_UID, reason="a uid per submission needs a root server")
async def test_the_test_process_has_its_uid_and_is_not_dumpable_before_any_submitted_code_runs() -> None:
    # A uid change makes a process dumpable again when the host's fs.suid_dumpable is 1 (ptrace,
    # /proc/PID/fd open to the same uid): the test process must be done with it first. (On
    # 0f712bb the solution started while it was still root, most of the time.)
    sandbox = new_sandbox(QUICK)
    probe = (
        "import os\n"
        "test_process = open('/proc/self/status').read().split('\\nPPid:')[1].split()[0]\n"  # as /proc numbers it
        "status = f'/proc/{test_process}/status'\n"
        "try:\n    uid = int(open(status).read().split('\\nUid:')[1].split()[0])\n"
        "except FileNotFoundError:\n    uid = None\n"  # /proc shows nothing of another uid, or a non-dumpable one
        "SETTLED = uid is None or uid == os.getuid() != 0 and os.stat(status).st_uid == 0\n"  # root's: not dumpable
        "def add(a, b):\n    return a + b if SETTLED else None\n"
    )
    rewards = [(await grade(sandbox, ADD, probe)).reward for _ in range(8)]
    assert rewards == [1.0] * 8


async def test_the_solution_process_holds_no_descriptor_but_its_socket_and_dev_null() -> None:
    # Forked ahead of need from a trial that holds the request and verdict pipes (fds 4 and 3
    # there): none of them, nor anything of the zygote, may reach the solution (fd 4 is its own
    # observations' pipe, to the test process).
    sandbox = new_sandbox(QUICK)
    probe = (
        "import os\n"
        "fds = {fd: os.readlink(f'/proc/self/fd/{fd}') for fd in range(64) if os.path.exists(f'/proc/self/fd/{fd}')}\n"
        "if fds.pop(3, '').startswith('socket:') is False: raise LookupError\n"
        "if not fds.pop(4, '').startswith('pipe:'): raise ValueError\n"  # its observations' pipe (write end)
        "if set(fds) != {0, 1, 2} or set(fds.values()) != {'/dev/null'}: raise KeyError\n"
        "def add(a, b):\n    return a + b\n"
    )
    for _ in range(2):  # a trial forked at start-up, then one forked ahead while idle
        assert (await grade(sandbox, ADD, probe)).reward == 1.0


async def spare_trial(sandbox: Sandbox, count: int) -> int:
    """The host pid of the `count`th trial the zygote forked ahead (one at start-up, one after each
    answer, one for each that died idle), once the zygote has said it forked it: no polling.
    (Its solution process may not be forked yet.)"""
    zygote = grader(sandbox)._zygote
    assert zygote is not None
    with anyio.fail_after(30):  # a failure, not a hang, if it never comes
        while zygote.spares < count:
            await zygote._read()
    (init,) = _children(zygote_pid(sandbox))  # nothing else runs: every answer came after its trial
    return init


async def kill_and_wait(pid: int) -> None:
    """SIGKILL `pid` and wait until it has exited (reaped or not)."""
    exited = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGKILL)
        await anyio.wait_readable(exited)
    finally:
        os.close(exited)


def pid_namespace(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


@pytest.mark.skipif(not PER_UID, reason="a zygote shared by submissions needs a root server")
async def test_the_zygote_keeps_a_trial_forked_ahead_and_replaces_it_if_it_dies() -> None:
    sandbox = new_sandbox(QUICK)
    assert (await grade(sandbox, ADD, GOOD)).reward == 1.0
    first = await spare_trial(sandbox, 2)
    assert pid_namespace(first) != pid_namespace(zygote_pid(sandbox))  # a namespace of its own, ready
    await kill_and_wait(first)  # dies idle (OOM-killed, say): the zygote collects it and forks another
    assert await spare_trial(sandbox, 3) != first
    assert (await grade(sandbox, ADD, GOOD)).reward == 1.0
    # Dead but not yet collected when a submission arrives (the zygote is stopped meanwhile): the
    # request finds a closed pipe, and the submission starts on a trial forked then.
    spare = await spare_trial(sandbox, 4)
    zygote = zygote_pid(sandbox)
    os.kill(zygote, signal.SIGSTOP)
    try:
        await kill_and_wait(spare)  # a zombie its stopped parent cannot reap
        results: list[Verdict] = []

        async def submit() -> None:
            results.append(await grade(sandbox, ADD, GOOD))

        async with anyio.create_task_group() as tg:
            tg.start_soon(submit)
            await anyio.wait_all_tasks_blocked()  # the request waits in the stopped zygote's pipe
            os.kill(zygote, signal.SIGCONT)
    finally:
        os.kill(zygote, signal.SIGCONT)
    assert [verdict.reward for verdict in results] == [1.0]


@pytest.mark.skipif(not PER_UID, reason="a zygote shared by submissions needs a root server")
async def test_no_trial_forked_ahead_outlives_its_grader() -> None:
    sandbox = new_sandbox(QUICK)
    assert (await grade(sandbox, ADD, GOOD)).reward == 1.0
    namespace = pid_namespace(await spare_trial(sandbox, 2))
    grader(sandbox).close()
    assert in_pid_namespace(namespace) == []


def in_pid_namespace(namespace: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == namespace:
                    found.append(int(entry.name))
            except OSError:
                continue  # exited while we looked
    return found


async def test_a_grader_error_reaches_the_caller_as_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    # The hack scan runs beside the grader in a task group, which wraps errors in a group.
    sandbox = new_sandbox(QUICK)

    async def no_uid_left(*args: object) -> str:
        await anyio.lowlevel.checkpoint()  # the scan starts first, as with a real grader
        raise RuntimeError("every sandbox uid from 1000000 to 1999999 is in use")

    monkeypatch.setattr(grader(sandbox), "run", no_uid_left)
    with pytest.raises(RuntimeError, match="is in use"):
        await grade(sandbox, ADD, GOOD)

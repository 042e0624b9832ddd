"""mcpgym.servers.coding: nothing outlives its call, submission or episode; memory and kernel surface.

Each test names the layer it needs; on this project's machines (root, bubblewrap, cgroup v1
memory) every layer is present, and a missing one fails the test (the suite must not skip it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import mcpgym
from mcpgym.servers.coding import Limits, Task, load_tasks
from mcpgym.servers.coding._host.grader import grading_memory
from mcpgym.servers.coding._host.interpreter import grade
from tests.coding.helpers import ISOLATION, QUICK, coding, new_sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SANDBOX = new_sandbox(QUICK)
ADD = Task("mine/add", "def add(a, b):\n", "def check(candidate):\n    assert candidate(1, 2) == 3\n", "add")
GOOD = "def add(a, b):\n    return a + b\n"


def named(comm: str) -> list[int]:
    """Live host pids whose command name is `comm` (set by the sandboxed code under test). Zombies
    are dead: killed processes wait there for their parent (or the namespace's init) to reap them."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = dict(line.split(":\t", 1) for line in (entry / "status").read_text().splitlines())
            except (OSError, ValueError):
                continue  # exited while we looked
            if status.get("Name") == comm and status.get("State", "Z")[0] not in "ZX":
                found.append(int(entry.name))
    return found


def rename(comm: str) -> str:
    """Source that names the current process `comm` (PR_SET_NAME), so the test can find it."""
    return f"import ctypes\nctypes.CDLL(None).prctl(15, {comm.encode()!r}, 0, 0, 0)\n"


def test_the_layers_these_tests_need_are_present() -> None:
    protections = SANDBOX.protections
    expected = "bwrap" if ISOLATION == "auto" else ISOLATION  # tests/test_coding_modes.py runs the others
    assert protections.isolation == expected and protections.own_uid, protections.warnings
    assert protections.cgroups is not None, protections.warnings  # a memory cgroup per episode
    info = protections.describe()
    assert info["memory"].startswith("memory cgroup per episode") and "blocked" in info["user_namespaces"]


async def test_processes_a_call_leaves_running_die_when_it_ends_and_the_interpreter_keeps_its_state() -> None:
    daemon = (
        "import os, time\nstate = 41\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n" + "".join(f"        {line}\n" for line in rename("mcpgymbg").splitlines()) + ""
        "        while True:\n"
        "            if os.fork() == 0:\n"  # re-forking successors, each under the CPU limit
        "                continue\n"
        "            time.sleep(0.05)\n"
        "            os._exit(0)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    async with mcpgym.connect(coding()) as env:
        await env.reset(seed=0)
        started = await env.call_tool("run_python", {"code": daemon})
        assert not started.is_error, started.text
        assert named("mcpgymbg") == []  # killed as the call returned, however it forked
        kept = await env.call_tool("run_python", {"code": "state + 1"})
        assert kept.text.strip() == "42"  # the interpreter itself was kept


async def test_memfd_pages_count_against_the_episodes_memory() -> None:
    limits = Limits(**{**QUICK.__dict__, "episode_memory_bytes": 256 << 20})
    # Many memfds, each under the file size limit (RLIMIT_FSIZE applies to one memfd too).
    fill = "import os\nfds = []\nfor _ in range(768):\n    fds.append(os.memfd_create('m'))\n"
    fill += "    os.write(fds[-1], b'x' * (512 << 10))\n"
    async with mcpgym.connect(coding(limits)) as env:
        await env.reset(seed=0)
        result = await env.call_tool("run_python", {"code": fill})
        assert result.is_error and "SIGKILL" in result.text, result.text  # OOM-killed inside its cgroup
        assert (await env.call_tool("run_python", {"code": "1 + 1"})).text.endswith("\n2\n")  # a fresh one


async def test_memfd_pages_count_against_the_graders_memory_too() -> None:
    limits = Limits(**{**QUICK.__dict__, "episode_memory_bytes": 64 << 20})
    sandbox = new_sandbox(limits)
    assert grading_memory(limits) < 384 << 20  # the premise: the hog is over the grader's limit
    hog = "import os\nfds = []\nfor _ in range(768):\n    fds.append(os.memfd_create('m'))\n"
    hog += "    os.write(fds[-1], b'x' * (512 << 10))\n" + GOOD
    assert (await grade(sandbox, ADD, hog)).reward == 0.0  # OOM-killed in the grader's cgroup
    assert (await grade(sandbox, ADD, GOOD)).reward == 1.0


async def test_user_namespaces_are_blocked_in_the_repl_and_while_grading() -> None:
    probe = (
        "import ctypes, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), ctypes.get_errno())\n"
        "print(subprocess.run(['unshare', '-r', 'true'], capture_output=True).returncode != 0)\n"
        "import os\nprint(libc.setns(os.open('/proc/self/ns/user', os.O_RDONLY), 0), ctypes.get_errno())\n"
    )
    async with mcpgym.connect(coding()) as env:
        await env.reset(seed=0)
        result = await env.call_tool("run_python", {"code": probe})
        assert result.text.split() == ["-1", "1", "True", "-1", "1"], result.text  # EPERM (not EINVAL)
    graded = "import ctypes\nBLOCKED = ctypes.CDLL(None).unshare(0x10000000) != 0\n" + (
        "def add(a, b):\n    return a + b if BLOCKED else 0\n"
    )
    assert (await grade(SANDBOX, ADD, graded)).reward == 1.0


async def test_posix_message_queues_do_not_leak_from_one_submission_to_the_next() -> None:
    opener = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.mq_open.restype = ctypes.c_int\n"
    writer = opener + "assert libc.mq_open(b'/mcpgym-leak', os.O_CREAT | os.O_RDWR, 0o666, None) >= 0\n" + GOOD
    reader = opener + "FOUND = libc.mq_open(b'/mcpgym-leak', os.O_RDONLY) >= 0\n"
    reader += "def add(a, b):\n    return 0 if FOUND else a + b\n"
    assert (await grade(SANDBOX, ADD, writer)).reward == 1.0  # the premise: it made one
    assert (await grade(SANDBOX, ADD, reader)).reward == 1.0  # and the next submission cannot see it


async def test_a_grading_daemon_that_kills_its_uid_cannot_outlive_its_submission() -> None:
    # On d184b8c the daemon killed the per-uid reaper, lived on in the shared grading sandbox and,
    # holding unlinked files, left every later submission without space.
    daemon = (
        "import os, signal\n"
        "ready, go = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n" + "".join(f"    {line}\n" for line in rename("mcpgymkiller").splitlines()) + ""
        "    held = []\n"
        "    try:\n"
        "        for n in range(64):\n"
        "            held.append(open(f'hold{n}', 'wb'))\n"
        "            os.unlink(f'hold{n}')\n"
        "            held[-1].write(b'x' * (1 << 20))\n"
        "            held[-1].flush()\n"
        "    except OSError:\n"
        "        pass\n"
        "    os.write(go, b'!')\n"
        "    while True:\n"
        "        try:\n"
        "            os.kill(-1, signal.SIGKILL)\n"  # every process of its uid but itself
        "        except OSError:\n"
        "            pass\n"
        "os.read(ready, 1)\n" + GOOD
    )
    await grade(SANDBOX, ADD, daemon)
    assert named("mcpgymkiller") == []
    writes = "for n in range(32):\n    open(f'data{n}', 'wb').write(b'x' * (1 << 20))\n" + GOOD
    assert (await grade(SANDBOX, ADD, writes)).reward == 1.0  # the next submission has its space


async def test_submit_without_code_grades_the_whole_solution_file(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"task_id": ADD.task_id, "prompt": ADD.prompt, "test": ADD.test, "entry_point": "add"}))
    padded = GOOD + "#" * (300 << 10) + "\nraise ValueError('the end of the file counts too')\n"
    async with mcpgym.connect(coding(tasks=load_tasks(path))) as env:
        await env.reset(seed=0)
        await env.call_tool("write_file", {"path": "solution.py", "content": padded})
        result = await env.call_tool("submit", {})
        status = (await env.state()).info["grading"]["status"]
        assert result.reward == 0.0 and status == "failed ValueError"  # on d184b8c: cut at 256 KiB, passed
        await env.reset(seed=0)
        missing = await env.call_tool("submit", {})
        assert missing.is_error and not missing.done and "solution.py" in missing.text


async def test_listings_are_unambiguous_for_names_with_newlines_quotes_and_arrows() -> None:
    make = (
        "import os\n"
        "for name in ['notes\\nsolution.py', 'a -> b', 'say \"hi\"', 'plain.py', ' pad']:\n"
        "    open(name, 'w').close()\n"
    )
    async with mcpgym.connect(coding()) as env:
        await env.reset(seed=0)
        assert not (await env.call_tool("run_python", {"code": make})).is_error
        listing = (await env.call_tool("list_files", {})).text.splitlines()
    assert sorted(listing) == sorted(['" pad"', '"a -> b"', '"notes\\nsolution.py"', "plain.py", '"say \\"hi\\""'])


def test_uid_locks_are_removed_when_released_and_a_released_lock_is_never_shared(own_locks: Path) -> None:
    from mcpgym._isolation import uids as _uids

    uids = [_uids.claim() for _ in range(3)]
    directory = _uids._lock_directory()
    assert directory == own_locks
    assert all((directory / str(uid)).exists() for uid in uids)  # the premise: held locks are files
    for uid in uids:
        _uids.release(uid)
    assert not any((directory / str(uid)).exists() for uid in uids)
    # A claimer that opened the file just before its release must not hold a lock on the unlinked one.
    stale = os.open(directory / "probe", os.O_RDWR | os.O_CREAT, 0o600)
    os.unlink(directory / "probe")
    assert not _uids._still_linked(stale, directory / "probe")
    os.close(stale)


def test_uids_reserved_but_never_used_leave_no_lock_file_at_exit(own_locks: Path) -> None:
    from mcpgym._isolation import uids as _uids

    claim = "from mcpgym._isolation import uids as _uids\nprint(_uids.claim(), *_uids._RESERVE)"
    done = subprocess.run([sys.executable, "-c", claim], capture_output=True, check=True)
    claimed = [int(uid) for uid in done.stdout.split()]
    assert len(claimed) == _uids._BATCH  # the premise: one claim reserved a whole batch
    directory = _uids._lock_directory()
    assert directory == own_locks
    # Only the one handed out (and never released) is left: the reserve went at exit.
    assert [uid for uid in claimed if (directory / str(uid)).exists()] == [claimed[0]]
    (directory / str(claimed[0])).unlink()


def test_a_forked_child_exiting_leaves_its_parents_reserved_uids_locked(own_locks: Path) -> None:
    from mcpgym._isolation import uids as _uids

    # A child forked after a claim has a copy of the reserve (and of the open, locked files): it
    # must not hand out its parent's uids, and its normal exit (atexit hooks) must not unlink them.
    script = (
        "import os, sys\nfrom mcpgym._isolation import uids as _uids\n_uids.claim()\n"
        "if os.fork() == 0:\n    print(_uids.claim(), flush=True)\n    sys.exit(0)\nos.wait()\n"
        "d = _uids._lock_directory()\nprint(*_uids._RESERVE, *[(d / str(u)).exists() for u in _uids._RESERVE])"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    child, *parent = done.stdout.split()
    reserve, linked = parent[: len(parent) // 2], parent[len(parent) // 2 :]
    assert len(reserve) == _uids._BATCH - 1, done  # the premise: a reserve to lose
    assert child not in reserve
    assert linked == ["True"] * len(reserve), linked


def test_startup_states_memory_enforcement_and_a_max_episodes_derived_from_the_machine(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from mcpgym._cli.serve import add_serve_options as _add_serve_options
    from mcpgym.servers.coding.__main__ import configure, parser
    from mcpgym.servers.coding._host.capacity import machine_capacity

    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"task_id": ADD.task_id, "prompt": ADD.prompt, "test": ADD.test, "entry_point": "add"}))
    cli = parser()
    _add_serve_options(cli)
    capacity = machine_capacity()
    assert f"--max-episodes defaults to {capacity.episodes} on this machine" in " ".join(cli.format_help().split())
    args = cli.parse_args(["--tasks", str(path)])
    assert args.max_episodes == capacity.episodes and "MiB of memory" in capacity.why
    configure(args)
    err = capsys.readouterr().err
    assert "mcpgym.servers.coding: memory: memory cgroup per episode (v" in err
    assert "user namespaces: blocked" in err and "background processes: killed" in err


async def test_sandbox_start_ups_wait_in_a_queue_before_any_call_is_timed() -> None:
    from mcpgym.servers.coding._host import process as _process

    async with mcpgym.connect(coding()) as first, mcpgym.connect(coding()) as second:
        await first.reset(seed=0)
        await second.reset(seed=0)
        queue = _process.starting()
        held = 0
        while queue.value:  # take every start-up slot: new interpreters must wait
            await queue.acquire()
            held += 1
        results: list[str] = []

        async def call(env: mcpgym.AsyncEnv) -> None:
            results.append((await env.call_tool("run_python", {"code": "6 * 7"})).text.strip())

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, first)
            tg.start_soon(call, second)
            await anyio.wait_all_tasks_blocked()
            assert results == [] and queue.statistics().tasks_waiting == 2  # queued, not started nor failed
            for _ in range(held):
                queue.release()
        assert results == ["42", "42"]

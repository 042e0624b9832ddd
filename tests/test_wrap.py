"""`mcpgym.wrap`: third-party MCP servers as environments, one sandboxed instance per episode.

Real servers: the official filesystem server from npm (pinned by tests/wrapped's lock file) and
a plain SDK `MCPServer` (tests/wrap_server.py) for state isolation, crashes and hangs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import mcpgym
from mcpgym.testing import transcript as _script
from mcpgym.wrapping import FileCheck, TaskFileError, TaskSpec, Verify, WrapContext, load_tasks, prepare, wrap
from mcpgym.wrapping import Score as WrapScore
from tests.conftest import DOORS, door
from tests.wrap_envs import FILESYSTEM, HERE, WrappedCounter, uid_locks_in

pytestmark = pytest.mark.anyio

SERVER = [sys.executable, str(HERE / "wrap_server.py")]

FS_TASKS = [
    TaskSpec(
        id="todo",
        prompt="Create notes/todo.md listing milk and eggs, one per line.",
        verify=Verify(files={"notes/todo.md": FileCheck(contains=["milk", "eggs"])}),
    ),
    TaskSpec(
        id="rename",
        prompt="Rename every .txt file to .md.",
        files={"a.txt": "A", "b/c.txt": "C"},
        verify=Verify(
            files={"a.md": FileCheck(equals="A"), "b/c.md": FileCheck(equals="C")}, absent=["a.txt", "b/c.txt"]
        ),
    ),
]


@pytest.fixture(autouse=True, scope="module")
def own_uid_locks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Uids claimed here are locked in a directory of this module's, not the host's (#23 item 8)."""
    with uid_locks_in(tmp_path_factory.mktemp("uid-locks")):
        yield


def test_the_filesystem_server_is_installed() -> None:
    # Fails (never skips) when the set-up did not run `npm ci --prefix tests/wrapped`.
    assert FILESYSTEM.exists(), "run: npm ci --prefix tests/wrapped (scripts/setup.sh --test does)"


@pytest.fixture(scope="module")
def fs_env() -> type[mcpgym.Environment]:
    return wrap([str(FILESYSTEM), "{workspace}"], tasks=FS_TASKS, max_steps=4)


async def _solve(env: mcpgym.AsyncEnv, task_id: str, *, wrong: bool = False) -> list[mcpgym.StepResult[Any]]:
    first = await env.reset(options={"task_id": task_id})
    ws = first.observation["workspace"]
    steps = []
    if task_id == "todo":
        steps.append(await env.call_tool("create_directory", {"path": f"{ws}/notes"}))
        text = "milk\nbread\n" if wrong else "milk\neggs\n"
        steps.append(await env.call_tool("write_file", {"path": f"{ws}/notes/todo.md", "content": text}))
    else:
        moves = [("a.txt", "a.md"), ("b/c.txt", "b/c.txt.bak" if wrong else "b/c.md")]
        for src, dst in moves:
            steps.append(await env.call_tool("move_file", {"source": f"{ws}/{src}", "destination": f"{ws}/{dst}"}))
    return steps


@pytest.mark.parametrize("task_id", ["todo", "rename"])
async def test_a_scripted_policy_solves_filesystem_tasks(fs_env: Any, task_id: str) -> None:
    async with mcpgym.connect(fs_env) as env:
        steps = await _solve(env, task_id)
        assert [s.is_error for s in steps] == [False, False]
        assert steps[-1].reward == 1.0 and steps[-1].done and not steps[-1].truncated
        assert sum(s.reward for s in steps) == 1.0
        state = await env.state()
        assert state.info["task_id"] == task_id and state.info["score"] == 1.0


@pytest.mark.parametrize("task_id", ["todo", "rename"])
async def test_a_wrong_policy_earns_nothing(fs_env: Any, task_id: str) -> None:
    async with mcpgym.connect(fs_env) as env:
        steps = await _solve(env, task_id, wrong=True)
        ws = (await env.state()).info
        assert not any(s.done for s in steps) and sum(s.reward for s in steps) == 0.0
        # Spend the rest of the step limit: truncated, and the final state still earns 0.
        while not steps[-1].done:
            steps.append(await env.call_tool("list_allowed_directories", {}))
        assert steps[-1].truncated and steps[-1].reward == 0.0
        assert ws["task_id"] == task_id


async def test_the_example_tasks_pay_nothing_for_near_misses() -> None:
    # What a policy under pressure tries first: every word on one line; a copy under the new name
    # with the original moved aside rather than renamed.
    Env = wrap([str(FILESYSTEM), "{workspace}"], tasks=HERE.parent / "examples" / "wrap_filesystem" / "tasks.jsonl")
    hacks: dict[str, list[tuple[str, dict[str, str]]]] = {
        "todo": [("write_file", {"path": "notes/todo.md", "content": "milk eggs bread"})],
        "rename-txt": [
            ("write_file", {"path": "a.md", "content": "alpha\n"}),
            ("write_file", {"path": "docs/b.md", "content": "beta\n"}),
            ("move_file", {"source": "a.txt", "destination": "a.old"}),
            ("move_file", {"source": "docs/b.txt", "destination": "docs/b.old"}),
        ],
    }
    async with mcpgym.connect(Env) as env:
        for task_id, calls in hacks.items():
            ws = (await env.reset(options={"task_id": task_id})).observation["workspace"]
            if task_id == "todo":
                await env.call_tool("create_directory", {"path": f"{ws}/notes"})
            for tool, args in calls:
                step = await env.call_tool(tool, {k: f"{ws}/{v}" if k != "content" else v for k, v in args.items()})
                assert not step.is_error, step.text  # the premise: each hack step did what it meant to
            state = await env.state()
            assert state.info["score"] == 0.0 and not state.done, task_id


async def test_tools_and_results_pass_through_unchanged(fs_env: Any) -> None:
    from mcp import Client, StdioServerParameters

    async with mcpgym.connect(fs_env) as env:
        ours = await env.list_tools()
        first = await env.reset(options={"task_id": "rename"})
        wrapped = await env.call_tool("read_text_file", {"path": f"{first.observation['workspace']}/a.txt"})
    assert not await anyio.Path(first.observation["workspace"]).exists(), "the workspace goes with the episode"
    async with Client(StdioServerParameters(command=str(FILESYSTEM), args=[str(HERE)])) as direct:
        theirs = (await direct.list_tools()).tools
    assert [t.model_dump() for t in ours] == [t.model_dump() for t in theirs]
    assert wrapped.text == "A" and wrapped.observation.structured_content == {"content": "A"}


async def test_images_pass_through_unchanged(fs_env: Any) -> None:
    import base64

    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    async with mcpgym.connect(fs_env) as env:
        ws = (await env.reset(options={"task_id": "todo"})).observation["workspace"]
        await anyio.Path(ws, "pixel.png").write_bytes(png)
        result = await env.call_tool("read_media_file", {"path": f"{ws}/pixel.png"})
    image = result.observation.content[0]
    assert image.type == "image" and image.mime_type == "image/png" and base64.b64decode(image.data) == png


async def test_concurrent_episodes_never_see_each_others_files(fs_env: Any) -> None:
    async with mcpgym.connect(fs_env) as a, mcpgym.connect(fs_env) as b:
        wa = (await a.reset(options={"task_id": "todo"})).observation["workspace"]
        wb = (await b.reset(options={"task_id": "todo"})).observation["workspace"]
        assert wa != wb
        await a.call_tool("write_file", {"path": f"{wa}/secret.txt", "content": "from a"})
        listing = await b.call_tool("list_directory", {"path": wb})
        assert "secret" not in listing.text
        stolen = await b.call_tool("read_text_file", {"path": f"{wa}/secret.txt"})
        assert stolen.is_error and "from a" not in stolen.text


@pytest.fixture
def sandboxed() -> None:
    if not mcpgym.wrapping.Sandbox().mode == "bwrap":
        pytest.fail("bubblewrap must work here (scripts/setup.sh --test installs it)")


async def test_the_server_cannot_read_outside_its_workspace(sandboxed: None, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host data")
    Env = wrap(SERVER, tools=["peek", "increment"])
    async with mcpgym.connect(Env) as env, mcpgym.connect(Env) as other:
        ws = (await env.reset()).observation["workspace"]
        other_ws = (await other.reset()).observation["workspace"]
        _write(f"{other_ws}/theirs.txt", "other episode")
        _write(f"{ws}/mine.txt", "own file")
        assert (await env.call_tool("peek", {"path": f"{ws}/mine.txt"})).text == "own file"
        for path in (str(secret), f"{other_ws}/theirs.txt", "/root/.bashrc"):
            result = await env.call_tool("peek", {"path": path})
            assert result.is_error and "No such file" in result.text, path


@pytest.fixture
def workspaces_outside_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Workspaces under /var/tmp: the sandbox's private /tmp no longer hides their parent."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="mcpgym-test-", dir="/var/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


async def test_a_workspace_argument_exposes_no_other_episode(sandboxed: None, workspaces_outside_tmp: Path) -> None:
    # `{workspace}` in the command is a path argument; it must not make its parent (every other
    # episode's workspace) readable, wherever the workspaces live.
    Env = wrap([*SERVER, "--root", "{workspace}"], tools=["peek"])
    async with mcpgym.connect(Env) as env, mcpgym.connect(Env) as other:
        ws = (await env.reset()).observation["workspace"]
        other_ws = (await other.reset()).observation["workspace"]
        assert Path(ws).is_relative_to(workspaces_outside_tmp)  # the premise
        _write(f"{other_ws}/theirs.txt", "other episode")
        _write(f"{ws}/mine.txt", "own file")
        assert (await env.call_tool("peek", {"path": f"{ws}/mine.txt"})).text == "own file"
        stolen = await env.call_tool("peek", {"path": f"{other_ws}/theirs.txt"})
        assert stolen.is_error and "other episode" not in stolen.text


@pytest.fixture
def readable_tmp_path(tmp_path: Path) -> Path:
    """`tmp_path`, readable by others: run as root, the server is a uid of its own."""
    tmp_path.chmod(0o755)
    return tmp_path


async def test_a_server_that_lives_under_tmp_runs_in_the_sandbox(sandboxed: None, readable_tmp_path: Path) -> None:
    tmp_path = readable_tmp_path
    script = tmp_path / "server.py"
    script.write_text((HERE / "wrap_server.py").read_text())
    assert str(script).startswith("/tmp/")  # the premise: the sandbox has a private /tmp
    Env = wrap([sys.executable, str(script)], tools=["increment"])
    async with mcpgym.connect(Env) as env:
        await env.reset()
        assert (await env.call_tool("increment")).text == "1"


async def test_host_secrets_under_etc_are_hidden(sandboxed: None) -> None:
    # The server sees an allowlist of /etc (the libraries' configuration), never the secrets.
    # (tests/test_wrap_sandbox.py: a root-only file with a name no denylist knows.)
    Env = wrap(SERVER, tools=["peek"])
    async with mcpgym.connect(Env) as env:
        await env.reset()
        shadow = await env.call_tool("peek", {"path": "/etc/shadow"})
        assert "root:" not in shadow.text
        assert (await env.call_tool("peek", {"path": "/etc/passwd"})).text.startswith("root:")


async def test_no_network_unless_the_task_allows_it(sandboxed: None) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    tasks = [TaskSpec(id="offline", prompt=""), TaskSpec(id="online", prompt="", network=True)]
    Env = wrap(SERVER, tasks=tasks, tools=["dial"])
    try:
        async with mcpgym.connect(Env) as env:
            await env.reset(options={"task_id": "offline"})
            assert (await env.call_tool("dial", {"port": port})).is_error
            await env.reset(options={"task_id": "online"})
            result = await env.call_tool("dial", {"port": port})
            assert not result.is_error and result.text == "connected"
    finally:
        listener.close()


async def test_each_episode_gets_a_fresh_server() -> None:
    async with mcpgym.connect(WrappedCounter) as env:
        await env.reset()
        assert (await env.call_tool("increment", {"by": 2})).text == "2"
        await env.reset()
        assert (await env.call_tool("get")).text == "0"
        # A trajectory rubric: the third increment reaches 3 and ends the episode.
        for expected in ("1", "2"):
            step = await env.call_tool("increment")
            assert step.text == expected and step.reward == 0.0 and not step.done
        final = await env.call_tool("increment")
        assert final.reward == 1.0 and final.done


async def test_filtered_and_renamed_tools() -> None:
    Env = wrap(SERVER, tools=["increment=bump", "get"])
    async with mcpgym.connect(Env) as env:
        assert [t.name for t in await env.list_tools()] == ["bump", "get"]
        await env.reset()
        assert (await env.call_tool("bump", {"by": 4})).text == "4"
        hidden = await env.call_tool("increment")  # filtered out: unknown to the agent, as any invented name
        assert hidden.is_error and hidden.info["unknown_tool"] and "Unknown tool" in hidden.text
        wrong = await env.call_tool("bump", {"by": "many"})
        assert wrong.is_error and not wrong.done  # the wrapped server's own validation, passed through
    with pytest.raises(ValueError, match="no tool 'nope'"):
        await prepare(wrap(SERVER, tools=["nope"]))  # known once the server is listed


def _write(path: str, text: str) -> None:
    Path(path).write_text(text)


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    tag = f"mcpgym-test-{uuid.uuid4().hex}"
    yield tag
    assert _processes_with(tag) == [], "a wrapped server outlived its episode"


async def test_a_crashing_server_ends_only_its_episode(marker: str) -> None:
    Env = wrap([*SERVER, "--marker", marker], tools=["crash", "increment"])
    async with mcpgym.connect(Env) as doomed, mcpgym.connect(Env) as fine:
        await doomed.reset()
        await fine.reset()
        assert len(_processes_with(marker)) >= 2
        crashed = await doomed.call_tool("crash")
        assert crashed.is_error and crashed.done and "exited" in crashed.text
        assert (await fine.call_tool("increment")).text == "1"
        await doomed.reset()  # the next episode gets a new server
        assert (await doomed.call_tool("increment")).text == "1"


async def test_a_daemon_the_server_starts_dies_with_its_episode(sandboxed: None, marker: str) -> None:
    # A new session, stdio detached, reparented: only the pid namespace still holds it. (Every
    # process forked for the command has the marker in its command line from the fork on.)
    Env = wrap(SERVER, tools=["shell"])
    async with mcpgym.connect(Env) as env:
        await env.reset()
        daemon = f"setsid sh -c 'sleep 1000; : {marker}' >/dev/null 2>&1 </dev/null &"
        await env.call_tool("shell", {"command": daemon})
        assert _processes_with(marker), "the premise: the daemon is running"
    # (the marker fixture then checks that it is gone)


async def test_a_hanging_server_ends_its_episode_with_a_clear_error(marker: str) -> None:
    Env = wrap([*SERVER, "--marker", marker], tools=["hang", "increment"], call_timeout=0.5)
    async with mcpgym.connect(Env) as hung, mcpgym.connect(Env) as fine:
        await hung.reset()
        await fine.reset()
        result = await hung.call_tool("hang")
        assert result.is_error and result.done and "did not answer 'hang' within 0.5s" in result.text
        assert (await fine.call_tool("increment")).text == "1"


async def test_a_server_that_will_not_start_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"wrap_server.py --exit-at-once exited before it answered initialize"):
        await prepare(wrap([*SERVER, "--exit-at-once"]))
    flag = tmp_path / "refuse"
    Env = wrap([*SERVER, "--exit-if-exists", str(flag)], tools=["increment"], isolation="none")
    async with mcpgym.connect(Env) as env:
        flag.touch()  # from now on the server exits as it starts
        with pytest.raises(mcpgym.MCPError, match=r"reset raised.*exited before it answered initialize"):
            await env.reset()
        flag.unlink()
        await env.reset()  # and the environment still serves episodes
        assert (await env.call_tool("increment")).text == "1"


def test_task_files_are_never_written_through_a_link_planted_in_the_workspace(tmp_path: Path) -> None:
    # Files are placed before the server starts, but a set-up command (or, with a warm pool, an
    # instance) may have run there first: a link it left must not turn the write into a host write.
    from mcpgym._wrap._instance import place_files

    victim = tmp_path / "victim.txt"
    victim.write_text("host file")
    (tmp_path / "dir").mkdir()
    for name, target, files in (
        ("notes.txt", victim, {"notes.txt": "seed"}),
        ("sub", tmp_path / "dir", {"sub/notes.txt": "seed"}),
    ):
        workspace = tmp_path / f"ws-{name}"
        workspace.mkdir()
        (workspace / name).symlink_to(target)
        with pytest.raises(RuntimeError, match=f"cannot place the task's file .*{name}.* is a link"):
            place_files(workspace, files)
    assert victim.read_text() == "host file" and not (tmp_path / "dir" / "notes.txt").exists()


def test_the_wrap_command_loads_a_rubric_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As `mcpgym serve MODULE:CLASS` does: the console script's sys.path lacks the working directory.
    from mcpgym._cli.options import load_object as _load_object

    (tmp_path / "my_rubric_module.py").write_text("def tidy(ctx):\n    return 1.0\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".")])
    assert _load_object("my_rubric_module:tidy").__name__ == "tidy"


def test_the_wrap_command_says_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    from mcpgym._cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["wrap", "--", "/nonexistent/mcp-server", "{workspace}"])
    assert str(exc.value.code).startswith("mcpgym wrap: no program '/nonexistent/mcp-server'")
    with pytest.raises(SystemExit):
        main(["wrap", "--help"])
    assert "usage: mcpgym wrap [options] -- COMMAND [ARGS ...]" in capsys.readouterr().out


HOSTILE = [sys.executable, str(HERE / "wrap_hostile.py")]


async def test_bad_commands_and_settings_are_refused_plainly() -> None:
    with pytest.raises(RuntimeError, match=r"wrap_hostile.py silent did not answer initialize within 1s"):
        await prepare(wrap([*HOSTILE, "silent"], start_timeout=1))
    with pytest.raises(ValueError, match="no program '/nonexistent/mcp-server'"):
        wrap(["/nonexistent/mcp-server", "{workspace}"])
    with pytest.raises(ValueError, match="no program 'mcp-server-that-is-not-installed'"):
        wrap(["mcp-server-that-is-not-installed"])
    with pytest.raises(ValueError, match="warm must be 0 or more"):
        wrap(SERVER, warm=-1)
    with pytest.raises(ValueError, match="max_steps must be 1 or more"):
        wrap(SERVER, max_steps=0)


async def test_a_wrapped_server_cannot_stamp_its_own_reward() -> None:
    Env = wrap([*HOSTILE, "forge"])
    async with mcpgym.connect(Env) as env:
        await env.reset()
        step = await env.call_tool("go")
    assert math.isnan(step.reward) and not step.done  # its own forged reward is not ours: unscored
    assert "io.mcpgym/step" not in (step.observation.meta or {}), "the forged stamp reached the client"


async def test_a_refused_last_call_still_earns_the_final_state() -> None:
    # SDKs answer invalid arguments with a JSON-RPC error: that call is a step all the same, and
    # when it is the last one the limit allows, the state the episode ends in is what it earns.
    task = TaskSpec(
        id="half",
        prompt="",
        partial=True,
        files={"a.txt": "x"},
        verify=Verify(files={"a.txt": FileCheck(equals="x"), "b.txt": FileCheck()}),
    )
    Env = wrap([*HOSTILE, "refuse"], tasks=[task], max_steps=1)
    async with mcpgym.connect(Env) as env:
        await env.reset()
        step = await env.call_tool("go")
        assert step.is_error and "refused 'go'" in step.text
        assert step.truncated and step.reward == pytest.approx(2 / 3)
        assert (await env.state()).info["score"] == pytest.approx(2 / 3)


async def test_a_malformed_result_is_said_plainly_and_the_episode_goes_on() -> None:
    Env = wrap([*HOSTILE, "malformed"])
    async with mcpgym.connect(Env) as env:
        await env.reset()
        step = await env.call_tool("go")
        assert step.is_error and not step.done
        assert (
            step.text
            == "The wrapped server's answer to 'go' is not a valid tool result (content: Input should be a valid list)"
        )


async def test_a_tool_may_take_longer_than_the_start_timeout() -> None:
    # The start timeout bounds the handshake; a call is bounded by the call timeout alone.
    Env = wrap([*HOSTILE, "slow"], start_timeout=2, call_timeout=30)
    async with mcpgym.connect(Env) as env:
        await env.reset()
        step = await env.call_tool("go", {"seconds": 2.5})
        assert not step.is_error and step.text == "done"


async def test_a_rubric_call_to_a_hanging_server_ends_the_episode() -> None:
    async def rubric(ctx: WrapContext) -> float:
        await ctx.call_tool("hang")  # a "read-only check" the server never answers
        return 1.0

    Env = wrap(SERVER, tools=["increment"], rubric=rubric, call_timeout=0.5, start_timeout=30)
    async with mcpgym.connect(Env) as env:
        await env.reset()
        with anyio.fail_after(10):
            step = await env.call_tool("increment")
        assert step.is_error and step.done and "Scoring needed the wrapped server" in step.text
        assert step.reward == 0.0


async def test_the_warm_pool_hands_out_started_instances(marker: str) -> None:
    Env = wrap([*SERVER, "--marker", marker], tools=["pid", "increment"], warm=2)
    async with mcpgym.connect(Env) as env:
        await env.reset()  # starts the pool, and takes the first instance it starts (no spawn beside it)
        pool = env.door._host.state[("mcpgym.wrap.pool", id(Env.config))]  # type: ignore[attr-defined]
        assert (pool.hits, pool.on_the_spot) == (1, 0)
        with anyio.fail_after(30):
            while pool.ready < 2:
                await pool.changed()
        started = pool.spawned
        for _ in range(3):
            with anyio.fail_after(30):
                while pool.ready < 1:
                    await pool.changed()
            await env.reset()
            assert (await env.call_tool("increment")).text == "1"  # a fresh server all the same
        assert pool.hits == 1 + 3
        with anyio.fail_after(30):
            while pool.ready < 2:
                await pool.changed()
        assert pool.spawned == started + 3  # each one taken was replaced
    # (the marker fixture then checks that no instance, taken or waiting, outlived the client)


async def test_the_warm_pool_passes_over_an_instance_that_died_waiting(marker: str) -> None:
    import signal

    Env = wrap([*SERVER, "--marker", marker], tools=["increment", "pid"], warm=1, isolation="none")
    async with mcpgym.connect(Env) as env:
        await env.reset()  # starts the pool, and takes the first instance it starts
        own = int((await env.call_tool("pid")).text)
        pool = env.door._host.state[("mcpgym.wrap.pool", id(Env.config))]  # type: ignore[attr-defined]
        with anyio.fail_after(30):
            while pool.ready < 1:
                await pool.changed()
        waiting = [p for p in _processes_with(marker) if p != own]
        assert len(waiting) == 1  # the premise: the pool's instance, waiting
        os.kill(waiting[0], signal.SIGKILL)
        await env.reset()
        assert (await env.call_tool("increment")).text == "1"
        assert pool.dead == 1 and pool.hits + pool.on_the_spot == 2  # the second: a refill, or its own


async def test_a_reset_cancelled_while_it_checks_a_pooled_instance_leaves_it_running_nowhere(
    marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcpgym._wrap import _instance

    checking = anyio.Event()

    async def stuck(instance: Any) -> bool:  # the liveness round trip of a reset, never answered
        checking.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    Env = wrap([*SERVER, "--marker", marker], tools=["increment"], warm=1)
    async with mcpgym.connect(Env) as env:
        await env.reset()  # starts the pool
        pool = env.door._host.state[("mcpgym.wrap.pool", id(Env.config))]  # type: ignore[attr-defined]
        with anyio.fail_after(30):
            while pool.ready < 1:
                await pool.changed()
        monkeypatch.setattr(_instance, "_alive", stuck)
        async with anyio.create_task_group() as tg:
            tg.start_soon(env.reset)  # takes the waiting instance, and is cancelled as it checks it
            await checking.wait()
            tg.cancel_scope.cancel()
        monkeypatch.undo()
        # The pool refills; what runs of it is that refill only: the instance the cancelled
        # reset took is stopped (it used to run on, held by the pool, until the pool closed),
        # and so is the first episode's, which that reset ended.
        with anyio.move_on_after(30):
            while pool.ready < 1 or pool.live > 1:
                await pool.changed()
        assert (pool.ready, pool.live) == (1, 1), "a pooled instance runs that nobody holds"
        assert len(_processes_with(marker)) >= 1  # the premise: the marker finds the pool's instance


async def test_a_client_leaving_does_not_stop_another_clients_server() -> None:
    # Each in-memory client runs its own server lifespan: an episode lives in its own client's.
    gym = mcpgym.GymServer(WrappedCounter)
    async with mcpgym.connect(gym) as first:
        async with mcpgym.connect(gym) as second:
            await first.reset()
            await second.reset()
            assert (await first.call_tool("increment")).text == "1"
        step = await first.call_tool("increment")
        assert not step.is_error and step.text == "2"


async def test_many_concurrent_episodes_and_resets_over_one_server(marker: str) -> None:
    from tests.conftest import serve_gym

    Env = wrap([*SERVER, "--marker", marker], tools=["increment"], warm=2)
    texts: list[str] = []

    async def churn(url: str) -> None:
        async with mcpgym.connect(url) as env:
            for _ in range(3):
                await env.reset()
                texts.append((await env.call_tool("increment")).text)

    async with serve_gym(Env) as (_, url):
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(churn, url)
    assert texts == ["1"] * 12  # every episode had a fresh server of its own
    # (the marker fixture then checks that nothing outlived the server)


async def test_the_warm_pool_when_the_command_starts_failing(marker: str, readable_tmp_path: Path) -> None:
    flag = readable_tmp_path / "refuse"
    Env = wrap([*SERVER, "--marker", marker, "--exit-if-exists", str(flag)], tools=["increment"], warm=1)
    async with mcpgym.connect(Env) as env:
        await env.reset()
        pool = env.door._host.state[("mcpgym.wrap.pool", id(Env.config))]  # type: ignore[attr-defined]
        with anyio.fail_after(30):
            while pool.ready < 1:
                await pool.changed()
        flag.touch()  # from now on the server exits as it starts
        await env.reset()  # the instance started before still serves
        assert (await env.call_tool("increment")).text == "1"
        with pytest.raises(mcpgym.MCPError, match="exited before it answered initialize"):
            await env.reset()  # none ready, none can start: said plainly
        flag.unlink()
        await env.reset()
        assert (await env.call_tool("increment")).text == "1"


@pytest.mark.parametrize("kind", DOORS)
async def test_every_door_gives_the_same_wrapped_episode(kind: str) -> None:
    script: list[tuple[str, dict[str, Any]]] = [
        ("get", {}),
        ("increment", {"by": "x"}),
        ("nope", {}),
        ("increment", {}),
        ("increment", {}),
        ("increment", {}),
        ("increment", {}),
    ]
    async with mcpgym.connect(WrappedCounter) as env:
        reference = _portable(await _script(env, script, seed=0))
    async with door(kind, WrappedCounter) as target, mcpgym.connect(target) as env:
        assert _portable(await _script(env, script, seed=0)) == reference


def _portable(transcript: list[Any]) -> list[Any]:
    """The transcript less the per-episode workspace path."""
    text = json.dumps(transcript, default=str)
    first = transcript[0][1]["workspace"]
    portable: list[Any] = json.loads(text.replace(first, "<ws>"))
    return portable


def test_task_files_are_validated_with_line_numbers(tmp_path: Path) -> None:
    good = {"id": "t", "prompt": "p", "verify": {"files": {"x": {"equals": "1"}}}}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "id": "u", "verfy": {}}) + "\n")
    with pytest.raises(TaskFileError, match=r"tasks.jsonl:3: verfy: Extra inputs"):
        load_tasks(path)
    path.write_text(json.dumps({**good, "files": {"../escape": "x"}}) + "\n")
    with pytest.raises(TaskFileError, match=r":1: files: .*not a relative path"):
        load_tasks(path)
    path.write_text("{not json\n")
    with pytest.raises(TaskFileError, match=r":1: not JSON"):
        load_tasks(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
    with pytest.raises(TaskFileError, match="appears twice"):
        load_tasks(path)
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(good).encode() + b"\r\n")  # as some editors save it
    assert [t.id for t in load_tasks(path)] == ["t"]


def test_the_verifier_cannot_be_fooled(tmp_path: Path) -> None:
    from mcpgym._wrap._verify import MAX_READ, verify

    task = TaskSpec(id="t", prompt="", verify=Verify(files={"out.txt": FileCheck(contains=["ok"])}))
    outside = tmp_path / "outside.txt"
    outside.write_text("ok")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "out.txt").symlink_to(outside)  # a link to a file that matches is not the file
    assert verify(task, ws).value == 0.0
    (ws / "out.txt").unlink()
    (ws / "d").symlink_to(tmp_path)  # nor is a path through a linked directory
    linked = TaskSpec(id="t", prompt="", verify=Verify(files={"d/outside.txt": FileCheck(contains=["ok"])}))
    assert verify(linked, ws).value == 0.0
    (ws / "out.txt").write_text("x" * MAX_READ + "ok")  # too big to read: fails, never truncated
    assert verify(task, ws).value == 0.0
    (ws / "out.txt").write_text("ok")
    assert verify(task, ws).value == 1.0
    empty = TaskSpec(id="e", prompt="")
    assert verify(empty, ws).value == 0.0  # a task with no checks is never "solved"
    partial = TaskSpec(
        id="p",
        prompt="",
        partial=True,
        verify=Verify(files={"out.txt": FileCheck(contains=["ok", "missing"])}),
    )
    assert verify(partial, ws) == WrapScore(2 / 3, verify(partial, ws).checks)


async def test_the_verifier_tests_what_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The wrapped server's processes run on while the checks do: a name that passed a test may be
    # a link or a FIFO by the time it is read. Simulated here by tests that always pass.
    from mcpgym._wrap._verify import verify

    task = TaskSpec(id="t", prompt="", verify=Verify(files={"out.txt": FileCheck(contains=["ok"])}))
    outside = tmp_path / "outside.txt"
    outside.write_text("ok")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "out.txt").symlink_to(outside)
    monkeypatch.setattr(Path, "is_symlink", lambda self: False)
    assert verify(task, ws).value == 0.0, "a link read as the file"
    (ws / "out.txt").unlink()
    os.mkfifo(ws / "out.txt")
    monkeypatch.setattr(Path, "is_file", lambda self: True)
    try:
        with anyio.fail_after(10):
            score = await anyio.to_thread.run_sync(verify, task, ws, abandon_on_cancel=True)
    finally:  # free a reader blocked on the FIFO (so no thread outlives the test)
        with contextlib.suppress(OSError):
            os.close(os.open(ws / "out.txt", os.O_WRONLY | os.O_NONBLOCK))
    assert score.value == 0.0 and "not a regular file" in score.checks[0].detail


def test_what_the_verifier_cannot_read_never_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Run by a non-root user, a server can make a directory unreadable (chmod 000): the files in
    # it must not vanish from the checks. Simulated by lookups that are refused, as root is never.
    from mcpgym._wrap._verify import verify

    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "secret.txt").write_text("still here")
    (ws / "keep.md").write_text("ok")
    real_lstat, real_scandir = os.lstat, os.scandir

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path).startswith(str(ws / "d") + "/"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_lstat(path, *args, **kwargs)

    def scandir(path: Any = ".") -> Any:
        if str(path) == str(ws / "d"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    real_open = os.open

    def open_(path: Any, flags: int, *args: Any, dir_fd: int | None = None, **kwargs: Any) -> int:
        if dir_fd is not None and path == "d" and flags & os.O_DIRECTORY:  # the listing walks by descriptor
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *args, dir_fd=dir_fd, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "open", open_)
    gone = TaskSpec(id="a", prompt="", verify=Verify(absent=["d/secret.txt"]))
    assert verify(gone, ws).value == 0.0
    only = TaskSpec(id="o", prompt="", verify=Verify(only=["*.md"]))
    score = verify(only, ws)
    assert score.value == 0.0 and "cannot list" in score.checks[0].detail


async def test_the_default_rubric_reads_files_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # Reading up to 8 MiB per checked file must not stall every other episode of the server.
    import threading

    from mcpgym._wrap import _rubric
    from mcpgym._wrap._rubric import WrapContext, default_rubric, evaluate

    threads: list[int] = []

    def spy(task: TaskSpec, workspace: Path) -> WrapScore:
        threads.append(threading.get_ident())
        return WrapScore(1.0)

    monkeypatch.setattr(_rubric, "verify", spy)
    await evaluate(default_rubric, WrapContext(TaskSpec(id="t", prompt=""), Path("/nonexistent")))
    assert threads and threads[0] != threading.get_ident()


async def test_harness_and_trl_work_over_a_wrapped_server() -> None:
    from mcpgym import harness
    from mcpgym.harness.types import AssistantTurn, ToolCall

    async def policy(messages: list[dict[str, Any]], tools: list[harness.ChatTool]) -> AssistantTurn:
        calls = sum(1 for m in messages if m.get("role") == "tool")
        return AssistantTurn(tool_calls=[ToolCall(id=f"c{calls}", name="increment", arguments_json="{}", arguments={})])

    trajectories = await harness.rollout(WrappedCounter, policy, episodes=2, concurrency=2)
    assert [t.reward for t in trajectories] == [1.0, 1.0]


def test_trl_environment_class_over_a_wrapped_server(marker: str) -> None:
    import mcpgym.trl

    Env = mcpgym.trl.environment_class(WrappedCounter)
    env = Env()
    try:
        assert "counter" in str(env.reset()).lower()
        for _ in range(3):
            env.increment()  # type: ignore[attr-defined]
        assert env.get_reward() == 1.0
    finally:
        env._close()


async def test_pools_and_recording_over_wrapped_servers(tmp_path: Path) -> None:
    from mcpgym.pool import Pool
    from tests.conftest import serve_gym

    async with (
        serve_gym(WrappedCounter, record=tmp_path / "a") as (_, first),
        serve_gym(WrappedCounter, record=tmp_path / "b") as (_, second),
    ):
        async with mcpgym.connect(Pool([first, second])) as env:
            for _ in range(2):
                await env.reset(seed=1)
                steps = [await env.call_tool("increment") for _ in range(3)]
                assert [s.reward for s in steps] == [0.0, 0.0, 1.0] and steps[-1].done
    recorded = mcpgym.read_recordings(tmp_path / "a") + mcpgym.read_recordings(tmp_path / "b")
    assert len(recorded) == 2
    assert all([s.tool for s in t.steps] == ["increment"] * 3 and t.total_reward == 1.0 for t in recorded)


async def test_the_filesystem_example_runs_as_written() -> None:
    example = HERE.parent / "examples" / "wrap_filesystem" / "play.py"
    done = await anyio.run_process([sys.executable, str(example)], cwd=HERE.parent, check=False)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "[in-process] mean return 1.00" in out and "[http+tidy] mean return 1.00" in out
    assert out.count("return=1.00 done=True") == 8


async def test_the_task_file_is_the_catalog_and_nothing_graded_is_in_it(fs_env: Any) -> None:
    tasks = await mcpgym.list_tasks(fs_env)
    assert [(t.id, t.prompt, t.options) for t in tasks] == [(s.id, s.prompt, {"task_id": s.id}) for s in FS_TASKS]
    shown = json.dumps([t.model_dump() for t in tasks])
    assert "verify" not in shown and "equals" not in shown and "files" not in shown


async def test_a_component_rubric_scores_a_wrapped_episode() -> None:
    from mcpgym import rubrics

    graded = wrap(
        [str(FILESYSTEM), "{workspace}"],
        tasks=FS_TASKS,
        max_steps=4,
        rubric=rubrics.Rubric(
            {"task": rubrics.final("solved"), "calls": rubrics.step_rubric(lambda step: -0.01)},
            weights={"task": 1.0, "calls": 1.0},
        ),
    )
    async with mcpgym.connect(graded) as env:
        steps = await _solve(env, "todo")
    assert steps[-1].done and steps[-1].components["task"] == 1.0
    assert [s.components["calls"] for s in steps] == [-0.01, -0.01]
    assert sum(s.reward for s in steps) == pytest.approx(1.0 - 0.02)


@pytest.mark.parametrize("verbose", [False, True])
async def test_mcpgym_wrap_keeps_each_servers_banner_quiet_unless_verbose(verbose: bool, tmp_path: Path) -> None:
    import shlex

    from mcp import StdioServerParameters

    log = tmp_path / "stderr"
    path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else None
    cli = [sys.executable, "-m", "mcpgym", "wrap", *(["--verbose"] if verbose else []), "--", *HOSTILE, "banner"]
    server = StdioServerParameters(command="/bin/sh", args=["-c", f"exec {shlex.join(cli)} 2>{log}"], env=path)
    async with mcpgym.connect(server) as env:
        for _ in range(2):  # two episodes, each its own instance (and banner)
            await env.reset()
            assert (await env.call_tool("go", {})).text == "ok"
    said = log.read_text()
    banner = "hostile MCP server (banner) running on stdio"
    # Listing the tools starts two instances, then one per episode.
    assert said.count(banner) == (4 if verbose else 0), said


async def test_a_server_that_fails_to_start_is_quoted_from_its_stderr() -> None:
    with pytest.raises(
        RuntimeError, match=r"(?s)exited before it answered initialize; its stderr ended: .*cannot open the"
    ):
        await prepare(wrap([*HOSTILE, "dies"]))

"""Real third-party MCP servers nobody here wrote, started under the sandbox as a user would (#24).

- `@modelcontextprotocol/server-memory` from npm (tests/wrapped_state's lock file), its state
  file in each episode's workspace through `--env`-style variables;
- `mcp-server-time` from PyPI in a virtualenv on the system Python, `mcp-server-git` in one on
  the pyenv Python (tests/wrapped_py/*.txt pin them; scripts/setup.sh --test makes both): the
  sandbox must find each one's interpreter and site-packages by itself;
- `mcp-server-git --repository {workspace}` on a repository the task's set-up creates before the
  server starts, with a task (make a commit) and scripted right and wrong policies.

They fail, never skip, when the set-up did not install them or bubblewrap is missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

import mcpgym
from mcpgym.wrapping import Check as WrapCheck
from mcpgym.wrapping import Sandbox, Score, TaskSpec, WrapContext, wrap
from tests.wrap_envs import uid_locks_in

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
MEMORY = HERE / "wrapped_state" / "node_modules" / ".bin" / "mcp-server-memory"
TIME = HERE / "wrapped_py" / "time-venv" / "bin" / "mcp-server-time"
GIT = HERE / "wrapped_py" / "git-venv" / "bin" / "mcp-server-git"
_IDENTITY = {
    key: value
    for who in ("AUTHOR", "COMMITTER")
    for key, value in ((f"GIT_{who}_NAME", "Policy"), (f"GIT_{who}_EMAIL", "policy@example.invalid"))
}


@pytest.fixture(autouse=True, scope="module")
def own_uid_locks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Uids claimed here are locked in a directory of this module's, not the host's (#23 item 8)."""
    with uid_locks_in(tmp_path_factory.mktemp("uid-locks")):
        yield


def test_the_real_servers_are_installed_and_sandboxed() -> None:
    assert MEMORY.exists(), "run: npm ci --prefix tests/wrapped_state (scripts/setup.sh --test does)"
    for server in (TIME, GIT):
        assert server.exists(), f"{server} is missing: run scripts/setup.sh --test"
    assert Sandbox().mode == "bwrap", "bubblewrap must work here (scripts/setup.sh --test installs it)"
    # The premise of the virtualenv tests: one on the system Python, one on another installation.
    assert _home(TIME).startswith("/usr/") and not _home(GIT).startswith("/usr/"), (_home(TIME), _home(GIT))


def _home(entry_point: Path) -> str:
    config = (entry_point.parent.parent / "pyvenv.cfg").read_text()
    return next(line.split("=", 1)[1].strip() for line in config.splitlines() if line.startswith("home"))


@pytest.fixture(scope="module")
def memory_env() -> type[mcpgym.Environment]:
    box = Sandbox(env={"MEMORY_FILE_PATH": "{workspace}/memory.jsonl"})
    return wrap([str(MEMORY)], sandbox=box, tools=["create_entities", "read_graph"])


def _graph(text: str) -> list[str]:
    return sorted(entity["name"] for entity in json.loads(text)["entities"])


async def test_server_memory_keeps_its_state_in_the_episode_workspace(memory_env: Any) -> None:
    async with mcpgym.connect(memory_env) as env:
        ws = (await env.reset()).observation["workspace"]
        entity = {"name": "alice", "entityType": "person", "observations": ["likes tea"]}
        made = await env.call_tool("create_entities", {"entities": [entity]})
        assert not made.is_error, made.text
        assert _graph((await env.call_tool("read_graph")).text) == ["alice"]
        assert "alice" in _read(Path(ws) / "memory.jsonl")  # its file, in this episode's workspace
        await env.reset()
        assert _graph((await env.call_tool("read_graph")).text) == []  # a fresh state per episode


def _read(path: Path) -> str:
    return path.read_text()


async def test_eight_concurrent_memory_episodes_are_isolated(memory_env: Any) -> None:
    seen: dict[int, list[str]] = {}

    async def episode(i: int) -> None:
        async with mcpgym.connect(memory_env) as env:
            await env.reset()
            entity = {"name": f"entity-{i}", "entityType": "thing", "observations": [str(i)]}
            assert not (await env.call_tool("create_entities", {"entities": [entity]})).is_error
            seen[i] = _graph((await env.call_tool("read_graph")).text)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(episode, i)
    assert seen == {i: [f"entity-{i}"] for i in range(8)}


async def test_a_pypi_server_in_a_virtualenv_on_the_system_python_starts_in_the_sandbox() -> None:
    Env = wrap([str(TIME)])
    assert {tool.name for tool in Env.config.tools} == {"get_current_time", "convert_time"}
    async with mcpgym.connect(Env) as env:
        await env.reset()
        now = await env.call_tool("get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error and json.loads(now.text)["timezone"] == "Europe/Paris"


GIT_TASK = TaskSpec(
    id="commit-notes",
    prompt="The repository in your workspace has an uncommitted notes.txt: commit it, message 'add notes'.",
    files={"README.md": "project\n", "notes.txt": "remember the milk\n"},
    setup=["git init -q -b main", "git add README.md", "git commit -q -m 'initial commit'"],
)


async def git_rubric(ctx: WrapContext) -> Score:
    """Read the final state from the wrapped server itself (never by running git on the host over
    a repository the policy controlled: its config could name programs for git to run)."""
    log = _text(await ctx.call_tool("git_log", {"repo_path": str(ctx.workspace)}))
    status = _text(await ctx.call_tool("git_status", {"repo_path": str(ctx.workspace)}))
    checks = [
        WrapCheck("a commit 'add notes'", "add notes" in log),
        WrapCheck("the initial commit kept", "initial commit" in log),
        WrapCheck("nothing left to commit", "nothing to commit" in status and "notes.txt" not in status),
    ]
    return Score(1.0 if all(c.passed for c in checks) else 0.0, checks)


def _text(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


@pytest.fixture(scope="module")
def git_env() -> type[mcpgym.Environment]:
    return wrap(
        [str(GIT), "--repository", "{workspace}"],
        tasks=[GIT_TASK],
        rubric=git_rubric,
        sandbox=Sandbox(env=_IDENTITY),
        max_steps=4,
    )


@pytest.mark.parametrize(
    ("policy", "reward"),
    [
        ([("git_add", {"files": ["notes.txt"]}), ("git_commit", {"message": "add notes"})], 1.0),
        ([("git_commit", {"message": "add notes"})], 0.0),  # nothing staged: notes.txt stays out
        ([("git_add", {"files": ["notes.txt"]}), ("git_commit", {"message": "wip"})], 0.0),
        ([("git_add", {"files": ["notes.txt"]})], 0.0),  # staged, never committed
    ],
    ids=["right", "commit-without-add", "wrong-message", "add-only"],
)
async def test_mcp_server_git_on_a_repository_the_set_up_made(
    git_env: Any, policy: list[tuple[str, dict[str, Any]]], reward: float
) -> None:
    async with mcpgym.connect(git_env) as env:
        first = await env.reset()
        ws = first.observation["workspace"]
        log = await env.call_tool("git_log", {"repo_path": ws})
        assert "initial commit" in log.text  # the server started on the repository the set-up made
        for tool, arguments in policy:
            step = await env.call_tool(tool, {"repo_path": ws, **arguments})
        info = (await env.state()).info
        assert step.reward == reward, info
        assert step.done == (reward == 1.0), info


async def test_a_failing_set_up_command_fails_the_reset_and_says_which() -> None:
    broken = TaskSpec(id="broken", prompt="", setup=["true", "echo no such repository >&2; exit 3"])
    Env = wrap([str(TIME)], tasks=[TaskSpec(id="fine", prompt=""), broken])
    async with mcpgym.connect(Env) as env:
        with pytest.raises(mcpgym.MCPError, match=r"set-up command .*exit 3.* failed \(exit status 3\): no such repo"):
            await env.reset(options={"task_id": "broken"})
        await env.reset(options={"task_id": "fine"})  # and the environment still serves episodes


_AS_A_USER = """
import json, sys, anyio, mcpgym
from mcpgym.wrapping import wrap
Env = wrap([sys.argv[1]])
async def main():
    async with mcpgym.connect(Env) as env:
        first = await env.reset()
        now = await env.call_tool("get_current_time", {"timezone": "UTC"})
        print(json.dumps({"sandbox": first.observation["sandbox"], "error": now.is_error, "text": now.text}))
anyio.run(main)
"""


@pytest.mark.system_python  # the system Python is 3.11 (Debian's): it cannot load 3.13's compiled packages
def test_run_as_a_user_the_server_starts_in_a_user_namespace_of_its_own(tmp_path: Path) -> None:
    # CI runs as root; a user's machine does not: the same wrap as an unprivileged uid (nobody),
    # with the system Python and this environment's packages (both readable by others).
    import subprocess
    import sys
    import sysconfig

    system = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"], capture_output=True)
    # The premise: the system Python can load this environment's compiled packages (same minor).
    assert system.stdout.decode().strip() == str(sys.version_info[:2]), "this test runs the system Python 3.11"
    src = str(Path(mcpgym.__file__).parent.parent)
    path = f"{src}:{sysconfig.get_paths()['purelib']}"
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", f"PYTHONPATH={path}", "HOME=/tmp"]
    done = subprocess.run(
        [*user, "/usr/bin/python3", "-c", _AS_A_USER, str(TIME)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = json.loads(done.stdout.splitlines()[-1])
    assert not said["error"] and json.loads(said["text"])["timezone"] == "UTC", said
    box = said["sandbox"]
    assert box["isolation"] == "bwrap" and box["user_namespaces_disabled"] and box["uid"].startswith("the host's")
    assert box["workspace"] == "no total size limit" and box["memory"].startswith("not limited"), box

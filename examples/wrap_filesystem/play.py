"""Play the filesystem tasks with a scripted policy: in-process, then over HTTP through
`mcpgym wrap --http`, with the task checks as the reward and then with the tidy rubric.

    npm install --prefix /tmp/fs @modelcontextprotocol/server-filesystem
    python examples/wrap_filesystem/play.py --server /tmp/fs/node_modules/.bin/mcp-server-filesystem

Run it from the repository root (the served rubric is imported as a module from there). The
test suite runs it against the copy pinned in tests/wrapped. The scripted policy stands
in for a model: an RL loop would send the model's tool calls instead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio

import mcpgym
from mcpgym.wrapping import load_tasks

HERE = Path(__file__).resolve().parent
PINNED = HERE.parent.parent / "tests" / "wrapped" / "node_modules" / ".bin" / "mcp-server-filesystem"

Calls = list[tuple[str, dict[str, Any]]]


def solution(task_id: str, ws: str) -> Calls:
    """What a competent agent does for each task (absolute paths: the server allows only `ws`)."""
    moves = {"rename-txt": [("a.txt", "a.md"), ("docs/b.txt", "docs/b.md")], "archive": []}
    if task_id == "todo":
        return [
            ("create_directory", {"path": f"{ws}/notes"}),
            ("write_file", {"path": f"{ws}/notes/todo.md", "content": "milk\neggs\n"}),
        ]
    if task_id == "fix-config":
        edit = {"oldText": "port = 80\n", "newText": "port = 8080\n"}
        return [("edit_file", {"path": f"{ws}/config.ini", "edits": [edit]})]
    if task_id == "archive":
        calls: Calls = [("create_directory", {"path": f"{ws}/archive"})]
        return calls + [
            ("move_file", {"source": f"{ws}/inbox/{n}", "destination": f"{ws}/archive/{n}"}) for n in ("1.eml", "2.eml")
        ]
    return [("move_file", {"source": f"{ws}/{a}", "destination": f"{ws}/{b}"}) for a, b in moves[task_id]]


async def play(target: mcpgym.Target, task_ids: list[str], label: str) -> float:
    total = 0.0
    async with mcpgym.connect(target) as env:
        for task_id in task_ids:
            first = await env.reset(options={"task_id": task_id})
            result = None
            for name, arguments in solution(task_id, first.observation["workspace"]):
                result = await env.call_tool(name, arguments)
            assert result is not None
            episode = (await env.state()).total_reward
            total += episode
            print(f"[{label}] {task_id}: return={episode:.2f} done={result.done}")
    mean = total / len(task_ids)
    print(f"[{label}] mean return {mean:.2f}")
    return mean


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=str(PINNED), help="the filesystem MCP server's executable")
    args = parser.parse_args()
    tasks = str(HERE / "tasks.jsonl")
    ids = [t.id for t in load_tasks(tasks)]
    command = [args.server, "{workspace}"]

    await play(mcpgym.wrap(command, tasks=tasks), ids, "in-process")

    rubric = "examples.wrap_filesystem.rubric:tidy"
    serve = [sys.executable, "-m", "mcpgym", "wrap", "--tasks", tasks, "--rubric", rubric, "--http", "--port", "0"]
    with mcpgym.ServerProcess([*serve, "--", *command]) as server:
        await play(server.url, ids, "http+tidy")


if __name__ == "__main__":
    anyio.run(main)

"""Wrapped servers as module-level classes, so every door (`mcpgym serve tests.wrap_envs:NAME`
in a child process included) reaches the same environment."""

from __future__ import annotations

import contextlib
import os
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import mcpgym
from mcpgym.wrapping import TaskSpec, Verify, WrapContext

HERE = Path(__file__).resolve().parent
FILESYSTEM = HERE / "wrapped" / "node_modules" / ".bin" / "mcp-server-filesystem"
"""The official filesystem server from npm, pinned by tests/wrapped/package-lock.json."""

COUNTER_TASKS = [
    TaskSpec(id="reach-3", prompt="Bring the counter to 3.", verify=Verify()),
]


def counter_rubric(ctx: WrapContext) -> float:
    """Solved when the agent's last increment returned 3 (a rubric over the trajectory)."""
    last = ctx.calls[-1] if ctx.calls else None
    if last is None or last.tool != "increment" or last.result.is_error:
        return 0.0
    return 1.0 if last.result.structured_content == {"result": 3} else 0.0


WrappedCounter = mcpgym.wrap(
    [sys.executable, str(HERE / "wrap_server.py")],
    tasks=COUNTER_TASKS,
    rubric=counter_rubric,
    tools=["increment", "get"],
    max_steps=6,
    name="WrappedCounter",
)


@contextlib.contextmanager
def uid_locks_in(directory: Path) -> Iterator[None]:
    """Sandbox uids claimed meanwhile are locked in `directory`, not in the host's lock directory
    (with a reserve of their own: uids reserved before stay locked where they were)."""
    from mcpgym._isolation import uids

    directory.chmod(0o700)
    saved_env, saved_reserve = os.environ.get(uids.LOCK_DIRECTORY_VARIABLE), uids._RESERVE
    os.environ[uids.LOCK_DIRECTORY_VARIABLE] = str(directory)
    uids._RESERVE = deque()
    try:
        yield
    finally:
        uids._RESERVE = saved_reserve
        if saved_env is None:
            del os.environ[uids.LOCK_DIRECTORY_VARIABLE]
        else:
            os.environ[uids.LOCK_DIRECTORY_VARIABLE] = saved_env

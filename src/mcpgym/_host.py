"""`Host`: what serves an environment class (a server's lifespan, an in-process client), and the
long-lived tasks its episodes need.

Layer: bottom (anyio only). An episode's `reset`, steps and `close` arrive as separate requests,
each in a task of its own, so an episode cannot itself hold a context that runs tasks (an MCP
client session, a subprocess's pipes): anyio requires a cancel scope to be exited by the task
that entered it. A host runs each such context in a task of its own, in the task group of
whoever serves the class, entered and exited there, while the episode uses what it yielded.
`Environment.hold(cm)` is the author-facing side; `state` lets the episodes of one host share
things (a warm pool of processes, a judge's cache).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus

T = TypeVar("T")
Release = Callable[[], Awaitable[None]]

logger = logging.getLogger("mcpgym")


class Host:
    """Runs contexts that outlive the request that opened them, until released or shut down."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._tg = task_group
        self.state: dict[Any, Any] = {}
        """Shared by every episode this host serves (keyed by whoever stores there)."""

    def cancel(self) -> None:
        """Stop everything still held (the host is going away)."""
        self._tg.cancel_scope.cancel()

    async def enter(self, cm: AbstractAsyncContextManager[T]) -> tuple[T, Release]:
        """Enter `cm` in a task of the host's own; returns what it yielded and a coroutine
        function that exits it (and waits until it has). An error while entering is raised here;
        one while exiting is logged (the episode that held it is already over)."""
        release = anyio.Event()
        exited = anyio.Event()

        async def hold(*, task_status: TaskStatus[T]) -> None:
            entered = False
            try:
                async with cm as value:
                    task_status.started(value)
                    entered = True
                    await release.wait()
            except Exception:
                if not entered:
                    raise  # start() re-raises it to the caller; the host's task group is untouched
                logger.exception("a context held for an episode failed")  # the episode sees its own errors
            finally:
                exited.set()

        value: T = await self._tg.start(hold)

        async def close() -> None:
            release.set()
            with anyio.CancelScope(shield=True):
                await exited.wait()

        return value, close

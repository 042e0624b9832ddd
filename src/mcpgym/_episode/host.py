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
    """Runs contexts that outlive the request that opened them, until released or closed."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._tg = task_group
        self._held: set[anyio.Event] = set()
        self._idle = anyio.Event()
        self._idle.set()
        self._closing = False
        self._entering: dict[anyio.Event, anyio.CancelScope] = {}
        self.state: dict[Any, Any] = {}
        """Shared by every episode this host serves (keyed by whoever stores there)."""

    async def enter(self, cm: AbstractAsyncContextManager[T]) -> tuple[T, Release]:
        """Enter `cm` in a task of the host's own; returns what it yielded and a coroutine
        function that starts exiting it. Exiting goes on in the background (a process may take
        a while to stop): `aclose()` waits for all of it. An error while entering is raised
        here; one while held or exiting is logged (the episode sees its own failures). A host
        that is closing enters nothing new (RuntimeError)."""
        if self._closing:
            raise RuntimeError("the host is closing: nothing new can be held")
        release = anyio.Event()
        # Counted from here, not from when the task runs: aclose() must see it whatever happens.
        self._held.add(release)
        if self._idle.is_set():
            self._idle = anyio.Event()

        entering = anyio.CancelScope()
        self._entering[release] = entering

        async def hold(*, task_status: TaskStatus[T]) -> None:
            entered = False
            try:
                # aclose() cancels this scope while `cm` is still being entered (a shutdown does
                # not wait for a slow start), never after: then `cm` exits as it would anyway.
                with entering:
                    async with cm as value:
                        self._entering.pop(release, None)
                        task_status.started(value)
                        entered = True
                        await release.wait()
                if entering.cancelled_caught and not entered:
                    raise RuntimeError("the host closed while this was being started")
            except Exception:
                if not entered:
                    raise  # start() raises it to the caller; the host's task group is untouched
                logger.exception("a context held for an episode failed")
            finally:
                self._forget(release)

        try:
            held: T = await self._tg.start(hold)
        except BaseException:
            self._forget(release)  # never started (e.g. the task group is gone)
            raise

        async def close() -> None:
            release.set()

        return held, close

    def _forget(self, release: anyio.Event) -> None:
        self._entering.pop(release, None)
        self._held.discard(release)
        if not self._held:
            self._idle.set()

    async def aclose(self) -> None:
        """Exit everything still held, and wait until it has (even when cancelled); what is still
        being entered is cancelled (its `enter()` raises). From now on `enter()` refuses."""
        self._closing = True
        with anyio.CancelScope(shield=True):
            for release in list(self._held):
                release.set()
            for entering in list(self._entering.values()):
                entering.cancel()
            await self._idle.wait()

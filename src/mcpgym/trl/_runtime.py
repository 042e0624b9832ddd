"""The one event loop every generated environment instance in a process shares.

Layer: sync-over-async plumbing for `mcpgym.trl`; imports only the public client API.

TRL calls `reset` and the tools synchronously, one rollout after another, and never closes
an instance. One blocking portal per instance (what `mcpgym.connect_sync` gives) would cost
a thread and an event loop per rollout slot -- hundreds for a real `generation_batch_size` --
and nothing to gain, since the calls are serial. So a process has one portal (anyio's
daemon thread), each instance's client is one task on it (`wrap_async_context_manager`,
so the client's scopes enter and exit in one task), and an `atexit` hook closes every
client, then the loop. A forked child starts its own portal on first use.

Episodes of one HTTP server share one `mcpgym.SharedClient` (opened on the same loop, closed
after the sessions): a trainer's hundreds of instances are one connection pool, not hundreds
of `mcp.Client`s (rfcs/0014-lean-client.md).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any, TypeVar, TypeVarTuple, Unpack

from anyio.from_thread import BlockingPortal, start_blocking_portal

from mcpgym._client.api import AsyncEnv
from mcpgym._client.shared import SharedClient
from mcpgym._targets.connect import Target, connect

log = logging.getLogger("mcpgym.trl")

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class Session:
    """One connected `AsyncEnv`, held open on the shared loop until `close()`."""

    def __init__(self, runtime: Runtime, env: AsyncEnv, shared: str | None = None) -> None:
        self.env = env
        self.shared = shared
        """The key of the `SharedClient` this session's episode rides on, if any."""
        self._runtime = runtime
        self._portal = runtime.portal()
        self._pid = os.getpid()
        self._cm: AbstractContextManager[AsyncEnv] | None = self._portal.wrap_async_context_manager(env)
        self._cm.__enter__()

    @property
    def alive(self) -> bool:
        """Open, and in this process: after `close()` (or `mcpgym.trl.close()`) or in a forked
        child, its portal is gone and a call would raise or hang forever."""
        return self._cm is not None and self._pid == os.getpid()

    def call(self, fn: Callable[[Unpack[Ts]], Awaitable[T]], *args: *Ts) -> T:
        return self._portal.call(fn, *args)

    def close(self) -> None:
        cm, self._cm = self._cm, None
        try:
            if cm is not None:
                cm.__exit__(None, None, None)  # ends the episode, over the shared client if any
        finally:
            self._runtime.forget(self)


class Runtime:
    """The process-wide portal and the sessions open on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None
        self._pid = 0
        self._sessions: list[Session] = []
        self._shared: dict[str, tuple[SharedClient, AbstractContextManager[SharedClient]]] = {}
        self._forked_from: list[ExitStack] = []
        atexit.register(self.close)

    def portal(self) -> BlockingPortal:
        with self._lock:
            if self._portal is None or self._pid != os.getpid():
                if self._portal is not None and self._pid != os.getpid():
                    # After a fork the sessions and the portal belong to the parent's loop, whose
                    # thread is not in this process. Keep its stack referenced: collected, it would
                    # close the portal's generator, which waits forever for that thread.
                    self._forked_from.append(self._stack)
                    self._sessions.clear()
                    self._shared.clear()
                self._stack = ExitStack()
                self._portal = self._stack.enter_context(start_blocking_portal(name="mcpgym-trl"))
                self._pid = os.getpid()
            return self._portal

    def open(self, target: Target, options: dict[str, Any]) -> Session:
        if not (isinstance(target, str) and target.startswith(("http://", "https://"))):
            session = Session(self, connect(target, **options))
        else:
            key = json.dumps([target, options], sort_keys=True, default=str)
            session = Session(self, self._shared_client(key, target, options).connect(), key)
        with self._lock:
            self._sessions.append(session)
        return session

    def _shared_client(self, key: str, url: str, options: dict[str, Any]) -> SharedClient:
        portal = self.portal()
        with self._lock:
            entry = self._shared.get(key)
        if entry is None:
            shared = SharedClient(url, **options)
            cm = portal.wrap_async_context_manager(shared)
            cm.__enter__()
            with self._lock:
                entry = self._shared.setdefault(key, (shared, cm))
            if entry[0] is not shared:  # another thread opened one first: use that one
                cm.__exit__(None, None, None)
        return entry[0]

    def run(self, fn: Callable[[Unpack[Ts]], Awaitable[T]], *args: *Ts) -> T:
        return self.portal().call(fn, *args)

    def forget(self, session: Session) -> None:
        """Drop a closed session; the last one on a shared client closes that client too."""
        with self._lock:
            if session in self._sessions:
                self._sessions.remove(session)
            unused = session.shared is not None and all(s.shared != session.shared for s in self._sessions)
            entry = self._shared.pop(session.shared, None) if unused and session.shared is not None else None
        if entry is not None and self._pid == os.getpid():
            entry[1].__exit__(None, None, None)

    def close(self) -> None:
        """Close every open session, then stop the loop (idempotent; also run at exit). A session
        that fails to close is logged, and the others are closed all the same."""
        if self._pid != os.getpid():
            return
        try:
            for session in list(self._sessions):
                try:
                    session.close()
                except Exception:  # a server already gone must not keep the others (or the loop) open
                    log.warning("mcpgym.trl: closing a connection failed", exc_info=True)
            with self._lock:
                shared, self._shared = list(self._shared.values()), {}
            for _, cm in shared:
                try:
                    cm.__exit__(None, None, None)
                except Exception:
                    log.warning("mcpgym.trl: closing a shared client failed", exc_info=True)
        finally:
            with self._lock:
                stack, self._stack, self._portal = self._stack, ExitStack(), None
            stack.close()


runtime = Runtime()

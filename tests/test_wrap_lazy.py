"""`wrap()` starts nothing, lists the tools once and off the event loop, and registers one exit
hook however many classes it makes (#22 item 8): each test fails on the eager wrap()."""

from __future__ import annotations

import atexit
import inspect
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import mcpgym
from mcpgym.wrapping import prepare, wrap
from tests.wrap_envs import HERE

pytestmark = pytest.mark.anyio

SERVER = [sys.executable, str(HERE / "wrap_server.py")]
HOSTILE = [sys.executable, str(HERE / "wrap_hostile.py")]


def _counted(marker: Path) -> list[str]:
    """The wrapped server, noting each start in `marker` before it runs."""
    return ["sh", "-c", f"echo start >> {shlex.quote(str(marker))}; exec {shlex.join(SERVER)}"]


def _starts(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


async def test_wrap_starts_nothing_and_the_tools_are_listed_once(tmp_path: Path) -> None:
    marker = tmp_path / "starts"
    Env = wrap(_counted(marker), tools=["increment"], isolation="none")
    assert _starts(marker) == 0  # the class exists; no server ran for it
    await prepare(Env)
    # Listed by two instances at once: as a client declaring no capabilities, and as one
    # declaring all of them (a server may list some tools only to such clients).
    listed = _starts(marker)
    await prepare(Env)
    assert listed == 2 and _starts(marker) == listed and list(Env.__mcpgym_tools__) == ["increment"]
    async with mcpgym.connect(Env) as env:
        await env.reset()
        assert (await env.call_tool("increment")).text == "1"
    assert _starts(marker) == listed + 1  # and then one per episode, as before


async def test_listing_the_tools_leaves_the_event_loop_running() -> None:
    order: list[str] = []

    async def lister() -> None:
        # A server that never answers initialize: the listing waits out start_timeout.
        with pytest.raises(RuntimeError, match="did not answer initialize within 1s"):
            await prepare(wrap([*HOSTILE, "silent"], start_timeout=1))
        order.append("listed")

    async def other() -> None:
        order.append("other task ran")

    async with anyio.create_task_group() as tg:
        tg.start_soon(lister)
        tg.start_soon(other)
    assert order == ["other task ran", "listed"]


async def test_one_exit_hook_for_every_wrapped_class(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[Callable[..., Any]] = []
    monkeypatch.setattr(atexit, "register", lambda fn, *args: registered.append(fn))
    for _ in range(3):
        await prepare(wrap(SERVER, tools=["increment"]))
    assert len(registered) <= 1  # the first wrapped class of the process registers it, if none did


async def test_connecting_to_a_wrapped_class_leaves_the_event_loop_running(tmp_path: Path) -> None:
    # The wrapped server starts only once another task has opened the gate: were its tools
    # listed on the event loop (as connect() once did), that task could not run until
    # start_timeout had failed the listing (generous: a loaded machine starts Python slowly).
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    command = ["sh", "-c", f"read go < {shlex.quote(str(gate))}; exec {shlex.join(SERVER)}"]
    Env = wrap(command, tools=["increment"], isolation="none", start_timeout=120)  # bounds a failure only
    order: list[str] = []
    done = anyio.Event()

    async def connector() -> None:
        try:
            async with mcpgym.connect(Env) as env:
                order.append("connected")
                assert [tool.name for tool in await env.list_tools()] == ["increment"]
        finally:
            done.set()

    async def opener() -> None:
        fd = await anyio.to_thread.run_sync(os.open, str(gate), os.O_WRONLY)  # (waits for a server's read)
        try:
            # A line for each instance that reads the gate (listing the tools starts two, each
            # `read` takes one line), the gate held open until they all have.
            os.write(fd, b"go\n" * 8)
            order.append("gate opened")
            await done.wait()
        finally:
            os.close(fd)

    async with anyio.create_task_group() as tg:
        tg.start_soon(connector)  # first: it runs until it waits
        tg.start_soon(opener)
    assert sorted(order) == ["connected", "gate opened"]


def test_wrap_has_one_signature() -> None:
    from mcpgym._wrap import _proxy

    # The lazy wrap is the eager one's parameters, not a copy of them kept in step by hand.
    assert getattr(wrap, "__wrapped__", None) is _proxy.wrap
    assert inspect.signature(wrap) == inspect.signature(_proxy.wrap) and mcpgym.wrap is wrap
    assert "Returns at once" in (wrap.__doc__ or "")


async def test_a_reset_waiting_for_a_warm_start_is_not_left_waiting_when_the_pool_closes() -> None:
    # The pool is starting its one instance (a server that never finishes starting) and a reset
    # waits for that start rather than starting its own: the pool closing must end the wait.
    import contextlib
    from collections.abc import AsyncIterator
    from typing import cast

    from mcpgym._wrap._instance import Launcher, WarmPool

    starting = anyio.Event()

    class NeverStarts:
        @contextlib.asynccontextmanager
        async def start(self, **options: Any) -> AsyncIterator[Any]:
            starting.set()
            await anyio.sleep_forever()
            yield

    pool = WarmPool(cast(Launcher, NeverStarts()), 1)
    ended: list[BaseException] = []

    async def reset() -> None:
        try:
            await pool.take()
        except Exception as exc:  # the pool is gone: a clear error, not a wait forever
            ended.append(exc)

    with anyio.fail_after(60):  # a guard: without the fix the reset would wait forever
        async with anyio.create_task_group() as resets:
            async with pool.running():
                await starting.wait()
                resets.start_soon(reset)
                await anyio.wait_all_tasks_blocked()
                assert pool._waiting == 1  # the premise: the reset waits for the pool's start
    assert len(ended) == 1

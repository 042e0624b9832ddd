"""`Host` and `Environment.hold()`: what an episode holds across requests is exited exactly
when the episode ends, whatever else fails, and a host that is closing takes nothing new."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import anyio
import pytest

import mcpgym
from mcpgym._episode.host import Host

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def _tracked(exited: anyio.Event) -> AsyncIterator[str]:
    try:
        yield "held"
    finally:
        exited.set()


class Holding(mcpgym.Environment):
    """Holds a context per episode; `close()` fails when asked to (options={"fail_close": True})."""

    exits: ClassVar[list[anyio.Event]] = []

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        self.fail_close = bool((options or {}).get("fail_close"))
        exited = anyio.Event()
        Holding.exits.append(exited)
        return {"value": await self.hold(_tracked(exited))}

    @mcpgym.tool
    async def noop(self) -> str:
        """Nothing."""
        return "ok"

    async def close(self) -> None:
        if self.fail_close:
            raise RuntimeError("close failed on purpose")


@pytest.fixture(autouse=True)
def _fresh_exits() -> None:
    Holding.exits = []


async def test_what_an_episode_holds_is_exited_even_when_close_fails() -> None:
    async with mcpgym.connect(Holding) as env:
        await env.reset(options={"fail_close": True})
        await env.reset()  # closes the first episode: its close() raises
        with anyio.fail_after(10):
            await Holding.exits[0].wait()


async def test_each_episode_of_a_shared_instance_releases_what_it_held() -> None:
    async with mcpgym.connect(Holding()) as env:
        await env.reset()
        await env.reset()  # the first episode is over, though the instance lives on
        with anyio.fail_after(10):
            await Holding.exits[0].wait()
        assert not Holding.exits[1].is_set()
    assert Holding.exits[1].is_set()


async def test_hold_without_a_host_says_how_to_get_one() -> None:
    with pytest.raises(RuntimeError, match=r"hold\(\) needs a host.*mcpgym.connect"):
        await Holding().reset()


async def test_a_closing_host_takes_nothing_new() -> None:
    # A reset racing the server's shutdown: entering after aclose() must fail, not leave a held
    # task that nobody releases (the host's task group would then never exit).
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            host = Host(tg)
            await host.aclose()
            exited = anyio.Event()
            with pytest.raises(RuntimeError, match="closing"):
                await host.enter(_tracked(exited))


async def test_aclose_cancels_a_context_still_being_entered() -> None:
    # The server shutting down while a reset is starting a slow server: shutdown does not wait
    # for the start, and the reset gets a clear error.
    entering, exited = anyio.Event(), anyio.Event()
    errors: list[BaseException] = []

    @contextlib.asynccontextmanager
    async def never_ready() -> AsyncIterator[None]:
        try:
            entering.set()
            await anyio.sleep_forever()
            yield
        finally:
            exited.set()

    async def reset(host: Host) -> None:
        try:
            await host.enter(never_ready())
        except RuntimeError as exc:
            errors.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            host = Host(tg)
            tg.start_soon(reset, host)
            await entering.wait()
            await host.aclose()
    assert exited.is_set()
    assert [str(e) for e in errors] == ["the host closed while this was being started"]

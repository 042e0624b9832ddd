"""One episode configuration for every door (issue #22 item 3): the same call timeout in-process
as over a server, a sync tool abandoned by a cancellation never shares its instance with the next
step or `close()`, and a reset cancelled after its episode was admitted leaves nothing behind."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import pytest

import mcpgym
from mcpgym import CallToolAction
from mcpgym._episode.config import CALL_TIMEOUT, CLOSE_WAIT
from mcpgym._episode.episode import Episode
from mcpgym._server.registry import EpisodeRegistry
from mcpgym.testing import serve_gym

pytestmark = pytest.mark.anyio


class Blocking(mcpgym.Environment):
    """A sync tool that blocks its worker thread until the test lets it go."""

    started: ClassVar[threading.Event]
    release: ClassVar[threading.Event]
    closes: ClassVar[list[bool]]

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        return "go"

    @mcpgym.tool
    def block(self) -> str:
        """Block until released."""
        type(self).started.set()
        type(self).release.wait(30)
        return "late"

    async def close(self) -> None:
        type(self).closes.append(type(self).release.is_set())  # was the tool's thread done by then?


@pytest.fixture
def blocking() -> type[Blocking]:
    Blocking.started, Blocking.release, Blocking.closes = threading.Event(), threading.Event(), []
    return Blocking


def test_every_door_builds_episodes_with_the_same_call_timeout() -> None:
    assert Episode(Blocking(), "a").call_timeout == CALL_TIMEOUT  # what the in-process door builds
    assert EpisodeRegistry(Blocking).call_timeout == CALL_TIMEOUT  # what a server builds
    assert mcpgym.GymServer(Blocking).registry.call_timeout == CALL_TIMEOUT
    assert CLOSE_WAIT < 30  # close and shutdown wait well inside uvicorn's and Kubernetes' grace


async def test_a_cancelled_sync_tool_strands_its_episode_and_close_waits_for_its_thread(
    blocking: type[Blocking],
) -> None:
    async with mcpgym.connect(blocking) as env:
        await env.reset()
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_once_running() -> None:
                    await anyio.to_thread.run_sync(blocking.started.wait)
                    scope.cancel()

                tg.start_soon(cancel_once_running)
                await env.step(CallToolAction(tool_name="block"))
        assert scope.cancelled_caught
        # The thread still runs on the instance: the next step must not call into it.
        after = await env.step(CallToolAction(tool_name="block"))
        assert after.done and after.truncated and after.is_error and "over" in after.text
        blocking.started.clear()
        async with anyio.create_task_group() as tg:
            tg.start_soon(env.close_episode)
            await anyio.wait_all_tasks_blocked()
            assert blocking.closes == []  # close() waits for the abandoned thread ...
            blocking.release.set()
        assert blocking.closes == [True]  # ... and then closes the instance, once
        assert not blocking.started.is_set()  # the second step never ran the tool


class StuckReset(mcpgym.Environment):
    """Its reset is admitted by the server and then waits until the test lets it go."""

    entered: ClassVar[anyio.Event]
    release: ClassVar[anyio.Event]

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        type(self).entered.set()
        await type(self).release.wait()
        return "go"

    @mcpgym.tool
    async def noop(self) -> str:
        """Do nothing."""
        return ""


async def test_a_reset_cancelled_by_its_client_leaves_no_episode_on_the_server() -> None:
    StuckReset.entered, StuckReset.release = anyio.Event(), anyio.Event()
    async with serve_gym(StuckReset) as (server, url), mcpgym.connect(url) as env:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def give_up_once_admitted() -> None:
                    await StuckReset.entered.wait()  # the server admitted the episode
                    scope.cancel()

                tg.start_soon(give_up_once_admitted)
                await env.reset()
        assert scope.cancelled_caught and env.episode_id is None
        StuckReset.release.set()  # the server's reset may now finish: its episode must still go
        while server.registry._episodes:  # the close the client sent, or the server's own retiring
            await anyio.wait_all_tasks_blocked()
            await anyio.lowlevel.checkpoint()
        assert server.registry._episodes == {}

"""mcpgym.pool edge cases found in review: concurrent first requests, cancelled connects, and
replicas that hang rather than die (re-probed with backoff, without holding up resets)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections import Counter as Tally
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx2
import pytest
from anyio.abc import SocketAttribute, SocketStream

from mcpgym.pool import Pool, Replica
from tests.test_pool import Server, answered_by, start_servers

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    (one,) = start_servers(1)
    try:
        yield one
    finally:
        one.kill()


async def test_concurrent_first_requests_share_one_link_and_the_env_closes(server: Server) -> None:
    pool = Pool([server.url])
    with anyio.fail_after(10):  # a second, orphaned link kept the env's task group open forever
        async with pool.connect() as env:
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(env.list_tools)
            assert len(env.door._links) == 1


async def test_a_connect_cancelled_or_failing_in_its_first_refresh_leaves_no_scope_open() -> None:
    started = anyio.Event()

    async def hanging() -> list[str]:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def connect(pool: Pool) -> None:
        async with pool.connect():
            raise AssertionError("connected without a refresh")

    async with anyio.create_task_group() as tg:
        tg.start_soon(connect, Pool(discover=hanging))
        await started.wait()
        tg.cancel_scope.cancel()

    async def failing() -> list[str]:
        raise OSError("discovery failed")

    with pytest.raises(OSError, match="discovery failed"):
        await connect(Pool(discover=failing))


# -- down and hung replicas: re-probed with backoff, apart from placement ---------------------


class Clock:
    """A `Pool.clock` the test moves by hand, so "due for a re-probe" needs no waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ProbeLog(Pool):
    """A pool that counts its `/healthz` probes per URL, started and finished."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.started: Tally[str] = Tally()
        self.finished: Tally[str] = Tally()
        self._progress = anyio.Event()

    async def _probe(self, http: httpx2.AsyncClient, replica: Replica) -> None:
        self.started[replica.url] += 1
        try:
            await super()._probe(http, replica)
        finally:
            self.finished[replica.url] += 1
            self._progress.set()
            self._progress = anyio.Event()

    async def wait_finished(self, url: str, count: int) -> None:
        while self.finished[url] < count:
            await self._progress.wait()


@contextlib.asynccontextmanager
async def hung_replica() -> AsyncIterator[str]:
    """The URL of a wedged "replica": it accepts connections and never answers (or closes them)."""

    async def hold(stream: SocketStream) -> None:
        async with stream:
            await anyio.sleep_forever()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, hold)
            yield f"http://127.0.0.1:{port}/mcp"
            tg.cancel_scope.cancel()


async def test_a_hung_replica_found_down_is_reprobed_in_the_background_not_by_each_reset(server: Server) -> None:
    clock = Clock()
    async with hung_replica() as hung:
        pool = ProbeLog([server.url, hung], refresh_interval=1.0, clock=clock)
        with anyio.fail_after(30):  # a bound only: a reset that waited for the hung probe would take an hour
            async with pool.connect() as env:  # its first refresh finds it hung: that probe times out
                assert [r.live for r in pool.replicas] == [True, False]
                pool.health_timeout = 3600  # from here on, waiting for a probe of it = never finishing
                for _ in range(10):
                    clock.now += pool.max_backoff  # every reading is due, the hung replica's too
                    await env.reset()
                    assert env.handle is not None and env.handle.url == server.url
                await anyio.wait_all_tasks_blocked()  # the background probe has started (and hangs)
                assert pool.replicas[1].probing
                # The live replica re-read before each reset; the hung one probed once more, in the
                # background, and not again while that probe is pending.
                assert (pool.started[server.url], pool.started[hung]) == (11, 2)
            # Closing the client cancelled the probe it owned (or close would have waited an hour).
            assert not pool.replicas[1].probing and not pool.replicas[1].live
            assert pool.finished[hung] == 2


async def test_a_down_replica_is_reprobed_with_exponential_backoff_up_to_a_cap(server: Server) -> None:
    with socket.socket() as sock:  # a free port, closed again: connections to it are refused
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    clock = Clock()
    pool = ProbeLog([server.url, dead], refresh_interval=1.0, max_backoff=8.0, clock=clock)
    await pool.refresh()  # at t=0: down
    assert not pool.replicas[1].live and pool.replicas[1].error is not None
    probed_at = []
    for second in range(1, 41):  # a reset's refresh every second
        clock.now = second
        before = pool.started[dead]
        async with anyio.create_task_group() as background:  # what PoolEnv passes; waited for here
            await pool.refresh(background=background)
        if pool.started[dead] > before:
            probed_at.append(second)
    assert probed_at == [1, 2, 4, 8, 16, 24, 32, 40]  # the wait doubles from refresh_interval, up to 8 s
    assert pool.started[server.url] == 1 + 40  # the live one was re-read every second throughout


async def test_a_hung_replica_that_recovers_rejoins() -> None:
    servers = start_servers(2)
    healthy, wedged = servers
    try:
        clock = Clock()
        pool = ProbeLog([healthy.url, wedged.url], refresh_interval=1.0, clock=clock)
        os.kill(wedged.pid, signal.SIGSTOP)  # hung: the kernel still accepts, the process never answers
        try:
            with anyio.fail_after(30):
                async with pool.connect() as first:  # its /healthz probe times out: down
                    assert [r.live for r in pool.replicas] == [True, False]
                    await first.reset()
                    assert first.handle is not None and first.handle.url == healthy.url
        finally:
            os.kill(wedged.pid, signal.SIGCONT)
        with anyio.fail_after(30):
            async with pool.connect() as env, pool.connect() as other:
                clock.now += pool.refresh_interval  # its re-probe is due
                await env.reset()  # placed on the live replica; the re-probe runs in the background
                assert env.handle is not None and env.handle.url == healthy.url
                await pool.wait_finished(wedged.url, 2)
                assert pool.replicas[1].live  # it answered: back in the pool
                await other.reset()  # 0 episodes there against 1: it goes to the returned replica
                assert other.handle is not None and other.handle.url == wedged.url
                assert await answered_by(other) == wedged.pid
    finally:
        for one in servers:
            one.kill()

"""mcpgym.pool edge cases found in review: concurrent first requests, cancelled connects."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from mcpgym.pool import Pool
from tests.test_pool import Server, start_servers

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
            assert len(env._links) == 1


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

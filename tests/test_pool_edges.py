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

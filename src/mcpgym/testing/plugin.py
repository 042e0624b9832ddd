"""pytest fixtures for environment authors: add `pytest_plugins = ["mcpgym.testing.plugin"]` to conftest.py.

- `mcpgym_door`: parametrises a test over every door ("inprocess", "memory", "stdio", "http");
- `mcpgym_env`: a connected `AsyncEnv` for the class your `mcpgym_environment` fixture returns,
  through `mcpgym_door` (so a test that takes it runs once per door).

```python
@pytest.fixture
def mcpgym_environment() -> type[mcpgym.Environment]:
    return MyEnv

@pytest.mark.anyio
async def test_winning(mcpgym_env: mcpgym.AsyncEnv) -> None:
    await mcpgym_env.reset(seed=0)
    ...
```

Layer: testing tools; imported only by pytest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mcpgym._client.api import AsyncEnv
from mcpgym._episode.environment import Environment
from mcpgym._targets.connect import connect
from mcpgym.testing._doors import DOORS, Door, door


@pytest.fixture(params=DOORS)
def mcpgym_door(request: pytest.FixtureRequest) -> Door:
    """Each door in turn: the test runs once per door."""
    kind: Door = request.param
    return kind


@pytest.fixture
def mcpgym_environment() -> type[Environment]:
    """Override this fixture to return your Environment class; `mcpgym_env` connects to it."""
    raise pytest.UsageError("define a `mcpgym_environment` fixture returning your Environment class")


@pytest.fixture
async def mcpgym_env(
    anyio_backend: str, mcpgym_door: Door, mcpgym_environment: type[Environment]
) -> AsyncIterator[AsyncEnv]:
    """A client for `mcpgym_environment` through `mcpgym_door`, closed after the test."""
    async with door(mcpgym_door, mcpgym_environment) as target, connect(target) as env:
        yield env

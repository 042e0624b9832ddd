"""`mcpgym.gymnasium.make(target)`: any mcpgym target as a `gymnasium.Env` (rfcs/0017-bridges.md).

    import mcpgym.gymnasium
    env = mcpgym.gymnasium.make("mcpgym.servers.echo")   # or gym:ID, a URL, a command, ...
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step({"tool": 0, "arguments": '{"message": "hi"}'})
    env.close()

Importing this module costs nothing; its names load Gymnasium when first used and need the
`gymnasium` extra (`pip install 'mcpgym[gymnasium]'`), which the error names when it is missing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpgym.bridges.gymnasium import AnyText, MCPGymnasiumEnv, make

__all__ = ["AnyText", "MCPGymnasiumEnv", "make"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("mcpgym.bridges.gymnasium"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

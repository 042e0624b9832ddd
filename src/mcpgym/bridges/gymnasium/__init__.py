"""Gymnasium, both ways (rfcs/0017-bridges.md): `gym:ID` targets serve any registered Gymnasium
environment as an mcpgym environment, and `mcpgym.gymnasium.make(target)` is a `gymnasium.Env`
over any mcpgym target.

Layer: a bridge, beside the doors. Needs the `gymnasium` extra (`pip install 'mcpgym[gymnasium]'`);
without it, importing this package says so.
"""

from __future__ import annotations

from typing import Any

from mcpgym._core.extras import needs

with needs("gymnasium", "the Gymnasium bridge (gym: targets, mcpgym.gymnasium)"):
    import gymnasium

from mcpgym._targets.target import ParsedTarget, TargetError
from mcpgym.bridges._query import parse_query, query_text
from mcpgym.bridges.gymnasium._environment import GymnasiumEnvironment, environment_class
from mcpgym.bridges.gymnasium._make import ENV_ID, AnyText, MCPGymnasiumEnv, make, register

register()

# `target` (the `gym:` scheme's hook, named in mcpgym._targets.target.SCHEMES) and
# `environment_class` stay out of the public names: mcpgym.trl.environment_class and the other
# bridges' `target` already mean other things (tests/test_names.py).
__all__ = ["ENV_ID", "AnyText", "GymnasiumEnvironment", "MCPGymnasiumEnv", "make", "spec_text"]

_CLASSES: dict[str, type[GymnasiumEnvironment]] = {}


def target(rest: str, args: dict[str, Any]) -> ParsedTarget:
    """The `gym:ID[?key=value&...]` target form: values are JSON where they parse as JSON
    (`is_slippery=false`, `map_size=8`), text otherwise (`map_name=8x8`); a run spec's `args`
    add to them. The class is built once per id and keyword arguments (the same text, the same class)."""
    env_id, _, query = rest.partition("?")
    kwargs = {**parse_query(f"gym:{rest}", query), **args}
    text = spec_text(env_id, kwargs)
    cls = _CLASSES.get(text)
    if cls is None:
        try:
            gymnasium.spec(env_id)
            cls = environment_class(env_id, kwargs, text)
        except (gymnasium.error.Error, TypeError, ValueError, ImportError) as exc:
            raise TargetError(f"gym:{rest}: {type(exc).__name__}: {exc}", forms=False) from None
        _CLASSES[text] = cls
    return ParsedTarget("environment", cls, spec=text)


def spec_text(env_id: str, kwargs: dict[str, Any]) -> str:
    """The text that names `gymnasium.make(env_id, **kwargs)` as a target (another process parses it)."""
    return f"gym:{env_id}{query_text(kwargs)}"

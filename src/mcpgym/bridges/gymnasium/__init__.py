"""Gymnasium, both ways (rfcs/0017-bridges.md): `gym:ID` targets serve any registered Gymnasium
environment as an mcpgym environment, and `mcpgym.gymnasium.make(target)` is a `gymnasium.Env`
over any mcpgym target.

Layer: a bridge, beside the doors. Needs the `gymnasium` extra (`pip install 'mcpgym[gymnasium]'`);
without it, importing this package says so.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

try:
    import gymnasium
except ModuleNotFoundError as exc:  # pragma: no cover - the test suite installs the extra
    raise ModuleNotFoundError(
        f"the Gymnasium bridge needs the gymnasium extra: pip install 'mcpgym[gymnasium]' ({exc})", name=exc.name
    ) from exc

from mcpgym._targets.target import ParsedTarget, TargetError
from mcpgym.bridges.gymnasium._environment import GymnasiumEnvironment, environment_class

__all__ = ["GymnasiumEnvironment", "environment_class", "spec_text", "target"]

_CLASSES: dict[str, type[GymnasiumEnvironment]] = {}


def target(rest: str, args: dict[str, Any]) -> ParsedTarget:
    """The `gym:ID[?key=value&...]` target form: values are JSON where they parse as JSON
    (`is_slippery=false`, `map_size=8`), text otherwise (`map_name=8x8`); a run spec's `args`
    add to them. The class is built once per id and keyword arguments (the same text, the same class)."""
    env_id, _, query = rest.partition("?")
    kwargs = {**_query(rest, query), **args}
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
    if not kwargs:
        return f"gym:{env_id}"
    query = urllib.parse.urlencode({key: json.dumps(value) for key, value in sorted(kwargs.items())})
    return f"gym:{env_id}?{query}"


def _query(rest: str, query: str) -> dict[str, Any]:
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=True) if query else []
    except ValueError:
        raise TargetError(f"gym:{rest}: keyword arguments are written ?key=value&key=value", forms=False) from None
    kwargs: dict[str, Any] = {}
    for key, value in pairs:
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs

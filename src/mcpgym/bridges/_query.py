"""`SCHEME:ID?key=value&...`: the keyword arguments of a bridge target, shared by the bridges.

Layer: plain parsing (standard library only). Values are JSON where they parse as JSON
(`is_slippery=false`, `max_turns=5`), text otherwise (`map_name=8x8`); `query_text` writes
them back in one canonical order, so the same arguments name the same target.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from mcpgym._targets.target import TargetError


def parse_query(target: str, query: str) -> dict[str, Any]:
    """The keyword arguments in `query` (the text after `?` of `target`, named in errors)."""
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=True) if query else []
    except ValueError:
        raise TargetError(f"{target}: keyword arguments are written ?key=value&key=value", forms=False) from None
    kwargs: dict[str, Any] = {}
    for key, value in pairs:
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
    return kwargs


def query_text(kwargs: dict[str, Any]) -> str:
    """`?key=value&...` for `kwargs` (values as JSON, keys sorted); empty for none."""
    if not kwargs:
        return ""
    return "?" + urllib.parse.urlencode({key: json.dumps(value) for key, value in sorted(kwargs.items())})

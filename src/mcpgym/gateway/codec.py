"""JSON for the gateway's hot path: the engine's reply read, the record and the client's reply written.

Layer: pure functions (bytes in, values out and back).

orjson when installed (`mcpgym[fast]`), the standard library otherwise. At 400 prompt tokens
and 60 generated ones orjson reads the engine's reply in ~13 us where `json` takes ~41, and
writes the record line in ~1.5 us where `json` takes ~15 (benchmarks/bench_gateway.py measures
the whole call). Where the two differ, the result stays what `json` would accept:

- Text orjson refuses (NaN or Infinity, which engines may write for a logprob; a lone UTF-16
  surrogate escape; a number out of a double's range) is read by `json` instead.
- A value orjson cannot write (an integer beyond 64 bits, a lone surrogate in a string) is
  written by `json`, ASCII-escaped, so the line is always valid UTF-8.
- orjson writes NaN and infinities as `null` where `json` writes the non-standard `NaN`: a
  record or reply is then strict JSON (the record's `logprobs` read back as None there). A
  document that needs `json` (above) keeps its `NaN`, which `json` and `read_calls` read and
  strict parsers refuse.
- orjson reads an integer beyond 64 bits as a float; `json` keeps it whole. Engines' replies
  hold token ids, counts and timestamps, far inside that range.

The client's request is read with `json` and the engine's request written with it: they are
small (~2-3 us), and a value the client sent reaches the engine exactly as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_orjson_loads: Callable[[bytes], Any] | None
_orjson_dumps: Callable[[Any], bytes] | None
try:
    import orjson
except ImportError:  # without mcpgym[fast]
    _orjson_loads = _orjson_dumps = None
else:
    _orjson_loads, _orjson_dumps = orjson.loads, orjson.dumps


def loads(raw: bytes) -> Any:
    """`raw` as JSON (raises `ValueError`: `json.JSONDecodeError` or `UnicodeDecodeError`)."""
    if _orjson_loads is not None:
        try:
            return _orjson_loads(raw)
        except ValueError:  # orjson.JSONDecodeError is a json.JSONDecodeError: the reasons above, or not JSON
            pass
    return json.loads(raw)


def dumps(value: Any) -> bytes:
    """`value` as compact JSON, UTF-8."""
    if _orjson_dumps is not None:
        try:
            return _orjson_dumps(value)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            pass
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped, the line stays UTF-8
        return json.dumps(value, separators=(",", ":")).encode()


def object_or_none(raw: bytes, read: Callable[[bytes], Any] = loads) -> dict[str, Any] | None:
    """`raw` when it is a JSON object, else None (`read=json.loads` for the client's request: above)."""
    try:
        value = read(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

"""The gateway's JSON (`mcpgym.gateway.codec`): orjson and the standard library give results
`json` accepts, whatever the engine or the client sent. Both paths, and orjson present (the
test environments install `mcpgym[fast]`: without it the fast path would go untested)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from mcpgym.gateway import codec


@pytest.fixture(params=["orjson", "json"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "json":
        monkeypatch.setattr(codec, "_orjson_loads", None)
        monkeypatch.setattr(codec, "_orjson_dumps", None)
    return str(request.param)


def test_orjson_is_installed_here() -> None:
    assert codec._orjson_loads is not None and codec._orjson_dumps is not None


@pytest.mark.parametrize(
    "raw",
    [b'{"logprob": NaN}', b'{"logprob": -Infinity}', b'{"text": "\\ud800"}', b'{"big": 1e400}', b'{"a": [1, 2.5]}'],
)
def test_what_json_reads_the_codec_reads(path: str, raw: bytes) -> None:
    got, expected = codec.loads(raw), json.loads(raw)
    assert json.dumps(got) == json.dumps(expected)  # (NaN != NaN: compared as text)


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff", b"[1] x"])
def test_what_json_refuses_the_codec_refuses(path: str, raw: bytes) -> None:
    with pytest.raises(ValueError):
        codec.loads(raw)
    assert codec.object_or_none(raw) is None


def test_only_an_object_is_an_object(path: str) -> None:
    assert codec.object_or_none(b'{"a": 1}') == {"a": 1}
    assert codec.object_or_none(b"[1]") is None and codec.object_or_none(b'"x"') is None


@pytest.mark.parametrize(
    "value",
    [
        {"text": "caf\u00e9 \u4e2d \U0001f600"},
        {"text": "lone \ud800 surrogate"},
        {"seed": 2**70},
        {"logprobs": [-0.5, None, 0.0]},
        {"nested": [{"a": [1, 2]}, []]},
    ],
)
def test_what_is_written_is_valid_utf8_json_that_reads_back_the_same(path: str, value: dict[str, Any]) -> None:
    line = codec.dumps(value)
    assert b"\n" not in line and json.loads(line.decode("utf-8")) == value


def test_a_nan_is_written_as_something_json_reads(path: str) -> None:
    [back] = json.loads(codec.dumps([math.nan]))
    assert back is None if path == "orjson" else math.isnan(back)  # orjson writes strict JSON: null

"""Recording by reference: every blob restores exactly, and nothing else is touched."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from mcpgym._recording.blobs import BLOB_KEY, BlobStore, restore

PNG = base64.b64encode(b"\x89PNG fake bytes").decode()


def round_trip(value: Any, directory: Path) -> tuple[Any, Any]:
    stored = json.loads(json.dumps(BlobStore(directory).externalize(value)))
    return stored, restore(stored, directory)


def test_blobs_are_stored_once_and_restored_exactly(tmp_path: Path) -> None:
    result = {
        "content": [
            {"type": "text", "text": "data:image/png;base64," + PNG},  # text that looks like a data URL: untouched
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "image", "data": PNG, "mimeType": "image/png", "_meta": {"mine": 1}},
            {"type": "image", "data": "not base64!", "mimeType": "image/png"},  # stays inline
        ]
    }
    part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}}
    value = {"result": result, "messages": [{"role": "user", "content": [part]}]}
    stored, back = round_trip(value, tmp_path)
    assert back == value
    blocks = stored["result"]["content"]
    assert blocks[0] == result["content"][0] and blocks[3] == result["content"][3]
    assert blocks[1]["data"] == "" and blocks[2]["_meta"] == {"mine": 1, BLOB_KEY: blocks[1]["_meta"][BLOB_KEY]}
    assert stored["messages"][0]["content"][0]["image_url"]["url"].startswith("mcpgym-blob:blobs/")
    assert len(list((tmp_path / "blobs").iterdir())) == 1  # one picture, stored once


def test_a_reference_outside_the_blobs_directory_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("do not read")
    forged = {"type": "image", "data": "", "mimeType": "image/png", "_meta": {BLOB_KEY: "secret.txt"}}
    climbing = {**forged, "_meta": {BLOB_KEY: "blobs/../secret.txt"}}
    assert restore([forged, climbing], tmp_path) == [forged, climbing]

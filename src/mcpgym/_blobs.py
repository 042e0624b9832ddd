"""Recorded images and audio by reference: each distinct blob once on disk, not base64 per line.

Layer: beside `_recording` (which calls it). A recorded result's image or audio block keeps its
type and MIME type, its `data` becomes "" and `_meta["io.mcpgym/blob"]` names the file
`blobs/<sha256>.<ext>` under the recording directory. Files are content-addressed: a maze
picture seen on fifty steps is written once. Reading a recording back puts the data back, so
`read_trajectories` returns the results exactly as they were sent. A `data:` URL (an
OpenAI-style image part, as the harness writes them) becomes `mcpgym-blob:blobs/<file>` the same
way.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from mcpgym._content import decoded, digest

BLOB_KEY = "io.mcpgym/blob"
BLOB_URL = "mcpgym-blob:"
_MEDIA = ("image", "audio")
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp", "audio/wav": "wav"}


class BlobStore:
    """Content-addressed files under `directory/blobs`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / "blobs"

    def externalize(self, value: Any) -> Any:
        """`value` (JSON data: a dumped result or an observation) with every media block's data
        moved to a blob file and replaced by a reference."""
        if isinstance(value, list):
            return [self.externalize(item) for item in value]
        if isinstance(value, str) and value.startswith("data:") and ";base64," in value[:100]:
            mime, _, data = value[5:].partition(";base64,")
            return BLOB_URL + self._store(decoded(data), mime)
        if not isinstance(value, dict):
            return value
        if _is_media(value):
            return self._reference(value)
        return {key: self.externalize(item) for key, item in value.items()}

    def _reference(self, block: dict[str, Any]) -> dict[str, Any]:
        mime = str(block.get("mimeType") or block.get("mime_type") or "")
        meta = {**(block.get("_meta") or {}), BLOB_KEY: self._store(decoded(block["data"]), mime)}
        return {**block, "data": "", "_meta": meta}

    def _store(self, raw: bytes, mime: str) -> str:
        """Write `raw` once; its path relative to the recording directory."""
        name = f"{digest(raw)}.{_EXTENSIONS.get(mime, 'bin')}"
        path = self.directory / name
        if not path.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.part")
            partial.write_bytes(raw)
            partial.replace(path)  # atomic: a reader never sees half a blob
        return f"blobs/{name}"


def restore(value: Any, directory: Path) -> Any:
    """The inverse of `externalize`: references replaced by their data (missing files: left as is)."""
    if isinstance(value, list):
        return [restore(item, directory) for item in value]
    if isinstance(value, str) and value.startswith(BLOB_URL):
        raw = _read(directory, value[len(BLOB_URL) :])
        if raw is None:
            return value
        mime = next((m for m, ext in _EXTENSIONS.items() if value.endswith("." + ext)), "application/octet-stream")
        return f"data:{mime};base64,{base64.b64encode(raw).decode()}"
    if not isinstance(value, dict):
        return value
    ref = (value.get("_meta") or {}).get(BLOB_KEY) if isinstance(value.get("_meta"), dict) else None
    if isinstance(ref, str) and value.get("data") == "":
        raw = _read(directory, ref)
        if raw is None:
            return value
        meta = {k: v for k, v in value["_meta"].items() if k != BLOB_KEY}
        return {**value, "data": base64.b64encode(raw).decode(), "_meta": meta or None}
    return {key: restore(item, directory) for key, item in value.items()}


def _read(directory: Path, ref: str) -> bytes | None:
    """A blob's bytes; None if missing or if `ref` points anywhere but the blobs directory."""
    path = directory / ref
    if path.parent != directory / "blobs" or not path.is_file():
        return None
    return path.read_bytes()


def _is_media(value: dict[str, Any]) -> bool:
    return value.get("type") in _MEDIA and isinstance(value.get("data"), str) and bool(value["data"])

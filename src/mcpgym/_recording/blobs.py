"""Recorded images and audio by reference: each distinct blob once on disk, not base64 per line.

Layer: beside `_recording` (which calls it). A recorded result's image or audio block keeps its
type and MIME type, its `data` becomes "" and `_meta["io.mcpgym/blob"]` names the file
`blobs/<sha256>.<ext>` under the recording directory. Files are content-addressed: a maze
picture seen on fifty steps is written once. Reading a recording back puts the data back, so
`read_recordings` returns the results exactly as they were sent. The `data:` URL of
an OpenAI-style image part (as the harness writes them) becomes `mcpgym-blob:blobs/<file>` the
same way. Data that is not exactly base64 stays inline, so every reference restores exactly.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Any

from mcpgym._core.content import digest

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
        if not isinstance(value, dict):
            return value
        if _is_media(value) and (raw := _base64(value["data"])) is not None:
            mime = str(value.get("mimeType") or value.get("mime_type") or "")
            meta = {**(value.get("_meta") or {}), BLOB_KEY: self._store(raw, mime)}
            return {**value, "data": "", "_meta": meta}
        url = _image_url(value)
        if url is not None and url.startswith("data:"):
            mime, _, data = url[5:].partition(";base64,")
            if (raw := _base64(data)) is not None:
                return {**value, "image_url": {**value["image_url"], "url": BLOB_URL + self._store(raw, mime)}}
        return {key: self.externalize(item) for key, item in value.items()}

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
    if not isinstance(value, dict):
        return value
    url = _image_url(value)
    if url is not None and url.startswith(BLOB_URL) and (raw := _read(directory, url[len(BLOB_URL) :])) is not None:
        mime = next((m for m, ext in _EXTENSIONS.items() if url.endswith("." + ext)), "application/octet-stream")
        data_url = f"data:{mime};base64,{base64.b64encode(raw).decode()}"
        return {**value, "image_url": {**value["image_url"], "url": data_url}}
    ref = (value.get("_meta") or {}).get(BLOB_KEY) if isinstance(value.get("_meta"), dict) else None
    if isinstance(ref, str) and value.get("data") == "":
        raw = _read(directory, ref)
        if raw is None:
            return value
        block = {k: v for k, v in value.items() if k != "_meta"}
        meta = {k: v for k, v in value["_meta"].items() if k != BLOB_KEY}
        return {**block, "data": base64.b64encode(raw).decode(), **({"_meta": meta} if meta else {})}
    return {key: restore(item, directory) for key, item in value.items()}


def _read(directory: Path, ref: str) -> bytes | None:
    """A blob's bytes; None if missing or if `ref` points anywhere but the blobs directory."""
    path = directory / ref
    if path.parent != directory / "blobs" or not path.is_file():
        return None
    return path.read_bytes()


def _image_url(value: dict[str, Any]) -> str | None:
    """The URL of an OpenAI-style image part (`{"type": "image_url", "image_url": {"url"}}`)."""
    part = value.get("image_url")
    if value.get("type") == "image_url" and isinstance(part, dict) and isinstance(part.get("url"), str):
        return str(part["url"])
    return None


def _base64(data: str) -> bytes | None:
    """The bytes, if `data` is exactly their base64 (so the reference restores it unchanged)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode() == data else None


def _is_media(value: dict[str, Any]) -> bool:
    return value.get("type") in _MEDIA and isinstance(value.get("data"), str) and bool(value["data"])

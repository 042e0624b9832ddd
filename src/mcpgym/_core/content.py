"""Tool-result content as agents and trainers read it: text, and images that are not dropped.

Layer: bottom (MCP types only). One rendering shared by `mcpgym.trl`, the harness and the
recorder, so an image is never silently lost on the way from an environment to a model:

- `result_text`: the text content, with one line per image or audio block saying what it is
  (MIME type, size, content hash: a stable reference to the recorded blob), and each embedded
  or linked resource by URI; a result with no content but structured content reads as JSON.
- `images`: the result's image blocks, for doors that can show them (OpenAI-style image parts,
  TRL multimodal tool results).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

import mcp_types as types


def result_text(observation: Any) -> str:
    """What a text-only reader sees of a tool result (see the module docstring)."""
    if not isinstance(observation, types.CallToolResult):
        return ""
    lines = [line for block in observation.content if (line := block_text(block)) is not None]
    text = "\n".join(lines)
    if not text and observation.structured_content is not None:
        text = json.dumps(observation.structured_content)
    return text


def block_text(block: types.ContentBlock) -> str | None:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return media_note(block)
    if isinstance(block, types.ResourceLink):
        return f"[resource: {block.uri}]"
    if isinstance(block, types.EmbeddedResource):
        contents = block.resource
        if isinstance(contents, types.TextResourceContents):
            return contents.text
        return f"[resource: {contents.uri} ({contents.mime_type or 'binary'})]"
    return None


def media_note(block: types.ImageContent | types.AudioContent) -> str:
    """`[image: image/png, 383 bytes, sha256:0a1b2c3d4e5f]`: what the block is, by reference."""
    raw = decoded(block.data)
    kind = "image" if isinstance(block, types.ImageContent) else "audio"
    return f"[{kind}: {block.mime_type}, {len(raw)} bytes, sha256:{digest(raw)[:12]}]"


def images(observation: Any) -> list[types.ImageContent]:
    if not isinstance(observation, types.CallToolResult):
        return []
    return [block for block in observation.content if isinstance(block, types.ImageContent)]


def data_url(block: types.ImageContent) -> str:
    """The image as a `data:` URL, the form OpenAI-style `image_url` parts take."""
    return f"data:{block.mime_type};base64,{block.data}"


def decoded(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data.encode()  # not base64 after all: still count and hash what was sent


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()

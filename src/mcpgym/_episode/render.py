"""`Render`: what an environment shows people of its current state (text, markdown or an image).

Layer: bottom (no transport). `Environment.render()` returns a `str` (plain text), a `Render`
or None (nothing to show); `rendering()` turns that into the wire model `Rendering` that
`EpisodeState.render` carries on every door, so the web page, `mcpgym play` and the viewer
show the same picture whether the environment runs in process or behind a server. Agents never
see it: what they see is what the tools return.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from mcpgym._core.types import Rendering


@dataclass(frozen=True)
class Render:
    """A picture of the current state for people: any of text, markdown and an image."""

    text: str | None = None
    markdown: str | None = None
    image: bytes | None = None
    """Encoded image bytes (PNG unless `mime_type` says otherwise)."""
    mime_type: str = "image/png"


def rendering(value: Any) -> Rendering | None:
    """The wire form of what `render()` returned (see the module docstring)."""
    if value is None:
        return None
    if isinstance(value, str):
        return Rendering(text=value)
    if not isinstance(value, Render):
        raise TypeError(f"render() returns a str, an mcpgym.Render or None, not {type(value).__name__}")
    if value.image is None:
        return Rendering(text=value.text, markdown=value.markdown)
    image = base64.b64encode(value.image).decode()
    return Rendering(text=value.text, markdown=value.markdown, image=image, mime_type=value.mime_type)

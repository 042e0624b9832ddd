"""Environments the web-page tests play: every input-schema feature, images, hostile text."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Annotated, Any, Literal

import mcp_types as types
from pydantic import BaseModel, Field

import mcpgym

HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'"><b>bold?</b>'


class Point(BaseModel):
    x: int
    y: Annotated[int, Field(ge=0)] = 0
    label: str | None = None


class Forms(mcpgym.Environment):
    """Every schema feature a tool form must handle, plus an image and some HTML."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"hello": "forms", "options": options}

    @mcpgym.tool
    async def configure(
        self,
        name: Annotated[str, Field(min_length=2, description="who is asking")],
        code: str,
        point: Point,
        count: Annotated[int, Field(ge=1, le=5)] = 2,
        ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5,
        verbose: bool = False,
        mode: Literal["fast", "slow"] = "fast",
        tags: list[str] = [],  # noqa: B006 (a schema default, never mutated)
        path: list[Point] | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        """Echo the arguments back as structured content; reward 1.0 when count is 3."""
        if count == 3:
            self.finish(reward=1.0)
        return {
            "name": name,
            "code": code,
            "point": point.model_dump(),
            "count": count,
            "ratio": ratio,
            "verbose": verbose,
            "mode": mode,
            "tags": tags,
            "path": None if path is None else [p.model_dump() for p in path],
            "note": note,
        }

    @mcpgym.tool
    async def picture(self) -> types.CallToolResult:
        """A 16x16 checkerboard PNG."""
        data = base64.b64encode(checkerboard_png()).decode()
        return types.CallToolResult(content=[types.ImageContent(type="image", data=data, mime_type="image/png")])

    @mcpgym.tool
    async def html(self) -> str:
        """Text that is markup: the page must show it, not run it."""
        return HOSTILE


def checkerboard_png(size: int = 16) -> bytes:
    rows = b"".join(
        b"\x00" + b"".join(b"\xe0\x40\x40" if (x // 4 + y // 4) % 2 else b"\x30\x60\xe0" for x in range(size))
        for y in range(size)
    )

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _numbered_tool(number: int) -> Any:
    async def call(self: mcpgym.Environment) -> str:
        return f"called {number}"

    call.__name__ = f"tool_{number}"
    call.__doc__ = f"Tool number {number}."
    return mcpgym.tool(call)


class ManyTools(mcpgym.Environment):
    """A long tool list: the last form is far below the result pane."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        return "ready"

    locals().update({f"tool_{n}": _numbered_tool(n) for n in range(30)})

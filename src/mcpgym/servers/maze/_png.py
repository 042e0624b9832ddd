"""A minimal PNG encoder (8-bit RGB, no filtering) on the standard library's zlib.

Layer: plain data. Enough to render small grids; a real imaging library would be one more
dependency for twenty lines of code.
"""

from __future__ import annotations

import struct
import zlib

RGB = tuple[int, int, int]


def encode(pixels: list[list[RGB]]) -> bytes:
    """PNG bytes for rows of (r, g, b) pixels, all rows the same width."""
    height, width = len(pixels), len(pixels[0])
    raw = b"".join(b"\x00" + bytes(channel for pixel in row for channel in pixel) for row in pixels)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit truecolour, no interlace
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def decode_size(png: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header."""
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)

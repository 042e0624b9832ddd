"""An `rgb_array` frame as PNG bytes, for MCP image content.

Layer: plain encoding (numpy and the standard library; Gymnasium asks for no image library).
Rows unfiltered, one zlib stream: the smallest correct PNG writer, and fast enough for
frames of a few hundred pixels a side.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def encode(frame: np.ndarray) -> bytes:
    """PNG bytes of an (height, width, 3) or (height, width, 4) uint8 array."""
    if frame.ndim != 3 or frame.shape[2] not in (3, 4):
        raise ValueError(f"an rgb_array frame is (height, width, 3 or 4), not {frame.shape}")
    height, width, channels = frame.shape
    pixels = np.ascontiguousarray(frame, dtype=np.uint8)
    rows = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, width * channels)], axis=1)
    colour_type = 2 if channels == 3 else 6
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    data = zlib.compress(rows.tobytes(), 6)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

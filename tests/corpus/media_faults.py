"""Hostile media bytes for the bad-input corpus, made on the fly: decompression bombs, broken images and videos, scripts in SVG.

>>> bomb_png(side=50_000)[:8] == PNG_MAGIC
True
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: An SVG whose script runs if a browser ever renders it as a document.
SVG_WITH_SCRIPT = (
    b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="alert(1)">'
    b"<script>alert(document.cookie)</script><rect width='10' height='10'/></svg>"
)
#: HTML that would run a script if it were served as text/html (or sniffed as it).
HTML_WITH_SCRIPT = b"<!doctype html><html><body><script>alert(document.cookie)</script></body></html>"


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def bomb_png(*, side: int) -> bytes:
    """A tiny PNG whose header claims ``side`` x ``side`` RGB pixels (a decompression bomb by its header).

    The pixel stream is a few zero rows compressed: decoding it all would need
    ``3 * side**2`` bytes, which is what the pixel limit must refuse.
    """
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00" * (3 * side + 1) * 4, 9)
    return PNG_MAGIC + _chunk(b"IHDR", header) + _chunk(b"IDAT", pixels) + _chunk(b"IEND", b"")


def small_png(*, side: int = 8, colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid ``side`` x ``side`` RGB PNG of one colour."""
    row = b"\x00" + bytes(colour) * side
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return PNG_MAGIC + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(row * side)) + _chunk(b"IEND", b"")


def truncated(data: bytes, *, keep: float) -> bytes:
    """The first ``keep`` fraction of ``data``."""
    return data[: max(1, int(len(data) * keep))]


def noise(size: int, *, seed: int) -> bytes:
    """``size`` reproducible random bytes."""
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


def tiny_clip() -> bytes:
    """A valid four-frame 32x32 H.264 MP4."""
    from loaders.media.encode import encode_video

    frames = [np.full((32, 32, 3), 40 * i, np.uint8) for i in range(4)]
    return encode_video(frames, fps=4)

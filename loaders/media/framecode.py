"""Frame codes: a frame's index painted as a visible number and as black/white blocks a test can read back."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..errors import DecodeError

#: Bits in a frame code unless told otherwise: indices 0..65535.
DEFAULT_BITS = 16
_MIN_BLOCK = 8  # pixels; 8x8 blocks survive H.264/VP9 at modest quality
_DARK, _LIGHT = 64.0, 192.0  # block means outside (dark, light) are unambiguous


def code_blocks(width: int, height: int, *, bits: int = DEFAULT_BITS) -> list[tuple[int, int, int, int]]:
    """The ``(left, top, right, bottom)`` block of each bit, most significant first.

    Square blocks of at least 8 pixels in rows along the bottom edge, centred;
    ``read_frame_code`` uses the same layout.

    >>> code_blocks(128, 64, bits=16)[0]
    (0, 56, 8, 64)
    """
    if bits < 1:
        raise ValueError(f"a frame code needs at least 1 bit, got {bits}")
    side = max(_MIN_BLOCK, width // 16)
    cols = min(bits, width // side)
    if cols < 1:
        raise ValueError(f"a {width}x{height} image is too narrow for a frame code (needs {side} pixels)")
    rows = math.ceil(bits / cols)
    if rows * side > height // 2:
        raise ValueError(f"a {width}x{height} image is too small for a {bits}-bit frame code")
    left0 = (width - cols * side) // 2
    top0 = height - rows * side
    blocks = []
    for i in range(bits):
        left, top = left0 + (i % cols) * side, top0 + (i // cols) * side
        blocks.append((left, top, left + side, top + side))
    return blocks


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def draw_frame_code(img: Image.Image, index: int, *, bits: int = DEFAULT_BITS, number: bool = True) -> Image.Image:
    """Paint ``index`` on ``img`` (in place; returned for chaining).

    A row of black (0) / white (1) blocks along the bottom edge holds the index
    in binary, most significant bit first; with ``number`` the index is also
    written large in the top-left corner for people.

    >>> img = draw_frame_code(Image.new("RGB", (128, 64), "gray"), 37)
    >>> read_frame_code(np.asarray(img))
    37
    """
    if not 0 <= index < (1 << bits):
        raise ValueError(f"frame index {index} does not fit a {bits}-bit frame code")
    draw = ImageDraw.Draw(img)
    white = 255 if img.mode in ("L", "I", "I;16") else (255,) * len(img.getbands())
    black = 0 if img.mode in ("L", "I", "I;16") else (0,) * len(img.getbands())
    blocks = code_blocks(img.width, img.height, bits=bits)
    for position, box in enumerate(blocks):
        bit = (index >> (bits - 1 - position)) & 1
        draw.rectangle((box[0], box[1], box[2] - 1, box[3] - 1), fill=white if bit else black)
    if number:
        font = _font(max(10, img.height // 5))
        text = str(index)
        left, top, right, bottom = draw.textbbox((2, 1), text, font=font)
        draw.rectangle((0, 0, right + 2, bottom + 2), fill=black)
        draw.text((2, 1), text, fill=white, font=font)
    return img


def read_frame_code(frame: np.ndarray, *, bits: int = DEFAULT_BITS) -> int:
    """Read the index ``draw_frame_code`` painted on a decoded frame (H x W x C or H x W array).

    Each block's central area is averaged and thresholded; a block too close to
    mid-gray to call raises ``DecodeError`` rather than guessing.
    """
    pixels = np.asarray(frame, dtype=np.float64)
    gray = pixels.mean(axis=2) if pixels.ndim == 3 else pixels
    height, width = gray.shape
    value = 0
    for position, (left, top, right, bottom) in enumerate(code_blocks(width, height, bits=bits)):
        margin = (right - left) // 4
        mean = float(gray[top + margin : bottom - margin, left + margin : right - margin].mean())
        if _DARK < mean < _LIGHT:
            raise DecodeError(f"frame code bit {position} is unreadable (block mean {mean:.0f} of 255)")
        value = (value << 1) | int(mean >= _LIGHT)
    return value

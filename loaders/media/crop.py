"""Random resized crops of images (decoding JPEGs at a reduced scale when the crop shrinks a lot) and crop-box overlays."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from ..errors import DecodeError, InvalidPlan
from .image import ORIENTATION_TAG, _load, _open_lazy, _orient, _reason, has_alpha, to_display_mode

#: JPEG decoders shrink by these factors while decoding (DCT scaling), largest first.
_JPEG_REDUCTIONS = (8, 4, 2)
#: EXIF orientations that swap width and height.
_SWAPPING = (5, 6, 7, 8)


@dataclass(frozen=True)
class Crop:
    """A random resized crop: the model input, the box it was cut from and how the source was decoded.

    ``box`` is ``(left, top, right, bottom)`` in pixels of the upright source image
    of ``source_size = (width, height)``, whatever scale it was decoded at;
    ``reduction`` is that scale's divisor (1: full size; 2, 4 or 8: a JPEG
    decoded at 1/2, 1/4 or 1/8 of its size).
    """

    image: Image.Image
    box: tuple[int, int, int, int]
    source_size: tuple[int, int]
    reduction: int = 1


def _check_range(name: str, pair: tuple[float, float], *, positive: bool) -> tuple[float, float]:
    low, high = float(pair[0]), float(pair[1])
    if not (math.isfinite(low) and math.isfinite(high)) or low > high or (positive and low <= 0):
        raise InvalidPlan(f"random_resized_crop {name} must be an increasing pair of positive numbers, got {pair}")
    return low, high


def _output_size(size: tuple[int, int]) -> tuple[int, int]:
    height, width = int(size[0]), int(size[1])
    if height < 1 or width < 1:
        raise InvalidPlan(f"random_resized_crop size must be two positive ints (height, width), got {size}")
    return height, width


def crop_box(
    width: int,
    height: int,
    rng: np.random.Generator,
    *,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> tuple[int, int, int, int]:
    """The ``(left, top, right, bottom)`` box ``random_resized_crop`` cuts from a ``width`` x ``height`` image.

    torchvision's ``RandomResizedCrop.get_params``: ten tries at a random area and
    log-uniform aspect ratio, then a center crop clamped to ``ratio``.

    >>> crop_box(100, 50, np.random.default_rng(0), scale=(1.0, 1.0), ratio=(2.0, 2.0))
    (0, 0, 100, 50)
    """
    scale = _check_range("scale", scale, positive=True)
    ratio = _check_range("ratio", ratio, positive=True)
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return left, top, left + w, top + h
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        h, w = height, int(round(height * ratio[1]))
    else:
        w, h = width, height
    top, left = (height - h) // 2, (width - w) // 2
    return left, top, left + w, top + h


def random_resized_crop(
    img: Image.Image,
    rng: np.random.Generator,
    *,
    size: tuple[int, int],
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> tuple[Image.Image, tuple[int, int, int, int]]:
    """Crop a random area and aspect ratio of ``img`` and resize it to ``size = (height, width)``.

    Same semantics (and ``size`` order) as torchvision's ``RandomResizedCrop``;
    deterministic given ``rng``. Returns the model input and the crop box
    ``(left, top, right, bottom)`` in ``img``'s pixels, for ``draw_box``.

    >>> crop, box = random_resized_crop(Image.new("RGB", (64, 48)), np.random.default_rng(1), size=(32, 32))
    >>> crop.size
    (32, 32)
    """
    height, width = _output_size(size)
    box = crop_box(img.width, img.height, rng, scale=scale, ratio=ratio)
    crop = img.resize((width, height), Image.Resampling.BILINEAR, box=box)
    return crop, box


# -- from encoded bytes --------------------------------------------------------------
def _stored_point(orientation: int, u: float, v: float, width: int, height: int) -> tuple[float, float]:
    """Where the upright point ``(u, v)`` lies in the stored image of ``width`` x ``height`` (stored pixels)."""
    return {
        1: (u, v),
        2: (width - u, v),
        3: (width - u, height - v),
        4: (u, height - v),
        5: (v, u),
        6: (v, height - u),
        7: (width - v, height - u),
        8: (width - v, u),
    }[orientation]


def _upright_point(orientation: int, x: float, y: float, width: int, height: int) -> tuple[float, float]:
    """Where the stored point ``(x, y)`` of a ``width`` x ``height`` image lands once upright (Pillow's ``exif_transpose``)."""
    return {
        1: (x, y),
        2: (width - x, y),
        3: (width - x, height - y),
        4: (x, height - y),
        5: (y, x),
        6: (height - y, x),
        7: (height - y, width - x),
        8: (y, width - x),
    }[orientation]


def reduced_box(
    box: tuple[int, int, int, int],
    *,
    orientation: int,
    stored_size: tuple[int, int],
    decoded_size: tuple[int, int],
    reduction: float,
) -> tuple[float, float, float, float]:
    """``box`` (upright pixels of the full image) in upright pixels of the image decoded at 1/``reduction``.

    A JPEG decoded at 1/s maps stored pixel ``x`` to ``x / s``; its size is
    rounded up, so a flipped axis also shifts by that rounding.

    >>> reduced_box((0, 0, 40, 20), orientation=2, stored_size=(100, 50), decoded_size=(13, 7), reduction=8)
    (0.5, 0.0, 5.5, 2.5)
    """
    (sw, sh), (dw, dh) = stored_size, decoded_size
    corners = [_stored_point(orientation, u, v, sw, sh) for u, v in ((box[0], box[1]), (box[2], box[3]))]
    upright = [_upright_point(orientation, x / reduction, y / reduction, dw, dh) for x, y in corners]
    (u0, v0), (u1, v1) = upright
    return min(u0, u1), min(v0, v1), max(u0, u1), max(v0, v1)


def _orientation(img: Image.Image) -> int | None:
    """The EXIF orientation Pillow's ``exif_transpose`` applies (1 when absent), or None when it cannot be read."""
    try:
        value = img.getexif().get(ORIENTATION_TAG, 1)
    except Exception:  # broken EXIF: the full decode path reports it
        return None
    return value if isinstance(value, int) and 1 <= value <= 8 else None


def _rgb(img: Image.Image) -> Image.Image:
    img = to_display_mode(img)
    return img if img.mode == "RGB" else img.convert("RGB")


def decode_crop(
    data: bytes,
    rng: np.random.Generator,
    *,
    size: tuple[int, int],
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    reduced: bool = True,
    where: str,
) -> Crop:
    """Decode an encoded image upright (EXIF orientation applied), as RGB, and take a ``random_resized_crop`` of it.

    The box is drawn from ``rng`` on the upright full-size image, exactly as
    ``random_resized_crop(open_image(data), rng, ...)`` draws it. With
    ``reduced`` (the default), a JPEG whose box shrinks at least 2x to ``size`` is
    decoded at 1/2, 1/4 or 1/8 of its size (the largest reduction that keeps the
    box at least ``size``), and the box is scaled onto that decoded image: faster
    (about 1.6x for a 640x480 photo: the entropy decoding every scale needs
    remains), and close to, not bit-identical with, the full-size crop.
    Other images, and JPEGs whose box shrinks less, are decoded at full size and
    give exactly ``random_resized_crop``'s pixels.

    >>> from loaders.media import encode_jpeg
    >>> photo = encode_jpeg(np.zeros((480, 640, 3), np.uint8))
    >>> whole = {"scale": (1.0, 1.0), "ratio": (4 / 3, 4 / 3)}     # the whole 640x480 image
    >>> crop = decode_crop(photo, np.random.default_rng(0), size=(64, 64), **whole, where="example")
    >>> crop.box, crop.reduction, crop.image.size
    ((0, 0, 640, 480), 4, (64, 64))
    """
    height, width = _output_size(size)
    img = _open_lazy(bytes(data), where)
    orientation = _orientation(img) if img.format == "JPEG" else None
    if orientation is None:  # decode first, then draw the box on what was decoded (random_resized_crop's order)
        upright = _rgb(_orient(_load(img, where), where))
        crop, box = random_resized_crop(upright, rng, size=(height, width), scale=scale, ratio=ratio)
        return Crop(crop, box, upright.size)
    stored = img.size
    source = (stored[1], stored[0]) if orientation in _SWAPPING else stored
    box = crop_box(source[0], source[1], rng, scale=scale, ratio=ratio)
    shrink = min((box[2] - box[0]) / width, (box[3] - box[1]) / height)
    factor = next((f for f in _JPEG_REDUCTIONS if f <= shrink), 1) if reduced and img.mode in ("RGB", "L") else 1
    reduction: float = 1
    if factor > 1:
        try:
            drafted = img.draft(None, (max(1, stored[0] // factor), max(1, stored[1] // factor)))
        except (OSError, ValueError) as exc:
            raise DecodeError(f"{where}: cannot decode image: {_reason(exc)}") from exc
        if drafted is not None:
            reduction = stored[0] / drafted[1][2]
    decoded = img.size
    upright = _rgb(_orient(_load(img, where), where))
    if reduction == 1:
        if upright.size != source:
            decoded_as = f"{upright.size[0]}x{upright.size[1]}"
            raise DecodeError(f"{where}: cannot decode image: decoded {decoded_as}, header says {source[0]}x{source[1]}")
        crop = upright.resize((width, height), Image.Resampling.BILINEAR, box=box)
        return Crop(crop, box, source)
    scaled = reduced_box(box, orientation=orientation, stored_size=stored, decoded_size=decoded, reduction=reduction)
    crop = upright.resize((width, height), Image.Resampling.BILINEAR, box=scaled)
    return Crop(crop, box, source, int(round(reduction)))


# -- overlays ----------------------------------------------------------------------
def draw_box(img: Image.Image, box: tuple[int, int, int, int], *, color: tuple[int, int, int] = (255, 32, 32)) -> Image.Image:
    """A display-mode copy of ``img`` with ``box = (left, top, right, bottom)`` outlined.

    >>> draw_box(Image.new("L", (20, 20)), (2, 2, 10, 10)).getpixel((2, 5))
    (255, 32, 32)
    """
    shown = to_display_mode(img)
    shown = shown.convert("RGBA" if has_alpha(shown) else "RGB")
    line = max(2, min(shown.size) // 100)
    left, top, right, bottom = box
    outline = color + (255,) if shown.mode == "RGBA" else color
    ImageDraw.Draw(shown).rectangle((left, top, right - 1, bottom - 1), outline=outline, width=line)
    return shown

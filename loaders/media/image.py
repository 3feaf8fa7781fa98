"""Image decoding for the read path and the inspector: safe open, EXIF, display modes, thumbnails, diffs."""

from __future__ import annotations

import io
import math
import os
import posixpath
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

from .. import storage
from ..errors import DecodeError, InvalidPlan

#: EXIF tag number of Orientation (1 = upright; 5-8 swap width and height).
ORIENTATION_TAG = 0x0112
_POINTER_TAGS = {0x8769, 0x8825, 0xA005}  # Exif, GPS and Interop IFD offsets: not readable values
_MAX_EXIF_VALUE = 200


@dataclass(frozen=True)
class ImageInfo:
    """What an encoded image is, read from its header: no pixels decoded.

    ``width``/``height`` are as displayed, i.e. after the EXIF orientation.
    """

    format: str
    width: int
    height: int
    mode: str
    byte_size: int
    exif: dict[str, str]
    orientation: int | None


# -- opening -----------------------------------------------------------------
def _check_pixels(img: Image.Image, where: str) -> None:
    """Refuse images above Pillow's pixel limit before any pixel is decoded.

    Pillow itself raises ``DecompressionBombError`` above twice the limit and only
    warns between one and two times it; turning that warning into an error with
    ``warnings.catch_warnings`` is not thread-safe, so the limit is checked here.
    """
    limit = Image.MAX_IMAGE_PIXELS
    width, height = img.size
    if limit is not None and width * height > limit:
        raise DecodeError(
            f"{where}: cannot decode image: {width}x{height} = {width * height:,} pixels exceeds the "
            f"decompression-bomb limit of {limit:,} pixels"
        )


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _open_lazy(data: bytes, where: str) -> Image.Image:
    """Open ``data`` and read its header only (format, size, mode, EXIF)."""
    if not data:
        raise DecodeError(f"{where}: cannot decode image: zero-length value")
    try:
        img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        raise DecodeError(f"{where}: cannot decode image: decompression bomb: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise DecodeError(f"{where}: cannot decode image: not a recognised image format ({len(data)} bytes)") from exc
    except MemoryError:
        raise
    except Exception as exc:  # Pillow's parsers raise many types on hostile bytes (struct.error, TypeError...)
        raise DecodeError(f"{where}: cannot decode image: {_reason(exc)}") from exc
    _check_pixels(img, where)
    return img


def _load(img: Image.Image, where: str) -> Image.Image:
    """Decode the pixels; truncated or corrupt data becomes a DecodeError."""
    try:
        img.load()
    except Image.DecompressionBombError as exc:
        raise DecodeError(f"{where}: cannot decode image: decompression bomb: {exc}") from exc
    except MemoryError:
        raise
    except Exception as exc:
        raise DecodeError(f"{where}: cannot decode image: {_reason(exc)}") from exc
    return img


def _orient(img: Image.Image, where: str) -> Image.Image:
    """``img`` upright: transposed by its EXIF orientation, else ``img`` itself (Pillow would copy it)."""
    try:
        if img.getexif().get(ORIENTATION_TAG, 1) == 1:
            return img
        return ImageOps.exif_transpose(img)
    except MemoryError:
        raise
    except Exception as exc:
        raise DecodeError(f"{where}: cannot apply EXIF orientation: {_reason(exc)}") from exc


def open_image(data: bytes, *, where: str) -> Image.Image:
    """Decode an encoded image and return it upright (EXIF orientation applied).

    Pillow's decompression-bomb limit stays on; anything that cannot be decoded
    raises ``DecodeError`` naming ``where`` and the cause.

    >>> open_image(render_png(Image.new("L", (3, 2))), where="example").size
    (3, 2)
    """
    return _orient(_load(_open_lazy(bytes(data), where), where), where)


def _orientation(exif: Image.Exif) -> int | None:
    value = exif.get(ORIENTATION_TAG)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _readable(value: Any) -> str | None:
    if isinstance(value, bytes):
        text = value.rstrip(b"\x00")
        if not text or not all(32 <= b < 127 for b in text):
            return None
        value = text.decode("ascii")
    text = str(value).strip().strip("\x00")
    if not text:
        return None
    return text if len(text) <= _MAX_EXIF_VALUE else text[: _MAX_EXIF_VALUE - 1] + "…"


def _exif_tags(exif: Image.Exif) -> dict[str, str]:
    tags: dict[str, str] = {}
    items = list(exif.items())
    try:
        items += list(exif.get_ifd(ExifTags.IFD.Exif).items())
    except Exception:  # a broken Exif sub-IFD: keep the main tags
        pass
    for tag, value in items:
        if tag in _POINTER_TAGS:
            continue
        text = _readable(value)
        if text is not None:
            tags[ExifTags.TAGS.get(tag, f"0x{tag:04x}")] = text
    return dict(sorted(tags.items()))


def _header_exif(img: Image.Image) -> Image.Exif:
    """The EXIF an opened image's header holds, without decoding pixels.

    Pillow's PNG ``getexif`` decodes the whole image to look for an ``eXIf`` chunk
    after the pixel data; here a PNG's EXIF is the chunk before them, if any.
    """
    if img.format == "PNG" and "exif" not in img.info:
        return Image.Exif()
    return img.getexif()


def image_info(data: bytes, *, where: str) -> ImageInfo:
    """Format, displayed size, mode, byte size and readable EXIF tags of an encoded image.

    Reads the header only (never pixels, even to find a PNG's EXIF), so a
    decompression bomb is refused without decoding and a page of large images
    costs their headers.

    >>> image_info(render_png(Image.new("RGB", (4, 2))), where="example").width
    4
    """
    data = bytes(data)
    img = _open_lazy(data, where)
    try:
        exif = _header_exif(img)
    except Exception:  # broken EXIF: report the image without it
        exif = Image.Exif()
    orientation = _orientation(exif)
    width, height = img.size
    if orientation in (5, 6, 7, 8):
        width, height = height, width
    return ImageInfo(
        format=str(img.format or "unknown"),
        width=width,
        height=height,
        mode=img.mode,
        byte_size=len(data),
        exif=_exif_tags(exif),
        orientation=orientation,
    )


# -- display -----------------------------------------------------------------
def _from_array(values: np.ndarray) -> Image.Image:
    return Image.fromarray(np.ascontiguousarray(values.astype(np.uint8)))


def _stretch(values: np.ndarray) -> Image.Image:
    low, high = float(values.min(initial=0)), float(values.max(initial=0))
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return _from_array(np.zeros(values.shape, np.uint8))
    return _from_array(np.clip((values - low) * (255.0 / (high - low)), 0, 255).round())


def to_display_mode(img: Image.Image) -> Image.Image:
    """Convert ``img`` to a mode browsers show correctly: ``RGB``, ``RGBA``, ``L`` or ``LA``.

    Grayscale stays ``L``; palette becomes ``RGBA`` when it has transparency, else
    ``RGB``; 16-bit images (``I;16*``) are scaled to 8 bits over their full range;
    32-bit ``I`` and float ``F`` images are scaled to 8 bits from 16 bits when
    their values fit, else stretched from their min to their max; CMYK, YCbCr,
    LAB and HSV become ``RGB``; premultiplied alpha becomes straight alpha.

    >>> to_display_mode(Image.new("I;16", (2, 2), 65535)).getpixel((0, 0))
    255
    """
    mode = img.mode
    if mode in ("RGB", "RGBA", "L", "LA"):
        return img
    if mode == "1":
        return img.convert("L")
    if mode in ("P", "PA"):
        transparent = mode == "PA" or "transparency" in img.info
        return img.convert("RGBA" if transparent else "RGB")
    if mode.startswith("I;16"):
        return _from_array(np.asarray(img).astype(np.uint16) >> 8)
    if mode == "I":
        values = np.asarray(img).astype(np.int64)
        if values.size and values.min() >= 0 and values.max() <= 255:
            return _from_array(values)
        if values.size and values.min() >= 0 and values.max() <= 65535:
            return _from_array(values >> 8)
        return _stretch(values.astype(np.float64))
    if mode == "F":
        return _stretch(np.asarray(img).astype(np.float64))
    if mode in ("RGBa", "RGBX"):
        return img.convert("RGBA" if mode == "RGBa" else "RGB")
    if mode == "La":
        return img.convert("LA")
    if "A" in mode or "transparency" in img.info:
        return img.convert("RGBA")
    return img.convert("RGB")


def has_alpha(img: Image.Image) -> bool:
    """True when ``img`` carries transparency (an alpha band or a transparent palette entry)."""
    return img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in img.info


def render_png(img: Image.Image) -> bytes:
    """PNG bytes of ``img`` in a display mode (see ``to_display_mode``).

    >>> render_png(Image.new("RGB", (1, 1)))[:4]
    b'\\x89PNG'
    """
    buffer = io.BytesIO()
    to_display_mode(img).save(buffer, format="PNG", compress_level=3)
    return buffer.getvalue()


def media_type(data: bytes) -> str:
    """The MIME type of encoded image bytes made here (PNG, WebP, JPEG), from their signature.

    >>> media_type(render_png(Image.new("L", (1, 1))))
    'image/png'
    """
    head = bytes(data[:12])
    if head.startswith(b"\x89PNG"):
        return "image/png"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return "application/octet-stream"


#: WebP effort for thumbnails: 0 (fastest) to 6. Effort 1 encodes a 256 px thumbnail in about a third of the
#: time of 3 (~1.4 ms instead of ~4 ms) for a file about a fifth larger, at the same quality setting.
THUMBNAIL_WEBP_METHOD = 1


def thumbnail(data: bytes, *, max_side: int = 256, where: str) -> bytes:
    """A thumbnail no larger than ``max_side`` on either side: WebP, or PNG when it has alpha.

    EXIF orientation is applied and the mode made displayable. JPEGs are decoded
    at the smallest scale (1/2, 1/4 or 1/8; ``Image.draft``) that still covers the
    thumbnail, so a 4000x3000 photo costs a few tens of ms, most of it reading
    its compressed bytes.

    >>> media_type(thumbnail(render_png(Image.new("RGB", (600, 300))), max_side=64, where="x"))
    'image/webp'
    """
    if max_side < 1:
        raise InvalidPlan(f"thumbnail max_side must be >= 1, got {max_side}")
    img = _open_lazy(bytes(data), where)
    if img.format == "JPEG":
        # the thumbnail's size (its longest side max_side; orientation swaps both sides alike)
        width, height = img.size
        fit = max_side / max(width, height)
        if fit < 1:
            try:
                img.draft(None, (math.ceil(width * fit), math.ceil(height * fit)))
            except (OSError, ValueError) as exc:
                raise DecodeError(f"{where}: cannot decode image: {_reason(exc)}") from exc
    img = _orient(_load(img, where), where)
    img = to_display_mode(img)
    # a drafted JPEG is less than twice the thumbnail; others are first reduced to that (reducing_gap), and
    # bicubic shrinks by up to 2x as well as Lanczos does for about two thirds of its time
    img.thumbnail((max_side, max_side), Image.Resampling.BICUBIC, reducing_gap=2.0)
    buffer = io.BytesIO()
    if has_alpha(img):
        img.save(buffer, format="PNG", compress_level=3)
    else:
        img.save(buffer, format="WEBP", quality=80, method=THUMBNAIL_WEBP_METHOD)
    return buffer.getvalue()


def image_from_value(value: Any, *, where: str = "image value") -> bytes | None:
    """The encoded bytes of an image cell: raw bytes or a Hugging Face ``{"bytes", "path"}`` struct.

    Returns ``None`` for a struct holding only a ``path`` (the caller resolves the
    path, relative to the shard's directory); raises ``DecodeError`` for a null
    cell or any other shape.

    >>> image_from_value({"bytes": b"abc", "path": "a.png"})
    b'abc'
    >>> image_from_value({"bytes": None, "path": "media/a.png"}) is None
    True
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        raw = value.get("bytes")
        if isinstance(raw, (bytes, bytearray, memoryview)):
            return bytes(raw)
        if raw is None and isinstance(value.get("path"), str) and value["path"]:
            return None
        raise DecodeError(f"{where}: image struct has neither bytes nor a path: keys {sorted(value)}")
    if value is None:
        raise DecodeError(f"{where}: image value is null")
    raise DecodeError(f"{where}: expected image bytes or a {{bytes, path}} struct, got {type(value).__name__}")


def resolve_media_path(path: str, *, shard_uri: str, where: str, allow_absolute: bool = False) -> str:
    """Where a media file stored by path lives: ``path`` relative to the directory of ``shard_uri``.

    A relative path may not leave that directory (no ``..``, and for local shards
    no symbolic link pointing out of it); absolute paths and URIs are refused
    unless ``allow_absolute``, so a hostile dataset cannot make the inspector
    read arbitrary files.

    >>> resolve_media_path("media/clip.mp4", shard_uri="/data/v1/part-00000.parquet", where="x")
    '/data/v1/media/clip.mp4'
    """
    if "://" in path or os.path.isabs(path) or path.startswith("\\\\"):
        if not allow_absolute:
            raise DecodeError(f"{where}: media path {path!r} is absolute; only paths relative to the shard's directory are read")
        return path
    parts = [part for part in path.replace("\\", "/").split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        raise DecodeError(f"{where}: media path {path!r} does not name a file inside the shard's directory")
    if storage.is_remote(shard_uri):
        return posixpath.join(posixpath.dirname(shard_uri), *parts)
    directory = os.path.dirname(storage.normalize(shard_uri))
    resolved = os.path.join(directory, *parts)
    real_directory = os.path.realpath(directory)
    if os.path.commonpath([real_directory, os.path.realpath(resolved)]) != real_directory:
        raise DecodeError(
            f"{where}: media path {path!r} leads outside the shard's directory through a symbolic link; only files inside it are read"
        )
    return resolved


# -- diffs ---------------------------------------------------------------------
def _heat(diff: np.ndarray) -> np.ndarray:
    """Map differences 0..255 to black → red → yellow → white (square-root scaled so small ones show)."""
    level = np.sqrt(diff.astype(np.float64) / 255.0) * 3.0
    rgb = np.stack([np.clip(level, 0, 1), np.clip(level - 1, 0, 1), np.clip(level - 2, 0, 1)], axis=-1)
    return (rgb * 255).round().astype(np.uint8)


def pixel_diff(a: bytes, b: bytes, *, where: str) -> bytes | None:
    """PNG heatmap of the per-pixel absolute difference of two images, or ``None`` when sizes differ.

    Both are decoded upright and compared in RGB; each pixel's largest channel
    difference is shown black (equal) → red → yellow → white (255), square-root
    scaled so that re-encoding noise stays visible.
    """
    first = to_display_mode(open_image(a, where=f"{where} (first image)")).convert("RGB")
    second = to_display_mode(open_image(b, where=f"{where} (second image)")).convert("RGB")
    if first.size != second.size:
        return None
    diff = np.abs(np.asarray(first, np.int16) - np.asarray(second, np.int16)).max(axis=-1)
    buffer = io.BytesIO()
    Image.fromarray(_heat(diff)).save(buffer, format="PNG", compress_level=3)
    return buffer.getvalue()

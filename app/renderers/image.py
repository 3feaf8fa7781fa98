"""Image fields: a lazily loaded thumbnail in listings, and the full image with its metadata (format, size, mode, bytes, EXIF).

Thumbnails are made by the server (``/media/...?thumb=``, EXIF applied,
display mode) and load when scrolled into view (``loading="lazy"``), each
inside a real link. A renderer only reads the image's header, so a listing
never decodes pixels; a header that is garbage, a decompression bomb or an
unknown format shows an inline error naming where the value came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from loaders.errors import DecodeError
from loaders.media import ImageInfo, image_from_value, image_info, resolve_media_path

from .. import urls
from ..templating import human_bytes
from .views import CellView, ErrorView, FieldContext, View

#: Formats every browser shows; others are shown through a server-made rendition.
BROWSER_FORMATS = frozenset({"PNG", "JPEG", "GIF", "WEBP"})
#: Longest side of the rendition shown for formats browsers cannot show (TIFF, BMP, ...).
RENDITION_SIDE = 2048
_PLACEHOLDER_SHARD = "s3://placeholder/part.parquet"


def where_of(ctx: FieldContext) -> str:
    """How errors name the field: ``dataset d version v shard s (file) row r column c``."""
    return f"{ctx.where} column {ctx.column}" if ctx.where else f"column {ctx.column}"


def fit(width: int, height: int, side: int = urls.THUMBNAIL_SIDE) -> tuple[int, int]:
    """The size of a thumbnail of a ``width`` x ``height`` image whose longest side is at most ``side``.

    >>> fit(4000, 3000), fit(100, 50)
    ((256, 192), (100, 50))
    """
    if width <= side and height <= side:
        return max(1, width), max(1, height)
    scale = side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def summary(info: ImageInfo) -> str:
    """``PNG 320×240 RGB · 12.3 KB``."""
    return f"{info.format} {info.width}×{info.height} {info.mode} · {human_bytes(info.byte_size)}"


def stored_path_of(value: Any, *, where: str = "media value") -> str | None:
    """The ``path`` of a ``{bytes: null, path}`` cell (stored by path), else ``None``.

    A path that is absolute or climbs out of the shard's directory raises
    ``DecodeError`` (the media endpoints refuse to read it).
    """
    path = value if isinstance(value, str) else None
    if isinstance(value, dict) and value.get("bytes") is None and isinstance(value.get("path"), str):
        path = value["path"]
    if path is not None:
        # the endpoints' own check, on its syntactic part only: a placeholder object-store shard touches no filesystem
        resolve_media_path(path, shard_uri=_PLACEHOLDER_SHARD, where=where)
    return path


@dataclass
class ImageCellView(CellView):
    """A listing cell: a lazily loaded thumbnail (when the field has a media URL) and a one-line summary."""

    partial: ClassVar[str] = "_partials/_image_cell.html"
    thumb_url: str | None = None
    href: str | None = None
    width: int = 0
    height: int = 0


@dataclass
class ImageView(View):
    """The full image (or a rendition), a link to the original bytes, and the image's metadata."""

    partial: ClassVar[str] = "_partials/_image.html"
    info: ImageInfo | None = None
    src: str | None = None
    original_url: str | None = None
    view_url: str | None = None
    rendition: bool = False
    exif: list[tuple[str, str]] = field(default_factory=list)
    path: str | None = None
    summary: str = ""
    #: A value stored by path is read by the view page; the field loads it as a fragment when revealed.
    deferred: bool = False
    fragment_url: str | None = None


def image_view(data: bytes, ctx: FieldContext, *, path: str | None = None) -> ImageView:
    """The view of an encoded image: reads its header only (the browser fetches the pixels).

    >>> from loaders.media import render_png; from PIL import Image
    >>> image_view(render_png(Image.new("L", (3, 2))), FieldContext("image", "image", {}, {})).info.mode
    'L'
    """
    info = image_info(data, where=where_of(ctx))
    original = ctx.media_url
    rendition = info.format.upper() not in BROWSER_FORMATS
    src = None
    if original:
        src = urls.add_query(original, thumb=RENDITION_SIDE) if rendition else original
    return ImageView(
        info=info,
        src=src,
        original_url=original,
        view_url=urls.view_of(original) if original and not ctx.full else None,
        rendition=rendition,
        exif=sorted(info.exif.items()),
        path=path,
        summary=summary(info),
    )


def image_field(value: Any, ctx: FieldContext) -> View:
    where = where_of(ctx)
    try:
        data = image_from_value(value, where=where)
        if data is None:
            path = stored_path_of(value, where=where)
            if ctx.media_url is None:
                return ImageView(path=path, summary=f"stored by path: {path}")
            view_url = urls.view_of(ctx.media_url)
            return ImageView(path=path, summary=f"stored by path: {path}", deferred=True, fragment_url=view_url, view_url=view_url)
        return image_view(data, ctx)
    except DecodeError as exc:
        return ErrorView(message=exc.message)


def image_cell(value: Any, ctx: FieldContext) -> View:
    where = where_of(ctx)
    try:
        data = image_from_value(value, where=where)
        path = stored_path_of(value, where=where) if data is None else None
    except DecodeError as exc:
        return ErrorView(message=exc.message)
    thumb = urls.add_query(ctx.media_url, thumb=urls.THUMBNAIL_SIDE) if ctx.media_url else None
    href = urls.view_of(ctx.media_url) if ctx.media_url else None
    if data is None:
        return ImageCellView(text=f"stored by path: {path}", title=str(path), thumb_url=thumb, href=href, width=0, height=0)
    try:
        info = image_info(data, where=where)
    except DecodeError as exc:
        return ErrorView(message=exc.message)
    width, height = fit(info.width, info.height)
    return ImageCellView(text=summary(info), title=summary(info), thumb_url=thumb, href=href, width=width, height=height)

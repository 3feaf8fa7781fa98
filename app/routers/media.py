"""Media of a sample's field, addressed by version id so every answer is immutable: stored bytes, thumbnails, frames.

``/media/datasets/{name}/versions/{version}/samples/{key}?field=`` sends the
field's whole value (with ``Range``): stored bytes, a text's UTF-8, anything
else as JSON (``app.whole_value``); with ``thumb=``/``frame=``/``box=`` what
the inspector makes of them; ``/view/...`` (same address) is the page that
shows one image or video field, opened on ``?frame=N`` or ``?t=seconds``.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from loaders import storage
from loaders.catalog.kinds import MEDIA_KINDS
from loaders.errors import SampleNotFound

from ..decode_budget import DecodeBudget, decode_budget_dependency
from ..deps import CatalogDep
from ..errors import ERROR_RESPONSES
from ..http_semantics import KeyDep, VersionDep, content_tag, etag, immutable, not_modified, ranged
from ..media_cache import MediaCache, media_cache_dependency
from ..pages.media import (
    MediaField,
    MediaPage,
    boxed_image,
    check_side,
    frame_image,
    load_field,
    media_page,
    parse_box,
    thumbnail_image,
)
from ..responses import respond, wants_fragment
from ..routing import bytes_answer, page
from ..whole_value import whole_value

router = APIRouter(tags=["media"], responses=ERROR_RESPONSES)

MediaDep = Annotated[MediaCache, Depends(media_cache_dependency)]
BudgetDep = Annotated[DecodeBudget, Depends(decode_budget_dependency)]
FieldParam = Annotated[str, Query(max_length=1000, description="The column whose media to send.")]


def stored_bytes(value: Any) -> bytes | None:
    """The bytes a binary/image/video value holds inline (``bytes`` or the ``{bytes, path}`` struct); never a path."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)):
        return bytes(value["bytes"])
    return None


def _filename(key: str, field: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{key}-{field}")[:120] + ".bin"


def _original(request: Request, media: MediaField) -> Response:
    data = stored_bytes(media.value)
    filename = _filename(media.key, media.field)
    if data is not None:
        return ranged(request, size=len(data), read=lambda o, n: data[o : o + n], tag=content_tag(data), filename=filename)
    path = media.stored_path() if media.kind in MEDIA_KINDS else None
    if path is None:
        raise SampleNotFound(f"{media.version.where(media.shard, media.row)} field {media.field!r} holds no stored bytes")
    if media.version.manifest.media_files is not None:  # checked bytes, tagged by their registered content
        checked = media.stored_bytes(path)
        return ranged(request, size=len(checked), read=lambda o, n: checked[o : o + n], tag=content_tag(checked), filename=filename)
    found = storage.stat(path)
    if not found.exists:
        raise SampleNotFound(f"{media.where}: the stored file {path} does not exist")
    mtime = os.stat(path).st_mtime_ns if not storage.is_remote(path) else 0
    tag = etag("file", media.version.id, media.key, media.field, path, found.size, mtime)
    return ranged(request, size=found.size, read=lambda o, n: storage.read_range(path, o, n), tag=tag, filename=filename)


@router.get(
    "/media/datasets/{name}/versions/{version}/samples/{key:path}",
    summary="A field's whole value (stored bytes, UTF-8 text or JSON, with Range), a thumbnail or a frame",
    **bytes_answer(
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "video/mp4",
        "video/quicktime",
        "video/webm",
        "audio/wav",
        "audio/flac",
        "audio/mpeg",
        "audio/ogg",
        "application/octet-stream",
        description="The stored bytes (a Range of them: 206), a thumbnail, a frame or a boxed image, typed by their content",
    ),
)
def field_bytes(
    request: Request,
    version: VersionDep,
    key: KeyDep,
    cache: MediaDep,
    budget: BudgetDep,
    field: FieldParam,
    thumb: Annotated[
        int | None,
        Query(
            description="Longest side of a thumbnail (16-4096, made at the next of 64, 128, 160, 256, 512, 1024, 2048); of a video, its first frame."
        ),
    ] = None,
    frame: Annotated[int | None, Query(ge=0, description="Frame index of a video: that frame as JPEG.")] = None,
    box: Annotated[str | None, Query(max_length=100, description="left,top,right,bottom: the image with this box outlined.")] = None,
) -> Response:
    if thumb is None and frame is None and box is None:
        if version.kinds.get(field) not in MEDIA_KINDS:  # a text, a list, a struct, plain bytes: straight from Arrow
            return whole_value(request, version, key, field, budget, filename=_filename(key, field))
        return _original(request, load_field(version, key, field))
    if thumb is not None:
        thumb = check_side(thumb)  # one of the fixed sizes, so the cache and the ETag are shared by every value near it
    tag = etag("made", version.id, key, field, thumb, frame, box)
    cached = not_modified(request, tag)
    if cached is not None:
        return cached
    media = load_field(version, key, field)
    if box is not None:
        rectangle = parse_box(box)
        return immutable(request, tag, lambda: boxed_image(cache, budget, media, rectangle, size=thumb))
    if frame is not None:
        return immutable(request, tag, lambda: frame_image(cache, budget, media, frame, size=thumb))
    assert thumb is not None
    return immutable(request, tag, lambda: thumbnail_image(cache, budget, media, thumb))


@page(
    router, "/view/datasets/{name}/versions/{version}/samples/{key:path}", summary="One image or video field, at a frame", model=MediaPage
)
def media_view(
    request: Request,
    version: VersionDep,
    key: KeyDep,
    catalog: CatalogDep,
    cache: MediaDep,
    budget: BudgetDep,
    field: FieldParam,
    frame: Annotated[int | None, Query(ge=0, description="Open a video on this frame.")] = None,
    t: Annotated[float | None, Query(ge=0, description="Open a video on the frame shown at this many seconds.")] = None,
) -> Response:
    data = media_page(catalog, cache, budget, version, key, field, frame=frame, t=t, page=not wants_fragment(request))
    return respond(request, data, template="video.html" if data.kind == "video" else "image.html", block="media")

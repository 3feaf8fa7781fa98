"""Media of a sample's field, addressed by version id so every answer is immutable: stored bytes, thumbnails, frames.

``/media/datasets/{name}/versions/{version}/samples/{key}?field=`` sends the
stored bytes (with ``Range``), and with ``thumb=``/``frame=``/``box=`` what
the inspector makes of them; ``/view/...`` (same address) is the page that
shows one image or video field, opened on ``?frame=N`` or ``?t=seconds``.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Annotated, Any, Callable, Iterator

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse

from loaders import storage
from loaders.errors import SampleNotFound
from loaders.kinds import MEDIA_KINDS
from loaders.media import media_type

from .. import urls
from ..decode_budget import DecodeBudget, decode_budget_dependency
from ..deps import CatalogDep
from ..errors import ERROR_RESPONSES, error_response
from ..media_cache import MediaCache, etag, media_cache_dependency
from ..pages.media import (
    MediaField,
    boxed_image,
    frame_image,
    load_field,
    media_page,
    check_side,
    parse_box,
    thumbnail_image,
)
from ..responses import respond, wants_fragment
from ..routing import page
from .datasets import resolve

router = APIRouter(tags=["media"], responses=ERROR_RESPONSES)

IMMUTABLE = "public, max-age=31536000, immutable"
MediaDep = Annotated[MediaCache, Depends(media_cache_dependency)]
BudgetDep = Annotated[DecodeBudget, Depends(decode_budget_dependency)]
KeyParam = Annotated[str | None, Query(alias="key", description="The key, for keys that cannot be a path segment.")]
FieldParam = Annotated[str, Query(max_length=1000, description="The column whose media to send.")]
_CHUNK = 1 << 20


def stored_bytes(value: Any) -> bytes | None:
    """The bytes a binary/image/video value holds inline (``bytes`` or the ``{bytes, path}`` struct); never a path."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)):
        return bytes(value["bytes"])
    return None


def _filename(key: str, field: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{key}-{field}")[:120] + ".bin"


#: Audio signatures: (offset, bytes) → type.
_AUDIO_SIGNATURES = (
    (8, b"WAVE", "audio/wav"),
    (0, b"fLaC", "audio/flac"),
    (0, b"OggS", "audio/ogg"),
    (0, b"ID3", "audio/mpeg"),
    (0, b"\xff\xfb", "audio/mpeg"),
    (0, b"\xff\xf3", "audio/mpeg"),
    (8, b"M4A ", "audio/mp4"),
)


def content_type(head: bytes) -> str:
    """The type browsers may show inline, from the first bytes: PNG/JPEG/GIF/WebP, MP4/QuickTime, WebM, WAV/FLAC/Ogg/MP3/M4A.

    SVG (which can carry scripts) and every unknown type are ``application/octet-stream``.

    >>> content_type(b"\\x1aE\\xdf\\xa3" + b"\\x00" * 20 + b"webm"), content_type(b"<svg")
    ('video/webm', 'application/octet-stream')
    """
    found = media_type(head)
    if found != "application/octet-stream":
        return found
    for offset, signature, audio in _AUDIO_SIGNATURES:
        if head[offset : offset + len(signature)] == signature:
            return audio
    if head[4:8] == b"ftyp":
        return "video/quicktime" if head[8:12] == b"qt  " else "video/mp4"
    if head.startswith(b"\x1aE\xdf\xa3") and b"webm" in head[:64]:
        return "video/webm"
    return "application/octet-stream"


def if_none_match(request: Request, tag: str) -> bool:
    """True when the request's ``If-None-Match`` names ``tag`` (weak comparison, as RFC 9110 asks) or is ``*``."""
    header = request.headers.get("if-none-match")
    if not header:
        return False
    given = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in given or tag.removeprefix("W/") in given


def immutable(request: Request, tag: str, make: Callable[[], bytes]) -> Response:
    """``304`` when the client has ``tag``, else ``make()`` with its type, cacheable forever."""
    headers = {"ETag": tag, "Cache-Control": IMMUTABLE}
    if if_none_match(request, tag):
        return Response(status_code=304, headers=headers)
    body = make()
    return Response(body, media_type=content_type(body[:64]), headers=headers)


def byte_range(header: str | None, size: int) -> tuple[int, int] | None | str:
    """The ``(start, end)`` (inclusive) a ``Range`` header asks for; ``None`` for the whole file; ``"unsatisfiable"``.

    Only single ``bytes=`` ranges are honoured; anything else is answered with the whole file.

    >>> byte_range("bytes=0-9", 100), byte_range("bytes=-10", 100), byte_range("bytes=100-", 100)
    ((0, 9), (90, 99), 'unsatisfiable')
    """
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[6:].strip().partition("-")
    try:
        if first == "":
            suffix = int(last)
            if suffix <= 0:
                return "unsatisfiable"
            return (max(0, size - suffix), size - 1) if size else "unsatisfiable"
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size:
        return "unsatisfiable"
    if start < 0 or end < start:
        return None
    return start, min(end, size - 1)


def ranged(request: Request, *, size: int, read: Callable[[int, int], bytes], tag: str, filename: str) -> Response:
    """The stored bytes, honouring ``Range`` (206, or 416 past the end) and ``If-None-Match`` (304)."""
    headers = {"ETag": tag, "Cache-Control": IMMUTABLE, "Accept-Ranges": "bytes"}
    if if_none_match(request, tag):
        return Response(status_code=304, headers=headers)
    head = read(0, min(size, 64))
    media = content_type(head)
    if media == "application/octet-stream":
        headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    if_range = request.headers.get("if-range")
    wanted = byte_range(request.headers.get("range"), size) if not if_range or if_range == tag else None
    if wanted == "unsatisfiable":
        return error_response(
            request, f"range {request.headers.get('range')} is outside the {size:,} bytes stored", 416, {"Content-Range": f"bytes */{size}"}
        )
    start, end, status = 0, size - 1, 200
    if isinstance(wanted, tuple):
        start, end, status = wanted[0], wanted[1], 206
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    headers["Content-Length"] = str(end - start + 1)

    def chunks() -> Iterator[bytes]:
        offset = start
        while offset <= end:
            length = min(_CHUNK, end + 1 - offset)
            yield read(offset, length)
            offset += length

    if end - start + 1 <= _CHUNK:
        return Response(read(start, end - start + 1) if size else b"", status_code=status, media_type=media, headers=headers)
    return StreamingResponse(chunks(), status_code=status, media_type=media, headers=headers)


def _original(request: Request, media: MediaField) -> Response:
    data = stored_bytes(media.value)
    filename = _filename(media.key, media.field)
    if data is not None:
        tag = '"' + hashlib.sha256(data).hexdigest()[:40] + '"'
        return ranged(request, size=len(data), read=lambda o, n: data[o : o + n], tag=tag, filename=filename)
    path = media.stored_path() if media.kind in MEDIA_KINDS else None
    if path is None:
        raise SampleNotFound(f"{media.version.where(media.shard, media.row)} field {media.field!r} holds no stored bytes")
    if media.version.manifest.media_files is not None:  # checked bytes, tagged by their registered content
        checked = media.stored_bytes(path)
        tag = '"' + hashlib.sha256(checked).hexdigest()[:40] + '"'
        return ranged(request, size=len(checked), read=lambda o, n: checked[o : o + n], tag=tag, filename=filename)
    found = storage.stat(path)
    if not found.exists:
        raise SampleNotFound(f"{media.where}: the stored file {path} does not exist")
    mtime = os.stat(path).st_mtime_ns if not storage.is_remote(path) else 0
    tag = etag("file", media.version.id, media.key, media.field, path, found.size, mtime)
    return ranged(request, size=found.size, read=lambda o, n: storage.read_range(path, o, n), tag=tag, filename=filename)


@router.get("/media/datasets/{name}/versions/{version}/samples/{key:path}", summary="A field's stored bytes, a thumbnail or a frame")
def field_bytes(
    request: Request,
    name: str,
    version: str,
    key: str,
    catalog: CatalogDep,
    cache: MediaDep,
    budget: BudgetDep,
    field: FieldParam,
    key_param: KeyParam = None,
    thumb: Annotated[
        int | None,
        Query(description="Longest side of a thumbnail (16-4096, made at the next of 64, 128, 160, 256, 512, 1024, 2048); of a video, its first frame."),
    ] = None,
    frame: Annotated[int | None, Query(ge=0, description="Frame index of a video: that frame as JPEG.")] = None,
    box: Annotated[str | None, Query(max_length=100, description="left,top,right,bottom: the image with this box outlined.")] = None,
) -> Response:
    if key == "" and key_param is not None:
        key = key_param
    found = resolve(request, catalog, name, version, lambda v: urls.media(name, v, key, field))
    if isinstance(found, Response):
        return found
    if thumb is None and frame is None and box is None:
        return _original(request, load_field(found, key, field))
    if thumb is not None:
        thumb = check_side(thumb)  # one of the fixed sizes, so the cache and the ETag are shared by every value near it
    tag = etag("made", found.id, key, field, thumb, frame, box)
    if if_none_match(request, tag):
        return Response(status_code=304, headers={"ETag": tag, "Cache-Control": IMMUTABLE})
    media = load_field(found, key, field)
    if box is not None:
        rectangle = parse_box(box)
        return immutable(request, tag, lambda: boxed_image(cache, budget, media, rectangle, size=thumb))
    if frame is not None:
        return immutable(request, tag, lambda: frame_image(cache, budget, media, frame, size=thumb))
    assert thumb is not None
    return immutable(request, tag, lambda: thumbnail_image(cache, budget, media, thumb))


@page(router, "/view/datasets/{name}/versions/{version}/samples/{key:path}", summary="One image or video field, at a frame")
def media_view(
    request: Request,
    name: str,
    version: str,
    key: str,
    catalog: CatalogDep,
    cache: MediaDep,
    budget: BudgetDep,
    field: FieldParam,
    key_param: KeyParam = None,
    frame: Annotated[int | None, Query(ge=0, description="Open a video on this frame.")] = None,
    t: Annotated[float | None, Query(ge=0, description="Open a video on the frame shown at this many seconds.")] = None,
) -> Response:
    if key == "" and key_param is not None:
        key = key_param
    found = resolve(request, catalog, name, version, lambda v: urls.media_view(name, v, key, field))
    if isinstance(found, Response):
        return found
    data = media_page(catalog, cache, budget, found, key, field, frame=frame, t=t, page=not wants_fragment(request))
    return respond(request, data, template="video.html" if data.kind == "video" else "image.html", block="media")

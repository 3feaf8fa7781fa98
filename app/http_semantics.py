"""HTTP for addresses that never change: versions named by id, immutable caching, ``If-None-Match`` and byte ``Range``s.

A tag or id prefix in a dataset URL answers ``307`` to the same URL with the
full version id (``VersionDep``), so what a link shows can never move.
Answers under such a URL are cacheable forever (``IMMUTABLE``), revalidated
by ``If-None-Match`` (``not_modified``), and stored bytes honour ``Range``
(``ranged``) so a browser can seek in a clip.

>>> if_none_match('W/"a", "b"', '"a"'), byte_range("bytes=-10", 100)
(True, (90, 99))
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Callable, Iterator, Literal

from fastapi import Depends, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from loaders import DatasetVersion
from loaders.catalog.store import check_name
from loaders.media import media_type

from . import urls
from .deps import CatalogDep
from .errors import error_response
from .responses import VARY
from .routing import canonical

#: ``Cache-Control`` of an answer whose URL names immutable content.
IMMUTABLE = "public, max-age=31536000, immutable"
#: Stored bytes are sent in chunks of this size when they do not fit one.
CHUNK = 1 << 20


# -- validators -----------------------------------------------------------------------
def etag(*parts: Any) -> str:
    """A strong ETag naming immutable content by its address.

    >>> etag("thumb", "0123abcd", "img-1", "image", 256)[:3]
    '"m-'
    """
    text = json.dumps(parts, separators=(",", ":"), default=str)
    return '"m-' + hashlib.sha256(text.encode()).hexdigest()[:40] + '"'


def content_tag(data: bytes | memoryview) -> str:
    """A strong ETag naming ``data`` by its content.

    >>> content_tag(b"abc")
    '"ba7816bf8f01cfea414140de5dae2223b00361a3"'
    """
    return '"' + hashlib.sha256(data).hexdigest()[:40] + '"'


#: One element of an ``If-None-Match`` list: an optionally weak entity tag (RFC 9110 §8.8.3), commas allowed inside the quotes.
_ENTITY_TAG = re.compile(r'\s*(?:W/)?("[\x21\x23-\x7e\x80-\xff]*")\s*(?:,|$)')


def entity_tags(header: str) -> list[str] | Literal["*"]:
    """The opaque tags an ``If-None-Match`` value lists (``W/`` dropped), or ``"*"``; a malformed rest is ignored.

    >>> entity_tags('"a", W/"b,c" ,, "d"'), entity_tags(" * ")
    (['"a"', '"b,c"', '"d"'], '*')
    """
    if header.strip() == "*":
        return "*"
    tags, at = [], 0
    while at < len(header):
        if header[at] in " \t,":  # list syntax allows empty elements and whitespace around them
            at += 1
            continue
        match = _ENTITY_TAG.match(header, at)
        if match is None:
            break
        tags.append(match.group(1))
        at = match.end()
    return tags


def if_none_match(header: str | None, tag: str) -> bool:
    """True when an ``If-None-Match`` value names ``tag`` by weak comparison (RFC 9110 §13.1.2), or is ``*``.

    >>> if_none_match('"x", W/"y"', 'W/"y"'), if_none_match('"x"', '"y"'), if_none_match(None, '"y"')
    (True, False, False)
    """
    if not header:
        return False
    listed = entity_tags(header)
    return listed == "*" or tag.removeprefix("W/") in listed


def not_modified(request: Request, tag: str) -> Response | None:
    """``304`` with the validators when the client already holds ``tag``, else ``None``."""
    if if_none_match(request.headers.get("if-none-match"), tag):
        return Response(status_code=304, headers={"ETag": tag, "Cache-Control": IMMUTABLE})
    return None


# -- what is sent ---------------------------------------------------------------------
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


def _download(headers: dict[str, str], media: str, filename: str | None) -> None:
    """Bytes of no type a browser may show, and a field's whole text or JSON, are sent as a download named ``filename``."""
    if (media == "application/octet-stream" or media.startswith(("text/plain", "application/json"))) and filename is not None:
        headers["Content-Disposition"] = f'attachment; filename="{filename}"'


def immutable(
    request: Request,
    tag: str,
    make: Callable[[], bytes],
    *,
    sniff: Callable[[bytes], str] = content_type,
    filename: str | None = None,
) -> Response:
    """``304`` when the client has ``tag``, else ``make()`` typed by ``sniff`` (a download when untyped), cacheable forever."""
    cached = not_modified(request, tag)
    if cached is not None:
        return cached
    body = make()
    media = sniff(body[:64])
    headers = {"ETag": tag, "Cache-Control": IMMUTABLE}
    _download(headers, media, filename)
    return Response(body, media_type=media, headers=headers)


# -- byte ranges ----------------------------------------------------------------------
_RANGE_SPEC = re.compile(r"([0-9]*)-([0-9]*)")


def byte_range(header: str | None, size: int) -> tuple[int, int] | None | Literal["unsatisfiable"]:
    """The ``(first, last)`` byte (inclusive) a ``Range`` header asks of ``size`` bytes (RFC 9110 §14.1.2).

    ``None`` means "send the whole": no header, another unit, a malformed
    header (ignored, as the RFC asks) or several ranges (which a server may
    ignore; browsers ask for one). ``"unsatisfiable"`` (answered ``416``): the
    range starts at or past the end, or is an empty suffix.

    >>> byte_range("bytes=0-9", 100), byte_range("bytes=-10", 100), byte_range("bytes=90-200", 100)
    ((0, 9), (90, 99), (90, 99))
    >>> byte_range("bytes=100-", 100), byte_range("bytes=0-1,5-6", 100), byte_range("items=0-1", 100)
    ('unsatisfiable', None, None)
    """
    if not header:
        return None
    unit, equals, specs = header.partition("=")
    if not equals or unit.strip().lower() != "bytes":
        return None
    ranges = [spec.strip() for spec in specs.split(",") if spec.strip()]
    parsed = [_RANGE_SPEC.fullmatch(spec) for spec in ranges]
    if len(ranges) != 1 or parsed[0] is None:
        return None
    first, last = parsed[0].groups()
    if first == "":
        if last == "":
            return None
        suffix = int(last)
        return (max(0, size - suffix), size - 1) if suffix and size else "unsatisfiable"
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)


def ranged(
    request: Request, *, size: int, read: Callable[[int, int], bytes], tag: str, filename: str, media: str | None = None
) -> Response:
    """``size`` stored bytes read by ``read(offset, length)``, honouring ``Range`` (206, or 416 past the end) and ``If-None-Match`` (304).

    ``media`` is their type when the caller knows it (a text, JSON); else it is read from the first bytes.

    A ``Range`` applies when ``If-Range`` is absent or names ``tag`` exactly (a strong comparison); else the whole is sent.
    """
    cached = not_modified(request, tag)
    if cached is not None:
        cached.headers["Accept-Ranges"] = "bytes"
        return cached
    headers = {"ETag": tag, "Cache-Control": IMMUTABLE, "Accept-Ranges": "bytes"}
    media = media or content_type(read(0, min(size, 64)))
    _download(headers, media, filename)
    if_range = request.headers.get("if-range")
    wanted = byte_range(request.headers.get("range"), size) if not if_range or if_range == tag else None
    if wanted == "unsatisfiable":
        return error_response(
            request, f"range {request.headers.get('range')} is outside the {size:,} bytes stored", 416, {"Content-Range": f"bytes */{size}"}
        )
    start, end, status = 0, size - 1, 200
    if wanted is not None:
        start, end, status = wanted[0], wanted[1], 206
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    headers["Content-Length"] = str(end - start + 1)

    def chunks() -> Iterator[bytes]:
        offset = start
        while offset <= end:
            length = min(CHUNK, end + 1 - offset)
            yield read(offset, length)
            offset += length

    if end - start + 1 <= CHUNK:
        return Response(read(start, end - start + 1) if size else b"", status_code=status, media_type=media, headers=headers)
    return StreamingResponse(chunks(), status_code=status, media_type=media, headers=headers)


# -- addresses ------------------------------------------------------------------------
class Moved(StarletteHTTPException):
    """Raised where a response cannot be returned (a dependency): ``307`` to ``url``, the same request at its canonical address."""

    def __init__(self, url: str) -> None:
        super().__init__(307, headers={"Location": url, **VARY})


def same_request_at(request: Request, url: str) -> Moved:
    """:class:`Moved` to ``url``'s path (under ``/api`` when the request was), the request's query kept."""
    return Moved(canonical(request, url.split("?")[0]))


def version_ref(request: Request, catalog: CatalogDep, name: str, version: str) -> DatasetVersion:
    """The version ``{version}`` of dataset ``{name}`` names (a tag, an id prefix or the id).

    Anything but the full id answers ``307`` to the same URL with the id, so a copied link keeps showing the same bytes.
    """
    check_name("dataset", name)
    found = catalog.resolve(f"{name}@{version}")
    if version != found.id:
        path = urls.route_path(request.scope["route"].path, {**request.path_params, "version": found.id})  # under /api when asked there
        query = request.url.query
        raise Moved(f"{path}?{query}" if query else path)
    return found


def sample_key(
    key: str,
    key_param: Annotated[
        str | None, Query(alias="key", max_length=100_000, description="The key, for keys that cannot be a path segment.")
    ] = None,
) -> str:
    """The ``{key}`` path segment, or ``?key=`` when the segment is empty (keys that cannot be a path segment, see ``app.urls``)."""
    return key_param if key == "" and key_param is not None else key


VersionDep = Annotated[DatasetVersion, Depends(version_ref)]
KeyDep = Annotated[str, Depends(sample_key)]

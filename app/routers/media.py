"""Stored bytes of a sample's field, addressed by version id, so the response is immutable and cacheable forever."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from loaders.errors import SampleNotFound

from .. import urls
from ..deps import CatalogDep
from ..errors import ERROR_RESPONSES
from .datasets import resolve

router = APIRouter(tags=["media"], responses=ERROR_RESPONSES)

IMMUTABLE = "public, max-age=31536000, immutable"


def stored_bytes(value: Any) -> bytes | None:
    """The bytes a binary/image/video value holds inline (``bytes`` or the ``{bytes, path}`` struct); never a path."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)):
        return bytes(value["bytes"])
    return None


def _filename(key: str, field: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{key}-{field}")[:120] + ".bin"


@router.get("/media/datasets/{name}/versions/{version}/samples/{key:path}", summary="A field's stored bytes")
def field_bytes(
    request: Request,
    name: str,
    version: str,
    key: str,
    catalog: CatalogDep,
    field: Annotated[str, Query(max_length=1000, description="The column whose bytes to send.")],
    key_param: Annotated[str | None, Query(alias="key", description="The key, for keys that cannot be a path segment.")] = None,
) -> Response:
    if key == "" and key_param is not None:
        key = key_param
    found = resolve(request, catalog, name, version, lambda v: urls.media(name, v, key, field))
    if isinstance(found, Response):
        return found
    if field not in found.schema.names:
        raise SampleNotFound(f"{found.ref} has no column {field!r} (columns: {', '.join(found.schema.names)})")
    shard, row = found.find(key)
    data = stored_bytes(found.read(shard, [row])[0].get(field))
    if data is None:
        raise SampleNotFound(f"{found.where(shard, row)} field {field!r} holds no stored bytes")
    etag = '"' + hashlib.sha256(data).hexdigest()[:40] + '"'
    headers = {"ETag": etag, "Cache-Control": IMMUTABLE}
    if etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
        return Response(status_code=304, headers=headers)
    headers["Content-Disposition"] = f'attachment; filename="{_filename(key, field)}"'
    return Response(data, media_type="application/octet-stream", headers=headers)

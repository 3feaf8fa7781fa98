"""Media stored by path beside a shard: checksummed at registration, verified on every read like shard bytes.

Image, video and audio cells may name a file (Hugging Face ``{"bytes": None,
"path": ...}`` structs, or a video path string) instead of holding bytes. Registration
hashes every such file it can resolve inside its shard's directory and stores
the table ``{uri: [size, sha256]}`` as ``datasets/{name}/media/{digest}.json``;
the manifest records its digest and file count (so the version id covers the
media too). :func:`read_media` returns a file's bytes only when they match.

Versions registered before media were checksummed have no table: their files
are read as before (nothing was recorded to check them against).
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa

from .. import storage
from ..errors import CatalogCorrupt, DecodeError, MediaChanged
from .files import read_json
from .kinds import CHECKSUMMED_KINDS

if TYPE_CHECKING:
    from .version import DatasetVersion


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def stored_path(value: Any, kind: str) -> str | None:
    """The path a media cell names when its bytes are stored in a file (None for inline bytes or no path)."""
    if isinstance(value, dict) and value.get("bytes") is None and isinstance(value.get("path"), str) and value["path"]:
        return value["path"]
    if kind == "video" and isinstance(value, str) and value:
        return value
    return None


def _media_columns(version: "DatasetVersion") -> list[str]:
    columns = []
    for field in version.schema:
        kind = version.kinds.get(field.name)
        by_path = pa.types.is_struct(field.type) and field.type.get_field_index("path") >= 0
        if kind in CHECKSUMMED_KINDS and (by_path or (kind == "video" and pa.types.is_string(field.type))):
            columns.append(field.name)
    return columns


def _paths(version: "DatasetVersion") -> Iterator[tuple[str, str]]:
    """``(resolved uri, where)`` of every by-path media cell that resolves inside its shard's directory."""
    columns = _media_columns(version)
    if not columns:
        return
    from ..media.image import resolve_media_path  # only now: the media stack is slow to import

    for shard, first, table in version.scan_tables(columns):
        uri = version.shards[shard].uri
        for column in columns:
            kind = version.kinds[column]
            for offset, value in enumerate(table.column(column).to_pylist()):
                path = stored_path(value, kind)
                if path is None:
                    continue
                where = f"{version.where(shard, first + offset)} column {column}"
                try:
                    yield resolve_media_path(path, shard_uri=uri, where=where), where
                except DecodeError:
                    continue  # refused on every read as well: a path leaving the shard's directory is never read


def scan_media(version: "DatasetVersion") -> dict[str, list[Any]] | None:
    """``{uri: [size, sha256]}`` of the media files a version names (None when it stores no media by path).

    A named file that is missing or unreadable is recorded as ``[None, None]``:
    reading it later is an error even if a file appears there.
    """
    table: dict[str, list[Any]] = {}
    for uri, _where in _paths(version):
        if uri in table:
            continue
        try:
            data = storage.read_bytes(uri)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            table[uri] = [None, None]
            continue
        table[uri] = [len(data), _digest(data)]
    return table or None


def encode_table(table: dict[str, list[Any]]) -> bytes:
    """The stored form of a media table (canonical JSON, so its digest is stable)."""
    return json.dumps(table, sort_keys=True, separators=(",", ":")).encode()


def table_path(root: str, name: str, digest: str) -> str:
    """Where a version's media table is stored in the catalog."""
    return storage.join(root, "datasets", name, "media", f"{digest}.json")


@functools.lru_cache(maxsize=64)
def _load_table(path: str, digest: str) -> dict[str, list[Any]]:
    raw = storage.read_bytes(path)
    if _digest(raw) != digest:
        raise CatalogCorrupt(f"{path}: media checksum table does not match its digest {digest} (edited after registration)")
    data = read_json(path, "media checksum table")
    if not isinstance(data, dict):
        raise CatalogCorrupt(f"{path}: media checksum table must be a JSON object")
    return data


def read_media(version: "DatasetVersion", uri: str, *, where: str) -> bytes:
    """The bytes of a media file stored by path, checked against what registration recorded.

    Raises MediaChanged (naming the file and the field) when the file changed,
    vanished, or was not there at registration.
    """
    media = version.manifest.media_files
    size, digest = None, None
    if media is not None:
        table = _load_table(table_path(version.root, version.name, media["digest"]), media["digest"])
        size, digest = table.get(uri, [None, None])
    try:
        data = storage.read_bytes(uri)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        if digest is None:  # missing now and (as far as anyone recorded) at registration: the value is just broken
            raise DecodeError(f"{where}: cannot read media file {uri}: {exc.strerror or exc}") from exc
        raise MediaChanged(f"{where}: media file {uri} is missing (it was registered with {version.ref})") from exc
    if media is None:
        return data  # registered before media were checksummed: nothing to check against
    if digest is None:
        raise MediaChanged(f"{where}: media file {uri} was not present when {version.ref} was registered; it is not served")
    if len(data) != size or _digest(data) != digest:
        raise MediaChanged(
            f"{where}: media file {uri} changed after registration ({len(data):,} bytes, registered {size:,}); it is not served"
        )
    return data

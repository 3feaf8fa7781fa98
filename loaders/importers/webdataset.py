"""Import WebDataset ``.tar`` shards: consecutive members sharing a key become one row.

As in WebDataset, a member's key is its path up to the first dot of its file
name and the rest is its extension (``train/0001.seg.json`` → key
``train/0001``, column ``seg_json``). The extension picks the column type:
text, JSON text, integer class, image, video or audio struct, else raw bytes.
"""

from __future__ import annotations

import base64
import json
import os
import tarfile
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import pyarrow as pa

from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import RegistrationError
from .resume import Position
from .writer import CountingReader, Progress, input_files, staged_import

if TYPE_CHECKING:
    from ..engine import Engine

SUFFIXES = (".tar", ".tar.gz", ".tgz")
MEDIA = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
TEXT_EXTENSIONS = frozenset({"txt", "text"})
JSON_EXTENSIONS = frozenset({"json", "jsn"})
INT_EXTENSIONS = frozenset({"cls", "cls2", "index"})
IMAGE_EXTENSIONS = frozenset({"jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff", "ppm", "pgm"})
VIDEO_EXTENSIONS = frozenset({"mp4", "webm", "mkv", "mov", "avi"})
AUDIO_EXTENSIONS = frozenset({"wav", "flac", "mp3", "ogg", "opus", "m4a"})
#: Samples per batch handed to the shard writer, and at most about this many bytes.
_BATCH = 64
_BATCH_BYTES = 16 << 20


def split_name(member: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member path, or None when its file name has no extension.

    >>> split_name("train/0001.seg.json")
    ('train/0001', 'seg.json')
    """
    folder, _, base = member.rpartition("/")
    stem, dot, extension = base.partition(".")
    if not dot or not stem or not extension:
        return None
    return (f"{folder}/{stem}" if folder else stem), extension.lower()


def column_of(extension: str) -> tuple[str, pa.DataType, str]:
    """``(column name, Arrow type, field kind)`` for a member extension."""
    last = extension.rsplit(".", 1)[-1]
    column = extension.replace(".", "_")
    if last in TEXT_EXTENSIONS:
        return column, pa.string(), "text"
    if last in JSON_EXTENSIONS:
        return column, pa.string(), "json"
    if last in INT_EXTENSIONS:
        return column, pa.int64(), "scalar"
    if last in IMAGE_EXTENSIONS:
        return column, MEDIA, "image"
    if last in VIDEO_EXTENSIONS:
        return column, MEDIA, "video"
    if last in AUDIO_EXTENSIONS:
        return column, MEDIA, "audio"
    return column, pa.binary(), "binary"


def _members(path: str, *, read: bool, raw: CountingReader | None = None) -> Iterator[tuple[tarfile.TarInfo, bytes | None]]:
    """Regular-file members of a tar in order, streaming (the member list is not kept)."""
    try:
        with tarfile.open(fileobj=raw, mode="r|*") if raw is not None else tarfile.open(path, mode="r:*") as tar:
            while True:
                member = tar.next()
                if member is None:
                    return
                tar.members = []  # tarfile keeps every header it has seen; drop them as we go
                if not member.isfile() or split_name(member.name) is None:
                    continue
                data = None
                if read:
                    handle = tar.extractfile(member)
                    data = handle.read() if handle is not None else b""
                yield member, data
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise RegistrationError(f"{path}: not a readable tar archive ({exc})") from exc


def _schema(files: list[str]) -> tuple[pa.Schema, dict[str, str], dict[str, str]]:
    """First pass over member names: the columns (sorted by name) and each extension's column."""
    columns: dict[str, tuple[pa.DataType, str]] = {}
    by_extension: dict[str, str] = {}
    for path in files:
        for member, _ in _members(path, read=False):
            _, extension = split_name(member.name)  # type: ignore[misc]
            if extension in by_extension:
                continue
            column, type_, kind = column_of(extension)
            if column == "id" or (column in columns and columns[column][0] != type_):
                raise RegistrationError(
                    f"{path}: member {member.name} gives column {column!r}, which another extension (or the key) already uses"
                )
            columns[column] = (type_, kind)
            by_extension[extension] = column
    if not columns:
        raise RegistrationError(f"no samples found in {', '.join(files)} (no member has a key.extension name)")
    fields = [pa.field("id", pa.string())] + [pa.field(name, columns[name][0]) for name in sorted(columns)]
    return pa.schema(fields), by_extension, {name: kind for name, (_, kind) in columns.items()}


def _value(extension: str, data: bytes, member: str, where: str) -> Any:
    """The column value of one member's bytes."""
    _, type_, kind = column_of(extension)
    if type_ == MEDIA:
        return {"bytes": data, "path": member}
    if type_ == pa.binary():
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RegistrationError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if type_ == pa.int64():
        try:
            return int(text.strip())
        except ValueError as exc:
            raise RegistrationError(f"{where}: expected an integer class, got {text[:40]!r}") from exc
    if kind == "json":
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise RegistrationError(f"{where}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    return text


def _samples(path: str, by_extension: dict[str, str], raw: CountingReader) -> Iterator[tuple[dict[str, Any], str]]:
    """``(row, where)`` per sample; members of one sample must be consecutive, as WebDataset writes them."""
    row: dict[str, Any] | None = None
    first = ""
    for member, data in _members(path, read=True, raw=raw):
        key, extension = split_name(member.name)  # type: ignore[misc]
        where = f"{path}: member {member.name}"
        if row is None or row["id"] != key:
            if row is not None:
                yield row, first
            row, first = {"id": key}, where
        column = by_extension[extension]
        if column in row:
            raise RegistrationError(f"{where}: sample {key!r} already has a {column!r} member")
        row[column] = _value(extension, data or b"", member.name, where)
    if row is not None:
        yield row, first


def import_webdataset(
    catalog: CatalogStore,
    name: str,
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    tag: str | None = None,
    key: str | None = "id",
    rows_per_shard: int | None = None,
    row_group_size: int | None = None,
    kinds: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    engine: "str | Engine | None" = None,
) -> DatasetVersion:
    """Import WebDataset tar shards (or directories of them) as a new version of ``name``.

    Columns: ``id`` (the sample key) and one per member extension, sorted by
    name: ``.txt`` → text, ``.json`` → JSON text, ``.cls`` → int64,
    ``.jpg/.png/.webp/...`` → image ``{bytes, path}``, ``.mp4/.webm/...`` →
    video ``{bytes, path}``, ``.wav/.flac/.mp3/...`` → audio ``{bytes, path}``, anything else → binary. A sample without some
    extension has null there. Keys must be unique across all shards.

    >>> import_webdataset(catalog, "laion-mini", "shards/", tag="v1").schema.names  # doctest: +SKIP
    ['id', 'cls', 'jpg', 'json', 'txt']
    """
    files = input_files(source, suffixes=SUFFIXES, what="WebDataset tar")
    total = sum(os.path.getsize(f) for f in files)
    shape = {"key": key, "rows_per_shard": rows_per_shard, "row_group_size": row_group_size}
    with staged_import(catalog, name, "webdataset", engine=engine, inputs=files, options=shape) as staging:
        resumed = staging.resume
        if resumed is not None and "schema" in resumed.state:  # interrupted after its first shard: the columns are known
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(resumed.state["schema"])))
            by_extension, column_kinds = resumed.state["by_extension"], resumed.state["kinds"]
        else:
            schema, by_extension, column_kinds = _schema(files)
        state = {
            "schema": base64.b64encode(schema.serialize().to_pybytes()).decode(),
            "by_extension": by_extension,
            "kinds": column_kinds,
        }
        writer = staging.writer(schema, rows_per_shard=rows_per_shard, row_group_size=row_group_size, key=key, state=state)
        start = resumed.position if resumed is not None else Position()
        done = sum(os.path.getsize(f) for f in files[: start.file])
        for index, path in enumerate(files):
            if index < start.file:
                continue  # written before the import was interrupted: not read again
            with CountingReader(path) as raw:
                rows: list[dict[str, Any]] = []
                places: list[str] = []
                begin = raw.count
                sample = 0
                first = start.row if index == start.file else 0
                for row, where in _samples(path, by_extension, raw):
                    sample += 1
                    if sample <= first:
                        continue  # (the samples of this tar already in finished shards)
                    rows.append(row)
                    places.append(where)
                    if len(rows) == _BATCH or raw.count - begin >= _BATCH_BYTES:
                        writer.write(pa.Table.from_pylist(rows, schema=schema), where=places, at=(index, sample - len(rows)))
                        rows, places, begin = [], [], raw.count
                        if progress is not None:
                            progress(done + raw.count, total)
                if rows:
                    writer.write(pa.Table.from_pylist(rows, schema=schema), where=places, at=(index, sample - len(rows)))
            done += os.path.getsize(path)
            if progress is not None:
                progress(done, total)
        return staging.publish(source=", ".join(files), key=key, tag=tag, kinds={**column_kinds, **dict(kinds or {})})

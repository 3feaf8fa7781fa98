"""Derived tables in the catalog (indexes built from a version): stamped with what they were built from, rebuilt when
the stamp does not match.

Derived data can always be computed again from the verified read path, so a
derived table is trusted only when its Arrow schema metadata names the version
it was built from, its layout, its row count and a digest of its content, and
all of them match what the reader expects. A file of another version, from an
older layout (or from before stamps), torn or edited reads as absent, with the
reason, and its caller rebuilds it. Key indexes (``{id}.keys.parquet``) and the
RL indexes (``{id}.rollouts.*.arrow``, ``{id}.episodes.*.parquet``) are stamped
this way.

>>> table = stamp(pa.table({"key": ["a", "b"], "row": [0, 1]}), version_id="v-1", layout=2)
>>> problem(table, version_id="v-1", layout=2) is None
True
>>> problem(table, version_id="v-2", layout=2)
'it carries no or another version id'
>>> problem(table, version_id="v-1", layout=3)
'it has layout 2, this reader reads layout 3'
"""

from __future__ import annotations

import hashlib
import io
import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import files as storage

log = logging.getLogger(__name__)

#: Arrow schema metadata of a derived table.
VERSION = b"batchscope.version"
ROWS = b"batchscope.rows"
DIGEST = b"batchscope.digest"
LAYOUT = b"batchscope.layout"
#: The layout of a table stamped before layouts were recorded (the first key indexes).
FIRST_LAYOUT = 1


def _string_bytes(array: pa.Array) -> tuple[bytes, bytes]:
    """Offsets (rebased to 0) and character data of a string array, whatever its chunking or slicing."""
    large = array.cast(pa.large_binary() if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type) else pa.large_string())
    offsets = np.frombuffer(large.buffers()[1], dtype=np.int64)[large.offset : large.offset + len(large) + 1]
    data = large.buffers()[2]
    start, end = (int(offsets[0]), int(offsets[-1])) if len(offsets) else (0, 0)
    return (offsets - start).tobytes(), (data.to_pybytes()[start:end] if data is not None else b"")


def _column_bytes(array: pa.Array) -> list[bytes]:
    """What the digest hashes of one column: its nulls (when it has any), then its values (nulls as zero or empty)."""
    out = [np.asarray(array.is_null()).tobytes()] if array.null_count else []
    type_ = array.type
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        filled = array.fill_null(b"" if pa.types.is_binary(type_) or pa.types.is_large_binary(type_) else "") if array.null_count else array
        out.extend(_string_bytes(filled))
    elif pa.types.is_integer(type_) or pa.types.is_boolean(type_):
        out.append(np.asarray(array.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64).tobytes())
    elif pa.types.is_floating(type_):
        out.append(np.asarray(array.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64).tobytes())
    else:
        raise TypeError(f"a derived table holds flat columns of numbers and strings, not {type_}")
    return out


def table_digest(table: pa.Table) -> str:
    """A digest of a table's values, column by column, independent of chunking and of the integer and float widths."""
    h = hashlib.sha256()
    for column in table.columns:
        for part in _column_bytes(column.combine_chunks()):
            h.update(part)
    return h.hexdigest()[:32]


def metadata(table: pa.Table, *, version_id: str, layout: int = FIRST_LAYOUT) -> dict[bytes, bytes]:
    """What a derived table carries about itself: its version, layout, row count and content digest."""
    stamped = {VERSION: version_id.encode(), ROWS: str(len(table)).encode(), DIGEST: table_digest(table).encode()}
    if layout != FIRST_LAYOUT:
        stamped[LAYOUT] = str(layout).encode()
    return stamped


def stamp(table: pa.Table, *, version_id: str, layout: int = FIRST_LAYOUT) -> pa.Table:
    """``table`` with its stamp added to the metadata it already has."""
    return table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata(table, version_id=version_id, layout=layout)})


def problem(
    table: pa.Table,
    meta: dict[bytes, bytes] | None = None,
    *,
    version_id: str,
    layout: int = FIRST_LAYOUT,
    rows: int | None = None,
) -> str | None:
    """Why a stored derived table cannot be trusted for ``version_id`` (None when it matches); ``meta`` defaults to the
    table's own schema metadata, ``rows`` is the row count the version implies (when it implies one)."""
    meta = (table.schema.metadata if meta is None else meta) or {}
    if meta.get(VERSION) != version_id.encode():
        return "it carries no or another version id"
    stored = meta.get(LAYOUT, str(FIRST_LAYOUT).encode()).decode(errors="replace")
    if stored != str(layout):
        return f"it has layout {stored}, this reader reads layout {layout}"
    if meta.get(ROWS) != str(len(table)).encode():
        return f"it has {len(table)} rows, its stamp says {meta.get(ROWS, b'none').decode(errors='replace')}"
    if rows is not None and len(table) != rows:
        return f"it has {len(table)} rows, the version {rows}"
    try:
        digest = table_digest(table)
    except TypeError as exc:
        return str(exc)
    if meta.get(DIGEST) != digest.encode():
        return "its content does not match its digest"
    return None


def _decode(data: bytes, path: str) -> pa.Table:
    if path.endswith(".parquet"):  # ParquetFile, not read_table: that would import pyarrow.dataset (and pandas)
        return pq.ParquetFile(pa.BufferReader(data)).read()
    return pa.ipc.open_file(pa.py_buffer(data)).read_all()


def read_table(path: str, *, version_id: str, layout: int, rows: int | None = None, what: str = "derived table") -> pa.Table | None:
    """The table stored at ``path`` (Parquet by its suffix, else Arrow IPC) when its stamp matches, else None: absent
    silently, otherwise with a warning naming ``what`` and why it is rebuilt."""
    if not storage.stat(path).exists:
        return None
    try:
        data = storage.read_bytes(path)
    except (FileNotFoundError, IsADirectoryError):  # removed since, or not a file
        return None
    try:
        table = _decode(data, path)
        found = problem(table, version_id=version_id, layout=layout, rows=rows)
    except (ValueError, pa.ArrowException) as exc:  # torn or not a table at all: rebuilt like a wrong one
        found = f"it cannot be read ({exc})"
    if found is None:
        return table
    log.warning("%s: rebuilding the %s: %s", path, what, found)
    return None


def write_table(path: str, table: pa.Table, *, version_id: str, layout: int) -> pa.Table:
    """Stamp ``table`` and store it at ``path`` atomically (zstd Parquet by the suffix, else Arrow IPC); returns the
    stamped table."""
    stamped = stamp(table, version_id=version_id, layout=layout)
    buffer = io.BytesIO()
    if path.endswith(".parquet"):
        pq.write_table(stamped, buffer, compression="zstd")
    else:
        with pa.ipc.new_file(buffer, stamped.schema) as writer:
            writer.write_table(stamped)
    storage.write_bytes_atomic(path, buffer.getvalue())
    return stamped

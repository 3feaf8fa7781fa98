"""Derived files: what batchscope computes from verified bytes and keeps in the catalog, believed only when sealed by
this installation, rebuilt whenever one fails a check or cannot be decoded.

Every file batchscope derives (key indexes, RL and episode indexes, cached diffs,
token counts, and any cache added later) is written and read through this
module, in one of three forms:

- **tables** (Parquet by the suffix, else Arrow IPC) carry, in their schema
  metadata, their row count, a digest of their values and a seal;
- **row-group tables** (``write_row_groups``) carry a digest per row group,
  so a lookup that reads one row group checks exactly what it read;
- **bytes** and **JSON** are wrapped in a small envelope naming their size,
  SHA-256 and seal.

The seal (``loaders.storage.seal``) is an HMAC, under a key kept outside the
catalog, of what the file is (``Derivation``: kind, source, layout) and of its
content digest. A file of another source or layout, from before seals, torn,
edited, or rewritten with a recomputed digest reads as absent, with the reason
logged, and its caller rebuilds it; bytes that cannot be decoded are the same.
A file is never served because it says so. Facts that pages show are in
addition checked against verified bytes where that is cheap (a key hit against
its row, diff counts against the sealed change table, a page's group
statistics against the rows it shows); see CONTRIBUTING.md.

>>> use_key(b"k" * 32)
>>> what = Derivation("example", "v-1", layout=2)
>>> table = stamp(pa.table({"key": ["a", "b"], "row": [0, 1]}), what)
>>> problem(table, what) is None
True
>>> problem(table, Derivation("example", "v-2", layout=2))
'it is not sealed by this installation for example of v-2 (layout 2)'
>>> forged = table.set_column(1, "row", pa.array([1, 0]))
>>> problem(stamp(forged, what).replace_schema_metadata({**forged.schema.metadata, DIGEST: table_digest(forged).encode()}), what)
'it is not sealed by this installation for example of v-1 (layout 2)'
>>> use_key(None)
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import threading
from typing import Any, Callable, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import files as storage
from .seal import Derivation, use_key

__all__ = [
    "Damaged",
    "Derivation",
    "RowGroupTable",
    "open_row_groups",
    "problem",
    "read_bytes",
    "read_json",
    "read_table",
    "stamp",
    "table_digest",
    "use_key",
    "write_bytes",
    "write_json",
    "write_row_groups",
    "write_table",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Arrow schema metadata of a derived table.
ROWS = b"batchscope.rows"
DIGEST = b"batchscope.digest"
SEAL = b"batchscope.seal"
#: Per-row-group digests of a row-group table (a JSON list).
GROUP_DIGESTS = b"batchscope.group_digests"
#: The first line of a derived file of bytes (then one line of JSON header, then the bytes).
ENVELOPE = b"batchscope-derived/1\n"
#: What decoding a damaged derived file can raise: each is a reason to rebuild, never an answer.
DECODE_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, KeyError, IndexError, OSError, EOFError, pa.ArrowException)


class Damaged(Exception):
    """A derived file failed a check or could not be decoded: rebuild it (never shown to users as an answer)."""


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
    """A digest of a table's column names and values, independent of chunking and of the integer and float widths."""
    h = hashlib.sha256(json.dumps(table.column_names).encode())
    for column in table.columns:
        for part in _column_bytes(column.combine_chunks()):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
    return h.hexdigest()[:32]


def _signed(rows: int, digest: str) -> str:
    return f"{rows}:{digest}"


def stamp(table: pa.Table, what: Derivation) -> pa.Table:
    """``table`` with its row count, digest and seal added to the metadata it already has."""
    digest = table_digest(table)
    stamped = {ROWS: str(len(table)).encode(), DIGEST: digest.encode(), SEAL: what.seal(_signed(len(table), digest)).encode()}
    return table.replace_schema_metadata({**(table.schema.metadata or {}), **stamped})


def _unsealed(what: Derivation) -> str:
    return f"it is not sealed by this installation for {what.kind} of {what.source} (layout {what.layout})"


def problem(table: pa.Table, what: Derivation, *, rows: int | None = None) -> str | None:
    """Why a stored derived table cannot be believed as ``what`` (None when it can); ``rows`` is the row count its
    source implies, when it implies one."""
    meta = table.schema.metadata or {}
    if rows is not None and len(table) != rows:
        return f"it has {len(table)} rows, its source {rows}"
    try:
        digest = table_digest(table)
    except TypeError as exc:
        return str(exc)
    seal = meta.get(SEAL, b"").decode("ascii", "replace")
    if not what.sealed(_signed(len(table), digest), seal):
        return _unsealed(what)
    return None


def _report(path: str, what: Derivation, reason: str) -> None:
    log.warning("%s: rebuilding the %s of %s: %s", path, what.kind, what.source, reason)


def _read_raw(path: str) -> bytes | None:
    if not storage.stat(path).exists:
        return None
    try:
        return storage.read_bytes(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):  # removed since, or not a file
        return None


def guarded(path: str, what: Derivation, decode: Callable[[], T]) -> T | None:
    """``decode()``, or None (logged) when it raises what damaged bytes make a decoder raise."""
    try:
        return decode()
    except (Damaged, *DECODE_ERRORS) as exc:
        _report(path, what, f"it cannot be read ({type(exc).__name__}: {exc})")
        return None


# -- tables -------------------------------------------------------------------------------
def _decode_table(data: bytes, path: str) -> pa.Table:
    if path.endswith(".parquet"):  # ParquetFile, not read_table: that would import pyarrow.dataset (and pandas)
        return pq.ParquetFile(pa.BufferReader(data)).read()
    return pa.ipc.open_file(pa.py_buffer(data)).read_all()


def read_table(path: str, what: Derivation, *, rows: int | None = None) -> pa.Table | None:
    """The table stored at ``path`` (Parquet by its suffix, else Arrow IPC) when it is sealed as ``what``, else None:
    absent silently, otherwise logged with why it is rebuilt."""
    data = _read_raw(path)
    if data is None:
        return None
    table = guarded(path, what, lambda: _decode_table(data, path))
    if table is None:
        return None
    found = problem(table, what, rows=rows)
    if found is not None:
        _report(path, what, found)
        return None
    return table


def _encode_table(path: str, table: pa.Table, *, row_group_size: int | None = None) -> bytes:
    buffer = io.BytesIO()
    if path.endswith(".parquet"):
        pq.write_table(table, buffer, compression="zstd", row_group_size=row_group_size)
    else:
        with pa.ipc.new_file(buffer, table.schema) as writer:
            writer.write_table(table)
    return buffer.getvalue()


def write_table(path: str, table: pa.Table, what: Derivation) -> pa.Table:
    """Stamp and seal ``table`` as ``what`` and store it at ``path`` atomically (zstd Parquet by the suffix, else Arrow
    IPC); returns the stamped table."""
    stamped = stamp(table, what)
    storage.write_bytes_atomic(path, _encode_table(path, stamped))
    return stamped


# -- row-group tables -----------------------------------------------------------------------
class RowGroupTable:
    """A stored Parquet table opened lazily, each row group checked against its sealed digest when it is read.

    ``groups[i]`` is what the seal says of row group ``i``: ``{"digest", "rows"}`` and, for a table written with
    ``bounds=COLUMN``, that column's ``first`` and ``last`` value in the group (for a sorted column: where to look).
    """

    def __init__(self, path: str, parquet: pq.ParquetFile, groups: list[dict[str, Any]], what: Derivation) -> None:
        self.path, self.parquet, self.groups, self.what = path, parquet, groups, what
        self._lock = threading.Lock()  # one open file, read by the threads of every request

    @property
    def num_row_groups(self) -> int:
        return len(self.groups)

    def read_row_group(self, group: int) -> pa.Table:
        """Row group ``group``, decoded and checked; ``Damaged`` when it cannot be decoded or is not what was sealed."""
        try:
            with self._lock:
                table = self.parquet.read_row_group(group)
            digest = table_digest(table)
        except DECODE_ERRORS as exc:
            raise Damaged(f"{self.path}: row group {group} of the {self.what.kind} cannot be read ({type(exc).__name__}: {exc})") from exc
        if digest != self.groups[group]["digest"] or len(table) != self.groups[group]["rows"]:
            raise Damaged(f"{self.path}: row group {group} of the {self.what.kind} does not match its sealed digest")
        return table


def _group_facts(table: pa.Table, bounds: str | None) -> dict[str, Any]:
    facts: dict[str, Any] = {"digest": table_digest(table), "rows": len(table)}
    if bounds is not None and len(table):
        column = table.column(bounds)
        facts["first"], facts["last"] = column[0].as_py(), column[len(table) - 1].as_py()
    return facts


def write_row_groups(path: str, table: pa.Table, what: Derivation, *, row_group_size: int, bounds: str | None = None) -> None:
    """Store ``table`` at ``path`` (zstd Parquet) in row groups of ``row_group_size`` rows, each one's digest (and,
    with ``bounds``, that column's first and last value) sealed in the footer."""
    starts = range(0, len(table), row_group_size) if len(table) else [0]  # an empty table is written as one empty group
    groups = [_group_facts(table.slice(start, row_group_size), bounds) for start in starts]
    listed = json.dumps(groups, separators=(",", ":"), sort_keys=True)
    sealed = {
        ROWS: str(len(table)).encode(),
        GROUP_DIGESTS: listed.encode(),
        SEAL: what.seal(_signed(len(table), hashlib.sha256(listed.encode()).hexdigest())).encode(),
    }
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **sealed})
    storage.write_bytes_atomic(path, _encode_table(path, table, row_group_size=max(1, row_group_size)))


def open_row_groups(path: str, what: Derivation, *, rows: int | None = None) -> RowGroupTable | None:
    """The row-group table at ``path`` when its footer is sealed as ``what`` (and holds ``rows`` rows), else None
    (absent silently, otherwise logged). Only the footer is read here; each row group is checked when read."""
    if not storage.stat(path).exists:
        return None

    def opened() -> RowGroupTable:
        fs, local = storage.resolve(path)
        parquet = pq.ParquetFile(fs.open_input_file(local))
        meta = parquet.schema_arrow.metadata or {}
        listed = meta.get(GROUP_DIGESTS, b"")
        stored_rows = int(meta.get(ROWS, b"-1"))
        if not listed or not what.sealed(
            _signed(stored_rows, hashlib.sha256(listed).hexdigest()), meta.get(SEAL, b"").decode("ascii", "replace")
        ):
            raise Damaged(_unsealed(what))
        groups = json.loads(listed)
        if len(groups) != parquet.metadata.num_row_groups or sum(g["rows"] for g in groups) != stored_rows:
            raise Damaged(f"its footer holds {parquet.metadata.num_row_groups} row groups, its seal {len(groups)}")
        if rows is not None and stored_rows != rows:
            raise Damaged(f"it has {stored_rows} rows, its source {rows}")
        return RowGroupTable(path, parquet, groups, what)

    return guarded(path, what, opened)


# -- bytes and JSON ---------------------------------------------------------------------------
def write_bytes(path: str, payload: bytes, what: Derivation) -> None:
    """Store ``payload`` at ``path`` atomically, in an envelope naming its size, SHA-256 and seal as ``what``."""
    digest = hashlib.sha256(payload).hexdigest()
    header = {"kind": what.kind, "source": what.source, "layout": what.layout, "size": len(payload), "sha256": digest}
    header["seal"] = what.seal(_signed(len(payload), digest))
    storage.write_bytes_atomic(path, ENVELOPE + json.dumps(header, separators=(",", ":")).encode() + b"\n" + payload)


def unwrap(data: bytes, what: Derivation, *, sealed: bool = True) -> bytes:
    """The payload of an enveloped derived file sealed as ``what``; ``Damaged`` with the reason otherwise.

    ``sealed=False`` checks only size and SHA-256, for a payload its reader pins by a digest it trusts anyway."""
    if not data.startswith(ENVELOPE):
        raise Damaged("it is not a sealed derived file (written before seals, or not by batchscope)")
    end = data.find(b"\n", len(ENVELOPE))
    if end < 0:
        raise Damaged("its header is cut off")
    try:
        header = json.loads(data[len(ENVELOPE) : end])
        size, digest, seal = int(header["size"]), str(header["sha256"]), header["seal"]
    except (ValueError, TypeError, KeyError) as exc:
        raise Damaged(f"its header cannot be read ({exc})") from exc
    payload = data[end + 1 :]
    if len(payload) != size:
        raise Damaged(f"it holds {len(payload)} bytes, its header says {size} (torn or edited)")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise Damaged("its bytes do not match their SHA-256 (edited or damaged)")
    if sealed and not what.sealed(_signed(size, digest), seal):
        raise Damaged(_unsealed(what))
    return payload


def read_bytes(path: str, what: Derivation) -> bytes | None:
    """The payload stored at ``path`` when it is sealed as ``what``, else None (absent silently, otherwise logged)."""
    data = _read_raw(path)
    if data is None:
        return None
    return guarded(path, what, lambda: unwrap(data, what))


def write_json(path: str, value: Any, what: Derivation) -> None:
    """Store a JSON value as a sealed derived file."""
    write_bytes(path, json.dumps(value, sort_keys=True, separators=(",", ":")).encode(), what)


def read_json(path: str, what: Derivation) -> Any:
    """The JSON value of a sealed derived file, or None (absent, unsealed or undecodable; logged unless absent)."""
    payload = read_bytes(path, what)
    if payload is None:
        return None
    return guarded(path, what, lambda: json.loads(payload))

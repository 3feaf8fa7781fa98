"""Key files and filtered copies: drop flagged rows when registering the next version (originals untouched).

A key file holds one key a line. A line that starts with ``"`` is a JSON
string, which is how keys with newlines, surrounding spaces or a leading quote
are written; empty lines are skipped.

>>> paths = write_excluding(catalog, "web-text", ["v1/"], "bad-keys.txt", key="id")   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import storage
from ..errors import RegistrationError
from ..storage.shard_scan import scan_shard
from .leftovers import remove_abandoned_copies
from .records import content_key, table_records
from .store import CatalogStore, _expand


def key_line(key: str) -> str:
    """One line of a key file.

    >>> key_line("a"), key_line("a\\nb")
    ('a', '"a\\\\nb"')
    """
    if not key or key != key.strip() or key.startswith('"') or "\n" in key or "\r" in key:
        return json.dumps(key)
    return key


def write_key_file(keys: Iterable[str]) -> str:
    """The text of a key file listing ``keys``."""
    return "".join(key_line(k) + "\n" for k in keys)


def read_key_file(path: str) -> set[str]:
    """The keys a key file lists; a clear error names the file and line of a bad JSON line."""
    if not storage.stat(path).exists:
        raise RegistrationError(f"key file {path} does not exist")
    try:
        text = storage.read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RegistrationError(f"key file {path} is not UTF-8 text ({exc})") from exc
    keys: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        line = line[:-1] if line.endswith("\r") else line
        if not line:
            continue
        if line.startswith('"'):
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise RegistrationError(f"key file {path} line {number}: not a JSON string ({exc})") from exc
            if not isinstance(value, str):
                raise RegistrationError(f"key file {path} line {number}: expected a JSON string, got {type(value).__name__}")
            keys.add(value)
        else:
            keys.add(line)
    return keys


def _drop(table: pa.Table, keys: set[str], key: str | None) -> pa.Table:
    if not keys or table.num_rows == 0:
        return table
    if key is not None:
        column = pc.cast(table.column(key), pa.string())
        listed = pc.is_in(column, value_set=pa.array(sorted(keys), pa.string()))
    else:
        listed = pa.array([content_key(r) in keys for r in table_records(table)], pa.bool_())
    return table.filter(pc.invert(pc.fill_null(listed, False)))


def _fingerprint(files: Sequence[str], keys: set[str], key: str | None) -> str:
    h = hashlib.sha256(json.dumps({"key": key, "keys": sorted(keys)}).encode())
    for uri in files:
        info = storage.stat(uri)
        h.update(f"{uri}\0{info.size}\0".encode())
        h.update(storage.read_range(uri, max(0, info.size - 65536), min(info.size, 65536)))
    return h.hexdigest()[:16]


def write_excluding(
    catalog: CatalogStore,
    name: str,
    paths: Sequence[str | os.PathLike[str]],
    keyfile: str,
    *,
    key: str | None,
) -> list[str]:
    """Write copies of the Parquet files in ``paths`` without the rows whose key ``keyfile`` lists.

    Keys are the ``key`` column's values as text, or content hashes when
    ``key`` is ``None`` (as the catalog computes them). The copies go to
    ``catalog.data_dir(name)/excluded-<hash>/`` (the hash covers the inputs and
    the keys, so the same inputs give the same files and the same version id),
    keep each file's schema and row-group size, and are returned in order.
    Files left without rows are skipped; the originals are never modified.
    """
    files = _expand(paths)
    keys = read_key_file(storage.normalize(keyfile))
    directory = storage.join(catalog.data_dir(name), f"excluded-{_fingerprint(files, keys, key)}")
    if not storage.is_remote(directory):
        remove_abandoned_copies(directory)
    out: list[str] = []
    for number, uri in enumerate(files):
        scan_shard(uri)  # footers and pages checked before anything is decoded from them
        fs, local = storage.resolve(uri)
        try:
            source = pq.ParquetFile(fs.open_input_file(local))
        except Exception as exc:
            raise RegistrationError(f"{uri}: cannot be read as Parquet ({exc})") from exc
        schema = source.schema_arrow
        if key is not None and key not in schema.names:
            raise RegistrationError(f"key column {key!r} is not in {uri} (columns: {', '.join(schema.names)})")
        target = storage.join(directory, f"{number:05d}-{os.path.basename(local)}")
        if storage.stat(target).exists:
            out.append(target)
            continue
        group_size = source.metadata.row_group(0).num_rows if source.metadata.num_row_groups else 1
        remote = storage.is_remote(target)
        sink: pa.BufferOutputStream | str = pa.BufferOutputStream() if remote else f"{target}.{os.getpid()}.tmp"
        if not remote:
            os.makedirs(directory, exist_ok=True)
        kept = 0
        try:
            with pq.ParquetWriter(sink, schema, compression="zstd", write_statistics=True) as writer:
                for group in range(source.metadata.num_row_groups):
                    table = _drop(source.read_row_group(group), keys, key)
                    if table.num_rows:
                        writer.write_table(table, row_group_size=max(1, group_size))
                        kept += table.num_rows
            if kept and isinstance(sink, str):
                os.replace(sink, target)
            elif kept:
                storage.write_bytes_atomic(target, sink.getvalue().to_pybytes())
        finally:
            if isinstance(sink, str) and os.path.exists(sink):
                os.unlink(sink)
        if kept:
            out.append(target)
    if not out:
        raise RegistrationError(f"every row of {len(files)} file(s) is listed in {keyfile}; nothing left to register")
    return out

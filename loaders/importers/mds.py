"""Import Mosaic MDS shards (mosaicml-streaming's format) by reading ``index.json`` and the shard files directly.

Encoded media stays encoded: a ``jpeg`` or ``png`` column keeps the exact bytes
the writer stored (as an image ``{bytes, path}`` struct). A shard file is
``[n: u32][n + 1 offsets: u32][config JSON][samples]``; a sample is the u32
sizes of its variable-size columns, then every column's bytes in order.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, Iterator, Mapping, Unpack

import pyarrow as pa

from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import CorruptData, RegistrationError
from ..storage.mds import Codec, column_codec, decode_sample, decompress
from .writer import ImportOptions, write_files

_BATCH = 256


def _index(root: str) -> list[dict[str, Any]]:
    path = os.path.join(root, "index.json")
    try:
        with open(path, encoding="utf-8") as handle:
            index = json.load(handle)
    except (OSError, ValueError) as exc:
        raise RegistrationError(f"{path}: not a readable MDS index ({exc})") from exc
    shards = index.get("shards") if isinstance(index, dict) else None
    if not isinstance(shards, list) or not shards:
        raise RegistrationError(f"{path}: lists no shards")
    for shard in shards:
        if not isinstance(shard, dict) or shard.get("format") != "mds":
            raise RegistrationError(
                f"{path}: only MDS shards are read (found format {shard.get('format') if isinstance(shard, dict) else shard!r})"
            )
    first = shards[0]
    for shard in shards[1:]:
        if (shard.get("column_names"), shard.get("column_encodings")) != (first.get("column_names"), first.get("column_encodings")):
            raise RegistrationError(f"{path}: shards disagree on their columns")
    return shards


def _shard_bytes(root: str, shard: Mapping[str, Any]) -> tuple[str, bytes]:
    raw = shard.get("raw_data") or {}
    raw_path = os.path.join(root, str(raw.get("basename", "")))
    zipped = shard.get("zip_data") or {}
    try:
        if raw.get("basename") and os.path.isfile(raw_path):
            with open(raw_path, "rb") as handle:
                return raw_path, handle.read()
        if zipped.get("basename") and shard.get("compression"):
            zip_path = os.path.join(root, str(zipped["basename"]))
            with open(zip_path, "rb") as handle:
                return zip_path, decompress(handle.read(), str(shard["compression"]), zip_path, int(raw.get("bytes", 0)))
    except OSError as exc:
        raise RegistrationError(f"{raw_path}: cannot be read ({exc.strerror or exc})") from exc
    raise RegistrationError(f"{raw_path}: shard file missing")


def _samples(data: bytes, path: str, columns: list[Codec]) -> Iterator[list[Any]]:
    (count,) = struct.unpack_from("<I", data, 0)
    offsets = struct.unpack_from(f"<{count + 1}I", data, 4)
    for row in range(count):
        begin, end = offsets[row], offsets[row + 1]
        if not 0 < begin <= end <= len(data):
            raise RegistrationError(f"{path} sample {row}: offsets {begin}..{end} lie outside the file ({len(data)} bytes)")
        try:
            yield decode_sample(memoryview(data)[begin:end], columns, f"{path} sample {row}")
        except CorruptData as exc:
            raise RegistrationError(exc.message) from None


def import_mds(
    catalog: CatalogStore,
    name: str,
    source: str | os.PathLike[str],
    **options: Unpack[ImportOptions],
) -> DatasetVersion:
    """Import the MDS dataset in folder ``source`` (its ``index.json`` and shards) as a new version of ``name``.

    Rows keep the index's shard order; ``jpeg``/``png`` columns keep their
    bytes, ``pil`` becomes PNG, ``json`` is JSON text (kind ``json``),
    ``str_int``/``str_float`` are numbers. ``pkl`` and ``ndarray`` columns are refused.

    >>> import_mds(catalog, "c4-mds", "mds/train/", tag="v1")  # doctest: +SKIP
    DatasetVersion(c4-mds@..., rows=..., shards=1)
    """
    root = os.path.abspath(os.fspath(source))
    if os.path.basename(root) == "index.json":
        root = os.path.dirname(root)
    shards = _index(root)
    names, encodings = shards[0].get("column_names") or [], shards[0].get("column_encodings") or []
    columns = [column_codec(str(e)) for e in encodings]
    schema = pa.schema([(n, c[0]) for n, c in zip(names, columns)])
    by_path = {os.path.join(root, str((s.get("raw_data") or {}).get("basename", ""))): s for s in shards}

    def read(path: str) -> Iterator[pa.Table]:
        where, data = _shard_bytes(root, by_path[path])
        rows: list[list[Any]] = []
        for values in _samples(data, where, columns):
            rows.append(values)
            if len(rows) == _BATCH:
                yield pa.table(list(map(list, zip(*rows))), schema=schema)
                rows = []
        if rows:
            yield pa.table(list(map(list, zip(*rows))), schema=schema)

    declared = {n: "json" if e == "json" else "image" for n, e in zip(names, encodings) if e in ("json", "jpeg", "png", "pil")}
    total = sum(int(s.get("samples", 0)) for s in shards)
    options["kinds"] = {**declared, **(options.get("kinds") or {})}
    return write_files(catalog, name, list(by_path), fmt="mds", schema=schema, read=read, total=total, source=root, **options)

"""Import Mosaic MDS shards (mosaicml-streaming's format) by reading ``index.json`` and the shard files directly.

Encoded media stays encoded: a ``jpeg`` or ``png`` column keeps the exact bytes
the writer stored (as an image ``{bytes, path}`` struct). A shard file is
``[n: u32][n + 1 offsets: u32][config JSON][samples]``; a sample is the u32
sizes of its variable-size columns, then every column's bytes in order.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import os
import struct
from typing import Any, Callable, Iterator, Mapping, Unpack

import pyarrow as pa

from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import RegistrationError
from .writer import ImportOptions, write_files

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
#: MDS encoding → (Arrow type, fixed size in bytes or None, decode bytes → value).
_NUMBERS = {
    "int": ("<q", pa.int64()), "int8": ("<b", pa.int8()), "int16": ("<h", pa.int16()), "int32": ("<i", pa.int32()),
    "int64": ("<q", pa.int64()), "uint8": ("<B", pa.uint8()), "uint16": ("<H", pa.uint16()),
    "uint32": ("<I", pa.uint32()), "uint64": ("<Q", pa.uint64()), "float16": ("<e", pa.float32()),
    "float32": ("<f", pa.float32()), "float64": ("<d", pa.float64()),
}  # fmt: skip
_BATCH = 256


def _number(fmt: str) -> Callable[[bytes], Any]:
    return lambda data: struct.unpack(fmt, data)[0]


def _pil_as_png(data: bytes) -> dict[str, Any]:
    """The ``pil`` encoding (width, height, mode, raw pixels) as a lossless PNG."""
    from PIL import Image

    width, height, mode_size = struct.unpack("<III", data[:12])
    mode = data[12 : 12 + mode_size].decode("utf-8")
    out = io.BytesIO()
    Image.frombytes(mode, (width, height), data[12 + mode_size :]).save(out, format="PNG")
    return {"bytes": out.getvalue(), "path": None}


def _column(encoding: str) -> tuple[pa.DataType, int | None, Callable[[bytes], Any]]:
    if encoding in _NUMBERS:
        fmt, type_ = _NUMBERS[encoding]
        return type_, struct.calcsize(fmt), _number(fmt)
    simple: dict[str, tuple[pa.DataType, Callable[[bytes], Any]]] = {
        "bytes": (pa.binary(), bytes),
        "str": (pa.string(), lambda d: d.decode("utf-8")),
        "json": (pa.string(), lambda d: json.dumps(json.loads(d.decode("utf-8")), ensure_ascii=False)),
        "str_int": (pa.int64(), lambda d: int(d.decode("utf-8"))),
        "str_float": (pa.float64(), lambda d: float(d.decode("utf-8"))),
        "str_decimal": (pa.string(), lambda d: d.decode("utf-8")),
        "jpeg": (IMAGE, lambda d: {"bytes": bytes(d), "path": None}),
        "png": (IMAGE, lambda d: {"bytes": bytes(d), "path": None}),
        "pil": (IMAGE, _pil_as_png),
    }
    if encoding in simple:
        type_, decode = simple[encoding]
        return type_, None, decode
    why = "pickled objects can run code when loaded" if encoding == "pkl" else "not supported by this importer"
    raise RegistrationError(
        f"MDS encoding {encoding!r} is {why}; supported: {', '.join(sorted([*_NUMBERS, *simple]))} (convert that column first, or drop it)"
    )


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


def _decompress(data: bytes, compression: str, path: str, size: int) -> bytes:
    algorithm = compression.split(":", 1)[0]
    if algorithm == "zstd":
        return pa.decompress(data, decompressed_size=size, codec="zstd").to_pybytes()
    if algorithm == "gz":
        return gzip.decompress(data)
    if algorithm == "bz2":
        return bz2.decompress(data)
    raise RegistrationError(f"{path}: compression {compression!r} is not supported (zstd, gz, bz2 are)")


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
                return zip_path, _decompress(handle.read(), str(shard["compression"]), zip_path, int(raw.get("bytes", 0)))
    except OSError as exc:
        raise RegistrationError(f"{raw_path}: cannot be read ({exc.strerror or exc})") from exc
    raise RegistrationError(f"{raw_path}: shard file missing")


def _samples(data: bytes, path: str, columns: list[tuple[pa.DataType, int | None, Callable[[bytes], Any]]]) -> Iterator[list[Any]]:
    (count,) = struct.unpack_from("<I", data, 0)
    offsets = struct.unpack_from(f"<{count + 1}I", data, 4)
    for row in range(count):
        begin, end = offsets[row], offsets[row + 1]
        if not 0 < begin <= end <= len(data):
            raise RegistrationError(f"{path} sample {row}: offsets {begin}..{end} lie outside the file ({len(data)} bytes)")
        sample = memoryview(data)[begin:end]
        variable = [c for c in columns if c[1] is None]
        sizes = list(struct.unpack_from(f"<{len(variable)}I", sample, 0))
        at = 4 * len(variable)
        values = []
        for _type, fixed, decode in columns:
            size = fixed if fixed is not None else sizes.pop(0)
            if at + size > len(sample):
                raise RegistrationError(f"{path} sample {row}: a column runs past the sample's end")
            try:
                values.append(decode(bytes(sample[at : at + size])))
            except (ValueError, struct.error, OSError) as exc:
                raise RegistrationError(f"{path} sample {row}: cannot decode a column ({exc})") from exc
            at += size
        yield values


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
    columns = [_column(str(e)) for e in encodings]
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

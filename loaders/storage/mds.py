"""Mosaic MDS shards (mosaicml-streaming's format), read in place, and the decoding of their column encodings.

A raw shard file is ``[n: u32][n + 1 offsets: u32][config JSON][samples]``; a sample is the u32 sizes of its
variable-size columns, then every column's bytes in order. Its columns (names, encodings, fixed sizes) are in the
``index.json`` of its folder, which lists every shard. A version's shard is one raw ``.mds`` file: registration finds
its entry in the ``index.json`` beside it (or in a folder above, for merged indexes), cuts its samples into row groups
of about :data:`GROUP_BYTES`, and hashes each group's bytes; the "footer" digest covers the file's header and the
entry's columns. Reads check both before decoding, so a shard or its ``index.json`` changed after registration is
refused, naming it.

Encoded media stays encoded: ``jpeg``/``png`` keep the bytes written (an image ``{bytes, path}``), ``pil`` becomes a
lossless PNG. ``ndarray`` columns of a fixed dtype and one dimension are lists of numbers.

>>> column_codec("uint16")[0], column_codec("ndarray:int32", arrays=True)[0]
(DataType(uint16), ListType(list<item: int32>))
"""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import json
import os
import struct
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..errors import ChecksumMismatch, CorruptData, RegistrationError
from . import files as storage
from .segments import digest, fetch, group_starts, hash_range
from .shards import ShardInfo, check_present

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
#: MDS number encoding → (struct format, Arrow type).
NUMBERS = {
    "int": ("<q", pa.int64()), "int8": ("<b", pa.int8()), "int16": ("<h", pa.int16()), "int32": ("<i", pa.int32()),
    "int64": ("<q", pa.int64()), "uint8": ("<B", pa.uint8()), "uint16": ("<H", pa.uint16()),
    "uint32": ("<I", pa.uint32()), "uint64": ("<Q", pa.uint64()), "float16": ("<e", pa.float32()),
    "float32": ("<f", pa.float32()), "float64": ("<d", pa.float64()),
}  # fmt: skip
#: Bytes of samples per row group, about.
GROUP_BYTES = 1 << 20

Codec = tuple[pa.DataType, "int | None", Callable[[bytes], Any]]


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


def _ndarray(encoding: str) -> Codec | None:
    """An ``ndarray:DTYPE[:N]`` column (fixed dtype, one dimension) as a list of numbers, else None."""
    parts = encoding.split(":")
    if len(parts) not in (2, 3) or parts[1] not in NUMBERS or parts[1] in ("int",):
        return None
    dtype = np.dtype(parts[1])
    shape = tuple(int(n) for n in parts[2].split(",")) if len(parts) == 3 else None
    if shape is not None and len(shape) != 1:
        return None

    def decode(data: bytes) -> list[Any]:
        at = 0
        if shape is None:  # [ndim << 2 | shape dtype code][shape], then the values
            ndim, code = data[0] >> 2, data[0] & 3
            if ndim != 1:
                raise ValueError(f"an array of {ndim} dimensions (one is read)")
            at = 1 + (1 << code)
        return np.frombuffer(data[at:], dtype=dtype).tolist()

    return pa.list_(pa.from_numpy_dtype(dtype)), dtype.itemsize * shape[0] if shape else None, decode


def column_codec(encoding: str, *, arrays: bool = False) -> Codec:
    """``(Arrow type, fixed size in bytes or None, decode bytes → value)`` of an MDS column encoding; ``arrays``
    accepts one-dimensional ``ndarray`` columns of a fixed dtype."""
    if encoding in NUMBERS:
        fmt, type_ = NUMBERS[encoding]
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
    found = _ndarray(encoding) if arrays and encoding.startswith("ndarray") else None
    if found is not None:
        return found
    why = "pickled objects can run code when loaded" if encoding == "pkl" else "not supported by this reader"
    supported = sorted([*NUMBERS, *simple, *(["ndarray:DTYPE"] if arrays else [])])
    raise RegistrationError(
        f"MDS encoding {encoding!r} is {why}; supported: {', '.join(supported)} (convert that column first, or drop it)"
    )


def decompress(data: bytes, compression: str, path: str, size: int) -> bytes:
    """The bytes of a compressed shard (``zstd``, ``gz``, ``bz2``)."""
    algorithm = compression.split(":", 1)[0]
    if algorithm == "zstd":
        return pa.decompress(data, decompressed_size=size, codec="zstd").to_pybytes()
    if algorithm == "gz":
        return gzip.decompress(data)
    if algorithm == "bz2":
        return bz2.decompress(data)
    raise RegistrationError(f"{path}: compression {compression!r} is not supported (zstd, gz, bz2 are)")


def decode_sample(sample: bytes | memoryview, codecs: list[Codec], where: str) -> list[Any]:
    """One sample's column values (its variable columns' sizes first, then every column's bytes)."""
    variable = sum(1 for c in codecs if c[1] is None)
    sizes = list(struct.unpack_from(f"<{variable}I", sample, 0))
    at = 4 * variable
    values = []
    for _type, fixed, decode in codecs:
        size = fixed if fixed is not None else sizes.pop(0)
        if at + size > len(sample):
            raise CorruptData(f"{where}: a column runs past the sample's end")
        try:
            values.append(decode(bytes(sample[at : at + size])))
        except (ValueError, struct.error, OSError) as exc:
            raise CorruptData(f"{where}: cannot decode a column ({exc})") from exc
        at += size
    return values


# -- the shard format ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _entries(index: str, size: int, mtime_ns: int) -> dict[str, dict[str, Any]]:
    """The shards an ``index.json`` lists, by the normalized path of their raw file (parsed once per version of it)."""
    try:
        with open(index, encoding="utf-8") as handle:
            shards = json.load(handle).get("shards")
    except (OSError, ValueError, AttributeError) as exc:
        raise RegistrationError(f"{index}: not a readable MDS index ({exc})") from None
    folder = os.path.dirname(index)
    out = {}
    for entry in shards if isinstance(shards, list) else []:
        raw = (entry.get("raw_data") or {}).get("basename") if isinstance(entry, dict) else None
        if raw:
            out[os.path.normpath(os.path.join(folder, raw))] = entry
    return out


def index_entry(uri: str) -> tuple[str, dict[str, Any]]:
    """``(index.json path, the entry describing the raw shard at uri)``, from the nearest ``index.json`` above it."""
    folder = os.path.dirname(uri)
    for _ in range(4):
        index = os.path.join(folder, "index.json")
        if os.path.isfile(index):
            stat = os.stat(index)
            entry = _entries(index, stat.st_size, stat.st_mtime_ns).get(os.path.normpath(uri))
            if entry is not None:
                if entry.get("format") != "mds":
                    raise RegistrationError(f"{index}: shard {os.path.basename(uri)} is of format {entry.get('format')!r}, not mds")
                return index, dict(entry)
        folder = os.path.dirname(folder)
    raise RegistrationError(f"{uri}: no index.json beside it (or above it) lists this MDS shard")


def _columns(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry.get(k) for k in ("column_names", "column_encodings", "column_sizes")}


def _header(uri: str, size: int, where: str) -> tuple[int, np.ndarray]:
    head = storage.read_range(uri, 0, min(size, 4), cache=False)
    if len(head) < 4:
        raise RegistrationError(f"{where}: {uri} is too short to be an MDS shard")
    (count,) = struct.unpack("<I", head)
    offsets = np.frombuffer(storage.read_range(uri, 4, 4 * (count + 1), cache=False), dtype=np.uint32).astype(np.int64)
    if len(offsets) != count + 1 or np.any(np.diff(offsets) < 0) or offsets[0] < 4 * (count + 2) or offsets[-1] != size:
        raise RegistrationError(f"{where}: {uri} is not an MDS shard of {count} samples ending at byte {size}")
    return count, offsets


class _Mds:
    """The MDS shard format (see :mod:`loaders.storage.formats`)."""

    name = "mds"
    extensions = (".mds",)

    def scan(self, uri: str, *, group_bytes: int | None = None) -> tuple[ShardInfo, pa.Schema]:
        """Describe one raw MDS shard: its samples, row groups and their digests, its columns from its index."""
        uri = storage.normalize(uri)
        if storage.is_remote(uri):
            raise RegistrationError(f"{uri}: MDS shards are read in place from a local folder")
        stat = storage.stat(uri)
        if not stat.exists:
            raise RegistrationError(f"{uri}: no such file")
        index, entry = index_entry(uri)
        schema = _schema(entry, index)
        count, offsets = _header(uri, stat.size, index)
        if count != entry.get("samples"):
            raise RegistrationError(f"{index}: lists {entry.get('samples')} samples in {uri}, which holds {count}")
        firsts = group_starts(offsets[:-1], group_bytes or GROUP_BYTES)
        counts = np.diff(np.asarray(firsts + [count], dtype=np.int64)).tolist()
        boundaries = [int(offsets[f]) for f in firsts] + [stat.size]
        head = storage.read_range(uri, 0, int(offsets[0]), cache=False)
        shard = ShardInfo(
            uri=uri,
            size=stat.size,
            rows=count,
            row_groups=tuple(int(c) for c in counts),
            boundaries=tuple(boundaries),
            segment_digests=tuple(hash_range(uri, a, b) for a, b in zip(boundaries, boundaries[1:])),
            footer_digest=digest(head + json.dumps(_columns(entry), sort_keys=True).encode()),
        )
        return shard, schema

    def open(self, shard: ShardInfo, *, where: str, cache: bool = True) -> "OpenMdsShard":
        return OpenMdsShard(shard, where=where, cache=cache)

    def decoded_bytes(self, shard: ShardInfo, row_group: int) -> int:
        """What decoding one row group holds in memory: about its bytes, twice (Python values beside them)."""
        return 2 * (shard.boundaries[row_group + 1] - shard.boundaries[row_group])


def _schema(entry: dict[str, Any], where: str) -> pa.Schema:
    names, encodings = entry.get("column_names") or [], entry.get("column_encodings") or []
    if len(names) != len(encodings) or not names:
        raise RegistrationError(f"{where}: a shard's column names and encodings do not pair up")
    return pa.schema([(n, column_codec(str(e), arrays=True)[0]) for n, e in zip(names, encodings)])


class OpenMdsShard:
    """A registered MDS shard opened for reading: header and columns checked once, each row group on every fetch."""

    def __init__(self, shard: ShardInfo, *, where: str, cache: bool = True) -> None:
        self.shard = shard
        self.where = where
        self.cache = cache
        check_present(shard, where=where)
        try:
            self.index, entry = index_entry(shard.uri)
            count, offsets = _header(shard.uri, shard.size, where)
        except RegistrationError as exc:
            raise ChecksumMismatch(f"{where}: {exc.message} (changed after registration)") from exc
        head = storage.read_range(shard.uri, 0, int(offsets[0]), cache=cache)
        if digest(head + json.dumps(_columns(entry), sort_keys=True).encode()) != shard.footer_digest:
            raise ChecksumMismatch(f"{where}: the header of shard {shard.uri} or its columns in {self.index} changed after registration")
        self.offsets = offsets
        self.schema = _schema(entry, self.index)
        self.codecs = [column_codec(str(e), arrays=True) for e in entry["column_encodings"]]
        self._firsts = np.concatenate([[0], np.cumsum(shard.row_groups)]).astype(np.int64)

    def read_row_group(self, row_group: int, columns: list[str] | None = None) -> pa.Table:
        """Fetch, verify and decode one row group's samples."""
        data = memoryview(fetch(self.shard, row_group, where=self.where, cache=self.cache))
        first, count = int(self._firsts[row_group]), self.shard.row_groups[row_group]
        base = self.shard.boundaries[row_group]
        rows = []
        for row in range(first, first + count):
            begin, end = int(self.offsets[row]) - base, int(self.offsets[row + 1]) - base
            rows.append(decode_sample(data[begin:end], self.codecs, f"{self.where} sample {row}"))
        table = pa.table([pa.array([r[i] for r in rows], type=f.type) for i, f in enumerate(self.schema)], schema=self.schema)
        return table.select(columns) if columns is not None else table


MDS = _Mds()

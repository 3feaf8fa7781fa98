"""Megatron indexed datasets as shards: a ``PREFIX.bin`` of token sequences and the ``PREFIX.idx`` that describes it,
read in place (what megatron-core's ``IndexedDatasetBuilder`` writes and its ``IndexedDataset`` reads).

A version's shard is the ``.bin`` file; its ``.idx`` sits beside it. The ``.idx`` is a 34-byte header (``MMIDIDX``
magic, version 1, the token dtype's code, the sequence and document counts), then each sequence's length (int32),
each sequence's byte offset in the ``.bin`` (int64), and the document indices (int64). Record ``i`` of a shard is
sequence ``i`` (megatron's "document" of a GPT dataset): ``{"document": i, "tokens": [...]}``.

Sequences are cut into row groups of about :data:`GROUP_BYTES` of ``.bin``. Each row group's segment digest covers
its sequences' lengths and offsets in the ``.idx`` and their bytes in the ``.bin``; the "footer" digest covers the
``.idx`` header and document indices. A read checks both files' bytes for the group before decoding them, so a
``.bin`` or ``.idx`` changed after registration is refused, naming it.

>>> import os, tempfile
>>> prefix = os.path.join(tempfile.mkdtemp(), "corpus")
>>> write_indexed(prefix, [[5, 6, 7], [8], [9, 10]], dtype=np.int32)
>>> info, schema = scan(prefix + ".bin", group_bytes=16)
>>> (info.rows, info.row_groups, str(schema.field("tokens").type))
(3, (2, 1), 'list<item: int32>')
>>> MEGATRON_INDEXED.open(info, where="corpus").read_row_group(1).to_pylist()
[{'document': 2, 'tokens': [9, 10]}]
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np
import pyarrow as pa

from ..errors import ChecksumMismatch, CorruptData, RegistrationError
from . import files as storage
from .segments import digest, fetch, group_starts, hash_range
from .shards import ShardInfo, check_present

MAGIC = b"MMIDIDX\x00\x00"
HEADER = 34
#: megatron-core's ``DType`` codes.
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}
#: Bytes of ``.bin`` per row group, about (a sequence stays whole in the group it starts in).
GROUP_BYTES = 1 << 20


def idx_path(bin_path: str) -> str:
    """The ``.idx`` beside a ``.bin``."""
    return bin_path[: -len(".bin")] + ".idx" if bin_path.endswith(".bin") else bin_path + ".idx"


class _Header:
    """An ``.idx`` header: the token dtype, the sequence and document counts, and where each array starts."""

    def __init__(self, raw: bytes, where: str) -> None:
        if len(raw) < HEADER or raw[:9] != MAGIC:
            raise RegistrationError(f"{where}: not a megatron index (no MMIDIDX header)")
        version, code, self.sequences, self.documents = struct.unpack("<QBQQ", raw[9:HEADER])
        if version != 1 or code not in DTYPES:
            raise RegistrationError(f"{where}: megatron index version {version} with dtype code {code} is not readable (version 1 is)")
        self.raw = raw[:HEADER]
        self.dtype = np.dtype(DTYPES[code])
        self.pointers_at = HEADER + 4 * self.sequences
        self.documents_at = self.pointers_at + 8 * self.sequences
        self.size = self.documents_at + 8 * self.documents


def _header(idx: str) -> _Header:
    stat = storage.stat(idx)
    if not stat.exists:
        raise RegistrationError(f"{idx}: no such file (the .idx of a megatron indexed dataset)")
    header = _Header(storage.read_range(idx, 0, min(HEADER, stat.size), cache=False), idx)
    if stat.size != header.size:
        multimodal = " (a multimodal index, not read)" if stat.size == header.size + header.sequences else ""
        raise RegistrationError(f"{idx}: {stat.size} bytes, its header describes {header.size}{multimodal}")
    return header


def _array(uri: str, offset: int, count: int, dtype: type) -> np.ndarray:
    return np.frombuffer(storage.read_range(uri, offset, count * np.dtype(dtype).itemsize, cache=False), dtype=dtype)


def _footer(header: _Header, idx: str) -> bytes:
    return header.raw + storage.read_range(idx, header.documents_at, header.size - header.documents_at, cache=False)


def _prefix(idx: str, header: _Header, first: int, count: int, *, cache: bool) -> bytes:
    """The ``.idx`` bytes of sequences ``[first, first + count)``: their lengths, then their offsets."""
    lengths = storage.read_range(idx, HEADER + 4 * first, 4 * count, cache=cache)
    pointers = storage.read_range(idx, header.pointers_at + 8 * first, 8 * count, cache=cache)
    return lengths + pointers


def scan(uri: str, *, group_bytes: int | None = None) -> tuple[ShardInfo, pa.Schema]:
    """Describe one ``.bin`` (and its ``.idx``) for a manifest: sequences, row groups and their digests."""
    uri = storage.normalize(uri)
    stat = storage.stat(uri)
    if not stat.exists:
        raise RegistrationError(f"{uri}: no such file")
    idx = idx_path(uri)
    header = _header(idx)
    lengths = _array(idx, HEADER, header.sequences, np.int32).astype(np.int64)
    pointers = _array(idx, header.pointers_at, header.sequences, np.int64)
    ends = np.cumsum(lengths) * header.dtype.itemsize
    if np.any(lengths < 0) or not np.array_equal(pointers, ends - lengths * header.dtype.itemsize):
        raise RegistrationError(f"{idx}: its sequences are not laid out one after another in {uri} (as megatron's builder writes them)")
    if (int(ends[-1]) if len(ends) else 0) != stat.size:
        raise RegistrationError(f"{idx}: its sequences hold {int(ends[-1]) if len(ends) else 0} bytes, {uri} has {stat.size}")
    firsts = group_starts(pointers, group_bytes or GROUP_BYTES)
    counts = np.diff(np.asarray(firsts + [header.sequences], dtype=np.int64)).tolist()
    boundaries = [int(pointers[f]) for f in firsts] + [stat.size]
    digests = tuple(
        hash_range(uri, boundaries[g], boundaries[g + 1], prefix=_prefix(idx, header, first, count, cache=False))
        for g, (first, count) in enumerate(zip(firsts, counts))
    )
    shard = ShardInfo(
        uri=uri,
        size=stat.size,
        rows=header.sequences,
        row_groups=tuple(int(c) for c in counts),
        boundaries=tuple(boundaries),
        segment_digests=digests,
        footer_digest=digest(_footer(header, idx)),
    )
    return shard, _schema(header.dtype)


def _schema(dtype: np.dtype) -> pa.Schema:
    return pa.schema([("document", pa.int64()), ("tokens", pa.list_(pa.from_numpy_dtype(dtype)))])


class OpenIndexedShard:
    """A registered ``.bin``/``.idx`` pair opened for reading: the ``.idx`` header and document indices checked once,
    each row group's bytes of both files on every fetch."""

    def __init__(self, shard: ShardInfo, *, where: str, cache: bool = True) -> None:
        self.shard = shard
        self.where = where
        self.cache = cache
        check_present(shard, where=where)
        self.idx = idx_path(shard.uri)
        try:
            self.header = _header(self.idx)
            footer = _footer(self.header, self.idx)
        except RegistrationError as exc:
            raise ChecksumMismatch(f"{where}: {exc.message} (changed after registration)") from exc
        if digest(footer) != shard.footer_digest or self.header.sequences != shard.rows:
            raise ChecksumMismatch(f"{where}: index {self.idx} of shard {shard.uri} changed after registration")
        self.schema = _schema(self.header.dtype)
        self._firsts = np.concatenate([[0], np.cumsum(shard.row_groups)]).astype(np.int64)

    def read_row_group(self, row_group: int, columns: list[str] | None = None) -> pa.Table:
        """Fetch, verify and decode one row group's sequences."""
        first, count = int(self._firsts[row_group]), self.shard.row_groups[row_group]
        prefix = _prefix(self.idx, self.header, first, count, cache=self.cache)
        data = fetch(self.shard, row_group, where=f"{self.where} ({self.idx} and its .bin)", prefix=prefix, cache=self.cache)
        lengths = np.frombuffer(prefix[: 4 * count], dtype=np.int32)
        tokens = np.frombuffer(data, dtype=self.header.dtype)
        if int(lengths.sum()) != len(tokens):
            raise CorruptData(
                f"{self.where}: row group {row_group} of {self.shard.uri} holds {len(tokens)} tokens, its index says {lengths.sum()}"
            )
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int32))
        table = pa.table(
            {
                "document": pa.array(np.arange(first, first + count, dtype=np.int64)),
                "tokens": pa.ListArray.from_arrays(offsets, pa.array(tokens)),
            },
            schema=self.schema,
        )
        return table.select(columns) if columns is not None else table


class _MegatronIndexed:
    """The megatron indexed-dataset shard format (see :mod:`loaders.storage.formats`)."""

    name = "megatron-indexed"
    extensions = (".bin",)

    def scan(self, uri: str) -> tuple[ShardInfo, pa.Schema]:
        return scan(uri)

    def open(self, shard: ShardInfo, *, where: str, cache: bool = True) -> OpenIndexedShard:
        return OpenIndexedShard(shard, where=where, cache=cache)

    def decoded_bytes(self, shard: ShardInfo, row_group: int) -> int:
        """What decoding one row group holds in memory: its tokens, and an offset per sequence."""
        return shard.boundaries[row_group + 1] - shard.boundaries[row_group] + 8 * shard.row_groups[row_group]


MEGATRON_INDEXED = _MegatronIndexed()


def write_indexed(prefix: str, sequences: Sequence[Sequence[int]], *, dtype: type = np.int32) -> None:
    """Write ``sequences`` as ``prefix.bin``/``prefix.idx`` in megatron's layout, one document per sequence (for
    examples and tests; real corpora come from megatron-core's own ``IndexedDatasetBuilder``)."""
    code = {np.dtype(v): k for k, v in DTYPES.items()}[np.dtype(dtype)]
    arrays = [np.asarray(s, dtype=dtype) for s in sequences]
    lengths = np.asarray([len(a) for a in arrays], dtype=np.int32)
    pointers = (np.concatenate([[0], np.cumsum(lengths)[:-1]]) * np.dtype(dtype).itemsize).astype(np.int64)
    with open(prefix + ".bin", "wb") as f:
        for array in arrays:
            f.write(array.tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC + struct.pack("<QBQQ", 1, code, len(arrays), len(arrays) + 1))
        f.write(lengths.tobytes() + pointers.tobytes() + np.arange(len(arrays) + 1, dtype=np.int64).tobytes())

"""Token files as shards: headerless arrays of concatenated documents, as the Dolma toolkit and OLMo write them
(``part-00.npy``: ``np.memmap`` of uint16 or uint32 tokens, each document ending with the EOS token), read in place.

The files say nothing about themselves, so the format takes options (:func:`loaders.storage.formats.format_name`):
``dtype`` (``uint8``, ``uint16``, ``uint32``, ``uint64``), ``eos`` and, when the tokenizer has one, ``bos``. A document
ends at an EOS token, or, with ``bos``, at an EOS followed by a BOS (and at the file's last token when it is an EOS):
OLMo-core's rule (``olmo_core.data.utils.iter_document_indices``). Tokens after the last boundary are one last,
unterminated document. Record ``i`` of a shard is its document ``i``: ``{"document": i, "start": first token, "tokens":
[...]}``.

Documents are cut into row groups of about :data:`GROUP_BYTES`; each row group is one checked segment (its documents'
bytes), and a read finds the documents of the segment again by the same rule.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "part-0.npy")
>>> np.asarray([5, 6, 0, 7, 0, 8, 9], dtype=np.uint16).tofile(path)
>>> tokens = NUMPY_TOKENS.configured({"dtype": "uint16", "eos": "0"})
>>> info, _ = tokens.scan(path)
>>> info.rows, tokens.open(info, where=path).read_row_group(0).to_pylist()[2]
(3, {'document': 2, 'start': 5, 'tokens': [8, 9]})
>>> document_ends(np.asarray([3, 0, 4, 0, 1, 5, 0], dtype=np.uint16), eos=0, bos=1).tolist()
[4, 7]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pyarrow as pa

from ..errors import ChecksumMismatch, CorruptData, RegistrationError
from . import files as storage
from .segments import digest, fetch, group_starts, hash_range
from .shards import ShardInfo, check_present

DTYPES = ("uint8", "uint16", "uint32", "uint64")
#: Bytes of tokens per row group, about (a document stays whole in the group it starts in).
GROUP_BYTES = 1 << 20


def document_ends(tokens: np.ndarray, *, eos: int, bos: int | None) -> np.ndarray:
    """One past the last token of every terminated document of ``tokens`` (OLMo-core's boundary rule)."""
    if bos is None:
        return np.flatnonzero(tokens == eos) + 1
    ends = np.flatnonzero((tokens[:-1] == eos) & (tokens[1:] == bos)) + 1
    if len(tokens) and tokens[-1] == eos:
        ends = np.append(ends, len(tokens))
    return ends


@dataclass(frozen=True)
class NumpyTokens:
    """The token-file format with its options (a plain value: options are validated when it is made)."""

    dtype: str = ""
    eos: int | None = None
    bos: int | None = None
    name: str = "numpy-tokens"
    extensions: tuple[str, ...] = (".npy",)

    def configured(self, options: Mapping[str, str]) -> "NumpyTokens":
        """This format with ``dtype``, ``eos`` and optionally ``bos``."""
        unknown = sorted(set(options) - {"dtype", "eos", "bos"})
        if unknown or options.get("dtype") not in DTYPES or "eos" not in options:
            raise RegistrationError(f"numpy-tokens takes dtype ({', '.join(DTYPES)}), eos and optionally bos; given {dict(options)!r}")
        try:
            eos, bos = int(options["eos"]), int(options["bos"]) if options.get("bos") not in (None, "") else None
        except ValueError:
            raise RegistrationError(
                f"numpy-tokens: eos and bos are token ids, not {options.get('eos')!r}, {options.get('bos')!r}"
            ) from None
        return NumpyTokens(options["dtype"], eos, bos)

    def _check(self) -> np.dtype:
        if self.dtype not in DTYPES or self.eos is None:
            raise RegistrationError("the numpy-tokens format needs its options: numpy-tokens?dtype=uint16&eos=0[&bos=1]")
        return np.dtype(self.dtype)

    def _footer(self, documents: int, tokens: int) -> bytes:
        spec = {"dtype": self.dtype, "eos": self.eos, "bos": self.bos, "documents": documents, "tokens": tokens}
        return json.dumps(spec, sort_keys=True).encode()

    def schema(self) -> pa.Schema:
        kind = pa.from_numpy_dtype(self._check())
        return pa.schema([("document", pa.int64()), ("start", pa.int64()), ("tokens", pa.list_(kind))])

    def scan(self, uri: str, *, group_bytes: int | None = None) -> tuple[ShardInfo, pa.Schema]:
        """Describe one token file: its documents, row groups and their digests (the file is read once)."""
        dtype = self._check()
        uri = storage.normalize(uri)
        if storage.is_remote(uri):
            raise RegistrationError(f"{uri}: token files are read in place from a local path")
        stat = storage.stat(uri)
        if not stat.exists:
            raise RegistrationError(f"{uri}: no such file")
        if stat.size % dtype.itemsize:
            raise RegistrationError(f"{uri}: {stat.size} bytes is not a whole number of {self.dtype} tokens")
        tokens = np.memmap(uri, dtype=dtype, mode="r") if stat.size else np.zeros(0, dtype)
        ends = document_ends(tokens, eos=int(self.eos or 0), bos=self.bos)
        starts = np.concatenate([[0], ends])
        starts = starts[starts < len(tokens)]  # a tail after the last boundary is one more (unterminated) document
        firsts = group_starts(starts * dtype.itemsize, group_bytes or GROUP_BYTES)
        counts = np.diff(np.asarray(firsts + [len(starts)], dtype=np.int64)).tolist()
        boundaries = [int(starts[f]) * dtype.itemsize for f in firsts] + [stat.size]
        shard = ShardInfo(
            uri=uri,
            size=stat.size,
            rows=len(starts),
            row_groups=tuple(int(c) for c in counts),
            boundaries=tuple(boundaries),
            segment_digests=tuple(hash_range(uri, a, b) for a, b in zip(boundaries, boundaries[1:])),
            footer_digest=digest(self._footer(len(starts), len(tokens))),
        )
        return shard, self.schema()

    def open(self, shard: ShardInfo, *, where: str, cache: bool = True) -> "OpenTokenShard":
        return OpenTokenShard(self, shard, where=where, cache=cache)

    def decoded_bytes(self, shard: ShardInfo, row_group: int) -> int:
        """What decoding one row group holds in memory: its tokens, and two numbers per document."""
        return shard.boundaries[row_group + 1] - shard.boundaries[row_group] + 16 * shard.row_groups[row_group]


class OpenTokenShard:
    """A registered token file opened for reading: each row group's bytes checked before its documents are cut."""

    def __init__(self, fmt: NumpyTokens, shard: ShardInfo, *, where: str, cache: bool = True) -> None:
        self.fmt = fmt
        self.dtype = fmt._check()
        self.shard = shard
        self.where = where
        self.cache = cache
        check_present(shard, where=where)
        if digest(fmt._footer(shard.rows, shard.size // self.dtype.itemsize)) != shard.footer_digest:
            raise ChecksumMismatch(f"{where}: token file {shard.uri} was registered with other options than {fmt.dtype}, eos {fmt.eos}")
        self.schema = fmt.schema()
        self._firsts = np.concatenate([[0], np.cumsum(shard.row_groups)]).astype(np.int64)

    def read_range(self, start: int, end: int) -> np.ndarray:
        """Tokens ``[start, end)`` of the file, from the checked bytes of the row groups that hold them."""
        itemsize = self.dtype.itemsize
        bounds = self.shard.boundaries
        first = int(np.searchsorted(bounds, start * itemsize, side="right")) - 1
        last = int(np.searchsorted(bounds, end * itemsize, side="left"))
        if start < 0 or end * itemsize > self.shard.size or start > end:
            raise CorruptData(f"{self.where}: tokens {start}-{end} are outside {self.shard.uri}")
        data = b"".join(fetch(self.shard, g, where=self.where, cache=self.cache) for g in range(max(0, first), max(first + 1, last)))
        base = bounds[max(0, first)] // itemsize
        return np.frombuffer(data, dtype=self.dtype)[start - base : end - base]

    def read_row_group(self, row_group: int, columns: list[str] | None = None) -> pa.Table:
        """Fetch, verify and cut one row group into its documents."""
        data = fetch(self.shard, row_group, where=self.where, cache=self.cache)
        tokens = np.frombuffer(data, dtype=self.dtype)
        ends = document_ends(tokens, eos=int(self.fmt.eos or 0), bos=self.fmt.bos)
        if not len(ends) or ends[-1] != len(tokens):
            ends = np.append(ends, len(tokens))  # a group ends where a document ends (or the file's unterminated tail)
        count = self.shard.row_groups[row_group]
        if len(ends) != count:
            raise CorruptData(f"{self.where}: row group {row_group} of {self.shard.uri} holds {len(ends)} documents, registered as {count}")
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        base = self.shard.boundaries[row_group] // self.dtype.itemsize
        first = int(self._firsts[row_group])
        table = pa.table(
            {
                "document": pa.array(np.arange(first, first + count, dtype=np.int64)),
                "start": pa.array(offsets[:-1].astype(np.int64) + base),
                "tokens": pa.ListArray.from_arrays(pa.array(offsets), pa.array(tokens)),
            },
            schema=self.schema,
        )
        return table.select(columns) if columns is not None else table


NUMPY_TOKENS = NumpyTokens()

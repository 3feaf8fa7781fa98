"""Vectorized 64-bit hashes of Arrow values, one per row: equal values hash equal, different values almost never do.

The diff engine compares millions of rows by these hashes instead of decoding
them into Python. Everything here is numpy over Arrow buffers (no per-row
Python), works on any nesting of lists, structs and maps, and is
deterministic across processes and machines (no salted hashes), so hashes
can be cached on disk.

Equality follows the stored bits, like :func:`loaders.catalog.records.content_key`:
every NaN equals every NaN, ``-0.0`` differs from ``0.0``, a null differs
from an empty string or list.

>>> import pyarrow as pa
>>> h = hash_array(pa.array(["a", "b", "a", None]))
>>> bool(h[0] == h[2]), bool(h[0] == h[1]), bool(h[3] == h[0])
(True, False, False)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..catalog.records import content_key

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_NULL = 0x6A09E667F3BCC909
_S32 = np.uint64(32)
_S33 = np.uint64(33)
_CHUNK_WORDS = 1 << 14  # per-chunk working set that stays in L2 cache
_CANONICAL_NAN = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}

# Type tags keep equal bit patterns of different shapes apart (the int 0 vs "" vs []).
_TAG_FIXED, _TAG_BYTES, _TAG_LIST, _TAG_STRUCT, _TAG_BOOL, _TAG_OTHER = range(1, 7)


def fmix(x: np.ndarray) -> np.ndarray:
    """Murmur3's 64-bit finalizer, in place on a ``uint64`` array (a bijection that spreads every bit)."""
    t = x >> _S33
    x ^= t
    x *= _M1
    np.right_shift(x, _S33, out=t)
    x ^= t
    x *= _M2
    np.right_shift(x, _S33, out=t)
    x ^= t
    return x


def _seeded(seed: int, tag: int) -> np.uint64:
    return fmix(np.array([(seed * 0x100000001B3 + tag * 0x9E3779B1) & 0xFFFFFFFFFFFFFFFF], np.uint64))[0]


def hash_array(array: pa.Array | pa.ChunkedArray, *, seed: int = 0) -> np.ndarray:
    """One ``uint64`` hash per element of ``array`` (any Arrow type); ``seed`` picks an independent hash family.

    >>> import pyarrow as pa
    >>> hash_array(pa.array([[1, 2], [2, 1]])).tolist()[0] != hash_array(pa.array([[2, 1]])).tolist()[0]
    True
    """
    if isinstance(array, pa.ChunkedArray):
        parts = [_hash(chunk, seed) for chunk in array.chunks]
        return np.concatenate(parts) if parts else np.empty(0, np.uint64)
    return _hash(array, seed)


def combine(hashes: list[np.ndarray], *, seed: int = 0) -> np.ndarray:
    """Fold several per-row hashes (one array per column, in order) into one per-row hash."""
    if not hashes:
        raise ValueError("combine needs at least one hash array")
    out = np.full(len(hashes[0]), _seeded(seed, _TAG_STRUCT), np.uint64)
    for h in hashes:
        out *= _GOLDEN
        out ^= h
        fmix(out)
    return out


def _with_nulls(array: pa.Array, h: np.ndarray, seed: int) -> np.ndarray:
    if array.null_count:
        valid = np.asarray(array.is_valid())
        h[~valid] = _seeded(seed, _NULL)
    return h


def _hash(array: pa.Array, seed: int) -> np.ndarray:
    type_ = array.type
    n = len(array)
    if n == 0:
        return np.empty(0, np.uint64)
    if isinstance(type_, pa.ExtensionType):
        return _hash(array.storage, seed)
    if pa.types.is_dictionary(type_):
        values = _hash(array.dictionary, seed)
        indices = np.asarray(array.indices.fill_null(0)).astype(np.int64)
        return _with_nulls(array, values[indices] if len(values) else np.zeros(n, np.uint64), seed)
    if pa.types.is_null(type_):
        return np.full(n, _seeded(seed, _NULL), np.uint64)
    if pa.types.is_boolean(type_):
        bits = np.unpackbits(np.frombuffer(array.buffers()[1], np.uint8), bitorder="little")
        h = bits[array.offset : array.offset + n].astype(np.uint64)
        h += _seeded(seed, _TAG_BOOL)
        return _with_nulls(array, fmix(h), seed)
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        return _with_nulls(array, _hash_binary(array, np.int32, seed), seed)
    if pa.types.is_large_string(type_) or pa.types.is_large_binary(type_):
        return _with_nulls(array, _hash_binary(array, np.int64, seed), seed)
    if pa.types.is_string_view(type_) or pa.types.is_binary_view(type_):
        target = pa.large_string() if pa.types.is_string_view(type_) else pa.large_binary()
        return _hash(pc.cast(array, target), seed)
    if pa.types.is_fixed_size_binary(type_) or pa.types.is_decimal(type_) or pa.types.is_interval(type_):
        width = type_.byte_width if pa.types.is_fixed_size_binary(type_) else type_.bit_width // 8
        data = np.frombuffer(array.buffers()[1], np.uint8)[array.offset * width : (array.offset + n) * width]
        offsets = np.arange(n + 1, dtype=np.int64) * width
        return _with_nulls(array, _hash_bytes(offsets, data, seed), seed)
    if _is_fixed_width(type_):
        return _with_nulls(array, _hash_fixed(array, seed), seed)
    if pa.types.is_struct(type_):
        h = np.full(n, _seeded(seed, _TAG_STRUCT + 16 * type_.num_fields), np.uint64)
        for i in range(type_.num_fields):
            h *= _GOLDEN
            h ^= _hash(array.field(i), seed)
            fmix(h)
        return _with_nulls(array, h, seed)
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_map(type_):
        offsets = np.asarray(array.offsets).astype(np.int64)
        return _with_nulls(array, _hash_lists(offsets, array.values, seed), seed)
    if pa.types.is_fixed_size_list(type_):
        size = type_.list_size
        offsets = (np.arange(n + 1, dtype=np.int64) + array.offset) * size
        return _with_nulls(array, _hash_lists(offsets, array.values, seed), seed)
    if pa.types.is_large_list_view(type_) or pa.types.is_list_view(type_):
        return _hash(pc.cast(array, pa.large_list(type_.value_type)), seed)
    return _hash_slow(array, seed)


def _is_fixed_width(type_: pa.DataType) -> bool:
    return (pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_temporal(type_)) and type_.bit_width in (8, 16, 32, 64)


def _fixed_values(array: pa.Array) -> np.ndarray:
    """The values of a fixed-width array as unsigned ints of the same width (NaNs made canonical)."""
    width = array.type.bit_width // 8
    raw = np.frombuffer(array.buffers()[1], dtype=f"<u{width}", count=array.offset + len(array))[array.offset :]
    if pa.types.is_floating(array.type):
        floats = raw.view(f"<f{width}")
        nan = np.isnan(floats)
        if nan.any():
            raw = raw.copy()
            raw[nan] = _CANONICAL_NAN[width]
    return raw


def _hash_fixed(array: pa.Array, seed: int) -> np.ndarray:
    h = _fixed_values(array).astype(np.uint64)
    h ^= _seeded(seed, _TAG_FIXED + 16 * array.type.bit_width)
    return fmix(h)


def _hash_binary(array: pa.Array, offset_type: type, seed: int) -> np.ndarray:
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], offset_type, count=array.offset + len(array) + 1)[array.offset :]
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.empty(0, np.uint8)
    return _hash_bytes(offsets.astype(np.int64), data, seed)


def _hash_bytes(offsets: np.ndarray, data: np.ndarray, seed: int) -> np.ndarray:
    """Hash ``data[offsets[i]:offsets[i+1]]`` for every ``i``, eight bytes at a time."""
    n = len(offsets) - 1
    base, end = int(offsets[0]), int(offsets[-1])
    padded = np.zeros(end - base + 8, np.uint8)
    padded[: end - base] = data[base:end]
    # Every byte position viewed as the start of a little-endian 64-bit word (numpy allows unaligned views).
    words = np.ndarray((end - base + 1,), "<u8", padded, 0, (1,))
    starts = offsets[:-1] - base
    lengths = offsets[1:] - offsets[:-1]
    out = np.empty(n, np.uint64)
    counts = (lengths + 7) >> 3
    first = 0
    while first < n:
        last = _chunk_end(counts, first)
        out[first:last] = _sum_words(words, starts[first:last], lengths[first:last], counts[first:last])
        first = last
    out ^= fmix(lengths.astype(np.uint64) + _seeded(seed, _TAG_BYTES))
    return fmix(out)


def _chunk_end(counts: np.ndarray, first: int) -> int:
    """End of a run of rows starting at ``first`` whose word count stays near the cache-sized chunk."""
    total = np.cumsum(counts[first : first + _CHUNK_WORDS])
    return first + max(1, int(np.searchsorted(total, _CHUNK_WORDS, side="right")))


def _sum_words(words: np.ndarray, starts: np.ndarray, lengths: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per row: the wrapping sum of mixed (word, position in row) pairs; order-sensitive."""
    word_offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=word_offsets[1:])
    total = int(word_offsets[-1])
    if total == 0:
        return np.zeros(len(counts), np.uint64)
    position = np.arange(total, dtype=np.int64)
    position -= np.repeat(word_offsets[:-1], counts)
    at = np.repeat(starts, counts)
    at += position << 3
    w = words[at]
    tail = lengths & 7
    partial = tail != 0
    ends = word_offsets[1:][partial] - 1
    w[ends] &= (np.uint64(1) << (tail[partial] << 3).astype(np.uint64)) - np.uint64(1)
    return _position_sums(w, position, word_offsets)


def _position_sums(values: np.ndarray, position: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Mix each value with its position inside its row, then sum per row (wrapping at 2**64)."""
    mixed = position.view(np.uint64) * _GOLDEN
    mixed ^= values
    t = np.empty_like(mixed)
    mixed *= _M1
    np.right_shift(mixed, _S32, out=t)
    mixed ^= t
    mixed *= _M2
    # A trailing zero keeps every start index valid (empty rows at the end) without changing any sum.
    padded = np.append(mixed, np.uint64(0))
    sums = np.add.reduceat(padded, offsets[:-1])
    sums[offsets[1:] == offsets[:-1]] = 0  # reduceat gives an empty row the value at its index
    return sums


def _hash_lists(offsets: np.ndarray, values: pa.Array, seed: int) -> np.ndarray:
    """Hash each list ``values[offsets[i]:offsets[i+1]]``; element order matters."""
    lo, hi = int(offsets[0]), int(offsets[-1])
    child = values.slice(lo, hi - lo)
    local = offsets - lo
    lengths = local[1:] - local[:-1]
    tag = _seeded(seed, _TAG_LIST)
    if _is_fixed_width(child.type) and child.null_count == 0:
        # Lists of plain numbers (token ids, masks, logprobs) hash as their bytes: far fewer operations.
        raw = _fixed_values(child)
        width = raw.dtype.itemsize
        sums = _hash_bytes(local * width, raw.view(np.uint8), seed + 1)
    else:
        element = _hash(child, seed + 1) if len(child) else np.empty(0, np.uint64)
        sums = np.empty(len(lengths), np.uint64)
        first = 0
        while first < len(lengths):
            last = _chunk_end(lengths, first)
            part = local[first : last + 1] - local[first]
            position = np.arange(int(part[-1]), dtype=np.int64)
            position -= np.repeat(part[:-1], lengths[first:last])
            sums[first:last] = _position_sums(element[local[first] : local[last]], position, part)
            first = last
    sums ^= fmix(lengths.astype(np.uint64) + tag)
    return fmix(sums)


def _hash_slow(array: pa.Array, seed: int) -> np.ndarray:
    """Types with no vectorized path (unions...): hash each decoded value."""
    return np.array([int(content_key({"v": value, "seed": seed})[1:17], 16) for value in array.to_pylist()], np.uint64)


def _is_plain_bytes(type_: pa.DataType) -> bool:
    return pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_binary(type_) or pa.types.is_large_binary(type_)


def equal_values(x: pa.Array | pa.ChunkedArray, y: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Element-wise equality of two same-typed arrays, by the same rules as the hashes (bits; NaN equals NaN).

    A null equals only a null. Plain numbers and strings are compared
    directly; nested values through their hashes.

    >>> import pyarrow as pa
    >>> equal_values(pa.array(["a", None, "c"]), pa.array(["a", None, "d"])).tolist()
    [True, True, False]
    """
    if isinstance(x, pa.ChunkedArray):
        x = x.combine_chunks()
    if isinstance(y, pa.ChunkedArray):
        y = y.combine_chunks()
    type_ = x.type
    if _is_fixed_width(type_) and y.type.equals(type_):
        equal = _fixed_values(x) == _fixed_values(y)
    elif _is_plain_bytes(type_) and y.type.equals(type_):
        equal = pc.fill_null(pc.equal(x, y), False).to_numpy(zero_copy_only=False)
    else:
        return hash_array(x) == hash_array(y)
    if x.null_count or y.null_count:
        valid_x = x.is_valid().to_numpy(zero_copy_only=False)
        valid_y = y.is_valid().to_numpy(zero_copy_only=False)
        equal = np.where(valid_x & valid_y, equal, valid_x == valid_y)
    return equal

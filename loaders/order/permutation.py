"""Keyed pseudo-random permutations of ``range(n)`` in O(1) memory: a Feistel network with cycle walking.

Nothing is materialized: ``perm(i)`` is computed from ``i`` and the key alone,
so a shuffled order over a billion records costs a few integer operations per
lookup and no memory, and it is identical on every machine forever.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

from ..storage.cache import ByteLRU

_M64 = (1 << 64) - 1
_ROUNDS = 6
#: Permutations up to this size are tabulated when a call asks for at least 1/_TABLE_USE of them.
_TABLE_MAX = 1 << 17
_TABLE_USE = 32
_TABLES: ByteLRU[np.ndarray] = ByteLRU(budget=32 << 20, size_of=lambda table: table.nbytes)


def derive_key(*parts: object) -> int:
    """A 64-bit key from any tuple of ints and strings (stable across processes and machines).

    >>> derive_key(0, "chunks", 3) == derive_key(0, "chunks", 3)
    True
    """
    text = "\x1f".join(f"{type(p).__name__}:{p}" for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _mix(x: int) -> int:
    """splitmix64 finalizer on Python ints."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _mix_np(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on uint64 arrays (wrapping arithmetic)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class Permutation:
    """A bijection of ``range(n)`` chosen by ``key``.

    >>> p = Permutation(10, key=7)
    >>> sorted(p(i) for i in range(10)) == list(range(10))
    True
    >>> p.inverse(p(3))
    3
    """

    __slots__ = ("n", "key", "_half", "_mask", "_round_keys")

    def __init__(self, n: int, key: int) -> None:
        if n < 0:
            raise ValueError(f"permutation size must be >= 0, got {n}")
        self.n = n
        self.key = key
        bits = max(2, (max(n, 2) - 1).bit_length())
        bits += bits % 2
        self._half = bits // 2
        self._mask = (1 << self._half) - 1
        self._round_keys = tuple(_mix(key ^ _mix(r + 1)) for r in range(_ROUNDS))

    def _encrypt(self, x: int) -> int:
        half, mask = self._half, self._mask
        left, right = x >> half, x & mask
        for k in self._round_keys:
            left, right = right, left ^ (_mix(right ^ k) & mask)
        return (left << half) | right

    def _decrypt(self, x: int) -> int:
        half, mask = self._half, self._mask
        left, right = x >> half, x & mask
        for k in reversed(self._round_keys):
            left, right = right ^ (_mix(left ^ k) & mask), left
        return (left << half) | right

    def __call__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(f"index {i} outside permutation of size {self.n}")
        if self.n == 1:
            return 0
        x = self._encrypt(i)
        while x >= self.n:  # cycle walking: expected < 4 steps since 2**bits < 4n
            x = self._encrypt(x)
        return x

    def inverse(self, j: int) -> int:
        """The ``i`` with ``self(i) == j``."""
        if not 0 <= j < self.n:
            raise IndexError(f"index {j} outside permutation of size {self.n}")
        if self.n == 1:
            return 0
        x = self._decrypt(j)
        while x >= self.n:
            x = self._decrypt(x)
        return x

    def map(self, indices: np.ndarray) -> np.ndarray:
        """Vectorized ``self(i)`` over an integer array.

        When many indices of a small permutation are asked for (a reader
        drawing a shuffle window), the whole permutation is computed once into
        a table kept in a small, byte-bounded cache: O(1) memory still, since
        the table size is capped independently of the dataset.
        """
        idx = np.asarray(indices, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            raise IndexError(f"indices outside permutation of size {self.n}")
        if self.n <= 1:
            return np.zeros_like(idx)
        if self.n <= _TABLE_MAX and idx.size * _TABLE_USE >= self.n:
            table = _TABLES.get_or_make((self.n, self.key), lambda: self._compute(np.arange(self.n, dtype=np.int64)).astype(np.int32))
            return table[idx].astype(np.int64)
        return self._compute(idx)

    def _compute(self, idx: np.ndarray) -> np.ndarray:
        half = np.uint64(self._half)
        mask = np.uint64(self._mask)
        keys = [np.uint64(k) for k in self._round_keys]

        def encrypt(x: np.ndarray) -> np.ndarray:
            left, right = x >> half, x & mask
            for k in keys:
                left, right = right, left ^ (_mix_np(right ^ k) & mask)
            return (left << half) | right

        with np.errstate(over="ignore"):
            x = encrypt(idx.astype(np.uint64))
            pending = x >= np.uint64(self.n)
            while pending.any():
                x[pending] = encrypt(x[pending])
                pending = x >= np.uint64(self.n)
        return x.astype(np.int64)


#: splitmix64's finalizer, for other modules that need a cheap, stable 64-bit mix (digests).
mix64 = _mix
mix64_array = _mix_np


@lru_cache(maxsize=4096)
def permutation(n: int, *key_parts: object) -> Permutation:
    """A cached permutation of ``range(n)`` keyed by ``key_parts`` (e.g. seed, source, epoch)."""
    return Permutation(n, derive_key(*key_parts))

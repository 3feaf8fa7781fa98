"""Pairing the rows of two sides by 128-bit key hashes, with numpy only.

Keys present once on each side pair through a sort and one binary search
(sides already in key order skip the sort). Keys that repeat within a side,
and the astronomically rare 64-bit collisions, pair exactly by full hash and
order of appearance: the i-th row of a key in A with its i-th row in B.

>>> import numpy as np
>>> k = np.array([5, 7, 9], np.uint64); z = np.zeros(3, np.uint64)
>>> pairs = pair_unique(k, z, k[::-1].copy(), z)
>>> pairs.a.tolist(), pairs.b.tolist()
([0, 1, 2], [2, 1, 0])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Pairs:
    """Positions ``a[i]`` and ``b[i]`` are paired; ``tricky_a``/``tricky_b`` mark rows left for :func:`pair_in_order`."""

    a: np.ndarray
    b: np.ndarray
    tricky_a: np.ndarray | None = None
    tricky_b: np.ndarray | None = None


@dataclass
class OrderedPairs:
    """The outcome of :func:`pair_in_order`, with the repeated keys of each side."""

    a: np.ndarray
    b: np.ndarray
    alone_a: np.ndarray
    alone_b: np.ndarray
    extra_a: int  # rows of A whose key an earlier A row already has
    extra_b: int
    repeated_a: np.ndarray  # one A position per repeated key, in key order
    repeated_b: np.ndarray


def sorted_order(k: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """``(order, k[order])``; ``order`` is ``None`` when ``k`` is already sorted."""
    if len(k) < 2 or bool(np.all(k[1:] >= k[:-1])):
        return None, k
    order = np.argsort(k)
    return order, k[order]


def pair_unique(a1: np.ndarray, a2: np.ndarray, b1: np.ndarray, b2: np.ndarray) -> Pairs:
    """Pair rows whose key (``k1``, ``k2``) occurs exactly once on each side; mark the rest of the shared keys as tricky."""
    na, nb = len(a1), len(b1)
    order_a, sorted_a = sorted_order(a1)
    order_b, sorted_b = sorted_order(b1)
    if na == nb and np.array_equal(a1, b1) and np.array_equal(a2, b2) and (na < 2 or bool(np.all(sorted_a[1:] != sorted_a[:-1]))):
        same = np.arange(na)
        return Pairs(same, same)  # the same unique keys in the same order: nothing to search
    if na:
        candidate = np.minimum(np.searchsorted(sorted_a, sorted_b), na - 1)
        hit = sorted_a[candidate] == sorted_b
    else:
        candidate, hit = np.zeros(nb, np.int64), np.zeros(nb, bool)
    a_of = candidate if order_a is None else order_a[candidate]
    b_of = np.arange(nb) if order_b is None else order_b
    collided = hit & (a2[a_of] != b2[b_of]) if na else hit
    tricky = [s[1:][s[1:] == s[:-1]] for s in (sorted_a, sorted_b) if len(s) > 1] + [sorted_b[collided]]
    values = np.concatenate(tricky)
    if not len(values):
        return Pairs(a_of[hit], b_of[hit])
    values = np.unique(values)
    tricky_a, tricky_b = np.isin(a1, values), np.isin(b1, values)
    hit &= ~tricky_b[b_of]
    return Pairs(a_of[hit], b_of[hit], tricky_a, tricky_b)


def pair_in_order(a1: np.ndarray, a2: np.ndarray, a_index: np.ndarray, b1: np.ndarray, b2: np.ndarray, b_index: np.ndarray) -> OrderedPairs:
    """Group rows by full key; the i-th A row of a key (by index) pairs with its i-th B row, the rest are alone."""
    k1 = np.concatenate([a1, b1])
    k2 = np.concatenate([a2, b2])
    index = np.concatenate([a_index, b_index])
    side = np.concatenate([np.zeros(len(a1), bool), np.ones(len(b1), bool)])
    source = np.concatenate([np.arange(len(a1)), np.arange(len(b1))])
    empty = np.empty(0, np.int64)
    if not len(k1):
        return OrderedPairs(empty, empty, empty, empty, 0, 0, empty, empty)
    order = np.lexsort((index, side, k2, k1))
    k1, k2, side, source = k1[order], k2[order], side[order], source[order]
    new = np.concatenate([[True], (k1[1:] != k1[:-1]) | (k2[1:] != k2[:-1])])
    group = np.cumsum(new) - 1
    groups = int(group[-1]) + 1
    count_a = np.bincount(group[~side], minlength=groups)
    count_b = np.bincount(group[side], minlength=groups)
    start = np.flatnonzero(new)
    rank = np.arange(len(source)) - start[group]
    rank = np.where(side, rank - count_a[group], rank)
    paired = ~side & (rank < count_b[group])
    partner = start[group[paired]] + count_a[group[paired]] + rank[paired]
    repeated_a, repeated_b = np.flatnonzero(count_a > 1), np.flatnonzero(count_b > 1)
    return OrderedPairs(
        a=source[paired],
        b=source[partner],
        alone_a=np.sort(source[~side & (rank >= count_b[group])]),
        alone_b=np.sort(source[side & (rank >= count_a[group])]),
        extra_a=int((count_a[repeated_a] - 1).sum()),
        extra_b=int((count_b[repeated_b] - 1).sum()),
        repeated_a=source[start[repeated_a]],
        repeated_b=source[start[repeated_b] + count_a[repeated_b]],
    )

"""Deterministic mixtures: which source each position of a stream draws from, exact at every prefix.

A block of ``M`` positions holds exactly ``c_s`` positions of source ``s``
(largest-remainder apportionment of the weights), spread evenly through the
block. Position ``J`` of a stream is pattern position ``(J + phase) mod M``;
the number of earlier draws from the same source is arithmetic, so the
mapping is O(1) with no random draws and no state.

Read format 4 apportions nothing: :func:`exact_cycle` finds the fewest steps in
which every source's share is a whole number of samples, so the counts per cycle
are the weights themselves and never drift from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from ..errors import InvalidPlan


def apportion(weights: Sequence[float], block: int) -> list[int]:
    """Split ``block`` positions among sources by weight (largest remainder); every source gets >= 1.

    >>> apportion([0.7, 0.3], 10)
    [7, 3]
    """
    total = sum(weights)
    if not all(math.isfinite(w) and w > 0 for w in weights) or total <= 0:
        raise InvalidPlan(f"source weights {list(weights)} are out of range: each must be finite and > 0")
    if block < len(weights):
        raise InvalidPlan(f"mixture_block={block} is out of range: must be >= the number of sources ({len(weights)})")
    exact = [Fraction(w).limit_denominator(10**9) / Fraction(total).limit_denominator(10**9) * block for w in weights]
    counts = [int(math.floor(e)) for e in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: block - sum(counts)]:
        counts[i] += 1
    for i, c in enumerate(counts):
        if c == 0:
            raise InvalidPlan(
                f"source {i} has weight {weights[i]} which rounds to 0 of mixture_block={block}; "
                f"raise mixture_block to at least {math.ceil(total / weights[i])}"
            )
    return counts


#: The longest mixture cycle read format 4 builds: steps, and positions (steps × global batch size).
MAX_CYCLE_STEPS = 1 << 16
MAX_CYCLE_POSITIONS = 1 << 20


def exact_weight(weight: float) -> Fraction:
    """A weight as the number it was written as: a float by its shortest decimal (0.3 is 3/10, not the binary
    fraction nearest to it), an integer as itself.

    >>> exact_weight(0.3), exact_weight(2)
    (Fraction(3, 10), Fraction(2, 1))
    """
    if isinstance(weight, int) and not isinstance(weight, bool):
        return Fraction(weight)
    return Fraction(repr(float(weight)))


def exact_cycle(weights: Sequence[float], batch: int) -> tuple[int, list[int]]:
    """``(P, counts)``: the fewest steps ``P`` in which each source's share ``w_s / Σw × batch × P`` is a whole
    number of samples, and those numbers (they sum to ``P × batch``).

    >>> exact_cycle([0.5, 0.3, 0.2], 32)
    (5, [80, 48, 32])
    """
    shares = [exact_weight(w) for w in weights]
    total = sum(shares)
    per_step = [share / total * batch for share in shares]
    cycle = math.lcm(*(f.denominator for f in per_step))
    return cycle, [int(f * cycle) for f in per_step]


def cycle_fits(cycle: int, batch: int) -> bool:
    """Whether a cycle of ``cycle`` steps of ``batch`` positions is within :data:`MAX_CYCLE_STEPS` and
    :data:`MAX_CYCLE_POSITIONS`."""
    return cycle <= MAX_CYCLE_STEPS and cycle * batch <= MAX_CYCLE_POSITIONS


@dataclass(frozen=True)
class Mixture:
    """The block pattern of a mixture: ``source_at[o]`` and ``rank_at[o]`` for ``o`` in ``range(block)``."""

    counts: tuple[int, ...]
    source_at: np.ndarray
    rank_at: np.ndarray

    @classmethod
    def build(cls, counts: Sequence[int]) -> "Mixture":
        """Interleave ``counts[s]`` positions of each source so every prefix is within one draw of its share.

        The ``j``-th draw of source ``s`` (1-based) may only sit at prefix
        lengths ``x`` with ``|j - x·c_s/M| < 1``, i.e. in the window
        ``[floor((j-1)·M/c_s) + 1, ceil(j·M/c_s)]``. Positions are filled
        earliest-deadline-first among released draws (ties: lower source),
        which meets every window (integer arithmetic only).
        """
        block = sum(counts)
        active = [s for s, c in enumerate(counts) if c]
        if len(active) == 1:  # one source fills the block: every window is one position, in order
            return cls(tuple(counts), np.full(block, active[0], dtype=np.int32), np.arange(block, dtype=np.int64))
        taken = [0] * len(counts)
        source_at = np.empty(block, dtype=np.int32)
        rank_at = np.empty(block, dtype=np.int64)
        for x in range(1, block + 1):
            best, best_deadline = -1, None
            for s, c in enumerate(counts):
                j = taken[s] + 1
                if j > c or (j - 1) * block // c + 1 > x:
                    continue
                deadline = -(-(j * block) // c)
                if best_deadline is None or deadline < best_deadline:
                    best, best_deadline = s, deadline
            if best < 0:  # cannot happen for a feasible pattern; keep the block complete regardless
                best = next(s for s in range(len(counts)) if taken[s] < counts[s])
            source_at[x - 1] = best
            rank_at[x - 1] = taken[best]
            taken[best] += 1
        return cls(tuple(counts), source_at, rank_at)

    @property
    def block(self) -> int:
        return len(self.source_at)

    def count_before(self, source: int, position: int) -> int:
        """How many of ``positions [0, position)`` of the infinite pattern belong to ``source``."""
        blocks, offset = divmod(position, self.block)
        within = int(np.count_nonzero(self.source_at[:offset] == source))
        return blocks * self.counts[source] + within

    def draw(self, position: int) -> tuple[int, int]:
        """``(source, n)``: position ``position`` of the pattern is the ``n``-th draw of ``source``."""
        blocks, offset = divmod(position, self.block)
        source = int(self.source_at[offset])
        return source, blocks * self.counts[source] + int(self.rank_at[offset])

    def draw_many(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized :meth:`draw`."""
        blocks, offset = np.divmod(np.asarray(positions, dtype=np.int64), self.block)
        source = self.source_at[offset]
        counts = np.asarray(self.counts, dtype=np.int64)[source]
        return source, blocks * counts + self.rank_at[offset]

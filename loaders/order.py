"""Global order: (stream, draw) → record, as pure arithmetic over keyed permutations.

One source of ``N`` records is cut into chunks of ``C`` consecutive records
(about a few row groups, so a reader touches each row group about once). In
every epoch the full chunks are shuffled by a keyed permutation and the
partial tail chunk (if any) comes last. The epochs' chunk sequences are
concatenated and dealt round-robin to ``K`` canonical streams: stream ``k``
owns global chunk slots ``k, k + K, k + 2K, ...``. Inside a stream, records
are shuffled within windows of ``w`` chunks. Every step is a fixed slice of
every stream, so the global batch never depends on how many ranks share the
streams, and each epoch (over all streams) covers every record exactly once.
All of it is O(1) arithmetic: no index arrays, no replay, no build step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .permutation import permutation


@dataclass(frozen=True)
class SourceOrder:
    """The shuffled, streamed order of one source's records."""

    rows: int
    chunk: int
    streams: int
    window: int
    seed: int
    source: int
    shuffle: bool = True

    def __post_init__(self) -> None:
        if self.rows <= 0 or self.chunk <= 0 or self.streams <= 0 or self.window <= 0:
            raise ValueError(f"invalid source order {self}")

    # -- chunk geometry -----------------------------------------------------
    @property
    def full_chunks(self) -> int:
        return self.rows // self.chunk

    @property
    def tail(self) -> int:
        """Records in the partial last chunk (0 when rows divide evenly)."""
        return self.rows % self.chunk

    @property
    def chunks_per_epoch(self) -> int:
        return self.full_chunks + (1 if self.tail else 0)

    def _tail_progression(self, stream: int) -> tuple[int, int] | None:
        """``(t0, m)``: stream chunk numbers ``t0 + j*m`` are epoch tails; None when it never gets one."""
        if not self.tail:
            return None
        n_c, k_total = self.chunks_per_epoch, self.streams
        target = (n_c - 1 - stream) % n_c
        g = math.gcd(k_total, n_c)
        if target % g:
            return None
        m = n_c // g
        t0 = 0 if m == 1 else (target // g) * pow(k_total // g, -1, m) % m
        return t0, m

    def chunk_start(self, stream: int, t: int) -> int:
        """Records of the stream before its ``t``-th chunk."""
        progression = self._tail_progression(stream)
        tails = 0
        if progression is not None and t > progression[0]:
            tails = (t - progression[0] - 1) // progression[1] + 1
        return t * self.chunk - tails * (self.chunk - self.tail)

    def chunk_of(self, stream: int, x: int) -> tuple[int, int]:
        """``(t, offset)``: stream record position ``x`` lies in the stream's chunk ``t`` at ``offset``."""
        progression = self._tail_progression(stream)
        if progression is None:
            return divmod(x, self.chunk)
        t0, m = progression
        if x < t0 * self.chunk:
            return divmod(x, self.chunk)
        x -= t0 * self.chunk
        period = (m - 1) * self.chunk + self.tail
        p, rem = divmod(x, period)
        base = t0 + p * m
        if rem < self.tail:
            return base, rem
        t, offset = divmod(rem - self.tail, self.chunk)
        return base + 1 + t, offset

    def _chunk_id(self, stream: int, t: int) -> tuple[int, int]:
        """``(epoch, chunk id)`` of the stream's ``t``-th chunk."""
        epoch, slot = divmod(stream + t * self.streams, self.chunks_per_epoch)
        if slot >= self.full_chunks or not self.shuffle:
            return epoch, slot
        return epoch, permutation(self.full_chunks, self.seed, "chunks", self.source, epoch)(slot)

    def _first_chunk_of_epoch(self, stream: int, epoch: int) -> int:
        """The stream's first chunk number whose global slot lies in ``epoch``."""
        return max(0, -(-(epoch * self.chunks_per_epoch - stream) // self.streams))

    def _window(self, stream: int, t: int) -> tuple[int, int]:
        """Chunk numbers ``[lo, hi)`` of the shuffle window holding chunk ``t``; windows never straddle epochs."""
        epoch = (stream + t * self.streams) // self.chunks_per_epoch
        first = self._first_chunk_of_epoch(stream, epoch)
        end = self._first_chunk_of_epoch(stream, epoch + 1)
        lo = first + (t - first) // self.window * self.window
        return lo, min(lo + self.window, end)

    # -- records ---------------------------------------------------------------
    def record(self, stream: int, draw: int) -> tuple[int, int]:
        """``(record index, epoch)`` of the ``draw``-th record the stream takes from this source."""
        if self.shuffle:
            t, _ = self.chunk_of(stream, draw)
            lo, hi = self._window(stream, t)
            start = self.chunk_start(stream, lo)
            size = self.chunk_start(stream, hi) - start
            draw = start + permutation(size, self.seed, "window", self.source, stream, lo)(draw - start)
        t, offset = self.chunk_of(stream, draw)
        epoch, chunk_id = self._chunk_id(stream, t)
        return chunk_id * self.chunk + offset, epoch

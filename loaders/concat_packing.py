"""A run's lossless packed sequences (read format 3): which documents fill stream ``k``'s ``n``-th sequence of ``s``.

Glue between the run (reading and tokenizing documents), the per-source token
counts (:mod:`loaders.token_index`) and the concat-and-chunk arithmetic
(:mod:`loaders.packing`). Tokenized windows are kept in a small LRU, since a
reader moves through a window over many steps.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .batch import Document
from .errors import CorruptData
from .lane_order import LaneOrder
from .packing import LanePacker, WindowTokens
from .transforms.pack import PackedSequence

if TYPE_CHECKING:
    from .run import Run

#: Tokenized windows kept per run (each holds a window of one stream's documents of one source).
#: Documents read and tokenized at a time: a window is tokenized only as far as the sequences asked for reach.
PIECE = 512
#: Tokenized windows kept per run, at least; and at least two per (stream, source), so a sequence that spans two
#: windows never evicts the window the next sequence needs. A process reading one rank only fills its own streams'.
WINDOW_CACHE = 16


@dataclass(frozen=True)
class PackingWaste:
    """Tokens a packed run delivers, pads and drops (over the steps it covers)."""

    document_tokens: int
    padding_tokens: int
    dropped_tokens: int
    sequences: int
    seq_len: int
    exact: bool
    note: str = ""

    @property
    def waste_fraction(self) -> float:
        capacity = self.sequences * self.seq_len
        return (self.padding_tokens + self.dropped_tokens) / capacity if capacity else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "waste_fraction": round(self.waste_fraction, 6)}


class ConcatPacking:
    """Sequence lookup for every (stream, source) of a run packed with ``Pack(strategy="concat")``."""

    def __init__(self, run: "Run", orders: list[LaneOrder], counts: list[np.ndarray]) -> None:
        pack = run.plan.pack
        assert pack is not None
        self.run = run
        self.pack = pack
        self.orders = orders
        self.packers = {
            (k, s): LanePacker(order, k, counts[s], pack.seq_len)
            for s, order in enumerate(orders)
            for k in range(order.streams)
            if order.rates[k] > 0
        }
        self._windows: OrderedDict[tuple[int, int, int, int], WindowTokens] = OrderedDict()
        self._lock = threading.Lock()

    def sequence(self, stream: int, source: int, n: int) -> tuple[PackedSequence, list[Document]]:
        """Stream ``stream``'s ``n``-th packed sequence of ``source`` and its documents (spans index them)."""
        packer = self.packers[(stream, source)]

        def window(layout: int, start: int, end: int, tokens: int) -> WindowTokens:
            return self._window(stream, source, layout, start, end).upto(tokens)

        return packer.sequence(n, window, pad_id=self.pack.pad_id, positions=self.pack.position_ids)

    def window_tokens(self, stream: int, source: int, layout: int, start: int, end: int) -> WindowTokens:
        """The tokenized documents of the shuffle window of slots ``[start, end)`` of ``layout``, in reading order."""
        return self._window(stream, source, layout, start, end).upto(None)

    def _window(self, stream: int, source: int, layout: int, start: int, end: int) -> "_Window":
        key = (stream, source, layout, start)
        with self._lock:
            cached = self._windows.get(key)
            if cached is not None:
                self._windows.move_to_end(key)
                return cached
        order = self.orders[source]
        positions = order.shuffled(stream, layout, start, end)
        records, epochs = order.layout_records(layout, positions)
        plan = self.packers[(stream, source)].layout(layout)
        w = int(np.searchsorted(plan.windows, start))
        where = f"run {self.run.name} source {self.run.sources[source].ref} stream {stream} epoch layout {layout}: the window of slots {start}..{end}"
        window = _Window(self.run, source, positions, records, epochs, int(plan.token_starts[w + 1] - plan.token_starts[w]), where)
        with self._lock:
            window = self._windows.setdefault(key, window)
            while len(self._windows) > max(WINDOW_CACHE, 2 * len(self.packers)):
                self._windows.popitem(last=False)
        return window

    def waste(self, sequences_read: dict[tuple[int, int], int]) -> PackingWaste:
        """Exact tokens delivered and padded when each (stream, source) has read ``sequences_read`` sequences."""
        tokens = padding = total = 0
        for key, count in sequences_read.items():
            delivered = int(self.packers[key].tokens_before(np.asarray([count]))[0])
            tokens += delivered
            padding += count * self.pack.seq_len - delivered
            total += count
        return PackingWaste(tokens, padding, 0, total, self.pack.seq_len, True)



class _Window:
    """One shuffle window's documents, read and tokenized piece by piece as far as sequences need them.

    When the last piece is in, the window's token total must equal its token counts' (else ``CorruptData``).
    """

    def __init__(
        self, run: "Run", source: int, positions: np.ndarray, records: np.ndarray, epochs: np.ndarray, expected: int, where: str
    ) -> None:
        self.run, self.source, self.where = run, source, where
        self.positions, self.records, self.epochs = positions, records, epochs
        self.expected = expected
        self._parts: list[WindowTokens] = []
        self._done = 0
        self._tokens = 0
        self._joined: WindowTokens | None = None
        self._lock = threading.Lock()

    def upto(self, tokens: int | None) -> WindowTokens:
        """The window's documents in reading order, at least through its first ``tokens`` tokens (None: all)."""
        with self._lock:
            while self._done < len(self.records) and (tokens is None or self._tokens < tokens):
                piece = slice(self._done, self._done + PIECE)
                documents, inputs = self.run.read_documents(
                    self.source, self.records[piece], self.epochs[piece], self.positions[piece]
                )
                masks = [i.get("loss_mask") for i in inputs]
                part = WindowTokens.of(documents, [i["input_ids"] for i in inputs], masks)
                self._parts.append(part)
                self._done += len(documents)
                self._tokens += part.tokens
                self._joined = None
                self._check()
            if self._joined is None:
                self._joined = WindowTokens.join(self._parts) if self._parts else WindowTokens.of([], [], [])
            return self._joined

    def _check(self) -> None:
        complete = self._done == len(self.records)
        if self._tokens > self.expected or (complete and self._tokens != self.expected):
            raise CorruptData(
                f"{self.where} tokenizes to {'at least ' if not complete else ''}{self._tokens} tokens, its token counts say "
                f"{self.expected} (a document transform is not deterministic per record, or the token counts are stale)"
            )

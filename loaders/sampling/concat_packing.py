"""A run's lossless packed sequences (read formats 3–4): which documents fill stream ``k``'s ``n``-th sequence of ``s``.

Glue between the document source (reading and tokenizing documents), the per-source token
counts (:mod:`loaders.sampling.token_index`) and the concat-and-chunk arithmetic
(:mod:`loaders.order.packing`). Tokenized windows are kept in a small LRU, since a
reader moves through a window over many steps.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import CorruptData
from ..order.lane_order import LaneOrder
from ..order.packing import LanePacker, WindowTokens
from ..transforms.pack import PackedSequence, finish
from .batch import Document
from .documents import DocumentSource

#: Documents read and tokenized at a time once a window is being read in order (a reader moving through it).
PIECE = 512
#: Documents read beyond those a lookup needs, when the run's per-record token counts say which those are.
AHEAD = 64
#: Fewest documents read by a window's first lookup, which reads only about as far as the sequence asked for. With
#: per-record counts, a sequence whose first document lies more than this beyond what was read is looked up alone.
MIN_PIECE = 16
#: Lookups of lone spans of a window kept (a long document spans many sequences).
SPANS_KEPT = 8
#: Documents read beyond the estimate of how many hold the tokens asked for (their average length is known).
OVERSHOOT = 1.25
#: Tokenized windows kept per run, at least; and at least two per (stream, source), so a sequence that spans two
#: windows never evicts the window the next sequence needs. A process reading one rank only fills its own streams'.
WINDOW_CACHE = 16


@dataclass(frozen=True)
class PackingWaste:
    """Tokens a packed run delivers, pads and drops (over the steps it covers), and how many of the delivered tokens
    are repeats: from a source's second or later epoch (an ``epochs=2`` run repeats half its tokens, an ``epochs=1``
    run none). ``after_epochs`` counts the all-padding sequences of streams that had delivered their epochs (read
    format 4 stops every stream at its epoch boundary); their tokens are part of ``padding_tokens``."""

    document_tokens: int
    padding_tokens: int
    dropped_tokens: int
    sequences: int
    seq_len: int
    exact: bool
    note: str = ""
    repeated_tokens: int = 0
    after_epochs: int = 0

    @property
    def waste_fraction(self) -> float:
        capacity = self.sequences * self.seq_len
        return (self.padding_tokens + self.dropped_tokens) / capacity if capacity else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "waste_fraction": round(self.waste_fraction, 6)}


class ConcatPacking:
    """Sequence lookup for every (stream, source) of a run packed with ``Pack(strategy="concat")``.

    ``documents`` reads and tokenizes the windows; ``counts`` are each source's tokens per chunk, ``records`` its
    tokens per record where the run pinned them. ``epochs`` (read format 4 runs over epochs): every lane stops after
    them, and its later sequences are all padding.
    """

    def __init__(
        self,
        documents: DocumentSource,
        orders: list[LaneOrder],
        counts: list[np.ndarray],
        records: list[np.ndarray | None] | None = None,
        *,
        epochs: float | None = None,
    ) -> None:
        pack = documents.plan.pack
        assert pack is not None
        self.documents = documents
        self.pack = pack
        self.orders = orders
        #: Tokens of every record per source, where the run pinned them (they let a lookup skip a window's prefix).
        self.record_counts = records or [None] * len(orders)
        self.packers = {
            (k, s): LanePacker(order, k, counts[s], pack.seq_len, epochs)
            for s, order in enumerate(orders)
            for k in range(order.streams)
            if order.rates[k] > 0
        }
        self._windows: OrderedDict[tuple[int, int, int, int], WindowTokens] = OrderedDict()
        self._lock = threading.Lock()

    def sequence(self, stream: int, source: int, n: int) -> tuple[PackedSequence, list[Document]]:
        """Stream ``stream``'s ``n``-th packed sequence of ``source`` and its documents (spans index them)."""
        packer = self.packers[(stream, source)]
        if packer.limit is not None and n >= packer.limit:
            return self._after_epochs(stream, source, packer.limit)

        def window(layout: int, start: int, end: int, lo: int, hi: int) -> WindowTokens:
            return self._window(stream, source, layout, start, end).covering(lo, hi)

        return packer.sequence(n, window, pad_id=self.pack.pad_id, positions=self.pack.position_ids)

    def _after_epochs(self, stream: int, source: int, limit: int) -> tuple[PackedSequence, list[Document]]:
        """A sequence of a lane that has delivered its epochs: all padding, naming the last document it delivered (the
        first of its part when it delivered none)."""
        if limit:
            last = self.sequence(stream, source, limit - 1)[1][-1]
        else:
            packer = self.packers[(stream, source)]
            plan = packer.layout(0)
            last = self.window_tokens(stream, source, 0, int(plan.windows[0]), int(plan.windows[1])).payloads[0]
        padding = PackedSequence([], [], [])
        finish(padding, self.pack.seq_len, self.pack.pad_id, self.pack.position_ids)
        return padding, [last]

    def window_tokens(self, stream: int, source: int, layout: int, start: int, end: int) -> WindowTokens:
        """The tokenized documents of the shuffle window of slots ``[start, end)`` of ``layout``, in reading order."""
        return self._window(stream, source, layout, start, end).upto(None)

    def document_starts(self, stream: int, source: int, layout: int, start: int, end: int) -> np.ndarray:
        """Token offsets of the window's documents in reading order (one more than documents: the last is the total);
        from the pinned per-record counts when the run has them, else by tokenizing the window."""
        window = self._window(stream, source, layout, start, end)
        return window.starts if window.starts is not None else window.upto(None).starts

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
        where = (
            f"run {self.documents.name} source {self.documents.sources[source].ref} stream {stream} "
            f"epoch layout {layout}: the window of slots {start}..{end}"
        )
        expected = int(plan.token_starts[w + 1] - plan.token_starts[w])
        known = self.record_counts[source]
        lengths = None if known is None else known[records].astype(np.int64)
        window = _Window(self.documents, source, positions, records, epochs, expected, where, lengths)
        with self._lock:
            window = self._windows.setdefault(key, window)
            while len(self._windows) > max(WINDOW_CACHE, 2 * len(self.packers)):
                self._windows.popitem(last=False)
        return window

    def waste(self, sequences_read: dict[tuple[int, int], int]) -> PackingWaste:
        """Exact tokens delivered, padded and repeated when each (stream, source) has read ``sequences_read``
        sequences."""
        tokens = padding = total = repeated = after = 0
        for key, count in sequences_read.items():
            packer = self.packers[key]
            delivered = int(packer.tokens_before(np.asarray([count]))[0])
            tokens += delivered
            padding += count * self.pack.seq_len - delivered
            total += count
            repeated += self.repeated_tokens(key, delivered)
            after += 0 if packer.limit is None else max(0, count - packer.limit)
        note = f"{after} sequence(s) of streams that had delivered their epochs are all padding" if after else ""
        return PackingWaste(tokens, padding, 0, total, self.pack.seq_len, True, note, repeated, after)

    def repeated_tokens(self, key: tuple[int, int], delivered: int) -> int:
        """How many of the first ``delivered`` document tokens of lane ``key`` come from its source's second or later
        epoch. A layout holds one epoch, except for sources with fewer chunks than drawing streams: there a window
        may mix two epochs, and its documents are read to tell them apart."""
        packer = self.packers[key]
        if packer.order.repeats == 1:
            return delivered - min(delivered, packer.layout(0).tokens)
        stream, source = key
        per_epoch, repeats = packer.order.slots, packer.order.repeats
        repeated, remaining, layout = 0, delivered, 0
        while remaining > 0:
            plan = packer.layout(layout)
            for w in range(len(plan.windows) - 1):
                take = min(int(plan.token_starts[w + 1] - plan.token_starts[w]), remaining)
                if take <= 0:
                    continue
                start, end = int(plan.windows[w]), int(plan.windows[w + 1])
                first, last = (layout * repeats + start // per_epoch, layout * repeats + (end - 1) // per_epoch)
                if first == last:
                    repeated += take if first >= 1 else 0
                else:
                    window = self.window_tokens(stream, source, layout, start, end)
                    for d, document in enumerate(window.payloads):
                        if document.epoch >= 1:
                            repeated += max(0, min(int(window.starts[d + 1]), take) - int(window.starts[d]))
                remaining -= take
            layout += 1
        return repeated


class _Window:
    """One shuffle window's documents, read and tokenized as far as sequences need them.

    Read in order, piece by piece, from the window's start (a reader moving
    through it); when the last piece is in, the window's token total must
    equal its token counts' (else ``CorruptData``). With the run's per-record
    counts (``lengths``, in reading order) a sequence far into the window is
    found without the documents before it: only its own documents are read,
    each checked against its count.
    """

    def __init__(
        self,
        documents: DocumentSource,
        source: int,
        positions: np.ndarray,
        records: np.ndarray,
        epochs: np.ndarray,
        expected: int,
        where: str,
        lengths: np.ndarray | None = None,
    ) -> None:
        self.documents, self.source, self.where = documents, source, where
        self.positions, self.records, self.epochs = positions, records, epochs
        self.expected = expected
        self.lengths = lengths
        self.starts: np.ndarray | None = None
        if lengths is not None:
            self.starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
            if int(self.starts[-1]) != expected:
                raise CorruptData(f"{where}: its records' token counts sum to {int(self.starts[-1])}, its chunks' to {expected}")
        self._parts: list[WindowTokens] = []
        self._done = 0
        self._tokens = 0
        self._joined: WindowTokens | None = None
        self._spans: OrderedDict[tuple[int, int], WindowTokens] = OrderedDict()
        self._lock = threading.Lock()

    def covering(self, lo: int, hi: int) -> WindowTokens:
        """Documents holding at least the window's tokens ``[lo, hi)``: the read prefix, or (with per-record counts)
        just the documents of that span when it lies more than a piece beyond what was read."""
        if self.starts is None:
            return self.upto(hi)
        first = int(np.searchsorted(self.starts, lo, side="right")) - 1
        last = int(np.searchsorted(self.starts, hi - 1, side="right")) - 1
        with self._lock:
            if self._tokens >= hi or first - self._done <= MIN_PIECE:
                pass  # the prefix holds it, or is about to: read on in order
            else:
                return self._span(first, last)
        return self.upto(hi)

    def _span(self, first: int, last: int) -> WindowTokens:
        """Documents ``first..last`` of the window alone (kept for a few lookups), each checked against its count."""
        key = (first, last)
        cached = self._spans.get(key)
        if cached is not None:
            self._spans.move_to_end(key)
            return cached
        picked = slice(first, last + 1)
        documents, inputs = self.documents.read_documents(self.source, self.records[picked], self.epochs[picked], self.positions[picked])
        assert self.lengths is not None and self.starts is not None
        for d, (document, i) in enumerate(zip(documents, inputs)):
            if len(i["input_ids"]) != self.lengths[first + d]:
                raise CorruptData(
                    f"{self.where}: document {document.key} tokenizes to {len(i['input_ids'])} tokens, the run's token counts "
                    f"say {int(self.lengths[first + d])} (a document transform is not deterministic per record, or the "
                    "token counts are stale)"
                )
        span = WindowTokens.of(documents, [i["input_ids"] for i in inputs], [i.get("loss_mask") for i in inputs])
        self._spans[key] = span = span.at(int(self.starts[first]))
        while len(self._spans) > SPANS_KEPT:
            self._spans.popitem(last=False)
        return span

    def upto(self, tokens: int | None) -> WindowTokens:
        """The window's documents in reading order, at least through its first ``tokens`` tokens (None: all)."""
        with self._lock:
            while self._done < len(self.records) and (tokens is None or self._tokens < tokens):
                piece = slice(self._done, self._done + self._piece(tokens))
                documents, inputs = self.documents.read_documents(
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

    def _piece(self, tokens: int | None) -> int:
        """Documents to read next: a full piece once the window is being read in order (a reader moving through it
        tokenizes in bulk); for its first lookup, enough at the window's average length to reach ``tokens``. With the
        per-record counts, exactly the documents that reach ``tokens`` and ``AHEAD`` more (so the last sequences a run
        reads do not tokenize a full piece nobody reads)."""
        if tokens is not None and self.starts is not None:
            needed = int(np.searchsorted(self.starts, tokens, side="left")) - self._done
            return max(1, min(PIECE, needed + AHEAD))
        if tokens is None or self._done:
            return PIECE
        average = max(1.0, self.expected / len(self.records))
        return min(PIECE, max(MIN_PIECE, math.ceil((tokens - self._tokens) / average * OVERSHOOT)))

    def _check(self) -> None:
        complete = self._done == len(self.records)
        if self._tokens > self.expected or (complete and self._tokens != self.expected):
            raise CorruptData(
                f"{self.where} tokenizes to {'at least ' if not complete else ''}{self._tokens} tokens, its token counts say "
                f"{self.expected} (a document transform is not deterministic per record, or the token counts are stale)"
            )

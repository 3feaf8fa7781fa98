"""Lossless packing (read formats 3–4): concat-and-chunk of each stream's documents of each source.

Stream ``k`` reads source ``s`` as the shuffled windows of its part of each
epoch layout (see :mod:`loaders.order.lane_order`). Packing concatenates those
documents' tokens, window after window, and cuts the stream of tokens into
``seq_len`` sequences; a document may continue into the next sequence (its
span's ``offset`` says where). Sequences never cross a layout, so only the
last sequence of a layout is padded, and nothing is dropped.

Finding sequence ``q`` needs the token count of every slot, which the run
computes once and stores (:class:`TokenIndex`, one number per chunk of
records): a layout's window token totals are sums of slot counts in that
layout's chunk order, and a prefix sum over them locates a sequence's windows
by binary search. Only the documents of those windows are read and tokenized.

A run over ``epochs`` (read format 4) stops every lane at its own epoch boundary:
:attr:`LanePacker.limit` is the number of sequences its epochs fill, and the
lane's later sequences hold no tokens (padding), so each token is delivered
exactly as many times as the plan has epochs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import CorruptData
from ..transforms.pack import DocumentSpan, PackedSequence, finish
from .lane_order import LaneOrder


@dataclass(frozen=True)
class LayoutPlan:
    """One stream's part of one layout of one source: its windows and their token totals."""

    windows: np.ndarray  # slot boundaries of the windows, len = windows + 1
    token_starts: np.ndarray  # tokens before each window boundary (prefix sums), len = windows + 1
    seq_len: int

    @property
    def tokens(self) -> int:
        return int(self.token_starts[-1])

    @property
    def sequences(self) -> int:
        """Sequences this layout packs into (none when the stream's part holds no tokens)."""
        return -(-self.tokens // self.seq_len)

    @property
    def padding(self) -> int:
        return self.sequences * self.seq_len - self.tokens

    def windows_of(self, q: int) -> list[int]:
        """Indices of the windows holding tokens of sequence ``q``."""
        begin, end = q * self.seq_len, min((q + 1) * self.seq_len, self.tokens)
        if end <= begin:
            return []
        first = int(np.searchsorted(self.token_starts, begin, side="right")) - 1
        last = int(np.searchsorted(self.token_starts, end - 1, side="right")) - 1
        return [w for w in range(first, last + 1) if self.token_starts[w + 1] > self.token_starts[w]]


#: Layouts without a single token after which a stream's source is declared empty.
EMPTY_LAYOUTS = 64


@dataclass(frozen=True)
class WindowTokens:
    """A window's documents in reading order: a payload each, and their tokens concatenated (``starts`` are offsets)."""

    payloads: list[Any]
    ids: np.ndarray
    mask: np.ndarray
    starts: np.ndarray
    #: Tokens of the window before these documents (a slice of a window starts past its first documents).
    base: int = 0

    @classmethod
    def of(cls, payloads: list[Any], ids: list[Sequence[int]], masks: list[Sequence[int] | None]) -> "WindowTokens":
        """Documents' payloads, token ids and loss masks (a ``None`` mask is all ones) flattened into one window."""
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        total = int(lengths.sum())
        # One pass over Python ints (not an array per document): most windows hold hundreds of short documents.
        flat_ids = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=total)
        if total and 0 <= flat_ids.min() and flat_ids.max() < 2**31:
            flat_ids = flat_ids.astype(np.int32)  # half the memory for every real vocabulary
        for d, (mask, length) in enumerate(zip(masks, lengths.tolist())):
            if mask is not None and len(mask) != length:
                raise CorruptData(f"document {d} of a window has {len(mask)} loss-mask entries for {length} tokens")
        every_mask = (itertools.repeat(1, n) if m is None else m for m, n in zip(masks, lengths.tolist()))
        flat_mask = np.fromiter(itertools.chain.from_iterable(every_mask), dtype=np.int8, count=total)
        starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return cls(payloads, flat_ids, flat_mask, starts)

    def at(self, base: int) -> "WindowTokens":
        """These documents, placed ``base`` tokens into their window."""
        return dataclasses.replace(self, base=base)

    @property
    def tokens(self) -> int:
        return int(self.starts[-1])

    @classmethod
    def join(cls, parts: list["WindowTokens"]) -> "WindowTokens":
        """Consecutive pieces of one window as one."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [p.tokens for p in parts[:-1]])
        starts = np.concatenate([[0]] + [p.starts[1:] + o for p, o in zip(parts, offsets)])
        return cls(
            [x for p in parts for x in p.payloads],
            np.concatenate([p.ids for p in parts]),
            np.concatenate([p.mask for p in parts]),
            starts.astype(np.int64),
        )


@dataclass
class LanePacker:
    """Concat-and-chunk for one stream of one source, addressed by sequence number."""

    order: LaneOrder
    stream: int
    slot_tokens: np.ndarray  # tokens of each chunk of the source, in record order
    seq_len: int
    epochs: float | None = None  # read format 4: the lane stops after these epochs (None: it never stops)
    _limit: int | None = None
    _layouts: list[LayoutPlan] = field(default_factory=list)
    _first_sequence: list[int] = field(default_factory=lambda: [0])
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def layout(self, layout: int) -> LayoutPlan:
        """The windows and token totals of ``layout`` (computed once per layout, in order)."""
        with self._lock:
            while len(self._layouts) <= layout:
                plan = self._plan(len(self._layouts))
                self._layouts.append(plan)
                self._first_sequence.append(self._first_sequence[-1] + plan.sequences)
            return self._layouts[layout]

    def _plan(self, layout: int) -> LayoutPlan:
        lo, hi = self.order.slot_range(self.stream)
        _, chunks = self.order.chunk_of_slot(layout, np.arange(lo, hi, dtype=np.int64))
        per_slot = self.slot_tokens[chunks]
        bounds = self.order.slot_windows(self.stream)
        prefix = np.concatenate([[0], np.cumsum(per_slot, dtype=np.int64)])
        return LayoutPlan(bounds, prefix[bounds - lo], self.seq_len)

    @property
    def limit(self) -> int | None:
        """The sequences this lane delivers, when it stops after :attr:`epochs` (None: it never stops)."""
        if self.epochs is None:
            return None
        if self._limit is None:
            self._limit = self.sequences_in(self.epochs)
        return self._limit

    def sequences_in(self, epochs: float) -> int:
        """Sequences the lane's first ``epochs`` epochs fill; a fraction of an epoch adds that fraction of the next
        layout's sequences, rounded up. A layout of several epochs (``order.repeats``) counts only whole."""
        whole, fraction = divmod(epochs, 1)
        repeats = self.order.repeats
        if repeats > 1 and (fraction or whole % repeats):
            raise ValueError(f"{epochs} epochs end inside a layout of {repeats} epochs")
        layouts = int(whole) // repeats
        count = self.first_sequence(layouts)
        if fraction:
            count += math.ceil(fraction * self.layout(layouts).sequences)
        return count

    def first_sequence(self, layout: int) -> int:
        """How many sequences of this stream and source come before ``layout``."""
        self.layout(layout)
        return self._first_sequence[layout]

    def locate(self, sequence: int) -> tuple[int, int]:
        """``(layout, q)``: the stream's ``sequence``-th sequence of this source is sequence ``q`` of ``layout``."""
        layout = 0
        while True:
            self.layout(layout)
            if sequence < self._first_sequence[layout + 1]:
                return layout, sequence - self._first_sequence[layout]
            layout += 1
            if layout >= EMPTY_LAYOUTS and self._first_sequence[layout] == 0:
                raise CorruptData(f"source {self.order.source} stream {self.stream}: {layout} epoch layouts in a row hold no tokens")

    def tokens_before(self, sequences: np.ndarray) -> np.ndarray:
        """Document tokens in the stream's first ``sequences[i]`` sequences of this source (exact; vectorized).

        Only a layout's last sequence is padded, so a partly read layout contributes ``seq_len`` per sequence; the
        sequences past :attr:`limit` contribute none.
        """
        n = np.asarray(sequences, dtype=np.int64)
        if self.limit is not None:  # sequences past the lane's epochs hold no tokens
            n = np.minimum(n, self.limit)
        if n.size and int(n.max()) > 0:
            self.locate(int(n.max()) - 1)
        with self._lock:
            first = np.asarray(self._first_sequence, dtype=np.int64)
            totals = np.concatenate([[0], np.cumsum([p.tokens for p in self._layouts], dtype=np.int64)]).astype(np.int64)
        full = np.searchsorted(first[1:], n, side="right")  # layouts read to their end
        return totals[full] + (n - first[full]) * self.seq_len

    def sequence(
        self, sequence: int, window_tokens: Callable[[int, int, int, int, int], WindowTokens], *, pad_id: int, positions: str
    ) -> tuple[PackedSequence, list[Any]]:
        """Sequence ``sequence``; ``window_tokens(layout, start_slot, end_slot, lo, hi)`` reads the documents of a window
        (in reading order) that hold at least its tokens ``[lo, hi)``, placed at their ``base``.

        Returns the sequence (spans index the returned payload list) and the
        payloads of the documents in it, in order.
        """
        layout, q = self.locate(sequence)
        plan = self.layout(layout)
        begin, end = q * self.seq_len, (q + 1) * self.seq_len
        out = PackedSequence([], [], [])
        payloads: list[Any] = []
        ids: list[np.ndarray] = []
        masks: list[np.ndarray] = []
        for w in plan.windows_of(q):
            base = int(plan.token_starts[w])
            lo, hi = max(begin - base, 0), min(end, int(plan.token_starts[w + 1])) - base  # this sequence's tokens of it
            window = window_tokens(layout, int(plan.windows[w]), int(plan.windows[w + 1]), lo, hi)
            if not window.base <= lo < hi <= window.base + window.tokens:
                raise CorruptData(f"window of slots {plan.windows[w]}..{plan.windows[w + 1]} does not hold its tokens {lo}..{hi}")
            base, lo, hi = base + window.base, lo - window.base, hi - window.base  # now relative to the documents read
            first = int(np.searchsorted(window.starts, lo, side="right")) - 1
            last = int(np.searchsorted(window.starts, hi - 1, side="right")) - 1
            for d in range(first, last + 1):
                doc_lo, doc_hi = int(window.starts[d]), int(window.starts[d + 1])
                a, b = max(lo, doc_lo), min(hi, doc_hi)
                if a >= b:
                    continue  # an empty document
                start = base + a - begin
                out.spans.append(DocumentSpan(len(payloads), start, start + b - a, a - doc_lo, doc_hi - doc_lo))
                payloads.append(window.payloads[d])
            ids.append(window.ids[lo:hi])
            masks.append(window.mask[lo:hi])
        if ids:
            out.input_ids = np.concatenate(ids).tolist()
            out.loss_mask = np.concatenate(masks).tolist()
        finish(out, self.seq_len, pad_id, positions)
        return out, payloads

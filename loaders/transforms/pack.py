"""Packing: documents concatenated into fixed-length sequences.

The default strategy, ``"concat"``, is lossless concat-and-chunk (see
:mod:`loaders.order.packing`): every document token of an epoch is delivered once,
and only the last sequence of an epoch per stream is padded. The
``"block"`` strategy, described here, is the fixed-block packing of read
formats 1 and 2, kept as an explicit option. A stream's documents are grouped into blocks of ``docs_per_block``; each
block is concatenated (documents keep their own loss masks) and cut into
exactly ``sequences_per_block`` sequences of ``seq_len`` tokens. Tokens past
the block's last sequence are dropped and a short block is padded (mask 0),
so the ``q``-th packed sequence of a stream is a function of one block only:
no O(N) index, no replay. The run records how many tokens packing dropped or
padded for every block it builds, so the cost of this choice is visible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import InvalidPlan
from .base import Context, Transform

#: Packing strategies: lossless concat-and-chunk, or the fixed blocks of read formats 1 and 2.
STRATEGIES = ("concat", "block")
#: Position ids: per-document restarts (and at each sequence start), or 0..seq_len-1 per sequence.
POSITION_MODES = ("document", "sequence")


@dataclass(frozen=True)
class Pack(Transform):
    """Pack documents into ``seq_len``-token sequences (see the module docstring).

    ``strategy``: ``"concat"`` (default, lossless) or ``"block"`` (fixed
    blocks of ``docs_per_block`` documents cut into ``sequences_per_block``
    sequences: overflow dropped, short blocks padded). ``sequences_per_block``
    defaults to what a block's documents fill on average, estimated once when
    the run is created and then fixed in the run manifest; ``docs_per_block``
    and ``sequences_per_block`` only apply to ``"block"``.

    ``position_ids``: ``"document"`` (default) restarts at 0 at every document
    boundary and at each sequence start, for document-masked attention (the
    sequence also carries ``cu_seqlens``); ``"sequence"`` numbers every
    sequence ``0..seq_len-1``. Either way no position id exceeds ``seq_len - 1``.
    """

    type = "pack"
    document_level = False

    seq_len: int = 2048
    docs_per_block: int = 64
    sequences_per_block: int | None = None
    pad_id: int = 0
    strategy: str = "concat"
    position_ids: str = "document"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise InvalidPlan(f"pack strategy={self.strategy!r} is not one of {', '.join(STRATEGIES)}")
        if self.position_ids not in POSITION_MODES:
            raise InvalidPlan(f"pack position_ids={self.position_ids!r} is not one of {', '.join(POSITION_MODES)}")
        if not isinstance(self.seq_len, int) or self.seq_len < 1:
            raise InvalidPlan(f"pack seq_len={self.seq_len!r} is out of range: must be an integer >= 1")
        if not isinstance(self.docs_per_block, int) or self.docs_per_block < 1:
            raise InvalidPlan(f"pack docs_per_block={self.docs_per_block!r} is out of range: must be an integer >= 1")
        if self.sequences_per_block is not None and (not isinstance(self.sequences_per_block, int) or self.sequences_per_block < 1):
            raise InvalidPlan(f"pack sequences_per_block={self.sequences_per_block!r} is out of range: must be an integer >= 1")

    def apply(self, inputs: dict[str, Any], ctx: Context) -> None:  # packing is done by the run, per block
        raise InvalidPlan("pack is applied by the run to whole blocks of documents")


@dataclass
class DocumentSpan:
    """Where one document lies in a packed sequence: tokens ``[start, end)`` are its tokens ``[offset, offset+end-start)``."""

    document: int
    start: int
    end: int
    offset: int
    length: int

    def to_json(self) -> dict[str, int]:
        return {"document": self.document, "start": self.start, "end": self.end, "offset": self.offset, "length": self.length}


@dataclass
class PackedSequence:
    """One packed sequence and the documents inside it."""

    input_ids: list[int]
    loss_mask: list[int]
    position_ids: list[int]
    spans: list[DocumentSpan] = field(default_factory=list)
    padding: int = 0
    #: Segment boundaries for document-masked attention: ``[0, end of each span..., seq_len]``.
    cu_seqlens: list[int] = field(default_factory=list)


def pack_block(
    documents: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    seq_len: int,
    sequences: int,
    pad_id: int,
    positions: str = "offset",
) -> tuple[list[PackedSequence], int]:
    """Pack ``(ids, mask)`` documents into ``sequences`` sequences; returns them and the tokens dropped.

    ``positions``: a :data:`POSITION_MODES` value, or ``"offset"`` (read formats 1 and 2: the
    token's offset inside its document, which may exceed ``seq_len``).

    >>> seqs, dropped = pack_block([([1, 2, 3], [1, 1, 1]), ([4, 5], [1, 1])], seq_len=2, sequences=2, pad_id=0)
    >>> [s.input_ids for s in seqs], dropped
    ([[1, 2], [3, 4]], 1)
    """
    out = [PackedSequence([], [], []) for _ in range(sequences)]
    capacity = seq_len * sequences
    cursor = 0
    dropped = 0
    for number, (ids, mask) in enumerate(documents):
        length = len(ids)
        doc_pos = 0
        while doc_pos < length:
            if cursor >= capacity:
                dropped += length - doc_pos
                break
            seq_index, seq_pos = divmod(cursor, seq_len)
            take = min(length - doc_pos, seq_len - seq_pos)
            seq = out[seq_index]
            seq.input_ids.extend(int(t) for t in ids[doc_pos : doc_pos + take])
            seq.loss_mask.extend(int(m) for m in mask[doc_pos : doc_pos + take])
            seq.position_ids.extend(range(doc_pos, doc_pos + take))
            seq.spans.append(DocumentSpan(number, seq_pos, seq_pos + take, doc_pos, length))
            doc_pos += take
            cursor += take
    for seq in out:
        if positions != "offset":
            finish(seq, seq_len, pad_id, positions)
            continue
        missing = seq_len - len(seq.input_ids)
        if missing:
            seq.input_ids.extend([pad_id] * missing)
            seq.loss_mask.extend([0] * missing)
            seq.position_ids.extend([0] * missing)
            seq.padding = missing
    return out, dropped


def finish(seq: PackedSequence, seq_len: int, pad_id: int, positions: str) -> None:
    """Pad ``seq`` to ``seq_len`` (mask 0) and set its ``position_ids`` (a :data:`POSITION_MODES` value) and ``cu_seqlens``.

    >>> seq = PackedSequence([5, 6, 7], [1, 1, 1], [], [DocumentSpan(0, 0, 1, 3, 4), DocumentSpan(1, 1, 3, 0, 2)])
    >>> finish(seq, 5, 0, "document")
    >>> seq.position_ids, seq.cu_seqlens, seq.padding
    ([0, 0, 1, 0, 1], [0, 1, 3, 5], 2)
    """
    missing = seq_len - len(seq.input_ids)
    seq.input_ids.extend([pad_id] * missing)
    seq.loss_mask.extend([0] * missing)
    seq.padding = missing
    ends = [span.end for span in seq.spans]
    if missing:
        ends.append(seq_len)
    seq.cu_seqlens = [0, *ends]
    if positions == "sequence":
        seq.position_ids = list(range(seq_len))
    else:
        bounds = seq.cu_seqlens
        seq.position_ids = [i - start for start, end in zip(bounds, bounds[1:]) for i in range(start, end)]

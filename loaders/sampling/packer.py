"""The packer: a run's documents packed into sequences, each sequence a sample.

Two strategies. **Fixed blocks** (read formats 1–3, ``Pack(strategy="block")``): stream ``k``'s documents are cut
into blocks of ``docs_per_block``, each packed into ``sequences_per_block`` sequences (tokens past the last one are
dropped); packed blocks are kept in a small LRU, since consecutive steps read the same block. **Lossless
concat-and-chunk** (read formats 3–4's default): stream ``k``'s ``n``-th sequence of a source is found from the
source's token counts per chunk (:mod:`loaders.sampling.concat_packing`).

>>> packer.sample(step=3, position=5).inputs["doc_spans"][0]["key"]      # doctest: +SKIP
'doc-17'
>>> estimate_sequences_per_block(sampler, documents)                       # doctest: +SKIP
6
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ..transforms import Pack, PackedSequence, pack_block
from .batch import Document, Sample
from .concat_packing import ConcatPacking, PackingWaste
from .documents import DocumentSource
from .plan import packs_losslessly
from .sampler import Sampler

#: Blocks of stream 0 tokenized to estimate sequences per block when the plan does not fix it.
ESTIMATE_BLOCKS = 4
#: Fixed-block packing waste is measured over every block up to this many documents, else over the first blocks.
WASTE_EXACT_DOCUMENTS = 20_000


def estimate_sequences_per_block(sampler: Sampler, documents: DocumentSource) -> int:
    """Sequences per fixed packing block for a plan that does not fix it: the tokens of the first
    :data:`ESTIMATE_BLOCKS` blocks of stream 0, per block, in sequences of ``seq_len`` (at least 1).

    Run creation calls it once and writes the result in the run manifest.
    """
    pack = documents.plan.pack
    assert pack is not None
    d = pack.docs_per_block
    tokens = 0
    for block in range(ESTIMATE_BLOCKS):
        counters = range(block * d, (block + 1) * d)
        for doc in documents.documents(sampler.draws(0, counters), counters):
            inputs = documents.tokens(doc, (1, 0, doc.draw), f"run {documents.name} stream 0 document {doc.draw}")
            tokens += len(inputs["input_ids"])
    return max(1, round(tokens / ESTIMATE_BLOCKS / pack.seq_len))


class Packer:
    """Packed sequences of a run whose plan packs (``documents.plan.pack``), as samples of its global batches."""

    def __init__(self, sampler: Sampler, documents: DocumentSource, *, read_format: int, sequences_per_block: int | None) -> None:
        self.sampler = sampler
        self.documents = documents
        self.name = documents.name
        self.plan = documents.plan
        self.read_format = read_format
        self.sequences_per_block = sequences_per_block
        self.lossless = packs_losslessly(self.plan, read_format)
        self._concat: ConcatPacking | None = None
        self._blocks: OrderedDict[tuple[int, int], tuple[list[PackedSequence], list[Document]]] = OrderedDict()
        self._dropped: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    @property
    def pack(self) -> Pack:
        pack = self.plan.pack
        assert pack is not None
        return pack

    @property
    def stops_after(self) -> float | None:
        """Epochs after which every stream stops (read format 4, lossless packing over ``epochs``; its later sequences
        are padding); None: streams read on into the next epoch (formats 1–3, plans over ``steps``)."""
        return self.plan.epochs if self.lossless and self.read_format >= 4 else None

    @property
    def concat(self) -> ConcatPacking:
        """Lossless packing's sequence lookup (runs packed with ``Pack(strategy="concat")``)."""
        if self._concat is None:
            sources = range(len(self.documents.sources))
            counts = [self.documents.token_counts(s) for s in sources]
            records = [self.documents.record_token_counts(s) for s in sources]
            self._concat = ConcatPacking(self.documents, self.sampler.lane_orders, counts, records, epochs=self.stops_after)
        return self._concat

    # -- fixed blocks -------------------------------------------------------------------------------
    def packed_block(self, stream: int, block: int) -> tuple[list[PackedSequence], list[Document]]:
        """The sequences packed from ``stream``'s ``block``-th block of documents, and those documents (spans index
        them)."""
        key = (stream, block)
        with self._lock:
            cached = self._blocks.get(key)
            if cached is not None:
                self._blocks.move_to_end(key)
                return cached
        pack = self.pack
        assert self.sequences_per_block is not None
        d = pack.docs_per_block
        counters = range(block * d, (block + 1) * d)
        documents = self.documents.documents(self.sampler.draws(stream, counters), counters)
        tokenized = []
        for doc in documents:
            inputs = self.documents.tokens(doc, (1, stream, doc.draw), f"run {self.name} stream {stream} document {doc.draw}")
            tokenized.append((inputs["input_ids"], inputs.get("loss_mask") or [1] * len(inputs["input_ids"])))
        positions = pack.position_ids if self.read_format >= 3 else "offset"
        sequences, dropped = pack_block(
            tokenized, seq_len=pack.seq_len, sequences=self.sequences_per_block, pad_id=pack.pad_id, positions=positions
        )
        with self._lock:
            self._blocks[key] = (sequences, documents)
            self._dropped[key] = dropped
            while len(self._blocks) > 4 * self.sampler.streams + 8:
                old, _ = self._blocks.popitem(last=False)
                self._dropped.pop(old, None)
        return sequences, documents

    def dropped(self, stream: int, block: int) -> int:
        """Tokens of ``stream``'s ``block`` past its last sequence (known once :meth:`packed_block` packed it)."""
        return self._dropped.get((stream, block), 0)

    def block_samples(self, stream: int, document: int) -> list[int]:
        """Sample counters of ``stream`` whose sequences hold some of its ``document``-th document's tokens (none when
        they were all dropped)."""
        assert self.sequences_per_block is not None
        block, within = divmod(document, self.pack.docs_per_block)
        sequences, _ = self.packed_block(stream, block)
        return [
            block * self.sequences_per_block + q for q, seq in enumerate(sequences) if any(span.document == within for span in seq.spans)
        ]

    def block_counters(self, steps: range) -> list[range]:
        """The ranges of one stream's documents that the packed blocks of ``steps`` hold (one range per block)."""
        assert self.sequences_per_block is not None
        width, d = self.sampler.width, self.pack.docs_per_block
        first = (steps.start * width) // self.sequences_per_block
        last = (steps.stop * width - 1) // self.sequences_per_block
        return [range(block * d, (block + 1) * d) for block in range(first, last + 1)]

    # -- samples -----------------------------------------------------------------------------------
    def sample(self, step: int, position: int) -> Sample:
        """The packed sequence at ``position`` of ``step``'s global batch, as a sample."""
        stream, i = divmod(position, self.sampler.width)
        counter = step * self.sampler.width + i
        if self.lossless:
            assert self.sampler.step_mixture is not None
            sources, n = self.sampler.step_mixture.draws(stream, np.asarray([counter]))
            seq, documents = self.concat.sequence(stream, int(sources[0]), int(n[0]))
            return self._sequence_sample(step, position, stream, seq, documents, dropped=0)
        assert self.sequences_per_block is not None
        block, q = divmod(counter, self.sequences_per_block)
        sequences, documents = self.packed_block(stream, block)
        dropped = self.dropped(stream, block) if q == self.sequences_per_block - 1 else 0
        return self._sequence_sample(step, position, stream, sequences[q], documents, dropped=dropped)

    def _sequence_sample(
        self, step: int, position: int, stream: int, seq: PackedSequence, documents: list[Document], *, dropped: int
    ) -> Sample:
        """A packed sequence as a sample: its documents (with their spans) and model inputs."""
        docs = []
        spans = []
        for span in seq.spans:
            source_doc = documents[span.document]
            docs.append(
                Document(
                    source_doc.source,
                    source_doc.source_name,
                    source_doc.key,
                    source_doc.address,
                    source_doc.epoch,
                    source_doc.record,
                    span.to_json(),
                    source_doc.draw,
                )
            )
            spans.append({**span.to_json(), "key": source_doc.key})
        index = step * self.sampler.global_batch_size + position
        inputs: dict[str, Any] = {
            "input_ids": list(seq.input_ids),
            "loss_mask": list(seq.loss_mask),
            "position_ids": list(seq.position_ids),
            "doc_spans": spans,
            "padding": seq.padding,
        }
        if self.read_format >= 3:  # older formats keep their inputs (and so their digests) exactly
            inputs["cu_seqlens"] = list(seq.cu_seqlens)
            inputs["dropped"] = dropped
        if not docs:  # an all-padding sequence (the block's documents ran out)
            docs = [documents[-1]]
        ctx = self.documents.context(None, (0, index), f"run {self.name} step {step} sample {index}", None)
        for transform in self.plan.sequence_transforms:
            transform.apply(inputs, ctx)
        return Sample(index, position, stream, docs, inputs)

    # -- waste ---------------------------------------------------------------------------------------
    def waste(self, total_steps: int) -> PackingWaste:
        """Document tokens packed, and tokens padded, dropped and repeated (from a second or later epoch), over the
        run's ``total_steps``.

        Lossless packing: exact, from the token counts. Fixed-block packing:
        exact when the run's blocks hold at most :data:`WASTE_EXACT_DOCUMENTS`
        documents, else measured on the first blocks of every stream and
        marked ``exact=False``.
        """
        pack, streams = self.pack, self.sampler.streams
        if self.lossless:
            assert self.sampler.step_mixture is not None
            read = {
                (k, s): int(n)
                for k in range(streams)
                for s, n in enumerate(self.sampler.step_mixture.draws_before(k, total_steps).tolist())
                if n
            }
            return self.concat.waste(read)
        assert self.sequences_per_block is not None
        blocks = -(-total_steps * self.sampler.width // self.sequences_per_block)
        measured = min(blocks, max(1, WASTE_EXACT_DOCUMENTS // (pack.docs_per_block * streams)))
        tokens = padding = dropped = repeated = 0
        for stream in range(streams):
            for block in range(measured):
                sequences, documents = self.packed_block(stream, block)
                padding += sum(seq.padding for seq in sequences)
                tokens += sum(len(seq.input_ids) - seq.padding for seq in sequences)
                dropped += self.dropped(stream, block)
                repeated += sum(span.end - span.start for seq in sequences for span in seq.spans if documents[span.document].epoch >= 1)
        sequences_measured = measured * self.sequences_per_block * streams
        note = "" if measured == blocks else f"measured on the first {measured} of {blocks} blocks of every stream"
        return PackingWaste(tokens, padding, dropped, sequences_measured, pack.seq_len, measured == blocks, note, repeated)

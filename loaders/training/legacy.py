"""Digests as the first ledger format (1) defined them, so ledgers written then still verify.

Format 1 hashed canonical JSON of each sample's index, its documents' keys and
addresses, and the inputs transforms made; the batch digest hashed the run,
step, rank, world size and those sample digests. Format 2 (see
``loaders.sampling.digests``) pins the same things with cheaper arithmetic.
"""

from __future__ import annotations

from ..catalog.records import digest
from ..sampling.batch import Batch, Sample, made_inputs


def sample_digest_v1(sample: Sample) -> str:
    """A sample's format-1 digest (16 hex characters)."""
    record = sample.documents[0].record if not sample.packed else {}
    documents = [[d.key, d.address.dataset, d.address.version, d.address.shard, d.address.row] for d in sample.documents]
    return digest([sample.index, documents, made_inputs(record, sample.inputs)], 16)


def batch_digests_v1(batch: Batch) -> tuple[str, list[str]]:
    """``(batch digest, sample digests)`` of ``batch`` in format 1."""
    samples = [sample_digest_v1(s) for s in batch.samples]
    return digest([batch.run, batch.step, batch.rank, batch.world_size, samples], 32), samples

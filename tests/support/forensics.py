"""A small catalog for loss forensics: packed runs with padding, per-sample and per-token losses, a spike and a dip.

``spiky`` (2 ranks, 30 steps) logs a slowly falling, slightly noisy loss except a
spike at :data:`SPIKE` and a dip to 0 at :data:`DIP`; per-sample losses put the
worst sample of every step at :data:`WORST` (rank, position); per-token losses
are logged for every sample. ``calm`` has the same plan on 1 rank without
anomalies (an overlay for ``spiky``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from loaders import Catalog, Pack, ReadPlan, Source, Tokenize

STEPS = 30
SPIKE = 17
DIP = 23
#: (rank, position) of the sample with the highest logged loss at every step of ``spiky``.
WORST = (1, 0)


def base_loss(step: int) -> float:
    """The ordinary part of both runs' loss curves: a slow decline with a little deterministic noise."""
    return 3.0 - 0.005 * step + 0.015 * ((step * 7) % 5 - 2)


def spiky_loss(step: int) -> float:
    """``spiky``'s loss: the base curve with a spike and a dip."""
    return {SPIKE: 9.0, DIP: 0.0}.get(step, base_loss(step))


def sample_loss(step: int, rank: int, position: int) -> float:
    """Per-sample losses: rank 1 position 0 is the worst, then rank 0 position 1, ..."""
    offsets = {(1, 0): 2.0, (0, 1): 1.0, (0, 0): 0.5, (1, 1): 0.25}
    return spiky_loss(step) + offsets[(rank, position)]


def build_forensics_catalog(root: Path, write_parquet, word_tokenizer) -> Catalog:  # noqa: ANN001 (conftest helpers)
    """Write the catalog under ``root`` (``write_parquet`` and ``word_tokenizer`` are the test suite's helpers)."""
    catalog = Catalog(root / "catalog")
    words = ["alpha", "beta", "gamma", "delta"] + [f"w{i}" for i in range(20)]
    catalog.put_tokenizer("words", word_tokenizer(words))
    texts = [" ".join(f"w{(i + j) % 20}" for j in range(3 + i % 4)) for i in range(24)]
    docs = pa.table({"id": [f"doc-{i}" for i in range(24)], "text": texts})
    catalog.register("docs", write_parquet(docs, root / "src" / "docs", shards=2), key="id", tag="v1", tokenizer="words")

    def plan(seed: int) -> ReadPlan:
        # Two documents of 3-6 tokens per block cut into two 16-token sequences: the first is mostly padding,
        # the second all padding.
        return ReadPlan(
            [Source("docs@v1", transforms=[Tokenize("text")])],
            seed=seed,
            global_batch_size=4,
            steps=STEPS,
            streams=2,
            transforms=[Pack(seq_len=16, docs_per_block=2, sequences_per_block=2, strategy="block")],
        )

    spiky = catalog.create_run("spiky", plan(5))
    readers = [spiky.reader(rank, 2, flush_seconds=0) for rank in range(2)]
    for batches in zip(*readers):
        for reader, batch in zip(readers, batches):
            reader.log(
                batch.step,
                loss=spiky_loss(batch.step),
                sample_loss=[sample_loss(batch.step, batch.rank, i) for i in range(len(batch))],
                token_loss=[[round(0.25 * i, 2) for i in range(len(s.inputs["input_ids"]))] for s in batch.samples],
            )
    for reader in readers:
        reader.close()
    calm = catalog.create_run("calm", plan(6))
    with calm.reader(0, 1, flush_seconds=0) as reader:
        for batch in reader:
            reader.log(batch.step, loss=base_loss(batch.step) + 0.1)
    return catalog

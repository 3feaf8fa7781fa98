"""Locality: a rank decodes each row group about once per epoch (read amplification <= 1.25)."""

from __future__ import annotations

from loaders import Catalog, ReadPlan, Source
from loaders.catalog.version import READ_STATS, clear_read_caches
from tests.support.readpath import write_text_dataset


def test_read_amplification_when_world_size_divides_streams(tmp_path):
    catalog = Catalog(tmp_path / "c")
    write_text_dataset(catalog, "corpus", 3000, row_group=7, shards=9)  # unaligned shards and row groups
    plan = ReadPlan([Source("corpus@v1")], seed=3, global_batch_size=16, epochs=1, streams=8)
    run = catalog.create_run("local", plan)
    clear_read_caches()
    READ_STATS.reset()
    consumed = 0
    with run.reader(0, 4, ledger=False) as reader:
        for batch in reader:
            consumed += len(batch)
    amplification = READ_STATS.rows / consumed
    assert consumed == run.total_steps * 4
    assert 1.0 <= amplification <= 1.25, amplification


def test_consecutive_batches_are_globally_shuffled(tmp_path):
    catalog = Catalog(tmp_path / "c")
    write_text_dataset(catalog, "corpus", 2000, row_group=10, shards=4)
    run = catalog.create_run("mix", ReadPlan([Source("corpus@v1")], seed=1, global_batch_size=8, epochs=2, streams=8))
    samples = [s for step in range(run.total_steps) for s in run.batch(step, 0, world_size=1).samples]
    keys = [s.key for s in samples]
    epoch0 = [s.key for s in samples if s.documents[0].epoch == 0]
    epoch1 = [s.key for s in samples if s.documents[0].epoch == 1]
    assert sorted(epoch0) == sorted(epoch1) == sorted(f"corpus-{i}" for i in range(2000))
    assert epoch0 != epoch1
    # The first step already spans the dataset: its records come from different parts of it.
    first = sorted(int(k.split("-")[1]) for k in keys[:8])
    assert first[-1] - first[0] > 500

"""Replayed Grain ``MapDataset`` pipelines: each process's batches, as Grain's own iteration yields them over a
``datasets`` source, equal the replay — for stages in several orders, seeded either way — and ``where`` inverts them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from loaders import Catalog
from loaders.errors import ReplayError
from loaders.replay.attach import attach
from loaders.replay.grain import import_grain
from tests.support.replays import hf_corpus, replayed_digests, token_digest


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return hf_corpus(tmp_path_factory.mktemp("grain"), rows=45)


def _grain_job(corpus, process, *, stages, processes, batch, epochs, seed=None, dataset_seed=None, drop=False, steps=None):
    """What process ``process`` of the job iterates (its first ``steps``): ``(step, process) → sample digests``."""
    import datasets

    grain = import_grain()
    ds = grain.MapDataset.source(datasets.load_from_disk(str(corpus))).map(lambda r: {"input_ids": np.asarray(r["input_ids"])})
    if dataset_seed is not None:
        ds = ds.seed(dataset_seed)
    for stage in stages:
        if stage == "shuffle":
            ds = ds.shuffle(seed=seed) if seed is not None else ds.shuffle()
        elif stage == "repeat":
            ds = ds.repeat(epochs)
        elif stage == "slice":
            ds = ds[process::processes]
        else:
            ds = ds.batch(batch, drop_remainder=drop)
    batches = itertools.islice(ds.to_iter_dataset(), steps)
    return {(step, process): [token_digest(row) for row in b["input_ids"]] for step, b in enumerate(batches)}


CASES = [
    (("shuffle", "repeat", "slice", "batch"), dict(seed=3)),
    (("repeat", "shuffle", "slice", "batch"), dict(dataset_seed=11)),
    (("shuffle", "repeat", "batch", "slice"), dict(seed=5, drop=True)),
]


@pytest.mark.parametrize("stages, seeds", CASES)
def test_every_step_of_every_process_equals_what_grain_iterates(tmp_path, corpus, stages, seeds):
    options = dict(stages=stages, processes=2, batch=4, epochs=3, **seeds)
    real = {}
    for process in range(2):
        real.update(_grain_job(corpus, process, **options))
    argv = ["--source", str(corpus), "--process-count", "2", "--batch-size", "4", "--epochs", "3", "--pipeline", ",".join(stages)]
    argv += ["--seed", str(seeds["seed"])] if "seed" in seeds else ["--dataset-seed", str(seeds["dataset_seed"])]
    argv += ["--drop-remainder"] if seeds.get("drop") else []
    run = attach(Catalog(tmp_path / "catalog"), "grain", "job", argv)
    replayed = replayed_digests(run)
    assert replayed == {key: value for key, value in real.items() if key[0] < run.total_steps}
    assert run.total_steps == min(max(s for s, p in real if p == process) + 1 for process in range(2))


def test_where_inverts_the_pipeline_and_epochs_count_passes(tmp_path, corpus):
    argv = ["--source", str(corpus), "--process-count", "2", "--batch-size", "3", "--epochs", "2", "--seed", "7"]
    run = attach(Catalog(tmp_path / "catalog"), "grain", "job", argv)
    reads = {}
    for step in range(run.total_steps):
        for rank in range(2):
            for position, sample in enumerate(run.batch(step, rank).samples):
                reads.setdefault(sample.index, []).append((sample.documents[0].epoch, step, rank, position))
    assert sorted(reads) == list(range(45)) and {len(r) for r in reads.values()} == {2}
    for record, expected in reads.items():
        assert [(r.epoch, r.step, r.rank, r.sample) for r in run.where(0, record).reads] == sorted(expected)


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--process-count", "2", "--batch-size", "4", "--pipeline", "shuffle,repeat,batch", "--seed", "1"],
            r"--process-count 2 needs a slice stage",
        ),
        (["--process-count", "60", "--batch-size", "4", "--seed", "1", "--drop-remainder"], r"over 45 records: a process gets no batch"),
        (["--process-count", "2", "--batch-size", "4"], r"a shuffle stage needs --seed S"),
        (
            ["--process-count", "2", "--batch-size", "4", "--seed", "1", "--epochs", "0"],
            r"repeating forever \(--epochs 0\) needs --steps N",
        ),
        (
            ["--process-count", "2", "--batch-size", "4", "--pipeline", "shuffle,zip,batch", "--seed", "1"],
            r"stages are shuffle, repeat, slice, batch",
        ),
    ],
)
def test_pipelines_grain_cannot_give_are_one_line(tmp_path, corpus, flags, message):
    catalog = Catalog(tmp_path / "catalog")
    with pytest.raises(ReplayError, match=message):
        attach(catalog, "grain", "job", ["--source", str(corpus), *flags])
    assert catalog.runs() == [] and catalog.datasets() == []


def test_a_forever_repeating_pipeline_is_read_for_the_steps_the_job_took(tmp_path, corpus):
    argv = ["--source", str(corpus), "--process-count", "2", "--batch-size", "4", "--seed", "2", "--epochs", "0", "--steps", "40"]
    run = attach(Catalog(tmp_path / "catalog"), "grain", "job", argv)
    real = _grain_job(corpus, 1, stages=("shuffle", "repeat", "slice", "batch"), processes=2, batch=4, epochs=None, seed=2, steps=40)
    assert run.total_steps == 40 and [replayed_digests(run)[(s, 1)] for s in range(40)] == [real[(s, 1)] for s in range(40)]

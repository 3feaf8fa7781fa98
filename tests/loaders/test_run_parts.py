"""The parts behind the Run façade, each on its own: sampler, document source, packer, assembler, world-size log,
verifier and the run manifest; and the errors Run and Reader share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from loaders import Catalog, Pack, RankOutOfRange, ReadPlan, Run, Source, Tokenize, storage
from loaders.catalog.store import CatalogStore
from loaders.errors import CatalogCorrupt
from loaders.run.manifest import create_manifest
from loaders.sampling.assembler import Assembler
from loaders.sampling.documents import DocumentSource
from loaders.sampling.packer import Packer, estimate_sequences_per_block
from loaders.sampling.sampler import Sampler
from loaders.sampling.world_sizes import WorldSizeLog, WorldSizeSpan
from loaders.training.verifier import Verifier
from tests.loaders.test_formats import PLAN, _as_format
from tests.support.readpath import alpha_beta_catalog

PACKED = ReadPlan(
    [Source("alpha@v1", transforms=[Tokenize("text", tokenizer="words")])],
    seed=3,
    global_batch_size=4,
    steps=6,
    streams=2,
    transforms=[Pack(seq_len=16, docs_per_block=8, strategy="block")],
)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    return alpha_beta_catalog(tmp_path_factory.mktemp("parts") / "catalog")


@pytest.fixture(scope="module")
def runs(catalog) -> dict[int, Run]:
    """The same plan in read formats 1, 2 and 3."""
    run = catalog.create_run("formats", PLAN)
    return {3: run, 2: Run(catalog, _as_format(run.manifest, 2)), 1: Run(catalog, _as_format(run.manifest, 1))}


def _sampler(run: Run) -> Sampler:
    resolved = run.manifest["resolved"]
    return Sampler(run.plan, run.sources, resolved["counts"], read_format=run.read_format, cycle_steps=resolved.get("cycle_steps"))


def _documents(run: Run) -> DocumentSource:
    token_counts = run.manifest["resolved"].get("token_counts")
    return DocumentSource(run.catalog, run.name, run.plan, run.sources, run.tokenizers, token_counts=token_counts)


def _record_indices(run: Run, batch) -> list[tuple[int, int, int]]:
    """``(source, record index, epoch)`` of each sample of an unpacked batch, from what was read."""
    return [
        (d.source, run.version(d.source).index_of(d.address.shard, d.address.row), d.epoch) for d in (s.documents[0] for s in batch.samples)
    ]


# -- sampler ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [1, 2, 3])
def test_the_samplers_draws_are_what_the_facade_reads(runs, fmt):
    run = runs[fmt]
    sampler = _sampler(run)  # made from the manifest alone, no Run
    for step in (0, 5, 11):
        for world_size, rank in ((1, 0), (2, 1), (4, 3)):
            positions = sampler.positions(rank, world_size)
            expected = _record_indices(run, run.batch(step, rank, world_size=world_size))
            assert sampler.addresses(step, positions) == expected == run.addresses(step, rank, world_size=world_size)
            assert [sampler.draw(p // sampler.width, step * sampler.width + p % sampler.width) for p in positions] == expected


@pytest.mark.parametrize("fmt", [1, 2, 3])
def test_the_sampler_inverts_its_draws(runs, fmt):
    sampler = runs[fmt].sampler
    counters = np.arange(0, 12 * sampler.width, dtype=np.int64)
    for stream in range(sampler.streams):
        sources = sampler.sources_at(stream, counters)
        assert sources.tolist() == sampler.compute_draws(stream, range(len(counters)))[0].tolist()
        for source in range(2):
            at = np.flatnonzero(sources == source)
            assert [sampler.counter_of(stream, source, n) for n in range(len(at))] == at.tolist()
            if fmt < 3:  # formats 1 and 2 count exactly mid-step; format 3 rounds up to whole steps
                assert [sampler.drawn_before(stream, source, int(c)) for c in at] == list(range(len(at)))
            assert sampler.drawn_before(stream, source, len(counters)) == len(at)


def test_prefetched_draws_are_handed_over_once(runs):
    sampler = _sampler(runs[3])
    drawn = sampler.prefetch_draws(1, range(4, 12))
    assert sampler.draws(1, range(4, 12)) is drawn  # kept for exactly this range...
    again = sampler.draws(1, range(4, 12))  # ...and then computed
    assert again is not drawn and all(np.array_equal(a, b) for a, b in zip(again, drawn))


# -- document source and assembler -----------------------------------------------------------------------
def test_the_document_source_reads_the_records_the_sampler_draws(runs):
    run = runs[3]
    sampler, documents = _sampler(run), _documents(run)
    counters = range(2 * sampler.width, 3 * sampler.width)  # stream 0's documents of step 2
    read = documents.read(sampler.draws(0, counters), counters)
    batch = run.batch(2, 0, world_size=sampler.streams)  # rank 0 of 4 reads exactly stream 0
    assert read.records == batch.records and read.draws.tolist() == list(counters)
    assert [d.key for d in documents.documents(sampler.draws(0, counters), counters)] == batch.keys


@pytest.mark.parametrize("fmt", [2, 3])
def test_the_assembler_gives_the_facades_batches(runs, fmt):
    run = runs[fmt]
    sampler, documents = _sampler(run), _documents(run)
    packer = Packer(sampler, documents, read_format=run.read_format, sequences_per_block=run.sequences_per_block)
    assembler = Assembler(run.name, sampler, documents, packer)
    assembler.prefetch(range(3, 7), 1, 2)
    assert [b.digest for b in assembler.batches(range(3, 7), 1, 2)] == [run.batch(s, 1, world_size=2).digest for s in range(3, 7)]


# -- packer -------------------------------------------------------------------------------------------
def test_the_estimate_of_sequences_per_block_needs_no_run(catalog):
    run = catalog.create_run("packed", PACKED)
    assert run.plan.pack.sequences_per_block is None and run.sequences_per_block >= 1
    sampler, documents = _sampler(run), _documents(run)
    assert estimate_sequences_per_block(sampler, documents) == run.sequences_per_block
    packer = Packer(sampler, documents, read_format=run.read_format, sequences_per_block=run.sequences_per_block)
    for step in range(run.total_steps):
        expected = [s.digest_value() for s in run.batch(step, 0, world_size=1).samples]
        assert [packer.sample(step, p).digest_value() for p in range(4)] == expected
    # block_samples lists the sequences a document's tokens went into, as the packed block shows them
    for document in range(PACKED.pack.docs_per_block):
        sequences, _ = packer.packed_block(1, 0)
        holding = [q for q, seq in enumerate(sequences) if any(span.document == document for span in seq.spans)]
        assert packer.block_samples(1, document) == holding


# -- world-size log ------------------------------------------------------------------------------------
def test_the_world_size_log_reads_the_file_only_when_it_changed(tmp_path, monkeypatch):
    path = str(tmp_path / "world_sizes.jsonl")
    log = WorldSizeLog(path, run="r", plan=PLAN)
    reads = []
    real = storage.read_bytes
    monkeypatch.setattr(storage, "read_bytes", lambda uri, *a, **k: reads.append(uri) or real(uri, *a, **k))
    assert log.history() == [WorldSizeSpan(0, 1)] and reads == []  # no file: nothing to read
    log.record(0, 2)
    log.record(5, 4)
    assert [log.at(s) for s in (0, 4, 5, 100)] == [2, 2, 4, 4]
    reads.clear()
    for step in range(50):
        log.at(step)
    assert reads == []  # unchanged file: the history read after the last record serves every lookup
    log.record(5, 4)  # already in force: nothing appended, nothing read
    assert reads == [] and log.history() == [WorldSizeSpan(0, 2), WorldSizeSpan(5, 4)]
    log.record(3, 1)  # a restart from an earlier step supersedes the later span
    assert log.history() == [WorldSizeSpan(0, 2), WorldSizeSpan(3, 1)] and len(reads) == 1


def test_a_torn_world_size_line_is_skipped_and_marked_and_garbage_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "world_sizes.jsonl"
    log = WorldSizeLog(str(path), run="r", plan=PLAN)
    log.record(0, 2)
    with open(path, "a") as out:
        out.write('{"start_step": 5, "wor')  # a writer killed mid-line
    assert log.history() == [WorldSizeSpan(0, 2)]  # the unterminated last line is no record, and no failure
    log.record(6, 4)  # the next writer ends the torn line and marks it
    assert path.read_text().splitlines()[1:] == ['{"start_step": 5, "wor', '{"torn": true}', path.read_text().splitlines()[-1]]
    assert WorldSizeLog(str(path), run="r", plan=PLAN).history() == [WorldSizeSpan(0, 2), WorldSizeSpan(6, 4)]
    path.write_text(path.read_text().replace('{"torn": true}', "not a record"))  # an edit, not a torn write
    with pytest.raises(CatalogCorrupt, match=f"{path}: line 2 is not a world-size record") as caught:
        WorldSizeLog(str(path), run="r", plan=PLAN).at(7)
    assert "\n" not in str(caught.value)


def test_the_world_size_log_sees_a_span_another_process_writes(catalog):
    run = catalog.create_run("elastic", PLAN)
    assert run.world_size_at(7) == 1
    code = "import sys; from loaders import Catalog; Catalog(sys.argv[1]).run(sys.argv[2]).record_world_size(4, 2)"
    subprocess.run([sys.executable, "-c", code, catalog.root, run.name], check=True, cwd=Path(__file__).parents[2])
    assert run.world_size_history() == [WorldSizeSpan(0, 1), WorldSizeSpan(4, 2)]
    assert run.world_size_at(7) == 2 and [b.world_size for b in run.global_batch(7)] == [2, 2]


# -- verifier and manifest -----------------------------------------------------------------------------
def test_the_verifier_compares_recomputed_batches_with_the_ledger(catalog):
    run = catalog.create_run("verified", PLAN)
    verifier = Verifier(storage.join(run.directory, "ledger"), lambda step, rank: run.batch(step, rank, world_size=2))
    assert verifier.verify(1, 1).status == "no-ledger"
    with run.reader(rank=1, world_size=2, end_step=3) as reader:
        for batch in reader:
            reader.mark_trained(batch.step)
    assert [verifier.verify(s, 1).status for s in range(4)] == ["verified", "verified", "verified", "no-ledger"]
    batch = run.batch(2, 1, world_size=2)
    assert verifier.compare(batch) == run.compare(batch)  # rank 1 does not log world sizes: give the batch


def test_a_manifest_is_made_without_a_run_and_the_catalog_store_knows_no_runs(catalog):
    store = CatalogStore(catalog.root)
    assert not hasattr(store, "create_run") and isinstance(catalog, CatalogStore)
    manifest = create_manifest(store, "pure", PACKED)
    run = Run(store, manifest)
    assert catalog.run("pure").manifest == manifest and "pure" in catalog.runs()
    assert [b.digest for b in run.global_batch(2)] == [b.digest for b in catalog.run("pure").global_batch(2)]


# -- errors -----------------------------------------------------------------------------------------
def test_a_bad_rank_is_the_same_error_from_run_and_reader(catalog):
    run = catalog.create_run("ranks", ReadPlan([Source("alpha@v1")], seed=0, global_batch_size=4, steps=3, streams=4))
    for call in (lambda: run.batch(0, 2, world_size=2), lambda: run.reader(rank=2, world_size=2)):
        with pytest.raises(RankOutOfRange) as raised:
            call()
        assert isinstance(raised.value, ValueError)  # callers catching ValueError still do

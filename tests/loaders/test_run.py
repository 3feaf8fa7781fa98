"""Runs over random plans: elastic partition, worker independence, resume equivalence, reader == run.batch."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders import (
    Batch,
    Catalog,
    InvalidPlan,
    Pack,
    RankOutOfRange,
    ReadPlan,
    Sample,
    Shuffle,
    Source,
    StateMismatch,
    StepOutOfRange,
    Tokenize,
)
from tests.support.readpath import (
    alpha_beta_catalog,
    assert_partition,
    assert_resumes_identically,
    batch_view,
    read_all,
    write_text_dataset,
)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    return alpha_beta_catalog(tmp_path_factory.mktemp("runs") / "catalog")


_counter = iter(range(10**9))


def _run(catalog: Catalog, plan: ReadPlan):
    return catalog.create_run(f"r{next(_counter)}", plan)


plans = st.builds(
    lambda weights, seed, per_stream, streams, chunk, window, shuffle, two: ReadPlan(
        [Source("alpha@v1", weight=weights[0] if two else None)] + ([Source("beta@v1", weight=weights[1])] if two else []),
        seed=seed,
        global_batch_size=per_stream * streams,
        steps=12,
        streams=streams,
        shuffle=Shuffle(enabled=shuffle, chunk_size=chunk, window_chunks=window),
        mixture_block=64,
    ),
    weights=st.tuples(*[st.integers(2, 50).map(lambda tenths: tenths / 10)] * 2),  # weights as written: 0.2 to 5.0
    seed=st.integers(0, 10_000),
    per_stream=st.integers(1, 3),
    streams=st.sampled_from([1, 2, 4, 8]),
    chunk=st.integers(1, 20),
    window=st.integers(1, 3),
    shuffle=st.booleans(),
    two=st.booleans(),
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans)
def test_global_batch_is_the_same_for_every_allowed_world_size(catalog, plan):
    run = _run(catalog, plan)
    assert_partition(run, run.plan.allowed_world_sizes(), steps=[0, 5, 11])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans, stop=st.integers(1, 11), data=st.data())
def test_resume_and_reader_equal_run_batch(catalog, plan, stop, data):
    run = _run(catalog, plan)
    world_size = data.draw(st.sampled_from(run.plan.allowed_world_sizes()))
    rank = data.draw(st.integers(0, world_size - 1))
    options = {"steps_per_task": data.draw(st.sampled_from([None, 1, 3, 5])), "threads": data.draw(st.sampled_from([1, 2]))}
    assert_resumes_identically(run, rank, world_size, stop_after=stop, **options)
    yielded = read_all(run, rank, world_size, ledger=False, **options)
    assert yielded == [batch_view(run.batch(s, rank, world_size=world_size)) for s in range(run.total_steps)]


def _rebuilt(batch: Batch) -> Batch:
    """The same samples as plain objects, sealed from scratch (the scalar digest path)."""
    samples = [Sample(s.index, s.position, s.stream, s.documents, s.inputs) for s in batch.samples]
    return Batch(batch.run, batch.step, batch.rank, batch.world_size, samples).seal()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans, step=st.integers(0, 11), tokenize=st.booleans())
def test_columnar_batches_equal_their_sample_objects(catalog, plan, step, tokenize):
    """Columns and vectorized digests (what the reader uses) agree with Sample objects and the scalar digests."""
    if tokenize:
        sources = [Source(s.ref, weight=s.weight, transforms=[Tokenize("text", tokenizer="words")]) for s in plan.sources]
        plan = ReadPlan(
            sources,
            seed=plan.seed,
            global_batch_size=plan.global_batch_size,
            steps=12,
            streams=plan.streams,
            shuffle=plan.shuffle,
            mixture_block=plan.mixture_block,
        )
    run = _run(catalog, plan)
    batch = run.batch(step, 0, world_size=1)
    columnar = (batch.sample_digests, batch.indices, batch.keys, batch.records, [dict(i) for i in batch.inputs], len(batch))
    samples = batch.samples
    assert columnar == (
        [s.digest for s in samples],
        [s.index for s in samples],
        [s.key for s in samples],
        [s.record for s in samples],
        [s.inputs for s in samples],
        len(samples),
    )
    rebuilt = _rebuilt(batch)
    assert rebuilt.sample_digests == columnar[0] and rebuilt.digest == batch.digest
    assert all(("input_ids" in s.inputs) == tokenize for s in samples)


def test_digests_cover_index_address_and_made_inputs(catalog):
    run = _run(catalog, ReadPlan([Source("alpha@v1")], seed=2, global_batch_size=4, steps=4, streams=2))
    batch = run.batch(1, 0, world_size=1)
    base = _rebuilt(batch)
    sample = base.samples[2]
    changed = [
        Sample(sample.index + 1, sample.position, sample.stream, sample.documents, sample.inputs),
        Sample(
            sample.index,
            sample.position,
            sample.stream,
            [replace(sample.documents[0], address=replace(sample.address, row=sample.address.row + 1))],
            sample.inputs,
        ),
        Sample(sample.index, sample.position, sample.stream, sample.documents, {**sample.inputs, "extra": [1, 2]}),
        Sample(sample.index, sample.position, sample.stream, sample.documents, {**sample.inputs, "text": sample.record["text"] + "!"}),
    ]
    for other in changed:
        samples = [*base.samples[:2], other, *base.samples[3:]]
        again = Batch(batch.run, batch.step, batch.rank, batch.world_size, samples).seal()
        assert again.sample_digests[2] != base.sample_digests[2] and again.digest != base.digest
        assert again.sample_digests[:2] == base.sample_digests[:2]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_worker_split_gives_the_same_stream_of_steps(catalog, workers):
    run = _run(catalog, ReadPlan([Source("alpha@v1"), Source("beta@v1")], seed=1, global_batch_size=4, steps=10, streams=2))
    merged: dict[int, list] = {}
    for worker in range(workers):
        with run.reader(1, 2, ledger=False, worker=worker, num_workers=workers) as reader:
            for batch in reader:
                merged[batch.step] = batch_view(batch)
    assert sorted(merged) == list(range(10))
    assert [merged[s] for s in range(10)] == read_all(run, 1, 2, ledger=False)


def test_same_manifest_same_bytes_in_a_fresh_process(catalog, tmp_path):
    import subprocess
    import sys

    run = _run(
        catalog, ReadPlan([Source("alpha@v1", weight=2), Source("beta@v1", weight=1)], seed=9, global_batch_size=6, steps=5, streams=3)
    )
    here = [(s.index, s.key, s.digest) for s in run.batch(3, 2, world_size=3).samples]
    code = (
        "import json,sys; from loaders import Catalog; r=Catalog(sys.argv[1]).run(sys.argv[2]);"
        "print(json.dumps([(s.index,s.key,s.digest) for s in r.batch(3,2,world_size=3).samples]))"
    )
    out = subprocess.run([sys.executable, "-c", code, catalog.root, run.name], capture_output=True, text=True, check=True)
    assert [tuple(x) for x in json.loads(out.stdout)] == here


@pytest.mark.parametrize("strategy", ["concat", "block"])
def test_packed_plan_spans_masks_and_positions(catalog, strategy):
    plan = ReadPlan(
        [Source("alpha@v1", transforms=[Tokenize("text", tokenizer="words")])],
        seed=4,
        global_batch_size=4,
        steps=6,
        streams=2,
        transforms=[Pack(seq_len=16, docs_per_block=8, strategy=strategy)],
    )
    run = _run(catalog, plan)
    assert (run.sequences_per_block is None) == (strategy == "concat")
    assert_partition(run, [1, 2], steps=[0, 3, 5])
    tokenizer = catalog.tokenizer("words")
    for sample in run.batch(2, 0, world_size=1).samples:
        ids, mask, positions = sample.inputs["input_ids"], sample.inputs["loss_mask"], sample.inputs["position_ids"]
        assert len(ids) == len(mask) == len(positions) == 16
        cu = sample.inputs["cu_seqlens"]
        assert cu[0] == 0 and cu[-1] == 16 and cu == sorted(cu)
        for span, doc in zip(sample.inputs["doc_spans"], sample.documents):
            expected = tokenizer.encode(doc.record["text"], add_special_tokens=False).ids + [0]
            assert ids[span["start"] : span["end"]] == expected[span["offset"] : span["offset"] + span["end"] - span["start"]]
            assert positions[span["start"] : span["end"]] == list(range(span["end"] - span["start"]))  # restart per document
            assert span["start"] in cu and span["end"] in cu
            assert doc.key == span["key"]
        covered = sum(s["end"] - s["start"] for s in sample.inputs["doc_spans"])
        assert covered + sample.inputs["padding"] == 16
        assert sum(mask) == covered
        assert max(positions) <= 15


def test_sequence_position_ids_number_every_sequence(catalog):
    plan = ReadPlan(
        [Source("alpha@v1", transforms=[Tokenize("text", tokenizer="words")])],
        seed=4,
        global_batch_size=2,
        steps=3,
        streams=2,
        transforms=[Pack(seq_len=16, position_ids="sequence")],
    )
    for sample in _run(catalog, plan).batch(1, 0, world_size=1).samples:
        assert sample.inputs["position_ids"] == list(range(16))


def test_errors_name_the_bad_value(catalog):
    with pytest.raises(InvalidPlan, match="global_batch_size=0 is out of range"):
        ReadPlan([Source("alpha@v1")], seed=0, global_batch_size=0, steps=1)
    with pytest.raises(InvalidPlan, match="streams=3 is out of range: must divide global_batch_size=8"):
        ReadPlan([Source("alpha@v1")], seed=0, global_batch_size=8, steps=1, streams=3)
    with pytest.raises(InvalidPlan, match="exactly one of epochs or steps"):
        ReadPlan([Source("alpha@v1")], seed=0, global_batch_size=8)
    run = _run(catalog, ReadPlan([Source("alpha@v1")], seed=0, global_batch_size=4, steps=3, streams=4))
    with pytest.raises(StepOutOfRange, match="steps 0 to 2"):
        run.batch(3, 0)
    with pytest.raises(RankOutOfRange, match="world size 2"):
        run.batch(0, 2, world_size=2)
    with pytest.raises(InvalidPlan, match="world size 3 is not allowed"):
        run.batch(0, 0, world_size=3)


def test_state_from_another_plan_is_refused(catalog):
    a = _run(catalog, ReadPlan([Source("alpha@v1")], seed=0, global_batch_size=2, steps=3))
    b = _run(catalog, ReadPlan([Source("alpha@v1")], seed=1, global_batch_size=2, steps=3))
    with a.reader(0, 1, ledger=False) as reader:
        state = reader.state_dict()
    with b.reader(0, 1, ledger=False) as other, pytest.raises(StateMismatch, match="belongs to run"):
        other.load_state_dict(state)


def test_tags_are_resolved_when_the_run_is_created(catalog):
    run = _run(catalog, ReadPlan([Source("beta@v1")], seed=0, global_batch_size=2, steps=3))
    before = run.batch(1, 0)
    write_text_dataset(catalog, "beta", 40, row_group=2, shards=1, tag="v1", prefix="beta-new-")
    assert catalog.resolve("beta@v1").id != run.sources[0].version
    again = catalog.run(run.name).batch(1, 0)
    assert batch_view(again) == batch_view(before)


def test_epochs_cover_sources(catalog):
    run = _run(catalog, ReadPlan([Source("alpha@v1")], seed=2, global_batch_size=4, epochs=1, streams=1, shuffle=Shuffle(chunk_size=97)))
    keys = [s.key for step in range(run.total_steps) for s in run.batch(step, 0).samples]
    assert set(keys) == {f"alpha-{i}" for i in range(97)}


def test_ledger_verify_detects_a_mismatch(catalog):
    run = _run(catalog, ReadPlan([Source("alpha@v1")], seed=0, global_batch_size=4, steps=4, streams=2))
    with run.reader(0, 2, flush_seconds=0) as reader:
        for batch in reader:
            reader.log(batch.step, loss=1.0 / (batch.step + 1))
    assert run.verify(2, 0).status == "verified"
    assert run.verify(2, 1).status == "no-ledger"
    assert run.ledger.series("loss") == [(s, 1.0 / (s + 1)) for s in range(4)]
    path = next((__import__("pathlib").Path(run.directory) / "ledger").glob("*.jsonl"))
    lines = path.read_text().splitlines()
    tampered = []
    for line in lines:
        entry = json.loads(line)
        if entry.get("t") == "batch" and entry["step"] == 2:
            entry["digest"] = "0" * 32
            entry["samples"][1] = "f" * 16
        tampered.append(json.dumps(entry))
    path.write_text("\n".join(tampered) + "\n")
    result = run.verify(2, 0)
    assert result.status == "mismatch" and result.differing == [run.batch(2, 0, world_size=2).samples[1].index]

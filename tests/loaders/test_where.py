"""Where was this read: inverting the read order gives exactly the (step, rank, sample) that ``run.batch`` shows."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders import Catalog, Pack, ReadPlan, Run, SampleNotFound, Shuffle, Source, Tokenize
from loaders.run.manifest import create_manifest
from loaders.sampling.where import where_read
from tests.loaders.test_formats import _as_format
from tests.support.readpath import Reads, forward_reads, words_tokenizer_json, write_text_dataset

NAMES = ("alpha", "beta", "gamma")
ROWS = (23, 9, 14)
TOKENIZE = [Tokenize("text", tokenizer="words")]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    catalog = Catalog(tmp_path_factory.mktemp("where") / "catalog")
    for name, rows in zip(NAMES, ROWS):
        write_text_dataset(catalog, name, rows, row_group=3, shards=2)
    catalog.put_tokenizer("words", words_tokenizer_json())
    return catalog


_names = iter(range(10**9))


def _inverse(run: Run) -> Reads:
    found: Reads = {}
    for source, resolved in enumerate(run.sources):
        for record in range(resolved.rows):
            where = where_read(run, source, record, epochs=None)
            assert where.next_epoch is None
            reads = {(r.epoch, r.step, r.rank, r.world_size, r.sample) for r in where.reads}
            assert len(reads) == len(where.reads), "a read is listed twice"
            for r in where.reads:
                assert r.position == r.rank * (run.global_batch_size // r.world_size) + r.sample
                assert r.index == r.step * run.global_batch_size + r.position
            if reads:
                found[(source, record)] = reads
    return found


def _assert_inverts(run: Run, world_sizes: list[int]) -> None:
    switch = run.total_steps // 2
    run.record_world_size(0, world_sizes[0])
    run.record_world_size(switch, world_sizes[1])
    assert _inverse(run) == dict(forward_reads(run))


def _allowed(streams: int) -> list[int]:
    return [d for d in range(1, streams + 1) if streams % d == 0]


unpacked = dict(
    weights=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    per_stream=st.integers(1, 3),
    streams=st.sampled_from([1, 2, 4]),
    chunk=st.sampled_from([None, 1, 2, 5]),
    window=st.integers(1, 3),
    shuffle=st.booleans(),
    seed=st.integers(0, 1000),
    data=st.data(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**unpacked, fmt=st.sampled_from([1, 2, 3]))
def test_unpacked_reads_invert_to_the_batches_that_hold_them(
    catalog, weights, per_stream, streams, chunk, window, shuffle, seed, data, fmt
):
    plan = ReadPlan(
        [Source(f"{n}@v1", weight=float(w)) for n, w in zip(NAMES, weights)],
        seed=seed,
        global_batch_size=per_stream * streams,
        steps=14,
        streams=streams,
        shuffle=Shuffle(enabled=shuffle, chunk_size=chunk, window_chunks=window),
        mixture_block=16,
    )
    run = catalog.create_run(f"u{next(_names)}", plan)
    if fmt < 3:
        run = Run(catalog, _as_format(run.manifest, fmt))
    _assert_inverts(run, [data.draw(st.sampled_from(_allowed(streams))) for _ in range(2)])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    weights=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    seq_len=st.integers(3, 30),
    batch=st.sampled_from([1, 2, 4]),
    chunk=st.sampled_from([None, 1, 3]),
    shuffle=st.booleans(),
    data=st.data(),
)
def test_lossless_packed_documents_invert_to_every_sequence_holding_their_tokens(catalog, weights, seq_len, batch, chunk, shuffle, data):
    streams = data.draw(st.sampled_from(_allowed(batch)))
    plan = ReadPlan(
        [Source(f"{n}@v1", weight=float(w), transforms=TOKENIZE) for n, w in zip(NAMES, weights)],
        seed=3,
        global_batch_size=batch,
        steps=10,
        streams=streams,
        shuffle=Shuffle(enabled=shuffle, chunk_size=chunk, window_chunks=2),
        transforms=[Pack(seq_len=seq_len)],
    )
    run = catalog.create_run(f"l{next(_names)}", plan)
    assert run.lossless_packing
    _assert_inverts(run, [data.draw(st.sampled_from(_allowed(streams))) for _ in range(2)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.integers(1, 5),
    per_block=st.integers(1, 4),
    seq_len=st.integers(4, 20),
    streams=st.sampled_from([1, 2]),
    fmt=st.sampled_from([1, 2, 3]),
    data=st.data(),
)
def test_fixed_block_packed_documents_invert_and_dropped_tokens_are_no_read(catalog, docs, per_block, seq_len, streams, fmt, data):
    plan = ReadPlan(
        [Source("alpha@v1", weight=2.0, transforms=TOKENIZE), Source("beta@v1", weight=1.0, transforms=TOKENIZE)],
        seed=1,
        global_batch_size=2 * streams,
        steps=8,
        streams=streams,
        mixture_block=16,
        transforms=[Pack(seq_len=seq_len, strategy="block", docs_per_block=docs, sequences_per_block=per_block)],
    )
    run = catalog.create_run(f"b{next(_names)}", plan)
    if fmt < 3:
        run = Run(catalog, _as_format(run.manifest, fmt))
    _assert_inverts(run, [data.draw(st.sampled_from(_allowed(streams))) for _ in range(2)])


def test_epochs_are_listed_a_page_at_a_time(catalog):
    plan = ReadPlan([Source("beta@v1")], seed=4, global_batch_size=4, steps=20, streams=2)
    run = catalog.create_run(f"e{next(_names)}", plan)
    everything = where_read(run, 0, 5, epochs=None)
    # 40 draws per stream; a part of 4 of the 9 records is 10 epochs, one of 5 is 8.
    assert everything.epochs == 10
    assert {(r.epoch, r.step, r.rank, r.world_size, r.sample) for r in everything.reads} == forward_reads(run)[(0, 5)]
    first = run.where(0, 5, epochs=3)
    assert first.next_epoch == 3 and [r.epoch for r in first.reads] == [0, 1, 2]
    rest = run.where(0, 5, first_epoch=3, epochs=None)
    assert first.reads + rest.reads == everything.reads and rest.next_epoch is None
    with pytest.raises(SampleNotFound, match="record 9 is outside"):
        where_read(run, 0, 9)


@pytest.mark.parametrize("fmt, epochs, streams", [(4, 1, 2), (4, 2, 4), (3, 1, 2)])
def test_an_epoch_run_inverts_exactly_including_streams_that_stopped_at_their_epoch_boundary(catalog, fmt, epochs, streams):
    plan = ReadPlan(
        [Source(f"{n}@v1", weight=float(w), transforms=TOKENIZE) for n, w in zip(NAMES, (3, 1, 2))],
        seed=8,
        global_batch_size=4,
        epochs=epochs,
        streams=streams,
        shuffle=Shuffle(chunk_size=2, window_chunks=2),
        transforms=[Pack(seq_len=10)],
    )
    run = Run(catalog, create_manifest(catalog, f"ep{next(_names)}", plan, as_format=fmt))
    assert run.read_format == fmt
    if fmt == 4:  # every stream reads its epochs and no further: the reads of every record are exactly `epochs`
        assert (
            run.packing_waste().after_epochs > 0
            and run.packing_waste().repeated_tokens * epochs == run.packing_waste().document_tokens * (epochs - 1)
        )
    _assert_inverts(run, [1, streams])

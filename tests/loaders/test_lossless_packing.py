"""Lossless packing (read format 3): every document token of an epoch exactly once, padding only at an epoch's end."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders import Catalog, CorruptData, Pack, ReadPlan, Shuffle, Source, Tokenize
from loaders.transforms.user import UserFunction
from tests.support.readpath import assert_partition, assert_resumes_identically, words_tokenizer_json, write_text_dataset

NAMES = ["alpha", "beta", "gamma"]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    catalog = Catalog(tmp_path_factory.mktemp("packing") / "catalog")
    for i, name in enumerate(NAMES):
        write_text_dataset(catalog, name, 31 + 29 * i, row_group=4, shards=2)
    catalog.put_tokenizer("words", words_tokenizer_json())
    return catalog


_names = iter(range(10**9))
TOKENIZE = [Tokenize("text", tokenizer="words")]


def _plan(weights, seq_len, batch, streams, *, steps=8, epochs=None, seed=5, chunk=None, **pack) -> ReadPlan:
    return ReadPlan(
        [Source(f"{n}@v1", weight=float(w), transforms=TOKENIZE) for n, w in zip(NAMES, weights)],
        seed=seed,
        global_batch_size=batch,
        streams=streams,
        steps=None if epochs else steps,
        epochs=epochs,
        shuffle=Shuffle(chunk_size=chunk, window_chunks=2),
        transforms=[Pack(seq_len=seq_len, **pack)],
    )


def _document_lengths(catalog: Catalog, name: str) -> dict[str, int]:
    tokenizer = catalog.tokenizer("words")
    version = catalog.resolve(f"{name}@v1")
    return {
        r["id"]: len(tokenizer.encode(r["text"], add_special_tokens=False).ids) + 1 for r in version.read_indices(np.arange(version.rows))
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    weights=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    seq_len=st.integers(3, 48),
    batch=st.sampled_from([1, 2, 4, 6, 8]),
    chunk=st.sampled_from([None, 1, 3, 7]),
    positions=st.sampled_from(["document", "sequence"]),
    data=st.data(),
)
def test_every_token_of_an_epoch_is_delivered_exactly_once(catalog, weights, seq_len, batch, chunk, positions, data):
    streams = data.draw(st.sampled_from([d for d in range(1, batch + 1) if batch % d == 0]))
    run = catalog.create_run(f"p{next(_names)}", _plan(weights, seq_len, batch, streams, chunk=chunk, position_ids=positions))
    packing = run.concat
    for s, name in enumerate(NAMES[: len(weights)]):
        lengths = _document_lengths(catalog, name)
        covered: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for (stream, source), packer in packing.packers.items():
            if source != s:
                continue
            layout = packer.layout(0)
            for n in range(layout.sequences):
                seq, documents = packing.sequence(stream, s, n)
                assert len(seq.input_ids) == len(seq.position_ids) == seq_len and max(seq.position_ids) < seq_len
                assert seq.padding == 0 or n == layout.sequences - 1  # padding only in the epoch's last sequence
                assert seq.cu_seqlens[0] == 0 and seq.cu_seqlens[-1] == seq_len
                for span in seq.spans:
                    doc = documents[span.document]
                    assert doc.epoch == 0 and span.length == lengths[doc.key]
                    covered[doc.key].append((span.offset, span.offset + span.end - span.start))
        assert set(covered) == set(lengths)
        for key, pieces in covered.items():  # each document's tokens once, in order, nothing missing
            pieces.sort()
            assert pieces[0][0] == 0 and pieces[-1][1] == lengths[key]
            assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(weights=st.lists(st.integers(1, 5), min_size=2, max_size=3), batch=st.sampled_from([2, 4, 6, 8]), data=st.data())
def test_packed_steps_are_mixed_per_step_and_world_size_independent(catalog, weights, batch, data):
    streams = data.draw(st.sampled_from([d for d in range(1, batch + 1) if batch % d == 0]))
    run = catalog.create_run(f"p{next(_names)}", _plan(weights, 16, batch, streams, steps=6))
    total = sum(weights)
    for step in range(6):
        whole = run.batch(step, 0, world_size=1)
        sources = [s.documents[0].source for s in whole.samples]
        for s, w in enumerate(weights):
            share = batch * w / total
            assert math.floor(share) <= sources.count(s) <= math.ceil(share)  # in sequences
            assert all(d.source == s for sample in whole.samples if sample.documents[0].source == s for d in sample.documents)
        for world_size in [w for w in range(2, streams + 1) if streams % w == 0]:
            joined = [x for r in range(world_size) for x in run.batch(step, r, world_size=world_size).sample_digests]
            assert joined == whole.sample_digests


def test_an_epoch_plan_reads_each_document_once_and_reports_its_waste(catalog):
    run = catalog.create_run(f"p{next(_names)}", _plan([1], 32, 4, 2, epochs=1))
    lengths = _document_lengths(catalog, "alpha")
    seen: dict[str, int] = defaultdict(int)
    for step in range(run.total_steps):
        for sample in run.batch(step, 0, world_size=1).samples:
            for doc in sample.documents:
                if doc.span is not None:  # an all-padding sequence names a document it does not hold
                    assert doc.epoch == 0
                    seen[doc.key] += doc.span["end"] - doc.span["start"]
    assert seen == lengths  # every token once, none twice
    waste = run.packing_waste()
    assert waste.exact and waste.dropped_tokens == 0 and waste.repeated_tokens == 0
    assert waste.document_tokens == sum(lengths.values())
    assert waste.document_tokens + waste.padding_tokens == waste.sequences * 32
    # One partial sequence per stream, plus the sequences of a stream that finished its epoch before the other did.
    assert waste.padding_tokens < (2 + waste.after_epochs) * 32


def test_fixed_block_packing_stays_available_and_reports_what_it_drops(catalog):
    run = catalog.create_run(f"p{next(_names)}", _plan([1], 16, 4, 2, strategy="block", docs_per_block=8, sequences_per_block=2))
    waste = run.packing_waste()
    assert waste.exact and waste.dropped_tokens > 0  # 8 documents of >= 6 tokens never fit in 2 x 16
    sample = run.batch(0, 0, world_size=1).samples[1]
    assert sample.inputs["dropped"] > 0 and max(sample.inputs["position_ids"]) < 16


@pytest.mark.parametrize("entry_name, file_name", [("token_counts", "{key}.npy"), ("record_token_counts", "{key}.records.npy")])
def test_stale_token_counts_are_rebuilt_and_wrong_ones_refused(catalog, entry_name, file_name):
    run = catalog.create_run(f"p{next(_names)}", _plan([1], 16, 2, 2))
    entry = run.manifest["resolved"][entry_name][0]
    path = Path(catalog.path("token-counts", file_name.format(key=entry["key"])))
    good = path.read_bytes()
    path.write_bytes(b"not an array")
    fresh = catalog.run(run.name)
    assert fresh.batch(1, 0).keys == run.batch(1, 0).keys and path.read_bytes() == good  # derived data, rebuilt
    manifest = json.loads((Path(run.directory) / "run.json").read_text())
    manifest["resolved"][entry_name][0]["sha256"] = "0" * 64
    path.write_bytes(b"tampered")
    from loaders.run.facade import Run

    with pytest.raises(CorruptData, match=f"token counts .*{re.escape(path.name)}: rebuilding them gives digest"):
        Run(catalog, manifest).batch(0, 0)


def test_a_document_transform_that_is_not_deterministic_is_caught(catalog):
    plan = ReadPlan(
        [Source("alpha@v1", transforms=[UserFunction("tests.support.unstable_transform:grow"), *TOKENIZE])],
        seed=1,
        global_batch_size=2,
        steps=4,
        streams=2,
        transforms=[Pack(seq_len=16)],
    )
    run = catalog.create_run(f"p{next(_names)}", plan)
    with pytest.raises(CorruptData, match="tokenizes to .* tokens, its token counts say"):
        for step in range(4):
            run.batch(step, 0)


def test_window_tokens_flatten_documents_and_refuse_a_mask_of_another_length() -> None:
    from loaders.order.packing import WindowTokens

    window = WindowTokens.of(["a", "b", "c"], [[5, 6], [], [7]], [[0, 1], None, None])
    assert window.ids.tolist() == [5, 6, 7] and window.mask.tolist() == [0, 1, 1] and window.starts.tolist() == [0, 2, 2, 3]
    assert WindowTokens.of([], [], []).tokens == 0
    with pytest.raises(CorruptData, match="document 1 of a window has 1 loss-mask entries for 2 tokens"):
        WindowTokens.of(["a", "b"], [[1], [2, 3]], [[1], [1]])


# -- lookups with per-record token counts ------------------------------------------------------------------------
def _without_record_counts(run):
    """The same run as created before per-record counts existed: sequences found by tokenizing window prefixes."""
    from loaders.run.facade import Run

    resolved = {k: v for k, v in run.manifest["resolved"].items() if k != "record_token_counts"}
    return Run(run.catalog, {**run.manifest, "resolved": resolved})


def _sequence_facts(packing, stream, source, n):
    seq, documents = packing.sequence(stream, source, n)
    spans = [(documents[s.document].key, documents[s.document].epoch, s.start, s.end, s.offset, s.length) for s in seq.spans]
    return seq.input_ids, seq.loss_mask, seq.position_ids, seq.cu_seqlens, spans


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    weights=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    seq_len=st.integers(3, 40),
    batch=st.sampled_from([1, 2, 4, 6]),
    chunk=st.sampled_from([None, 1, 3, 7]),
    data=st.data(),
)
def test_sequences_found_from_record_counts_equal_those_found_by_reading_window_prefixes(
    catalog, monkeypatch, weights, seq_len, batch, chunk, data
):
    from loaders.sampling import concat_packing

    monkeypatch.setattr(concat_packing, "MIN_PIECE", 0)  # every lookup past what was read takes the per-record path
    streams = data.draw(st.sampled_from([d for d in range(1, batch + 1) if batch % d == 0]))
    run = catalog.create_run(f"p{next(_names)}", _plan(weights, seq_len, batch, streams, chunk=chunk))
    assert run.concat.record_counts[0] is not None
    prefix = _without_record_counts(run).concat
    assert prefix.record_counts == [None] * len(weights)
    lookups = [(k, s, n) for (k, s), packer in run.concat.packers.items() for n in range(2 * packer.layout(0).sequences + 1)]
    for stream, source, n in data.draw(st.permutations(lookups)):  # random access, in any order
        assert _sequence_facts(run.concat, stream, source, n) == _sequence_facts(prefix, stream, source, n)


@pytest.fixture(scope="module")
def long_catalog(tmp_path_factory) -> Catalog:
    catalog = Catalog(tmp_path_factory.mktemp("long") / "catalog")
    write_text_dataset(catalog, "many", 4000, row_group=250, shards=2)
    catalog.put_tokenizer("words", words_tokenizer_json())
    return catalog


def test_a_sequence_deep_in_a_window_reads_only_its_own_documents(long_catalog, monkeypatch):
    from loaders.sampling.documents import DocumentSource

    plan = ReadPlan(
        [Source("many@v1", transforms=TOKENIZE)],
        seed=3,
        global_batch_size=2,
        streams=1,
        steps=4,
        shuffle=Shuffle(chunk_size=500, window_chunks=2),
        transforms=[Pack(seq_len=32)],
    )
    run = long_catalog.create_run("deep", plan)
    read: list[int] = []
    original = DocumentSource.read_documents

    def counting(self, source, records, epochs, positions):
        read.append(len(records))
        return original(self, source, records, epochs, positions)

    monkeypatch.setattr(DocumentSource, "read_documents", counting)  # where a run's documents are read
    packer = run.concat.packers[(0, 0)]
    deep = packer.layout(0).sequences // 8  # half way into the first window of 1000 documents
    seq, documents = run.concat.sequence(0, 0, deep)
    assert sum(read) <= 8 and len(documents) <= sum(read)  # a few documents of ~6 tokens, not the 500 before them
    read.clear()
    slow = _without_record_counts(run).concat.sequence(0, 0, deep)
    assert sum(read) > 200 and slow[0].input_ids == seq.input_ids  # what a prefix read costs, for the same tokens


def test_a_document_that_does_not_match_its_record_count_is_caught(catalog, monkeypatch):
    from loaders.sampling import concat_packing

    monkeypatch.setattr(concat_packing, "MIN_PIECE", 0)
    plan = ReadPlan(
        [Source("gamma@v1", transforms=[UserFunction("tests.support.unstable_transform:grow"), *TOKENIZE])],
        seed=1,
        global_batch_size=2,
        steps=8,
        streams=1,
        shuffle=Shuffle(chunk_size=20, window_chunks=2),
        transforms=[Pack(seq_len=8)],
    )
    run = catalog.create_run(f"p{next(_names)}", plan)
    refusals = []
    for n in reversed(range(run.concat.packers[(0, 0)].layout(0).sequences)):
        try:
            run.concat.sequence(0, 0, n)
        except CorruptData as exc:
            refusals.append(str(exc))
    assert any(re.search(r"document gamma-\d+ tokenizes to \d+ tokens, the run's token counts say \d+", r) for r in refusals)


def test_runs_created_before_record_counts_reopen_as_the_same_run(catalog):
    run = catalog.create_run(f"p{next(_names)}", _plan([1, 2], 16, 2, 2))
    old = _without_record_counts(run)
    (Path(run.directory) / "run.json").write_text(json.dumps(old.manifest))
    again = catalog.create_run(run.name, _plan([1, 2], 16, 2, 2), exist_ok=True)
    assert "record_token_counts" not in again.manifest["resolved"] and again.batch(2, 0).keys == run.batch(2, 0).keys


def test_an_epoch_plan_keeps_every_world_size_and_resume_identical_through_its_padded_tail(catalog):
    run = catalog.create_run(f"p{next(_names)}", _plan([2, 1, 1], 12, 4, 4, epochs=1))
    tail = [step for step in range(run.total_steps) if any(s.inputs["padding"] == 12 for s in run.batch(step, 0, world_size=1).samples)]
    assert tail and tail[-1] == run.total_steps - 1  # the streams that finished first pad the last steps
    assert_partition(run, [2, 4], tail + [0, run.total_steps // 2])
    assert_resumes_identically(run, 1, 2, stop_after=tail[0] - 1)

"""Realized mixture: the arithmetic per window and over the whole run equals a forward count over ``run.batch``."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from loaders import Catalog, Pack, ReadPlan, Shuffle, Source, Tokenize
from loaders.forensics.realized_mixture import MAX_WINDOWS, measure, measured_steps, realized_mixture, step_mix, window_bounds
from loaders.run.facade import Run
from loaders.run.manifest import READ_FORMAT, create_manifest
from tests.loaders.test_formats import _as_format
from tests.support.mixture import NAMES, build_mixture_catalog

TOKENIZE = [Tokenize("text", tokenizer="words")]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    return build_mixture_catalog(tmp_path_factory.mktemp("mix"))


_names = iter(range(10**9))


def _run(catalog: Catalog, weights, *, batch=6, streams=3, steps=14, tokenize=False, pack=None, fmt=READ_FORMAT, **extra) -> Run:
    sources = [Source(f"{n}@v1", weight=float(w), transforms=TOKENIZE if tokenize else []) for n, w in zip(NAMES, weights)]
    plan = ReadPlan(
        sources,
        seed=3,
        global_batch_size=batch,
        streams=streams,
        steps=steps,
        shuffle=Shuffle(chunk_size=4, window_chunks=2),
        mixture_block=64,
        transforms=[pack] if pack is not None else [],
    )
    name = f"mix-{next(_names)}"
    if fmt >= 3:
        return Run(catalog, create_manifest(catalog, name, plan, as_format=fmt))
    return Run(catalog, _as_format(catalog.create_run(name, plan).manifest, fmt, **extra))


def _forward(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """Per step and source: samples and tokens (``len(input_ids) - padding``, a sample's real tokens) of every batch."""
    samples = np.zeros((run.total_steps, len(run.sources)), dtype=np.int64)
    tokens = np.zeros_like(samples)
    for step in range(run.total_steps):
        for sample in run.batch(step, 0, world_size=1).samples:
            source = sample.documents[0].source
            samples[step, source] += 1
            ids = sample.inputs.get("input_ids")
            if ids is not None:
                tokens[step, source] += len(ids) - int(sample.inputs.get("padding") or 0)
    return samples, tokens


def _windows(mix, field: str) -> np.ndarray:
    return np.asarray([getattr(w, field) for w in mix.windows], dtype=np.int64)


@pytest.mark.parametrize(
    "weights, batch, streams, fmt",
    [([5, 2, 1], 6, 3, 4), ([1, 1, 3], 8, 2, 4), ([5, 2, 1], 6, 3, 3), ([5, 2, 1], 6, 3, 2), ([2, 1, 1], 8, 4, 1), ([3, 1], 4, 1, 2)],
)
def test_unpacked_sample_counts_equal_a_forward_count_for_every_step_and_window(catalog, weights, batch, streams, fmt):
    run = _run(catalog, weights, batch=batch, streams=streams, fmt=fmt)
    assert run.read_format == fmt
    samples, _ = _forward(run)
    per_step = realized_mixture(run, window=1)
    assert per_step.unit == "samples" and per_step.samples_exact
    assert _windows(per_step, "samples").tolist() == samples.tolist()
    assert list(per_step.samples) == samples.sum(axis=0).tolist()
    assert per_step.tokens is None and "no input_ids" in per_step.note  # untokenized: nothing to count, and said so
    assert per_step.measured_steps == ()  # and nothing was read
    for window in (3, 5, 14, 100):
        mix = realized_mixture(run, window=window)
        starts = list(range(0, run.total_steps, min(window, run.total_steps)))
        assert [(w.start, w.end) for w in mix.windows] == [(a, min(a + window, run.total_steps)) for a in starts]
        expected = [samples[w.start : w.end].sum(axis=0).tolist() for w in mix.windows]
        assert _windows(mix, "samples").tolist() == expected


def test_tokenized_unpacked_run_measures_tokens_on_a_bounded_set_of_steps(catalog):
    run = _run(catalog, [3, 2, 1], tokenize=True, steps=40)
    samples, tokens = _forward(run)
    mix = realized_mixture(run, window=4)
    steps = measured_steps(40)
    assert mix.measured_steps == steps and len(steps) == 16 and steps[0] == 0 and steps[-1] == 39
    assert not mix.tokens_exact and mix.samples_exact
    assert "16 of 40 steps" in mix.note
    assert list(mix.tokens) == tokens[list(steps)].sum(axis=0).tolist()
    assert list(mix.samples) == samples.sum(axis=0).tolist()  # samples stay exact over every step
    for w in mix.windows:
        inside = [s for s in steps if w.start <= s < w.end]
        assert w.measured_steps == len(inside)
        assert (w.tokens is None) == (not inside)
        if inside:
            assert list(w.tokens) == tokens[inside].sum(axis=0).tolist()
    again = realized_mixture(run, window=4, measurement=measure(run, steps))  # a kept measurement gives the same answer
    assert again.to_json() == mix.to_json()


@pytest.mark.parametrize("weights, batch, streams, seq_len", [([5, 2, 1], 6, 3, 11), ([1, 3, 2], 4, 2, 7), ([2, 1], 2, 1, 23)])
def test_lossless_packed_run_counts_sequences_and_document_tokens_exactly(catalog, weights, batch, streams, seq_len):
    run = _run(catalog, weights, batch=batch, streams=streams, steps=30, tokenize=True, pack=Pack(seq_len=seq_len))
    assert run.lossless_packing
    samples, tokens = _forward(run)
    mix = realized_mixture(run, window=1)
    assert mix.unit == "sequences" and mix.samples_exact and mix.tokens_exact and mix.measured_steps == ()
    assert _windows(mix, "samples").tolist() == samples.tolist()
    assert _windows(mix, "tokens").tolist() == tokens.tolist()
    assert list(mix.tokens) == tokens.sum(axis=0).tolist()
    assert mix.padding == run.total_steps * batch * seq_len - int(tokens.sum())
    assert mix.padding == run.packing_waste().padding_tokens
    coarse = realized_mixture(run, window=7)
    assert _windows(coarse, "tokens").tolist() == [tokens[w.start : w.end].sum(axis=0).tolist() for w in coarse.windows]


@pytest.mark.parametrize("fmt", [2, 3, 4])
def test_fixed_block_packed_run_counts_documents_of_the_measured_steps_and_says_so(catalog, fmt):
    pack = Pack(seq_len=16, docs_per_block=8, strategy="block")
    extra = {"sequences_per_block": 4} if fmt == 2 else {}
    run = _run(catalog, [2, 1, 1], batch=4, streams=2, steps=20, tokenize=True, pack=pack, fmt=fmt, **extra)
    assert run.read_format == fmt and not run.lossless_packing
    mix = realized_mixture(run, window=5)
    assert mix.unit == "documents" and not mix.samples_exact and not mix.tokens_exact
    assert "fixed-block" in mix.note
    documents, tokens = Counter(), Counter()
    padding = 0
    spanning = 0
    for step in mix.measured_steps:
        seen = {}  # a document split over two sequences of the step counts once
        for sample in run.batch(step, 0, world_size=1).samples:
            spans = sample.inputs["doc_spans"]
            padding += sample.inputs["padding"]
            for d, span in zip(sample.documents, spans):
                spanning += (sample.stream, d.draw) in seen
                seen[(sample.stream, d.draw)] = d.source
                tokens[d.source] += span["end"] - span["start"]
        documents.update(seen.values())
    assert spanning  # the case is exercised: some document is cut across sequences of one step
    assert list(mix.samples) == [documents[s] for s in range(3)]
    assert list(mix.tokens) == [tokens[s] for s in range(3)]
    assert mix.padding == padding
    assert sum(mix.tokens) + padding == len(mix.measured_steps) * 4 * 16


def test_long_runs_are_summed_by_period_without_reading(catalog):
    run = _run(catalog, [5, 2, 1], batch=6, streams=3, steps=20_000, fmt=2)
    mix = realized_mixture(run, window=700)
    width = run.global_batch_size // run.streams
    direct = np.zeros(3, dtype=np.int64)
    for stream in range(run.streams):
        sources, _, _ = run.draws(stream, range(0, run.total_steps * width))
        direct += np.bincount(sources, minlength=3)
    assert list(mix.samples) == direct.tolist()
    assert _windows(mix, "samples").sum(axis=0).tolist() == direct.tolist()
    second = sum(np.bincount(run.draws(k, range(700 * width, 1400 * width))[0], minlength=3) for k in range(run.streams))
    assert list(mix.windows[1].samples) == second.tolist()
    huge = _run(catalog, [5, 2, 1], steps=10**9)
    size, bounds = window_bounds(huge.total_steps, 1)
    assert size == 10**9 // MAX_WINDOWS and len(bounds) == MAX_WINDOWS + 1
    totals = realized_mixture(huge, window=1)
    assert sum(totals.samples) == 10**9 * 6 and len(totals.windows) == MAX_WINDOWS
    cycle = huge.step_mixture.cycle
    per_cycle = huge.manifest["resolved"]["counts"]  # whole cycles hold exactly the apportioned counts
    whole, rest = divmod(10**9, cycle)
    tail = sum((huge.step_mixture.step_counts(t) for t in range(rest)), np.zeros(3, dtype=np.int64))
    assert list(totals.samples) == [whole * c + int(t) for c, t in zip(per_cycle, tail)]


def test_step_mix_counts_every_rank_of_a_step_against_the_plan(catalog):
    run = _run(catalog, [5, 2, 1], tokenize=True)
    batches = [run.batch(4, rank, world_size=3) for rank in range(3)]
    mix = step_mix(run, 4, batches)
    counted = Counter(s.documents[0].source for b in batches for s in b.samples)
    rows = mix.rows()
    assert [r["samples"] for r in rows] == [counted[s] for s in range(3)]
    assert [r["samples"] for r in rows] == run.step_mixture.step_counts(4).tolist()
    assert [round(r["planned"], 6) for r in rows] == [0.625, 0.25, 0.125]
    for r in rows:
        assert r["samples_deviation"] == pytest.approx(r["samples"] / 6 - r["planned"])
        assert r["tokens"] == sum(
            len(s.inputs["input_ids"])
            for b in batches
            for s in b.samples
            if s.documents[0].source == NAMES.index(r["source"].split("@")[0])
        )

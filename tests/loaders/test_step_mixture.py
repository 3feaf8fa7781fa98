"""Every global batch carries the mixture weights (read formats 3–4), for any weights, batch size, streams and world
size; in read format 4 every prefix of steps holds them too (the weights exactly, never rounded to a block)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders import Catalog, InvalidPlan, ReadPlan, Source
from loaders.order.mixture import apportion, cycle_fits, exact_cycle, exact_weight
from loaders.order.step_mixture import StepMixture, pfair_extras
from tests.support.readpath import write_text_dataset

NAMES = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]


def _shares(weights: list[float], batch: int) -> list[Fraction]:
    """Each source's exact share of one global batch, as the apportionment sees the weights."""
    exact = [Fraction(w).limit_denominator(10**9) for w in weights]
    total = sum(exact)
    return [w / total * batch for w in exact]


def _divisor(draw, n: int) -> int:
    return draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))


@st.composite
def mixtures(draw):
    weights = draw(st.lists(st.floats(0.05, 20.0, allow_nan=False), min_size=2, max_size=6))
    batch = draw(st.integers(1, 300))
    streams = _divisor(draw, batch)
    block = draw(st.integers(len(weights), 4096))
    return weights, batch, streams, block


@settings(max_examples=150, deadline=None)
@given(mixtures())
def test_every_step_holds_each_share_within_one_sample(case):
    weights, batch, streams, block = case
    cycle = -(-block // batch)
    try:
        counts = apportion(weights, cycle * batch)
    except InvalidPlan:  # a weight too small for the cycle is refused, naming mixture_block
        return
    mixture = StepMixture.build(counts, cycle, batch, streams)
    shares = _shares(weights, batch)
    per_step = np.stack([mixture.step_counts(t) for t in range(cycle)])
    for s, share in enumerate(shares):
        assert set(per_step[:, s].tolist()) <= {math.floor(share), math.ceil(share)}
    # every prefix of the cycle is within one sample of the cycle's own share (Pfair lag)
    lag = np.cumsum(per_step, axis=0) * cycle - np.arange(1, cycle + 1)[:, None] * np.asarray(counts)[None, :]
    assert (np.abs(lag) < cycle).all()
    assert (per_step.sum(axis=1) == batch).all()


@settings(max_examples=80, deadline=None)
@given(mixtures(), st.integers(0, 3))
def test_each_stream_draws_each_source_in_order_without_gaps(case, start_cycle):
    weights, batch, streams, block = case
    cycle = -(-block // batch)
    try:
        counts = apportion(weights, cycle * batch)
    except InvalidPlan:
        return
    mixture = StepMixture.build(counts, cycle, batch, streams)
    width = batch // streams
    assert (mixture.rates.sum(axis=0) == np.asarray(counts)).all()
    for stream in range(streams):
        first = start_cycle * cycle * width
        counters = np.arange(first, first + 2 * cycle * width)
        sources, n = mixture.draws(stream, counters)
        for s in range(len(counts)):
            got = n[sources == s]
            begin = start_cycle * mixture.rates[stream, s]
            assert got.tolist() == list(range(begin, begin + len(got)))  # the stream's s-draws, consecutively
            assert (mixture.draws_before(stream, start_cycle * cycle)[s]) == begin


def test_pfair_spreads_a_rare_source_evenly():
    extras = pfair_extras([1, 3, 4], 8)  # one slot per step shared by rates 1/8, 3/8, 4/8
    assert extras.sum(axis=1).tolist() == [1] * 8
    assert all(extras[t : t + 2, 2].sum() == 1 for t in range(0, 8, 2))  # rate 1/2: once in every pair of steps
    assert extras[:4, 1].sum() in (1, 2) and extras[:, 1].sum() == 3 and extras[:, 0].sum() == 1


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    catalog = Catalog(tmp_path_factory.mktemp("mixture") / "catalog")
    for i, name in enumerate(NAMES[:4]):
        write_text_dataset(catalog, name, 23 + 17 * i, row_group=3, shards=2)
    return catalog


_names = iter(range(10**9))


def _source_counts(batch, names: list[str]) -> list[int]:
    return [sum(1 for k in batch.keys if k.startswith(f"{name}-")) for name in names]


def test_the_reported_plan_is_mixed_at_every_step(catalog):
    """0.75 / 0.25 at B=64 with the default streams (64): 48 and 16 at every step, not 64/0/64/0 and 0/64."""
    plan = ReadPlan([Source("alpha@v1", weight=0.75), Source("beta@v1", weight=0.25)], seed=3, global_batch_size=64, steps=40)
    run = catalog.create_run(f"m{next(_names)}", plan)
    assert plan.streams == 64
    assert [_source_counts(run.batch(step, 0, world_size=1), ["alpha", "beta"]) for step in range(40)] == [[48, 16]] * 40


def test_a_weight_too_small_for_one_step_is_honoured_over_the_smallest_window(catalog):
    plan = ReadPlan([Source("alpha@v1", weight=0.999), Source("beta@v1", weight=0.001)], seed=3, global_batch_size=64, steps=250)
    run = catalog.create_run(f"m{next(_names)}", plan)
    assert run.step_mixture.cycle == 125  # 0.001 × 64 × 125 = 8 samples: the fewest steps where the share is whole
    beta = [_source_counts(run.batch(step, 0, world_size=1), ["alpha", "beta"])[1] for step in range(250)]
    assert set(beta) == {0, 1} and sum(beta) == 16  # 0.064 a step: one sample in about every 16 steps, exactly
    assert all(abs(sum(beta[:t]) - Fraction(64, 1000) * t) < 1 for t in range(251))
    with pytest.raises(InvalidPlan, match=r"cannot be held exactly: .* only over 156250 steps .* give weights with fewer decimals"):
        catalog.create_run(
            f"m{next(_names)}",
            ReadPlan([Source("alpha@v1", weight=0.8765433), Source("beta@v1", weight=0.1234567)], seed=3, global_batch_size=64, steps=4),
        )


@st.composite
def written_weights(draw):
    """Weights as people write them: integers, or decimals with up to 3 digits; a batch size and its streams."""
    digits = draw(st.integers(0, 3))
    weights = [n / 10**digits if digits else n for n in draw(st.lists(st.integers(1, 5 * 10**digits), min_size=2, max_size=6))]
    batch = draw(st.integers(1, 300))
    return weights, batch, _divisor(draw, batch)


@settings(max_examples=150, deadline=None)
@given(written_weights(), st.integers(1, 3000))
def test_every_prefix_of_steps_holds_each_weight_within_one_sample(case, steps):
    weights, batch, streams = case
    cycle, counts = exact_cycle(weights, batch)
    if not cycle_fits(cycle, batch):
        return  # refused when a run is created (see above)
    mixture = StepMixture.build(counts, cycle, batch, streams)
    per_step = np.stack([mixture.step_counts(t) for t in range(cycle)])[np.arange(steps) % cycle]
    exact = [exact_weight(w) for w in weights]
    denominator = math.lcm(*(w.denominator for w in exact))
    a = np.asarray([int(w * denominator) for w in exact], dtype=np.int64)  # weights as integers over one denominator
    total = int(a.sum())
    # Every step: each source's count is the floor or the ceiling of its share w × B.
    assert ((per_step * total >= (batch * a) // total * total) & (per_step * total <= -(-(batch * a) // total) * total)).all()
    # Every prefix of t steps: each source's count is within one sample of w × B × t (|C·W − t·B·a| < W).
    cumulative = np.cumsum(per_step, axis=0)
    t = np.arange(1, steps + 1, dtype=np.int64)[:, None]
    assert (np.abs(cumulative * total - t * batch * a[None, :]) < total).all()
    assert (per_step.sum(axis=1) == batch).all()


@pytest.mark.parametrize("weights", [[0.5, 0.3, 0.2], [0.47, 0.31, 0.22]])
def test_the_mixtures_that_drifted_in_read_format_3_hold_after_2000_steps(catalog, weights):
    names = NAMES[:3]
    plan = ReadPlan([Source(f"{n}@v1", weight=w) for n, w in zip(names, weights)], seed=1, global_batch_size=32, steps=2000)
    run = catalog.create_run(f"m{next(_names)}", plan)
    mixture = run.step_mixture
    per_step = np.stack([mixture.step_counts(t) for t in range(mixture.cycle)])[np.arange(2000) % mixture.cycle]
    drift = np.cumsum(per_step, axis=0) - np.arange(1, 2001)[:, None] * 32 * np.asarray(weights)[None, :]
    assert np.abs(drift).max() < 1  # read format 3 (apportioned over 1024 positions): 12.8 and 35.9 samples
    assert _source_counts(run.batch(1999, 0, world_size=1), names) == per_step[1999].tolist()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    weights=st.lists(st.integers(1, 9), min_size=2, max_size=4),
    batch=st.sampled_from([2, 4, 6, 8, 12, 16, 24]),
    data=st.data(),
)
def test_runs_mix_every_step_at_every_world_size(catalog, weights, batch, data):
    streams = _divisor(data.draw, batch)
    names = NAMES[: len(weights)]
    plan = ReadPlan(
        [Source(f"{n}@v1", weight=float(w)) for n, w in zip(names, weights)],
        seed=data.draw(st.integers(0, 99)),
        global_batch_size=batch,
        steps=12,
        streams=streams,
        mixture_block=data.draw(st.integers(len(weights), 200)),
    )
    try:
        run = catalog.create_run(f"m{next(_names)}", plan)
    except InvalidPlan:
        return
    shares = _shares([float(w) for w in weights], batch)
    world_sizes = [w for w in range(1, streams + 1) if streams % w == 0]
    so_far = [0] * len(weights)
    for step in range(12):
        whole = run.batch(step, 0, world_size=1)
        for s, count in enumerate(_source_counts(whole, names)):
            assert math.floor(shares[s]) <= count <= math.ceil(shares[s])
            so_far[s] += count
            assert abs(so_far[s] - shares[s] * (step + 1)) < 1  # and every prefix of steps (read format 4)
        for world_size in world_sizes:
            joined = []
            for rank in range(world_size):
                batch = run.batch(step, rank, world_size=world_size)
                joined += batch.keys
                arithmetic = [(s, *run.version(s).locate(r), e) for s, r, e in run.addresses(step, rank, world_size=world_size)]
                assert arithmetic == [(d.source, d.address.shard, d.address.row, d.epoch) for x in batch.samples for d in x.documents]
            assert joined == whole.keys


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 400),
    chunk=st.integers(1, 50),
    rates=st.lists(st.integers(0, 5), min_size=1, max_size=6),
    window=st.integers(1, 3),
    aligned=st.booleans(),
    shuffle=st.booleans(),
    draws=st.lists(st.integers(0, 5000), max_size=20),
)
def test_one_draw_in_plain_integers_is_the_vectorized_draw(rows, chunk, rates, window, aligned, shuffle, draws):
    from loaders.order.lane_order import LaneOrder

    if not any(rates):
        return
    order = LaneOrder(rows, chunk, tuple(rates), window, 7, 1, shuffle, aligned)
    for stream, rate in enumerate(rates):
        if rate and draws:
            records, epochs = order.records(stream, np.asarray(draws))
            assert [order.record(stream, d) for d in draws] == list(zip(records.tolist(), epochs.tolist()))


def test_row_weights_too_fine_for_an_exact_cycle_are_rounded_and_the_run_says_so(tmp_path):
    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "big", 2050, row_group=500, shards=1)
    write_text_dataset(catalog, "small", 2049, row_group=500, shards=1)
    sources = [Source("big@v1"), Source("small@v1")]  # no weights: 2050/4099 of 256 is whole only every 4099 steps
    run = catalog.create_run("rows", ReadPlan(sources, seed=1, global_batch_size=256, steps=4))
    resolved = run.manifest["resolved"]
    assert resolved["mixture_exact"] is False and resolved["cycle_steps"] == 4 and resolved["counts"] == apportion([2050, 2049], 1024)
    weighted = [Source("big@v1", weight=2050), Source("small@v1", weight=2049)]
    with pytest.raises(InvalidPlan, match=r"cannot be held exactly: .* only over 4099 steps \(1049344 positions"):
        catalog.create_run("weighted", ReadPlan(weighted, seed=1, global_batch_size=256, steps=4))
    exact = catalog.create_run(
        "exact", ReadPlan([Source("big@v1", weight=2), Source("small@v1", weight=1)], seed=1, global_batch_size=256, steps=4)
    )
    assert exact.manifest["resolved"]["mixture_exact"] is True and exact.step_mixture.cycle == 3  # 2/3 × 256 × 3 is whole


@given(
    cycle=st.integers(1, 4),
    streams=st.integers(1, 8),
    width=st.integers(1, 6),
    counters=st.lists(st.integers(0, 10_000), min_size=1, max_size=20),
)
def test_one_source_draws_without_tables_exactly_as_its_tables_say(cycle, streams, width, counters):
    batch = streams * width
    mix = StepMixture.build([cycle * batch], cycle, batch, streams)
    assert mix.one_source
    for stream in range(streams):
        fast = [mix.draw(stream, c) for c in counters]
        sources, n = mix.draws(stream, np.asarray(counters))  # from the tables, made on demand
        assert fast == list(zip(sources.tolist(), n.tolist()))
        assert mix.lane_rates(0) == tuple(mix.rates[:, 0].tolist())

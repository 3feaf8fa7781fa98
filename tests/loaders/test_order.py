"""Global order properties: per-epoch partition of every source, and exact mixtures at every prefix."""

from collections import Counter, defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.order.mixture import Mixture, apportion
from loaders.order.source_order import SourceOrder


@settings(max_examples=80, deadline=None)
@given(
    rows=st.integers(1, 120),
    chunk=st.integers(1, 40),
    streams=st.integers(1, 9),
    window=st.integers(1, 4),
    seed=st.integers(0, 1000),
    shuffle=st.booleans(),
)
def test_each_epoch_covers_every_record_exactly_once(rows, chunk, streams, window, seed, shuffle):
    order = SourceOrder(rows, min(chunk, rows), streams, window, seed, 0, shuffle)
    by_epoch: dict[int, list[int]] = defaultdict(list)
    # Enough draws per stream that epochs 0 and 1 are complete on every stream.
    draws = 3 * rows + 3 * chunk * window + 5
    for stream in range(streams):
        for draw in range(draws):
            record, epoch = order.record(stream, draw)
            assert 0 <= record < rows
            by_epoch[epoch].append(record)
    for epoch in (0, 1):
        assert sorted(by_epoch[epoch]) == list(range(rows))


def test_epochs_are_shuffled_differently():
    order = SourceOrder(1000, 10, 1, 2, seed=5, source=0)
    epoch0 = [order.record(0, d)[0] for d in range(1000)]
    epoch1 = [order.record(0, d)[0] for d in range(1000, 2000)]
    assert sorted(epoch0) == sorted(epoch1) == list(range(1000))
    assert epoch0 != epoch1
    assert epoch0 != list(range(1000))


@settings(max_examples=300, deadline=None)
@given(weights=st.lists(st.floats(0.05, 10), min_size=1, max_size=6), block=st.integers(5, 300))
def test_mixture_is_exact_within_one_at_every_prefix(weights, block):
    block = max(block, len(weights))
    try:
        counts = apportion(weights, block)
    except Exception:
        return  # a weight too small for the block is rejected with a clear error (tested below)
    mixture = Mixture.build(counts)
    seen: Counter = Counter()
    for position in range(3 * block):
        source, n = mixture.draw(position)
        assert n == seen[source]  # draws of a source are numbered 0, 1, 2, ... with no gaps
        seen[source] += 1
        for s, c in enumerate(counts):
            assert abs(seen[s] - (position + 1) * c / block) < 1
    total = sum(weights)
    for s, c in enumerate(counts):
        assert abs(c - block * weights[s] / total) < 1


def test_tiny_weight_is_rejected_with_the_value_and_a_fix():
    import pytest

    from loaders.errors import InvalidPlan

    with pytest.raises(InvalidPlan, match="rounds to 0 of mixture_block=10; raise mixture_block"):
        apportion([1.0, 0.001], 10)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 300),
    chunk=st.integers(1, 50),
    streams=st.integers(1, 6),
    window=st.integers(1, 3),
    shuffle=st.booleans(),
    start=st.integers(0, 2000),
    count=st.integers(1, 40),
)
def test_vectorized_records_equal_scalar(rows, chunk, streams, window, shuffle, start, count):
    import numpy as np

    order = SourceOrder(rows, min(chunk, rows), streams, window, 3, 1, shuffle)
    for stream in range(streams):
        draws = np.arange(start, start + count)
        records, epochs = order.records(stream, draws)
        assert list(zip(records.tolist(), epochs.tolist())) == [order.record(stream, int(d)) for d in draws]


def test_streams_change_windows_at_different_positions():
    """Stream k's window grid is shifted by k/K of a window, so a reader's streams never all switch row groups at once."""
    order = SourceOrder(10_000, 10, 4, 2, 0, 0, True)
    width = 20
    for stream in range(4):
        first = order.window_of(stream, 0, 2500)
        assert first == (0, width - stream * width // 4)
        start, size = order.window_of(stream, first[1], 2500)
        assert (start, size) == (first[1], width)
    import numpy as np

    starts, sizes = order.window_of(3, np.arange(2500), 2500)
    assert starts.min() == 0 and (starts + sizes).max() == 2500 and set(sizes.tolist()) <= {5, 20, 15}

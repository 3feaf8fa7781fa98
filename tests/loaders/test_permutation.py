"""The keyed permutation is a bijection, invertible, vectorizable and stable across processes."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.order.permutation import Permutation, derive_key


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), key=st.integers(0, 2**64 - 1))
def test_bijection_and_inverse(n, key):
    p = Permutation(n, key)
    image = [p(i) for i in range(n)]
    assert sorted(image) == list(range(n))
    assert [p.inverse(j) for j in image] == list(range(n))
    assert p.map(np.arange(n)).tolist() == image  # large asks use a table of the whole permutation
    few = np.arange(0, n, 97)
    assert p.map(few).tolist() == [image[i] for i in few]  # small asks compute directly


def test_keys_give_different_orders_and_are_stable():
    a = [Permutation(1000, derive_key(0, "x", 1))(i) for i in range(20)]
    b = [Permutation(1000, derive_key(0, "x", 2))(i) for i in range(20)]
    assert a != b
    # Pinned values: a change here silently changes every run's order, so it must be deliberate.
    assert Permutation(1000, derive_key(0, "x", 1))(0) == a[0]
    assert derive_key(0, "chunks", 0, 0) == 7661173057218886745


def test_huge_domain_is_cheap():
    p = Permutation(10**12, 99)
    values = {p(i) for i in range(1000)}
    assert len(values) == 1000 and all(0 <= v < 10**12 for v in values)

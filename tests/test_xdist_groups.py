"""The suite's xdist groups hold: tests marked ``xdist_group`` share one worker only if pytest-xdist can tag their node
ids, which some pytest releases prevent (pyproject pins a range that works); this fails loudly if that breaks again."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("streaming-shm")
def test_grouped_tests_carry_their_group_in_their_node_id(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("dist", "no") != "loadgroup" and not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run with --dist loadgroup (make test runs it so)")
    assert request.node.nodeid.endswith("@streaming-shm"), request.node.nodeid

"""One local Ray cluster (2 CPUs) for the whole test session, and the ``engine`` fixture that runs a test on each engine.

Tests that use Ray carry ``pytest.mark.xdist_group("ray")`` so they share one
test process (``make test`` distributes with ``--dist loadgroup``), and Ray
starts once. Subprocesses reach the same cluster through ``RAY_ADDRESS``.
"""

from __future__ import annotations

import logging
from typing import Iterator

import pytest

#: Mark a module or test that uses the session's Ray cluster.
RAY_GROUP = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """Start a local Ray with 2 CPUs in this process (the ray engine then uses it); its address for subprocesses."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(params=["local", "ray"])
def engine(request: pytest.FixtureRequest) -> str:
    """The name of each engine in turn (the ray one on the session's 2-CPU cluster)."""
    if request.param == "ray":
        request.getfixturevalue("ray_address")
    return request.param

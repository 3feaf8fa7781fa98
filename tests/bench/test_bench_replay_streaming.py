"""The Streaming replay benchmark's measurements, run small and in process: the replay's batch at step s is what
Streaming's own resumed loader yields, and the lookup figures have the shape the benchmark reports (no timing)."""

from __future__ import annotations

import pytest

from bench import bench_replay_streaming as bench
from tests.support.streaming_runs import release_shared_memory

# Streaming names its shared memory by scanning for a free prefix, which races between processes: every test that runs
# it shares one xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("streaming-shm")]  # Streaming's own StreamingDataset and DataLoader run for real


def test_the_replay_and_streamings_resumption_reach_the_same_batch(tmp_path):
    local = bench.write_data(tmp_path / "stream", 1200)
    assert bench.write_data(tmp_path / "stream", 1200) == local  # complete data is reused
    step = 97
    replayed = bench.replay_reach(local=local, step=step, cache_dir=str(tmp_path / "cache"))
    resumed = bench.streaming_resume(local=local, step=step)
    release_shared_memory([local])
    assert replayed["texts"] == resumed["texts"] and len(resumed["texts"]) == bench.BATCH
    looked = bench.lookups(local, str(tmp_path / "cache"), count=3)
    assert looked["total_steps"] == 1200 // bench.BATCH
    assert all(looked[key]["runs"] == 3 for key in ("step_0", "last_step", "random_steps", "random_steps_decoded"))

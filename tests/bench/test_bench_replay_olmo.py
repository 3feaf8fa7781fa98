"""The OLMo-core replay benchmark in quick mode: a valid result whose baseline yields the replay's own batch."""

from __future__ import annotations

import json

import pytest

from bench import bench_replay_olmo

pytestmark = pytest.mark.slow


def test_replay_benchmark_compares_with_olmo_cores_own_batch_and_reports_its_goals(tmp_path):
    result = bench_replay_olmo.run(tmp_path, quick=True)
    assert json.loads(json.dumps(result)) == result and result["benchmark"] == "replay_olmo"
    replay, olmo, attached = result["results"]
    assert attached["system"].startswith("batchscope attach olmo")
    assert olmo["same_batch_as_replay_at_target"] is True
    assert replay["target_step"] == 10**4 < replay["total_steps"]
    assert set(result["goals"]) == {"index_build_vs_framework", "locate_ms", "batch_ms"}
    assert all(value is not None for value in result["ratios"].values())

"""The Megatron-Core replay benchmark runs in quick mode and reports its goals; attaching over the cache built nothing
(no timing assertions)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("megatron.core", reason="the megatron extra is not installed")
pytestmark = pytest.mark.slow


def test_quick_run_reports_lookups_attach_and_the_loader_baselines(tmp_path):
    from bench import bench_replay_megatron

    result = bench_replay_megatron.run(tmp_path, quick=True)
    assert json.loads(json.dumps(result)) == result
    assert result["benchmark"] == "replay_megatron" and result["baseline"]["megatron_build_s"] > 0
    ours, theirs = result["results"]
    assert ours["iterations"] == bench_replay_megatron.TARGET_ITERATION and ours["attach_built_anything"] is False
    assert ours["open_without_cache_megatron_build_s"] > 0 and theirs["iterate_to_1e5_s_extrapolated"] > 0
    assert result["goals"]["attach_builds_nothing"]["met"] is True
    assert all(value is not None for value in result["ratios"].values())

"""Smoke tests of the benchmarks: each runs in quick mode and writes a valid result; no timing assertions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import __main__ as bench_main
from bench import bench_lookup, bench_resume, bench_throughput, harness, peers

REPO = Path(__file__).resolve().parents[2]
MINE = {"lookup": bench_lookup, "resume": bench_resume, "throughput": bench_throughput}
STATUSES = {"ok", "unavailable", "not run", "capped", "failed"}
#: The module's benchmarks run once, on one worker (a module fixture would run again on every worker it is split over),
#: the worker of every test that runs Streaming (its lookup peer), whose shared-memory names race between processes.
pytestmark = pytest.mark.xdist_group("streaming-shm")


@pytest.fixture(scope="session")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each of the three benchmarks run once in quick mode, through the same entry point ``python -m bench`` uses
    (once per session: a module fixture would run again whenever the worker's tests of this module are interleaved with
    other modules' of the same group)."""
    workdir = tmp_path_factory.mktemp("bench-work")
    return {name: bench_main.run_one(name, workdir=workdir, quick=True) for name in MINE}


def _number_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


@pytest.mark.parametrize("name", sorted(MINE))
def test_result_has_the_common_shape(results: dict[str, dict[str, Any]], name: str) -> None:
    result = results[name]
    assert result["status"] == "ok", result.get("traceback")
    assert json.loads(json.dumps(result)) == result
    assert result["benchmark"] == name and result["quick"] is True
    assert {"cpu_count", "python", "versions"} <= set(result["machine"])
    assert isinstance(result["baseline"], dict) and result["baseline"]
    assert result["results"]
    assert result["ratios"] and all(_number_or_none(v) for v in result["ratios"].values())
    for key, goal in result["goals"].items():
        assert set(goal) == {"target", "measured", "met"}, key
        assert _number_or_none(goal["measured"]) and goal["met"] in (True, False, None)


def _status_ok_or_explained(entry: dict[str, Any]) -> None:
    assert entry["status"] in STATUSES, entry
    if entry["status"] != "ok":
        assert entry.get("reason"), f"a peer result without a reason: {entry}"


def test_lookup_measures_every_size_and_reports_every_peer(results: dict[str, dict[str, Any]]) -> None:
    rows = results["lookup"]["results"]
    mine = [r for r in rows if r["system"] == "batchscope"]
    assert [r["n"] for r in mine] == list(bench_lookup.SIZES)
    for row in mine:
        assert row["cold"]["status"] == "ok"
        assert len(row["cold"]["indices"]) == 4 and all(0 <= i < row["n"] for i in row["cold"]["indices"])
        assert set(row["by_step"]) == {str(s) for s in bench_lookup.FLAT_STEPS}
    fresh = [r for r in rows if r["system"].startswith("fresh process")]
    assert len(fresh) == 1 and fresh[0]["batchscope"]["status"] == "ok" and fresh[0]["batchscope"]["wall_ms"] > 0
    _status_ok_or_explained(fresh[0]["grain"])
    peer_rows = [r for r in rows if r["system"] != "batchscope" and r not in fresh]
    assert {r["system"] for r in peer_rows} == set(peers.LOOKUPS), "a peer was silently skipped"
    for row in peer_rows:
        _status_ok_or_explained(row)
        if row["status"] == "ok":
            assert all(0 <= i < row["n"] for i in row["indices"])
    for row in results["lookup"]["baseline"]["results"]:
        _status_ok_or_explained(row)


def test_lookup_answers_from_a_synthetic_manifest_match_a_fresh_process(results: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    runs = bench_lookup.build_runs(tmp_path / "catalog", (10**6,))
    expected = [a[1] for a in runs[10**6].addresses(bench_lookup.STEP, bench_lookup.RANK, world_size=bench_lookup.WORLD_SIZE)]
    row = next(r for r in results["lookup"]["results"] if r["system"] == "batchscope" and r["n"] == 10**6)
    assert row["cold"]["indices"] == expected[:4]


def test_throughput_reads_the_same_rows_on_both_sides(results: dict[str, dict[str, Any]]) -> None:
    result = results["throughput"]
    readers = [r for r in result["results"] if r["system"].startswith("batchscope run.reader")]
    assert [r["system"].rsplit(" ", 1)[1] for r in readers] == ["records", "samples", "numpy"]
    for reader in readers:
        assert reader["rows"] == result["baseline"]["rows"] > reader["dataset"]["rows"] - bench_throughput.BATCH  # an epoch
        assert reader["dataset"]["shards"] == bench_throughput.SHARDS
    for amp in [r for r in result["results"] if "amplification" in r]:
        assert amp["world_size"] == 4 and amp["streams"] == 8
        assert amp["rows_decoded"] >= amp["rows_consumed"] > 0


def test_resume_gives_a_real_batch_at_every_step(results: dict[str, dict[str, Any]]) -> None:
    rows = results["resume"]["results"]
    mine = [r for r in rows if r["system"] == "batchscope"]
    assert [r["step"] for r in mine] == list(bench_resume.QUICK_STEPS)
    assert all(r["samples"] == bench_resume.BATCH and r["fresh_process"]["status"] == "ok" for r in mine)
    theirs = [r for r in rows if r["system"] != "batchscope"]
    assert [r["step"] for r in theirs] == list(bench_resume.QUICK_STEPS)
    for row in theirs:
        _status_ok_or_explained(row)
        if row["status"] == "ok":
            assert row["state_check"] is True and row["samples"] == bench_resume.BATCH


def test_summary_has_a_section_and_tables_per_result(results: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    for name, result in results.items():
        bench_main.write_result(tmp_path, name, result)
    (tmp_path / "other.json").write_text(json.dumps({"benchmark": "other", "baseline": "a scan", "x": {"ratio_vs_scan": 2.5}}))
    text = bench_main.write_summary(tmp_path).read_text()
    for name in [*MINE, "other"]:
        assert f"## {name}" in text
    assert text.count("| goal | target | measured | met |") == len(MINE)
    assert "| x.ratio_vs_scan | 2.5 |" in text


def test_a_failing_benchmark_is_recorded_not_raised(tmp_path: Path) -> None:
    result = bench_main.run_one("does_not_exist", workdir=tmp_path, quick=True)
    assert result["status"] == "failed" and "ModuleNotFoundError" in result["error"]


def test_discovery_finds_the_modules_and_rejects_unknown_names() -> None:
    assert set(MINE) <= set(bench_main.discover())
    assert bench_main.select(bench_main.discover(), ["bench_lookup", "resume"]) == ["lookup", "resume"]
    proc = subprocess.run([sys.executable, "-m", "bench", "--only", "nosuch"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "unknown benchmark nosuch" in proc.stderr and "lookup" in proc.stderr


def test_isolated_reports_caps_and_crashes(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time\ntime.sleep(60)\n")
    capped = harness.isolated("runpy:run_path", timeout=3, path_name=str(script))
    assert capped["status"] == "capped" and capped["cap_s"] == 3
    crashed = harness.isolated("bench.harness:count_label", timeout=30, n="not a number")
    assert crashed["status"] == "failed" and "exit code" in crashed["reason"]


def test_unknown_peer_is_unavailable_with_a_reason() -> None:
    result = peers.status("no-such-peer")
    assert result["status"] == "unavailable" and "unknown peer" in result["reason"]

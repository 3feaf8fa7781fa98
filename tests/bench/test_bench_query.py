"""The query benchmark's parts on a tiny version: the answers it compares agree and its figures have their shape."""

from __future__ import annotations

from pathlib import Path

from bench import bench_query


def test_the_query_benchmark_measures_what_it_says_on_a_tiny_version(tmp_path: Path) -> None:
    catalog, run, paths = bench_query.build(tmp_path / "query", 5_000)
    sql = bench_query.measure_sql(catalog, paths, repeat=1)  # asserts each answer equals DuckDB's own
    assert [entry["query"] for entry in sql] == list(bench_query.QUERIES) and all(entry["speed_vs_direct"] for entry in sql)
    find = bench_query.measure_find(catalog, run, repeat=1, forward_steps=1)  # asserts 100 matches, each where its batch holds it
    assert find["matches"] == bench_query.MATCHES and find["samples"] == 5_000
    profile = bench_query.measure_profile(catalog, repeat=2)
    assert profile["rows"] == 5_000 and profile["columns"] == 5 and profile["cold"]["runs"] == 1

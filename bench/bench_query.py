"""Query benchmark: SQL over a version against DuckDB reading the same Parquet files, ``find`` against its own predicate
scan and a forward scan of ``run.batch``, and column statistics cold and cached.

- **SQL**: ``SqlSession.query`` (what ``batchscope sql`` runs: the statement checked, the tables resolved, every shard's
  check looked up — cached after the first query — and the sandboxed database queried) against ``duckdb`` querying
  ``read_parquet([the same files])`` directly, on the same machine, same queries, interleaved. Goal: ≥ 0.8 × its speed.
- **find**: a run of N samples (one epoch of an N-row version) and a predicate matching 100 rows. ``find_reads`` is
  compared with the predicate's scan alone (``matching_rows``): the inversion must cost ≤ 1 ms per match. The forward
  alternative, reading every step's batch, is measured on a few steps and extrapolated to the run (labelled as such).
- **column statistics**: ``version_profile`` of the N-row version cold (no shard check, database, profile or stored file
  cached; the operating system's file cache is warm) and cached (kept in the process; read back from the catalog).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from . import harness

NAME = "query"
SEED = 5
MATCHES = 100
SHARD_ROWS = 1_000_000
ROW_GROUP = 100_000
BATCH = 1000
SQL_GOAL = 0.8
FIND_MS_PER_MATCH = 1.0
PROFILE_GOAL_S = 5.0

QUERIES = {
    "group by": "SELECT lang, count(*) AS n, avg(score) AS mean FROM {t} GROUP BY lang ORDER BY lang",
    "filter count": "SELECT count(*) AS n FROM {t} WHERE text LIKE '%7 of%' AND score > 0.5",
    "top 100": "SELECT id, score FROM {t} ORDER BY score DESC LIMIT 100",
    "distinct": "SELECT count(DISTINCT text) AS n FROM {t}",
}


def build(root: Path, rows: int) -> tuple[Any, Any, list[str]]:
    """A fresh catalog at ``root``: ``big@v1`` of ``rows`` rows (id, text, score, lang, needle on ``MATCHES`` rows) and
    a one-epoch run over it; returns ``(catalog, run, shard files)``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from loaders import Catalog, ReadPlan, Source

    try:  # the data of an earlier run of the same size is reused (it is deterministic)
        catalog = Catalog(root / "catalog")
        version = catalog.resolve("big@v1")
        if version.rows == rows:
            return catalog, catalog.run("find-run"), [shard.uri for shard in version.shards]
    except Exception:  # noqa: BLE001 - none yet, or another size: built afresh
        pass
    shutil.rmtree(root, ignore_errors=True)
    (root / "src").mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    needles = set(rng.choice(rows, size=MATCHES, replace=False).tolist())
    paths = []
    for number, first in enumerate(range(0, rows, SHARD_ROWS)):
        count = min(SHARD_ROWS, rows - first)
        ids = pa.array(np.arange(first, first + count, dtype=np.int64))
        text = pc.binary_join_element_wise("document ", pc.cast(pc.divide(ids, 1000), pa.string()), " of the corpus", "")
        table = pa.table(
            {
                "id": ids,
                "text": text,
                "score": pa.array(rng.random(count)),
                "lang": pa.array(rng.choice(["en", "de", "fr", "ja", "sw"], size=count)).dictionary_encode(),
                "needle": pa.array(np.isin(np.arange(first, first + count), list(needles))),
            }
        )
        path = root / "src" / f"part-{number:03d}.parquet"
        pq.write_table(table, path, row_group_size=ROW_GROUP)
        paths.append(str(path))
    catalog = Catalog(root / "catalog")
    catalog.register("big", paths, key="id", tag="v1")
    run = catalog.create_run("find-run", ReadPlan([Source("big@v1")], seed=SEED, global_batch_size=BATCH, steps=rows // BATCH))
    return catalog, run, paths


def _arrow(relation: Any) -> Any:
    from loaders.query.duck import arrow_table

    return arrow_table(relation)


def _rounded(table: Any) -> list[dict[str, Any]]:
    return [{k: round(v, 9) if isinstance(v, float) else v for k, v in row.items()} for row in table.to_pylist()]


def measure_sql(catalog: Any, paths: list[str], *, repeat: int) -> list[dict[str, Any]]:
    """Each query through batchscope's session and through DuckDB directly, interleaved; medians and their ratio."""
    import duckdb

    from loaders.query import SqlSession

    session = SqlSession(catalog)
    direct = duckdb.connect()
    files = "[" + ", ".join(f"'{p}'" for p in paths) + "]"
    out = []
    for label, template in QUERIES.items():
        ours = template.format(t='"big@v1"')
        theirs = template.format(t=f"read_parquet({files})")
        first = time.perf_counter()
        answer = session.query(ours).table  # checks every shard the first time (kept for the rest of the process)
        first_s = time.perf_counter() - first
        assert _rounded(answer) == _rounded(_arrow(direct.sql(theirs))), label  # the same answer (sums in any order)
        ours_t, theirs_t = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            session.query(ours)
            ours_t.append(time.perf_counter() - start)
            start = time.perf_counter()
            _arrow(direct.sql(theirs))
            theirs_t.append(time.perf_counter() - start)
        ours_m, theirs_m = harness.Timing(tuple(ours_t)), harness.Timing(tuple(theirs_t))
        out.append(
            {
                "query": label,
                "sql": ours,
                "batchscope": ours_m.to_json(),
                "duckdb_direct": theirs_m.to_json(),
                "first_query_with_checks_ms": round(first_s * 1e3, 1),
                "speed_vs_direct": harness.ratio(theirs_m.median, ours_m.median),
            }
        )
    return out


def measure_find(catalog: Any, run: Any, *, repeat: int, forward_steps: int) -> dict[str, Any]:
    """``find_reads`` for the needle rows against the predicate's scan alone, and the extrapolated forward scan."""
    from loaders.query import SqlSession
    from loaders.query.find import find_reads, matching_rows

    session = SqlSession(catalog)
    version = run.version(0)
    matching_rows(session, version, "needle")  # shard checks and database, once
    scan = harness.time_repeated(lambda: matching_rows(session, version, "needle"), repeat=repeat)
    find = harness.time_repeated(lambda: find_reads(run, "needle", session=session), repeat=repeat)
    found = find_reads(run, "needle", session=session)
    assert len(found.matches) == MATCHES and not found.truncated
    for match in found.matches[:5]:  # each read is where the batch holds it
        assert run.batch(match.step, match.rank).samples[match.position].key == match.key
    forward = harness.time_calls(lambda step: run.batch(step, 0, world_size=1), range(forward_steps), warmup=1)
    per_match_ms = (find.median - scan.median) * 1e3 / MATCHES
    return {
        "samples": run.total_steps * run.global_batch_size,
        "matches": len(found.matches),
        "find": find.to_json(),
        "predicate_scan": scan.to_json(),
        "inversion_ms_per_match": round(per_match_ms, 4),
        "forward_batch_per_step": forward.to_json(),
        "forward_scan_s_extrapolated": round(forward.median * run.total_steps, 1),
    }


def measure_profile(catalog: Any, *, repeat: int) -> dict[str, Any]:
    """Column statistics cold (nothing of batchscope's cached), then kept in the process, then read from the catalog."""
    from loaders.query import SqlSession, verified
    from loaders.query import profile as profile_module

    version = catalog.resolve("big@v1")
    colds = []
    for _ in range(max(1, repeat // 2)):
        verified.forget()
        profile_module.forget()
        Path(profile_module.profile_path(version)).unlink(missing_ok=True)
        start = time.perf_counter()
        profile_module.version_profile(SqlSession(catalog), version)
        colds.append(time.perf_counter() - start)
    session = SqlSession(catalog)
    memo = harness.time_repeated(lambda: profile_module.version_profile(session, version), repeat=repeat)

    def stored() -> None:
        profile_module.forget()
        assert profile_module.version_profile(session, version).stored

    kept = harness.time_repeated(stored, repeat=repeat)
    return {
        "rows": version.rows,
        "columns": len(version.schema),
        "cold": harness.Timing(tuple(colds)).to_json(),
        "cached_in_process": memo.to_json(),
        "cached_in_catalog": kept.to_json(),
    }


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Build the data, then measure SQL, find and column statistics."""
    rows = 10**6 if quick else 10**7
    repeat = 3 if quick else 7
    catalog, the_run, paths = build(Path(workdir) / "query", rows)
    sql = measure_sql(catalog, paths, repeat=repeat)
    find = measure_find(catalog, the_run, repeat=repeat, forward_steps=1 if quick else 2)
    profile = measure_profile(catalog, repeat=repeat)
    worst_sql = min(entry["speed_vs_direct"] or 0 for entry in sql)
    find_budget_ms = find["predicate_scan"]["median_ms"] + FIND_MS_PER_MATCH * find["matches"]
    label = harness.count_label(rows)
    ratios: dict[str, float | None] = {f"sql speed vs DuckDB direct ({e['query']}, N={label})": e["speed_vs_direct"] for e in sql}
    ratios[f"find / (predicate scan + 1 ms per match) (N={label})"] = harness.ratio(find["find"]["median_ms"], find_budget_ms)
    ratios[f"forward scan (extrapolated) / find (N={label})"] = harness.ratio(
        find["forward_scan_s_extrapolated"] * 1e3, find["find"]["median_ms"]
    )
    ratios[f"column statistics cached / cold (N={label})"] = harness.ratio(
        profile["cached_in_catalog"]["median_ms"], profile["cold"]["median_ms"]
    )
    cold_s = profile["cold"]["median_ms"] / 1e3
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "duckdb.connect().sql(... read_parquet([the version's files]) ...)",
            "what": "the same queries over the same files, same process, interleaved; for find, its own predicate scan",
        },
        results=[{"system": "batchscope", "rows": rows, "sql": sql, "find": find, "column_statistics": profile}],
        ratios=ratios,
        goals={
            "sql_vs_duckdb": harness.goal(f">= {SQL_GOAL} x DuckDB's speed (worst query)", worst_sql, worst_sql >= SQL_GOAL),
            "find_ms": harness.goal(
                f"<= predicate scan + {FIND_MS_PER_MATCH:g} ms per match ({find_budget_ms:.1f} ms)",
                find["find"]["median_ms"],
                find["find"]["median_ms"] <= find_budget_ms,
            ),
            "column_statistics_cold_s": harness.goal(f"<= {PROFILE_GOAL_S:g} s at N={label}", round(cold_s, 3), cold_s <= PROFILE_GOAL_S),
            "column_statistics_cached_ms": harness.goal(
                "instant: <= 50 ms read back from the catalog",
                profile["cached_in_catalog"]["median_ms"],
                profile["cached_in_catalog"]["median_ms"] <= 50,
            ),
        },
        notes=[
            "speed_vs_direct = DuckDB direct median / batchscope median (>= 1: batchscope is as fast or faster); "
            "batchscope's figure includes checking the statement, resolving the tables, a stat per shard (the shards' "
            "checks are cached after the first query: first_query_with_checks_ms) and the row cap",
            "find = the predicate over the source (DuckDB) plus inverting the order for each matching row; "
            "forward_scan_s_extrapolated = the measured run.batch of one step x the run's steps (not run)",
            "column statistics cold: shard checks, the DuckDB database, the kept profile and its file all dropped; "
            "the operating system's file cache is warm",
        ],
    )

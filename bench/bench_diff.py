"""Version diff: summary time when one shard changed; rows/s and peak memory when every shard changed (1% of rows edited).

Two versions of 10 M rows in 100 shards (quick: 1 M in 10) with an integer key,
a 40-200 character text and a float. Every figure is also a ratio against a
baseline measured in the same run: a pyarrow scan of the same columns of the
same files (the I/O and decode floor any diff pays). Each measurement runs in
a fresh process, after paying pyarrow's one-off kernel start-up, which is
reported apart.

    python -m bench.bench_diff          # quick mode, prints the result
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import harness

NAME = "diff"
DATASET = "bench-diff"
FORMAT = 3
ROW_GROUP = 10_000
EDITED = 0.01
COLUMNS = ["id", "text", "score"]
SUMMARY_GOAL_S = 2.0
RATE_GOAL = 1_000_000
MEMORY_GOAL = 512 << 20
_WORDS = (
    "the of and to in data model token batch learning training step rank shard sample version key value "
    "text image video reward episode rollout loss gradient optimizer schedule warmup eval metric"
).split()


def _shown(path: Path) -> str:
    """A path as results show it: relative to the repository when inside it (results are committed)."""
    try:
        return str(Path(path).resolve().relative_to(harness.REPO))
    except ValueError:
        return Path(path).name


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Build (once, reused) and diff the versions; returns the benchmark document."""
    rows, shards = (1_000_000, 10) if quick else (10_000_000, 100)
    repeats = 3 if quick else 1
    timeout = 600.0 if quick else 3600.0
    built = _build(Path(workdir) / NAME / ("quick" if quick else "full"), rows=rows, shards=shards)
    root = built["catalog"]

    def measure(kind: str, b: str) -> dict[str, Any]:
        runs = [harness.isolated(f"bench.bench_diff:measure_{kind}", timeout=timeout, root=root, a="v1", b=b) for _ in range(repeats)]
        done = [r for r in runs if r.get("status") == "ok"]
        if not done:
            return runs[0]
        best = sorted(done, key=lambda r: r["seconds"])[len(done) // 2]  # the median run
        return {**best, "seconds_all": [round(r["seconds"], 4) for r in done]}

    one, one_scan = measure("diff", "one"), measure("scan", "one")
    every, every_scan = measure("diff", "all"), measure("scan", "all")
    moved = measure("diff", "moved")
    rate = rows / every["seconds"] if "seconds" in every else None
    moved_rate = rows / moved["seconds"] if "seconds" in moved else None
    table_bytes = built["decoded_bytes_per_version"]
    rss = every.get("rss_peak_delta_bytes")
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "pyarrow.dataset scan (threads on) of id, text, score of the shards the diff reads",
            "one_shard_changed_s": one_scan.get("seconds"),
            "every_shard_changed_s": every_scan.get("seconds"),
            "every_shard_changed_rows_per_s": round(rows / every_scan["seconds"]) if "seconds" in every_scan else None,
            "every_shard_changed_rss_peak_delta_bytes": every_scan.get("rss_peak_delta_bytes"),
        },
        results=[
            {"system": "diff_versions, one shard changed", **one},
            {"system": "diff_versions, every shard changed, 1% of rows edited", "rows_per_s": _round(rate), **every},
            {"system": "diff_versions, same edits, every shard's rows reversed", "rows_per_s": _round(moved_rate), **moved},
            {"system": "dataset", "rows": rows, "shards": shards, "row_group": ROW_GROUP, "edited": EDITED, **built},
        ],
        ratios={
            "one shard changed: diff / scan of the two changed shards": harness.ratio(one.get("seconds"), one_scan.get("seconds")),
            "every shard changed: diff / scan": harness.ratio(every.get("seconds"), every_scan.get("seconds")),
            "every shard changed, rows reversed: diff / scan": harness.ratio(moved.get("seconds"), every_scan.get("seconds")),
            "every shard changed: peak RSS growth / one version's decoded columns": harness.ratio(rss, table_bytes),
        },
        goals={
            "one_shard_summary_s": harness.goal(
                f"<= {SUMMARY_GOAL_S} s ({rows:,} rows, {shards} shards)", one.get("seconds"), one.get("seconds", 1e9) <= SUMMARY_GOAL_S
            ),
            "rows_per_s_every_shard_changed": harness.goal(
                f">= {RATE_GOAL:,} rows/s matched by key", _round(rate), (rate or 0) >= RATE_GOAL
            ),
            "memory_bounded": harness.goal(
                f"peak RSS growth <= {MEMORY_GOAL >> 20} MB whatever the size (one version decodes to {table_bytes >> 20} MB)",
                rss,
                rss is not None and rss <= MEMORY_GOAL,
            ),
        },
        notes=[
            "rows/s counts the rows of one version (each row is matched with its counterpart in the other)",
            "'one' rewrites shard rows/2 only; 'all' rewrites every shard with 1% of rows edited (text, a third of them also score); "
            "'moved' is 'all' with every shard's rows in reverse order",
            "files are in the OS page cache (written just before or reused); the diff verifies every row group it reads",
            f"{repeats} run(s) per measurement, median reported; the machine is shared, compare ratios rather than seconds",
        ],
    )


def _round(value: float | None) -> int | None:
    return None if value is None else round(value)


# -- data -------------------------------------------------------------------------------------------


def _build(base: Path, *, rows: int, shards: int) -> dict[str, Any]:
    """Write v1, 'one' (one shard edited), 'all' (every shard edited) and 'moved' ('all' reversed per shard)."""
    marker = base / "built.json"
    spec = {"format": FORMAT, "rows": rows, "shards": shards, "row_group": ROW_GROUP}
    if marker.exists():
        saved = json.loads(marker.read_text())
        if saved.get("spec") == spec:
            return {**saved["info"], "reused": True}
    from loaders import Catalog

    start = time.perf_counter()
    catalog = Catalog(str(base / "catalog"))
    per_shard = rows // shards
    v1, every, moved = [], [], []
    decoded = 0
    for shard in range(shards):
        table = _shard(shard, per_shard)
        edited = _edit(table, seed=shard)
        decoded += table.nbytes
        v1.append(_write(table, base / "v1" / f"part-{shard:05d}.parquet"))
        every.append(_write(edited, base / "all" / f"part-{shard:05d}.parquet"))
        moved.append(_write(edited.take(pa.array(np.arange(per_shard)[::-1])), base / "moved" / f"part-{shard:05d}.parquet"))
    one = list(v1)
    one[shards // 2] = every[shards // 2]
    for tag, paths in (("v1", v1), ("one", one), ("all", every), ("moved", moved)):
        catalog.register(DATASET, paths, key="id", tag=tag)
    info = {
        "catalog": _shown(base / "catalog"),
        "decoded_bytes_per_version": decoded,
        "bytes_on_disk_per_version": sum(Path(p).stat().st_size for p in v1),
        "build_s": round(time.perf_counter() - start, 1),
    }
    marker.write_text(json.dumps({"spec": spec, "info": info}))
    return {**info, "reused": False}


def _shard(shard: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(shard)
    vocab = np.array(_WORDS)
    lengths = rng.integers(40, 200, rows)
    corpus = " ".join(vocab[rng.integers(0, len(vocab), int(lengths.sum()) // 4 + 16)]).encode()
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    text = pa.LargeStringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(corpus[: int(offsets[-1])])).cast(pa.string())
    ids = np.arange(shard * rows, (shard + 1) * rows, dtype=np.int64)
    return pa.table({"id": ids, "text": text, "score": rng.random(rows)})


def _edit(table: pa.Table, *, seed: int) -> pa.Table:
    rng = np.random.default_rng(10_000 + seed)
    edited = np.zeros(table.num_rows, bool)
    edited[rng.choice(table.num_rows, int(table.num_rows * EDITED), replace=False)] = True
    text = pc.if_else(pa.array(edited), pc.binary_join_element_wise(table.column("text"), "edited", " "), table.column("text"))
    rescored = pa.array(edited & (np.arange(table.num_rows) % 3 == 0))
    score = pc.if_else(rescored, pc.add(table.column("score"), 1.0), table.column("score"))
    return table.set_column(1, "text", text).set_column(2, "score", score)


def _write(table: pa.Table, path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=ROW_GROUP, compression="zstd", use_dictionary=False)
    return str(path)


# -- measurements (each in a fresh process, through harness.isolated) ------------------------------------


def _warm_up() -> float:
    """Pay a fresh process's one-off cost (pyarrow registers compute kernels on first use) before timing."""
    from loaders.diff.fragments import key_hashes
    from loaders.diff.hashing import equal_values

    start = time.perf_counter()
    key_hashes(pa.chunked_array([pa.array([1, None])]))
    equal_values(pa.array(["a"]), pa.array(["b"]))
    pc.sort_indices(pa.table({"key": [2, 1]}), sort_keys=[("key", "ascending")])
    return round(time.perf_counter() - start, 3)


def measure_diff(root: str, a: str, b: str) -> dict[str, Any]:
    """Time ``diff_versions`` (no cache) of ``a`` and ``b``, with its peak memory growth."""
    from loaders import Catalog
    from loaders.diff import diff_versions

    catalog = Catalog(root)
    va, vb = catalog.resolve(f"{DATASET}@{a}"), catalog.resolve(f"{DATASET}@{b}")
    startup = _warm_up()
    with harness.RssProbe() as probe:
        start = time.perf_counter()
        diff = diff_versions(va, vb, cache=False)
        seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "startup_s": startup,
        "counts": diff.counts.to_json(),
        "shards_read": len(diff.shards.removed) + len(diff.shards.added),
        "shards_unchanged": len(diff.shards.unchanged),
        **probe.to_json(),
    }


def measure_scan(root: str, a: str, b: str) -> dict[str, Any]:
    """The floor: stream the same columns of the shards the diff reads with pyarrow, nothing else."""
    import pyarrow.dataset as ds

    from loaders import Catalog
    from loaders.diff.schema import diff_shards

    catalog = Catalog(root)
    va, vb = catalog.resolve(f"{DATASET}@{a}"), catalog.resolve(f"{DATASET}@{b}")
    shards = diff_shards(va, vb)
    files = [va.shards[s.shard].uri for s in shards.removed] + [vb.shards[s.shard].uri for s in shards.added]
    _warm_up()
    rows = 0
    with harness.RssProbe() as probe:
        start = time.perf_counter()
        for batch in ds.dataset(files, format="parquet").to_batches(columns=COLUMNS, use_threads=True):
            rows += batch.num_rows
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "rows": rows, **probe.to_json()}


if __name__ == "__main__":
    print(json.dumps(run(harness.REPO / "bench" / "work", quick=True), indent=1, default=str))

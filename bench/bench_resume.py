"""Resume benchmark: from a saved reader state at step s to the first batch, for s = 0 … 1e9, vs torchdata's StatefulDataLoader.

batchscope: a fresh ``Run`` opened from the catalog, ``run.reader(...)``,
``load_state_dict(state at s)`` and the first real ``Batch`` (records read
from a small real Parquet dataset; the plan's ``steps`` is large enough for
every s). torchdata: a ``StatefulDataLoader`` over an equivalent shuffled
map-style dataset of the same records, resumed at step s; it regenerates the
epoch's permutation and skips the samples already yielded, so each of its
measurements runs in a fresh process under a time cap.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from . import harness

NAME = "resume"
STEPS = (0, 10**3, 10**4, 10**5, 10**6, 10**9)
QUICK_STEPS = (0, 10**3, 10**6, 10**9)
BATCH = 64
STREAMS = 8
SEED = 0
ROWS = 20_000
ROW_GROUP = 500
TOTAL_STEPS = 2 * 10**9
GOAL_S = 1.0
FLAT_TOLERANCE = 1.5
TORCHDATA_BYTES_PER_SAMPLE = 48
"""Peak bytes per sample of an epoch when torchdata resumes: ``randperm`` (8) plus its ``tolist()`` (~40)."""


def build_run(root: Path) -> Any:
    """A small real dataset (``ROWS`` rows, 4 shards) and a run long enough for step 1e9."""
    from loaders import Catalog, ReadPlan, Source

    shutil.rmtree(root, ignore_errors=True)
    data = root / "data"
    data.mkdir(parents=True)
    per_shard = ROWS // 4
    paths = []
    for shard in range(4):
        first = shard * per_shard
        table = pa.table(
            {
                "id": [f"row-{i:06d}" for i in range(first, first + per_shard)],
                "text": [f"record {i}: " + " ".join(f"w{(i * 7 + j) % 997}" for j in range(40)) for i in range(first, first + per_shard)],
            }
        )
        path = data / f"part-{shard}.parquet"
        pq.write_table(table, path, row_group_size=ROW_GROUP, compression="zstd")
        paths.append(str(path))
    catalog = Catalog(root / "catalog")
    catalog.register("resume-text", paths, key="id", tag="v1")
    plan = ReadPlan([Source("resume-text@v1")], seed=SEED, global_batch_size=BATCH, steps=TOTAL_STEPS, streams=STREAMS)
    catalog.create_run("resume", plan)
    return catalog, paths


def resume_once(catalog_root: Path, step: int, *, state: dict[str, Any]) -> tuple[float, int]:
    """Open the run, make a reader, load ``state`` moved to ``step``, take the first batch: ``(seconds, samples)``."""
    from loaders import Catalog
    from loaders.catalog.version import clear_read_caches

    clear_read_caches()
    start = time.perf_counter()
    run = Catalog(catalog_root).run("resume")
    with run.reader(0, 1, ledger=False) as reader:
        reader.load_state_dict({**state, "step": step})
        batch = next(iter(reader))
    elapsed = time.perf_counter() - start
    if batch.step != step:
        raise AssertionError(f"resumed at step {step} but the first batch is step {batch.step}")
    return elapsed, len(batch.samples)


def _saved_state(catalog_root: Path) -> dict[str, Any]:
    """A real state saved by a reader after one batch."""
    from loaders import Catalog

    run = Catalog(catalog_root).run("resume")
    with run.reader(0, 1, ledger=False) as reader:
        reader.mark_trained(next(iter(reader)).step)
        return reader.state_dict()


def measure_torchdata(paths: list[str], steps: tuple[int, ...], *, cap: float) -> list[dict[str, Any]]:
    """torchdata resume at each step in a fresh process; steps beyond the memory budget or after a capped one are not run."""
    out: list[dict[str, Any]] = []
    blocked: str | None = None
    for step in steps:
        need = (step + 1) * BATCH * TORCHDATA_BYTES_PER_SAMPLE
        if need > harness.MEMORY_BUDGET:
            out.append(
                {
                    "step": step,
                    "status": "not run",
                    "reason": f"the epoch's permutation would need ~{need / 2**30:.0f} GiB "
                    f"(budget {harness.MEMORY_BUDGET / 2**30:.0f} GiB)",
                }
            )
            continue
        if blocked:
            out.append({"step": step, "status": "not run", "reason": blocked})
            continue
        entry = {
            "step": step,
            **harness.isolated("bench.peers:torchdata_resume", timeout=cap, paths=paths, step=step, batch=BATCH, seed=SEED),
        }
        if entry.get("status") == "capped":
            blocked = f"a smaller step already exceeded the {cap:g} s cap"
        elif entry.get("status") == "unavailable":
            blocked = entry["reason"]
        out.append(entry)
    return out


def _extrapolate(torchdata: list[dict[str, Any]]) -> None:
    """Label a linear estimate (from the largest measured step) on each step torchdata did not finish."""
    measured = [e for e in torchdata if e.get("status") == "ok" and e["step"] > 0]
    if not measured:
        return
    last = max(measured, key=lambda e: e["step"])
    for entry in torchdata:
        if entry.get("status") in ("capped", "not run") and entry["step"] > last["step"]:
            entry["extrapolated_resume_ms"] = round(last["resume_ms"] * (entry["step"] + 1) / (last["step"] + 1), 1)


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Measure batchscope at every step (median of repeats) and torchdata where it fits the cap."""
    root = Path(workdir) / "resume"
    _, paths = build_run(root)
    catalog_root = root / "catalog"
    steps = QUICK_STEPS if quick else STEPS
    repeats = 3 if quick else 7
    cap = 4.0 if quick else 20.0
    state = _saved_state(catalog_root)
    results = []
    for step in steps:
        samples = [resume_once(catalog_root, step, state=state) for _ in range(repeats)]
        timing = harness.Timing(tuple(s for s, _ in samples))
        cold = harness.isolated("bench.bench_resume:resume_isolated", timeout=120, catalog_root=str(catalog_root), step=step, state=state)
        results.append(
            {
                "system": "batchscope",
                "step": step,
                "resume": timing.to_json(),
                "samples": samples[0][1],
                "fresh_process": cold,
            }
        )
    torchdata = measure_torchdata(paths, steps, cap=cap)
    _extrapolate(torchdata)
    results += [{"system": "torchdata.StatefulDataLoader", **e} for e in torchdata]
    mine = {r["step"]: r["resume"]["median_ms"] for r in results if r["system"] == "batchscope"}
    ratios: dict[str, float | None] = {f"flatness step {harness.count_label(s)}/0": harness.ratio(mine[s], mine[0]) for s in steps if s}
    for entry in torchdata:
        label = f"torchdata@step {harness.count_label(entry['step'])} / batchscope"
        if entry.get("status") == "ok":
            ratios[label] = harness.ratio(entry["resume_ms"], mine[entry["step"]])
        elif entry.get("status") == "capped":
            ratios[f"{label} (lower bound: capped at {entry['cap_s']:g} s)"] = harness.ratio(entry["cap_s"] * 1e3, mine[entry["step"]])
    at_1e6 = None if 10**6 not in mine else round(mine[10**6] / 1e3, 4)
    flat = harness.ratio(max(mine.values()), mine[0])
    return harness.document(
        NAME,
        quick=quick,
        baseline={"system": "batchscope resume at step 0", "median_ms": mine[0]},
        results=results,
        ratios=ratios,
        goals={
            "resume_s_at_1e6": harness.goal(
                f"<= {GOAL_S:g} s from load_state_dict at step 1e6 to the first batch",
                at_1e6,
                at_1e6 is not None and at_1e6 <= GOAL_S,
            ),
            "flat_in_step": harness.goal(f"<= {FLAT_TOLERANCE} (slowest step / step 0)", flat, flat is not None and flat <= FLAT_TOLERANCE),
        },
        notes=[
            f"dataset: {ROWS} rows in 4 zstd shards ({ROW_GROUP}-row row groups); plan: global batch {BATCH}, "
            f"{STREAMS} streams, {harness.count_label(TOTAL_STEPS)} steps",
            "one resume = open run + reader + load_state_dict + first batch (real reads, row-group cache cleared)",
            "fresh_process: the same resume in a new Python process (imports excluded), with its peak RSS growth",
            f"torchdata: map-style dataset of (s + 1) * {BATCH} samples (sample i = record i mod {ROWS}) so step s "
            "is in the first epoch; its state at s is a real state with counters moved to s (checked against a real "
            "run at a small step: state_check)",
            f"torchdata: each measurement capped at {cap:g} s; estimates past the cap are linear extrapolations, "
            "labelled; its records sit in memory (no Parquet reads, no checksums), so it is faster than batchscope "
            "at small steps: what matters is the growth with s",
        ],
    )


def resume_isolated(*, catalog_root: str, step: int, state: dict[str, Any]) -> dict[str, Any]:
    """One resume in a fresh process, with peak RSS growth (for ``harness.isolated``)."""
    import loaders  # noqa: F401 - imports are not part of the resume

    with harness.RssProbe() as probe:
        elapsed, samples = resume_once(Path(catalog_root), step, state=state)
    return {"status": "ok", "resume_ms": round(elapsed * 1e3, 3), "samples": samples, **probe.to_json()}

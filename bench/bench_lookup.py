"""Lookup benchmark: which records rank r reads at step s, at N = 1e6 … 1e9, against an O(N) permutation and peers.

batchscope answers with ``run.addresses(step, rank, world_size=64)``: pure
arithmetic over keyed permutations, no reads. Its dataset versions here are
synthetic manifests that claim N rows (fake digests, no data files): the
address path never opens a shard. The baseline is ``numpy.random.permutation(N)``,
the O(N) approach; the peers are Hugging Face ``datasets``, mosaicml-streaming
and Grain, each computing the same thing its own way in a fresh process.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import harness, peers

NAME = "lookup"
SIZES = (10**6, 10**7, 10**8, 10**9)
STEP = 10**6
FLAT_STEPS = (0, 10**3, 10**6, 10**9)
WORLD_SIZE = 64
BATCH = 1024
SEED = 0
RANK = 3
TOTAL_STEPS = 10**12
SHARD_ROWS = 10**6
ROW_GROUP = 10_000
GOAL_MS = 1.0
FLAT_TOLERANCE = 1.5
#: Fresh processes per cold measurement of an O(1) lookup (batchscope, Grain): the median is reported.
COLD_REPEATS = 5
COLD_GOAL = 1.0


# -- synthetic catalog ----------------------------------------------------------------------------------
def write_synthetic_version(catalog: Any, name: str, rows: int, *, shard_rows: int = SHARD_ROWS, row_group: int = ROW_GROUP) -> str:
    """Write a manifest claiming ``rows`` rows (shards of ``shard_rows``, fake digests) and tag it ``v1``; returns its id."""
    from loaders import storage
    from loaders.catalog.manifest import Manifest
    from loaders.storage.shards import ShardInfo

    shards = []
    for number, first in enumerate(range(0, rows, shard_rows)):
        count = min(shard_rows, rows - first)
        groups = [row_group] * (count // row_group) + ([count % row_group] if count % row_group else [])
        shards.append(
            ShardInfo(
                uri=f"synthetic://{name}/part-{number:05d}.parquet",
                size=count * 100,
                rows=count,
                row_groups=tuple(groups),
                boundaries=tuple(range(4, 4 + 1000 * len(groups), 1000)),
                segment_digests=tuple(f"{number:016x}{g:016x}" for g in range(len(groups))),
                footer_digest=f"{number:032x}",
            )
        )
    manifest = Manifest(
        name=name,
        schema=pa.schema([("id", pa.string()), ("text", pa.string())]),
        kinds={"id": "text", "text": "text"},
        key="id",
        shards=tuple(shards),
        created="2000-01-01T00:00:00+00:00",
        notes={"synthetic": "row counts only; no data files exist"},
    )
    storage.write_bytes_atomic(catalog.path("datasets", name, "versions", f"{manifest.id}.json"), json.dumps(manifest.to_json()).encode())
    refs = {"head": manifest.id, "tags": {"latest": manifest.id, "v1": manifest.id}}
    storage.write_bytes_atomic(catalog.path("datasets", name, "refs.json"), json.dumps(refs).encode())
    return manifest.id


def _run_name(n: int) -> str:
    return f"lookup-{harness.count_label(n)}"


def build_runs(root: Path, sizes: tuple[int, ...]) -> dict[int, Any]:
    """A fresh catalog at ``root`` with one synthetic dataset and one run per size."""
    from loaders import Catalog, ReadPlan, Source

    shutil.rmtree(root, ignore_errors=True)
    catalog = Catalog(root)
    runs = {}
    for n in sizes:
        name = f"synthetic-{harness.count_label(n)}"
        write_synthetic_version(catalog, name, n)
        plan = ReadPlan([Source(f"{name}@v1")], seed=SEED, global_batch_size=BATCH, steps=TOTAL_STEPS)
        runs[n] = catalog.create_run(_run_name(n), plan)
    return runs


# -- measurements -------------------------------------------------------------------------------------------
def batchscope_cold(*, root: str, run: str, step: int, rank: int, world_size: int) -> dict[str, Any]:
    """In a fresh process: open the run from the catalog and compute one lookup (time and peak RSS)."""
    from loaders import Catalog

    with harness.RssProbe() as probe:
        start = time.perf_counter()
        opened = Catalog(root).run(run)
        middle = time.perf_counter()
        addresses = opened.addresses(step, rank, world_size=world_size)
        end = time.perf_counter()
    return {
        "status": "ok",
        "first_lookup_ms": round((end - start) * 1e3, 4),
        "open_run_ms": round((middle - start) * 1e3, 4),
        "lookup_after_open_ms": round((end - middle) * 1e3, 4),
        **probe.to_json(),
        "indices": [a[1] for a in addresses[:4]],
    }


_FRESH = {
    "batchscope": (
        "import json, sys, time; t0 = time.perf_counter()\n"
        "from loaders import Catalog\n"
        "t1 = time.perf_counter(); run = Catalog(sys.argv[1]).run(sys.argv[2])\n"
        "found = run.addresses({step}, {rank}, world_size={world})\n"
        "print(json.dumps([t1 - t0, time.perf_counter() - t1, found[0][1]]))"
    ),
    "grain": (
        "import json, sys, time; t0 = time.perf_counter()\n"
        "try:\n    import grain.python as gp\nexcept ImportError:\n    import grain as gp\n"
        "t1 = time.perf_counter()\n"
        "s = gp.IndexSampler(num_records={n}, shard_options=gp.ShardOptions(shard_index={rank}, shard_count={world}, "
        "drop_remainder=True), shuffle=True, num_epochs=None, seed={seed})\n"
        "keys = [s[{rank} + k * {world}].record_key for k in range({step} * {per}, ({step} + 1) * {per})]\n"
        "print(json.dumps([t1 - t0, time.perf_counter() - t1, keys[0]]))"
    ),
}


def fresh_processes(root: Path, run: str, *, repeats: int) -> dict[str, Any]:
    """Each system's whole fresh process (interpreter start, imports, open, one lookup), alternating; medians."""
    import subprocess
    import sys

    from . import peers as peer_module

    per = BATCH // WORLD_SIZE
    codes = {name: code.format(step=STEP, rank=RANK, world=WORLD_SIZE, n=SIZES[-1], seed=SEED, per=per) for name, code in _FRESH.items()}
    if peer_module.package_version("grain") is None:
        codes.pop("grain")
    walls: dict[str, list[float]] = {name: [] for name in codes}
    inside: dict[str, list[list[float]]] = {name: [] for name in codes}
    for _ in range(repeats):
        for name, code in codes.items():
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", code, str(root), run], capture_output=True, text=True, timeout=120)
            walls[name].append(time.perf_counter() - start)
            if done.returncode == 0:
                inside[name].append(json.loads(done.stdout.strip().splitlines()[-1])[:2])
    out: dict[str, Any] = {}
    for name in _FRESH:
        if name not in codes:
            out[name] = peers.unavailable("grain is not installed (pip install -e '.[bench]')")
            continue
        if not inside[name]:
            out[name] = {"status": "failed", "reason": f"{name}'s fresh process failed"}
            continue
        out[name] = {
            "status": "ok",
            "wall_ms": round(statistics.median(walls[name]) * 1e3, 1),
            "imports_ms": round(statistics.median(x[0] for x in inside[name]) * 1e3, 1),
            "open_and_lookup_ms": round(statistics.median(x[1] for x in inside[name]) * 1e3, 3),
        }
    return out


def numpy_permutation(*, n: int, step: int, rank: int, world_size: int, batch: int, seed: int, warm: int) -> dict[str, Any]:
    """In a fresh process: ``numpy.random.permutation(N)`` of the step's epoch, then the rank's slice."""
    import numpy as np

    per_rank = batch // world_size
    epoch, position = divmod(step * batch, n)

    def rows(perm: Any, s: int) -> Any:
        first = (s * batch) % n + rank * per_rank
        return perm[np.arange(first, first + per_rank) % n]

    with harness.RssProbe() as probe:
        start = time.perf_counter()
        perm = np.random.default_rng(seed + epoch).permutation(n)
        indices = rows(perm, step)
        first = time.perf_counter() - start
    timing = harness.time_calls(lambda k: rows(perm, step + k), range(1, warm + 1))
    return {
        "status": "ok",
        "first_lookup_ms": round(first * 1e3, 4),
        "lookup": timing.to_json(),
        **probe.to_json(),
        "indices": [int(i) for i in indices[:4]],
    }


def _warm(run: Any, steps: list[int], ranks: list[int]) -> harness.Timing:
    pairs = list(zip(steps, ranks))
    return harness.time_calls(lambda p: run.addresses(p[0], p[1], world_size=WORLD_SIZE), pairs, warmup=1)


def _with_locate(run: Any, steps: list[int]) -> harness.Timing:
    version = run.version(0)

    def lookup(step: int) -> list[tuple[int, int]]:
        return [version.locate(record) for _, record, _ in run.addresses(step, RANK, world_size=WORLD_SIZE)]

    return harness.time_calls(lookup, steps, warmup=1)


def measure_batchscope(root: Path, run: Any, n: int, *, count: int, rng: random.Random) -> dict[str, Any]:
    """Warm lookups (consecutive steps, random steps, each flat step), Python peak, and the cold lookup in a fresh process."""
    consecutive = _warm(run, [STEP + k for k in range(count)], [k % WORLD_SIZE for k in range(count)])
    random_steps = [rng.randrange(TOTAL_STEPS) for _ in range(count)]
    scattered = _warm(run, random_steps, [rng.randrange(WORLD_SIZE) for _ in range(count)])
    by_step = {str(s): _warm(run, [s + k for k in range(count)], [RANK] * count).to_json() for s in FLAT_STEPS}
    located = _with_locate(run, [STEP + k for k in range(count)])
    _, python_bytes = harness.python_peak(lambda: run.addresses(STEP + count, RANK, world_size=WORLD_SIZE))
    colds = [
        harness.isolated(
            "bench.bench_lookup:batchscope_cold",
            timeout=60,
            root=str(root),
            run=run.name,
            step=STEP,
            rank=RANK,
            world_size=WORLD_SIZE,
        )
        for _ in range(COLD_REPEATS)
    ]
    cold = _median_run(colds)
    return {
        "n": n,
        "lookup": consecutive.to_json(),
        "lookup_random_steps": scattered.to_json(),
        "lookup_with_locate": located.to_json(),
        "by_step": by_step,
        "python_peak_bytes": python_bytes,
        "cold": cold,
    }


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median ``first_lookup_ms`` (all of them listed in ``first_lookup_ms_all``)."""
    done = sorted((r for r in runs if r.get("status") == "ok"), key=lambda r: r["first_lookup_ms"])
    if not done:
        return runs[0]
    return {**done[len(done) // 2], "first_lookup_ms_all": [r["first_lookup_ms"] for r in done]}


def _estimate(previous: dict[str, Any] | None, n: int) -> tuple[float | None, float | None]:
    """Linear extrapolation ``(bytes, seconds)`` from the measurement at the previous (smaller) N."""
    if not previous or previous.get("status") != "ok":
        return None, None
    scale = n / previous["n"]
    rss = previous.get("rss_peak_delta_bytes")
    return (rss * scale if rss is not None else None), previous["first_lookup_ms"] / 1e3 * scale


def measure_o_n(target: str, sizes: tuple[int, ...], *, cap: float, warm: int, repeats: int = 1) -> list[dict[str, Any]]:
    """Measure an isolated lookup at each N in turn; skip (with an extrapolated estimate) what would not fit."""
    out: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for n in sizes:
        rss, seconds = _estimate(previous, n)
        if previous is not None and (rss is not None and rss > harness.MEMORY_BUDGET or seconds and seconds > cap):
            need = f"~{rss / 2**30:.1f} GiB" if rss is not None else "?"
            basis = harness.count_label(previous["n"])
            entry = {
                "n": n,
                "status": "not run",
                "reason": f"would need {need} and ~{seconds:.0f} s (extrapolated linearly from N={basis}); "
                f"budget {harness.MEMORY_BUDGET / 2**30:.0f} GiB, cap {cap:g} s",
                "extrapolated_first_lookup_ms": round(seconds * 1e3, 1) if seconds is not None else None,
                "extrapolated_rss_bytes": int(rss) if rss is not None else None,
            }
        else:
            runs = [
                harness.isolated(
                    target,
                    timeout=cap,
                    n=n,
                    step=STEP,
                    rank=RANK,
                    world_size=WORLD_SIZE,
                    batch=BATCH,
                    seed=SEED,
                    warm=warm,
                )
                for _ in range(repeats)
            ]
            entry = {"n": n, **(_median_run(runs) if repeats > 1 else runs[0])}
            if entry.get("status") == "ok":
                previous = entry
        out.append(entry)
        if entry.get("status") == "unavailable":
            out.extend({"n": m, **{k: v for k, v in entry.items() if k != "n"}} for m in sizes[len(out) :])
            break
    return out


# -- the benchmark ----------------------------------------------------------------------------------------------
def _ratios(mine: dict[int, dict[str, Any]], others: dict[str, list[dict[str, Any]]]) -> dict[str, float | None]:
    ratios: dict[str, float | None] = {}
    for name, entries in others.items():
        for entry in entries:
            n = entry["n"]
            if entry.get("status") != "ok" or n not in mine:
                continue
            label = f"{name}@{harness.count_label(n)}"
            ratios[f"cold {label} / batchscope"] = harness.ratio(entry["first_lookup_ms"], mine[n]["cold"].get("first_lookup_ms"))
            if "lookup" in entry:
                ratios[f"warm {label} / batchscope"] = harness.ratio(entry["lookup"]["median_ms"], mine[n]["lookup"]["median_ms"])
    small, large = min(mine), max(mine)
    medians = [m["lookup"]["median_ms"] for m in mine.values()]
    ratios[f"flatness N {harness.count_label(large)}/{harness.count_label(small)}"] = harness.ratio(
        mine[large]["lookup"]["median_ms"], mine[small]["lookup"]["median_ms"]
    )
    ratios["spread over N (slowest/fastest)"] = harness.ratio(max(medians), min(medians))
    steps = mine[large]["by_step"]
    ratios[f"flatness step 1e6/0 (N={harness.count_label(large)})"] = harness.ratio(steps[str(10**6)]["median_ms"], steps["0"]["median_ms"])
    ratios[f"flatness step 1e9/0 (N={harness.count_label(large)})"] = harness.ratio(steps[str(10**9)]["median_ms"], steps["0"]["median_ms"])
    return ratios


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Measure lookups at every size; quick mode measures the O(N) approaches at N=1e6 only."""
    workdir = Path(workdir)
    count = 40 if quick else 300
    cap = 20.0 if quick else 90.0
    o_n_sizes = SIZES[:1] if quick else SIZES
    root = workdir / "lookup" / "catalog"
    runs = build_runs(root, SIZES)
    rng = random.Random(SEED)
    mine = {n: measure_batchscope(root, runs[n], n, count=count, rng=rng) for n in SIZES}
    baseline = measure_o_n("bench.bench_lookup:numpy_permutation", o_n_sizes, cap=cap, warm=count)
    others: dict[str, list[dict[str, Any]]] = {"numpy.permutation": baseline}
    for peer, target in peers.LOOKUPS.items():
        if peer == "grain":  # O(1) in N like batchscope: measured up to 1e9, as often as batchscope's cold lookup
            others[peer] = measure_o_n(target, (SIZES[0], SIZES[-1]) if quick else SIZES, cap=cap, warm=count, repeats=COLD_REPEATS)
        else:
            others[peer] = measure_o_n(target, o_n_sizes, cap=cap, warm=count)
    results = [{"system": "batchscope", **mine[n]} for n in SIZES]
    results += [{"system": name, **entry} for name, entries in others.items() if name != "numpy.permutation" for entry in entries]
    ratios = _ratios(mine, others)
    worst = max(max(m["lookup"]["median_ms"], m["lookup_random_steps"]["median_ms"]) for m in mine.values())
    flat_n = next(v for k, v in ratios.items() if k.startswith("flatness N"))
    flat_step = next(v for k, v in ratios.items() if k.startswith("flatness step 1e6"))
    fresh = fresh_processes(root, runs[SIZES[-1]].name, repeats=COLD_REPEATS)
    results.append({"system": "fresh process: interpreter start, imports, open, one lookup (N=1e9)", **fresh})
    grain_cold = [harness.ratio(e.get("first_lookup_ms"), mine[e["n"]]["cold"].get("first_lookup_ms")) for e in others.get("grain", [])]
    grain_cold = [r for r in grain_cold if r is not None]
    worst_cold = min(grain_cold) if grain_cold else None
    fresh_ratio = harness.ratio(fresh.get("grain", {}).get("wall_ms"), fresh.get("batchscope", {}).get("wall_ms"))
    ratios["fresh process grain / batchscope (imports included)"] = fresh_ratio
    goals = {
        "cold_vs_grain": harness.goal(
            f">= {COLD_GOAL} (Grain's cold lookup / batchscope's, after imports, worst N; medians of {COLD_REPEATS} fresh processes)",
            worst_cold,
            None if worst_cold is None else worst_cold >= COLD_GOAL,
        ),
        "fresh_process_vs_grain": harness.goal(
            f">= {COLD_GOAL} (Grain's fresh process / batchscope's, interpreter start to the answer)",
            fresh_ratio,
            None if fresh_ratio is None else fresh_ratio >= COLD_GOAL,
        ),
        "lookup_ms": harness.goal(f"<= {GOAL_MS:g} ms per lookup (median, worst N, consecutive or random steps)", worst, worst <= GOAL_MS),
        "flat_in_n": harness.goal(
            f"<= {FLAT_TOLERANCE} (time at 1e9 / time at 1e6)", flat_n, flat_n is not None and flat_n <= FLAT_TOLERANCE
        ),
        "flat_in_step": harness.goal(
            f"<= {FLAT_TOLERANCE} (time at step 1e6 / step 0)",
            flat_step,
            flat_step is not None and flat_step <= FLAT_TOLERANCE,
        ),
    }
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "numpy.random.permutation(N)",
            "what": "O(N) shuffle of the step's epoch, then the rank's slice",
            "results": baseline,
        },
        results=results,
        ratios=ratios,
        goals=goals,
        notes=[
            f"one lookup = the {BATCH // WORLD_SIZE} records of rank {RANK} (world size {WORLD_SIZE}, "
            f"global batch {BATCH}) at step {harness.count_label(STEP)}",
            "warm: median of per-call times after the first call; cold: a fresh process opens the catalog/run "
            "(or builds the peer's shuffle) and answers one lookup; peers are measured on index arithmetic only, "
            "like batchscope",
            "ratios > 1 mean batchscope is faster; 'not run' entries carry linear extrapolations, labelled as such",
            "cold batchscope = open the run manifest (read run.json, build the mixture table) + first lookup; "
            "open_run_ms and lookup_after_open_ms split it",
            "the per-N spread of batchscope's lookup follows the Feistel cycle-walking factor "
            "(2**bits / n with an even bit count, between 1 and 4 depending on N), not a trend in N",
            "peak memory: tracemalloc for batchscope's Python allocations, peak RSS growth in a fresh process for everything",
            f"cold figures of batchscope and Grain are medians of {COLD_REPEATS} fresh processes each (first_lookup_ms_all)",
            "fresh process: wall time from starting the interpreter to the answer, imports included, alternating the two systems",
        ],
    )

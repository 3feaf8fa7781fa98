"""Benchmark of the RL views: a step/rank page of 64 rollouts of 2,048 tokens, and zero-variance groups of 1 million rollouts.

Every figure is a ratio against a baseline measured in the same run:

- **step/rank page**: the server time of the first HTML of a step/rank page
  (and of the batch's rollout-group view alone) whose token views load lazily,
  against serializing the same 64 rollouts' raw records as JSON;
- **zero-variance groups**: the first page of ``?zero_variance=1`` of a
  1-million-rollout version (cold: a fresh process, the group index on disk;
  warm: the same process again; first use: building the index), against a
  pyarrow full scan of the same columns.

    python -m bench --only rl            # python -m bench --quick --only rl for 200k rollouts, 512 tokens
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench import harness

NAME = "rl"
FORMAT = 3
GROUP = 8
ROW_GROUP = 8192
ZERO_SHARE = 0.25
#: Steps of the step/rank benchmark run (64 rollouts each); the first warms the server, the others are measured.
STEPS = 6
PAGE_GOAL_MS = 200.0
GROUPS_GOAL_MS = 500.0
COLUMNS = ["group_id", "prompt", "reward", "advantage", "completion_ids", "logprobs", "ref_logprobs", "finish_reason"]


# -- data ----------------------------------------------------------------------------------------
def _lists(lengths: np.ndarray, values: np.ndarray, type_: pa.DataType) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, type_))


def rollouts_table(start: int, rows: int, *, tokens: tuple[int, int], seed: int) -> pa.Table:
    """``rows`` rollouts in groups of ``GROUP`` (a quarter of the groups with equal rewards), vectorized."""
    rng = np.random.default_rng(seed)
    index = np.arange(start, start + rows)
    group = index // GROUP
    flat = rng.random(rows // GROUP + 1) < ZERO_SHARE
    rewards = rng.integers(0, 2, rows).astype(np.float64)
    local = np.arange(rows) // GROUP  # groups start at multiples of GROUP within the table
    rewards = np.where(flat[local], rewards[local * GROUP], rewards)
    means = np.repeat(rewards.reshape(-1, GROUP).mean(axis=1), GROUP)
    stds = np.repeat(rewards.reshape(-1, GROUP).std(axis=1), GROUP)
    lengths = rng.integers(tokens[0], tokens[1] + 1, rows)
    total = int(lengths.sum())
    logprobs = -rng.exponential(1.0, total).astype(np.float32)
    finish = np.where(lengths >= tokens[1] - max(1, (tokens[1] - tokens[0]) // 10), "length", "stop")
    struct = pa.StructArray.from_arrays(
        [
            pa.array([f"What is {g} + {g}?" for g in group]),
            pa.array([f"The answer is {g * 2}." for g in group]),
            _lists(np.full(rows, 8), np.tile(np.arange(8, dtype=np.int32), rows), pa.int32()),
            _lists(lengths, rng.integers(0, 50_000, total).astype(np.int32), pa.int32()),
            _lists(lengths, logprobs, pa.float32()),
            _lists(lengths, logprobs - np.float32(0.01), pa.float32()),
            pa.array(rewards),
            pa.array((rewards - means) / (stds + 1e-6)),
            pa.array([f"g{g}" for g in group]),
            pa.array(finish),
        ],
        names=[
            "prompt",
            "completion",
            "prompt_ids",
            "completion_ids",
            "logprobs",
            "ref_logprobs",
            "reward",
            "advantage",
            "group_id",
            "finish_reason",
        ],
    )
    return pa.table({"id": pa.array([f"r{i}" for i in index]), "step": pa.array(group // 64, pa.int32()), "rollout": struct})


def _build_groups(workdir: Path, *, rows: int, shards: int) -> tuple[str, list[str]]:
    root = workdir / f"rl-groups-{rows}"
    marker = root / "built.json"
    spec = {"format": FORMAT, "rows": rows, "shards": shards, "row_group": ROW_GROUP}
    paths = [str(root / "data" / f"part-{s:05d}.parquet") for s in range(shards)]
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return str(root / "catalog"), paths
    from loaders import Catalog

    shutil.rmtree(root, ignore_errors=True)
    (root / "data").mkdir(parents=True)
    per = rows // shards
    for s, path in enumerate(paths):
        pq.write_table(rollouts_table(s * per, per, tokens=(4, 24), seed=s), path, row_group_size=ROW_GROUP, compression="zstd")
    Catalog(str(root / "catalog")).register("rollouts-1m", paths, key="id", tag="v1")
    marker.write_text(json.dumps(spec))
    return str(root / "catalog"), paths


def _build_batch(workdir: Path, *, tokens: int) -> str:
    root = workdir / f"rl-batch-{tokens}"
    marker = root / "built.json"
    spec = {"format": FORMAT, "tokens": tokens}
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return str(root / "catalog")
    from loaders import Catalog
    from loaders.sampling.plan import ReadPlan, Shuffle, Source

    shutil.rmtree(root, ignore_errors=True)
    (root / "data").mkdir(parents=True)
    path = str(root / "data" / "part-00000.parquet")
    pq.write_table(rollouts_table(0, 64 * STEPS, tokens=(tokens, tokens), seed=1), path, row_group_size=64)
    catalog = Catalog(str(root / "catalog"))
    catalog.register("rollouts-2k", [path], key="id", tag="v1")
    catalog.create_run(
        "rl-bench", ReadPlan([Source("rollouts-2k@v1")], seed=0, global_batch_size=64, steps=STEPS, shuffle=Shuffle(enabled=False))
    )
    marker.write_text(json.dumps(spec))
    return str(root / "catalog")


# -- measurements (each in a fresh process) ------------------------------------------------------------
def _client(root: str) -> Any:
    from fastapi.testclient import TestClient

    from app.factory import create_app
    from app.settings import Settings

    return TestClient(create_app(Settings(root=root, flags_path=str(Path(root) / "bench-flags.sqlite"))))


def _get_ms(client: Any, url: str) -> float:
    start = time.perf_counter()
    answer = client.get(url)
    elapsed = (time.perf_counter() - start) * 1e3
    if answer.status_code != 200:
        raise RuntimeError(f"{url} answered {answer.status_code}: {answer.text[:300]}")
    return elapsed


def measure_groups(root: str, *, rebuild: bool) -> dict[str, Any]:
    """In a fresh process with the server up: the first zero-variance page (the index built first when ``rebuild``,
    else read from disk), the same with the index read from disk again, then warm pages."""
    from app import urls
    from loaders import Catalog
    from loaders.rl.store import MEMO, index_path

    catalog = Catalog(root)
    version = catalog.resolve("rollouts-1m@v1")
    files = [Path(index_path(catalog.root, version, "rollouts", "rollout", part)) for part in ("rows.arrow", "groups.arrow")]
    if rebuild:
        for path in files:
            path.unlink(missing_ok=True)
    client = _client(root)
    _get_ms(client, urls.home())  # the server is up: app built, home page served
    url = urls.rollout_groups("rollouts-1m", version.id, zero_variance="1")
    first = _get_ms(client, url)
    html = client.get(url).text
    MEMO.clear()
    from_disk = _get_ms(client, url)
    warm = harness.time_repeated(lambda: client.get(url), repeat=7)
    sorted_url = urls.rollout_groups("rollouts-1m", version.id, zero_variance="1", sort="-length")
    return {
        "first_page_ms": round(first, 1),
        "first_page_index_from_disk_templates_warm_ms": round(from_disk, 1),
        "warm_page": warm.to_json(),
        "sorted_by_length_first_ms": round(_get_ms(client, sorted_url), 1),
        "page_at_20000_ms": round(_get_ms(client, urls.rollout_groups("rollouts-1m", version.id, zero_variance="1", start=20_000)), 1),
        "groups_on_page": html.count('class="rl-group zero-variance"'),
        "index_bytes": sum(path.stat().st_size for path in files),
    }


def measure_scan(paths: list[str]) -> dict[str, Any]:
    """The baseline: a pyarrow full scan of the columns the group index reads (threads on)."""
    columns = [f"rollout.{c}" for c in COLUMNS] + ["step"]
    timing = harness.time_repeated(lambda: pq.read_table(paths, columns=columns), repeat=3, warmup=1)
    return {"scan": timing.to_json()}


def measure_batch(root: str) -> dict[str, Any]:
    """Step/rank pages of 64 rollouts: the first HTML in a fresh process (step 0), the first HTML of each other step
    (server up, batch not cached), repeats, the batch view alone, and the raw-JSON baseline."""
    from app import urls
    from app.jsonable import jsonable
    from app.pages.rollouts import rollout_batch_view
    from app.templating import Templates
    from loaders import Catalog

    catalog = Catalog(root)
    run = catalog.run("rl-bench")
    client = _client(root)
    cold = _get_ms(client, urls.rank("rl-bench", 0, 0))
    first = harness.Timing(tuple(_get_ms(client, urls.rank("rl-bench", step, 0)) / 1e3 for step in range(1, STEPS)))
    rank = harness.time_repeated(lambda: client.get(urls.rank("rl-bench", 1, 0)), repeat=5)
    groups = harness.time_repeated(lambda: client.get(urls.rank_rollouts("rl-bench", 1, 0)), repeat=5)
    batch = run.batch(1, 0)
    templates = Templates()

    def view_html() -> str:
        view = rollout_batch_view(batch, run)
        return templates.render(view.partial, {"view": view})

    view = harness.time_repeated(view_html, repeat=7, warmup=1)
    records = [s.record for s in batch.samples]
    raw = harness.time_repeated(lambda: json.dumps(jsonable(records)), repeat=7, warmup=1)
    html = client.get(urls.rank("rl-bench", 1, 0)).text
    return {
        "rollouts": len(records),
        "tokens_per_rollout": len(records[0]["rollout"]["completion_ids"]),
        "rank_page_fresh_process_ms": round(cold, 1),
        "rank_page_first_view": first.to_json(),
        "rank_page_repeat": rank.to_json(),
        "rank_rollouts_page_repeat": groups.to_json(),
        "batch_view_html": view.to_json(),
        "raw_json": raw.to_json(),
        "rank_page_kb": round(len(html) / 1024, 1),
        "lazy_token_views": html.count('class="rl-lazy"') + html.count('class="tokens deferred"'),
    }


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Build (once) and measure; returns the result document."""
    rows, shards, tokens = (200_000, 4, 512) if quick else (1_000_000, 10, 2048)
    workdir = Path(workdir)
    groups_root, paths = _build_groups(workdir, rows=rows, shards=shards)
    batch_root = _build_batch(workdir, tokens=tokens)
    cap = 900.0
    built = harness.isolated("bench.bench_rl:measure_groups", timeout=cap, root=groups_root, rebuild=True)
    cold = harness.isolated("bench.bench_rl:measure_groups", timeout=cap, root=groups_root, rebuild=False)
    scan = harness.isolated("bench.bench_rl:measure_scan", timeout=cap, paths=paths)
    batch = harness.isolated("bench.bench_rl:measure_batch", timeout=cap, root=batch_root)
    scan_ms = scan.get("scan", {}).get("median_ms")
    raw_ms = batch.get("raw_json", {}).get("median_ms")
    cold_ms = cold.get("first_page_ms")
    rank_ms = batch.get("rank_page_first_view", {}).get("median_ms")
    view_ms = batch.get("batch_view_html", {}).get("median_ms")
    ratios = {
        "zero-variance first page, cold process / full scan": harness.ratio(cold_ms, scan_ms),
        "zero-variance page, warm / full scan": harness.ratio(cold.get("warm_page", {}).get("median_ms"), scan_ms),
        "first use (index build + first page) / full scan": harness.ratio(built.get("first_page_ms"), scan_ms),
        "step/rank page first HTML / raw JSON of the rollouts": harness.ratio(rank_ms, raw_ms),
        "batch group view HTML / raw JSON of the rollouts": harness.ratio(view_ms, raw_ms),
    }
    goals = {
        "rank_page_first_html_ms": harness.goal(
            f"<= {PAGE_GOAL_MS:g} ms (first view of a step/rank page, server up; median of {STEPS - 1} steps)",
            rank_ms,
            rank_ms is not None and rank_ms <= PAGE_GOAL_MS,
        ),
        "zero_variance_first_page_ms": harness.goal(
            f"<= {GROUPS_GOAL_MS:g} ms (index on disk, fresh process)", cold_ms, cold_ms is not None and cold_ms <= GROUPS_GOAL_MS
        ),
    }
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "groups": {"system": "pyarrow.parquet.read_table of the same rollout sub-columns (threads on)", **scan},
            "batch": {"system": "json.dumps of the 64 rollouts' raw records (jsonable)", "raw_json": batch.get("raw_json")},
        },
        results=[
            {"what": f"zero-variance groups of {rows:,} rollouts, index built in this process", **built},
            {"what": f"zero-variance groups of {rows:,} rollouts, index on disk, fresh process", **cold},
            {"what": f"step/rank page of 64 rollouts x {tokens:,} tokens", **batch},
        ],
        ratios=ratios,
        goals=goals,
        notes=[
            f"{rows:,} rollouts in groups of {GROUP}, {ZERO_SHARE:.0%} of the groups with equal rewards, {shards} shards, row groups of {ROW_GROUP:,}",
            "first page = TestClient GET of the HTML page (server time: page data, template, response), 20 groups a page; "
            "'server up' = the app built and another page served first in the same process",
            "the group index (one row per rollout: group, reward, advantage, length, finish, problems) is built once per version "
            "from the verified row groups' rollout sub-columns and kept under {catalog}/indexes/",
            "token views of the step/rank page load lazily (htmx, when revealed); their first HTML holds none",
        ],
    )

"""Recording benchmark: what ``batchscope.record`` costs a loader, and how fast a live page shows a new step.

- keys: one real loader (a PyTorch ``DataLoader`` in the main process over rows of a registered version, tokenized
  and collated to tensors) iterated to the end, alone and wrapped in ``batchscope.record(..., source=, keys=)``,
  interleaved (ABAB...) in the same run; the figure is the median time with recording over the median without.
- samples: the same loader recorded without a source, so every sample is kept for itself; the extra time per MB
  kept (and the MB kept).
- live: 8 rank processes recording one run at 10 steps/s each, logging the loss of every step, a real
  ``batchscope serve``, and a client doing what ``static/live.js`` does (poll ``/api/runs/{run}/live`` every
  ``POLL_MS``, fetch the page's live fragment when the version moves); per step, the time from the last rank's
  ``rec.log`` to the first fragment showing that step. The goal is a median within 2 s.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from . import harness

NAME = "record"
ROWS = 8192
BATCH = 32
LIVE_RANKS = 8
STEPS_PER_SECOND = 10
GOAL_OVERHEAD = 0.02
GOAL_LIVE_S = 2.0


def build(root: Path) -> Any:
    """A catalog with ``web@v1`` (ROWS rows of text, key ``id``) and a word tokenizer."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from loaders import Catalog

    shutil.rmtree(root, ignore_errors=True)
    (root / "data").mkdir(parents=True)
    words = [f"w{i}" for i in range(500)]
    text = [" ".join(words[(i * 7 + j) % 500] for j in range(64 + i % 64)) for i in range(ROWS)]
    pq.write_table(pa.table({"id": [f"doc-{i}" for i in range(ROWS)], "text": text}), root / "data" / "web.parquet", row_group_size=256)
    catalog = Catalog(root / "catalog")
    catalog.register("web", [str(root / "data" / "web.parquet")], key="id", tag="v1")
    return catalog


def make_loader(catalog_root: str) -> Any:
    """The loader measured: rows by index, tokenized, collated to tensors (what a small pretraining loader does)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from torch.utils.data import DataLoader, Dataset

    from loaders import Catalog

    vocab = {f"w{i}": i for i in range(500)} | {"[UNK]": 500}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    version = Catalog(catalog_root).resolve("web@v1")

    class Rows(Dataset):
        def __len__(self) -> int:
            return version.rows

        def __getitem__(self, index: int) -> dict[str, Any]:
            record = version.record(index)
            ids = tokenizer.encode(record["text"]).ids[:128]
            return {"id": record["id"], "input_ids": torch.tensor(ids + [0] * (128 - len(ids)))}

    generator = torch.Generator().manual_seed(0)
    return DataLoader(Rows(), batch_size=BATCH, shuffle=True, generator=generator, num_workers=0, drop_last=True)


def _time(catalog_root: str, *, run: str | None, source: bool) -> tuple[tuple[float, float], float, dict[str, Any] | None]:
    """(CPU seconds of this process — every thread, the recorder's included —, wall seconds) to iterate the loader to
    its end with every record written, the seconds ``record(...)`` took to start (resolving the source, loading its
    key index), and the recorder's report."""
    import batchscope
    from loaders.record import column

    loader = make_loader(catalog_root)
    report, setup = None, 0.0
    iterable: Any = loader
    if run is not None:
        options = {"source": "web@v1", "keys": column("id")} if source else {}
        began = time.perf_counter()
        iterable = rec = batchscope.record(loader, run=run, root=catalog_root, **options)
        setup = time.perf_counter() - began
    start, cpu = time.perf_counter(), time.process_time()
    for _ in iterable:
        pass
    if run is not None:
        rec.close()
        report = rec.report
    return (time.process_time() - cpu, time.perf_counter() - start), setup, report


def overhead(catalog_root: str, *, repeats: int) -> dict[str, Any]:
    """Keys and kept samples against the bare loader, interleaved so load drifts hit all three alike.

    The figures are CPU time of the process (every thread's, the recorder's watchdog included): on a machine shared by
    other work, wall time mostly measures the neighbours; the wall-clock ratio is reported beside it."""
    bare, keys, kept, kept_mb, setups = [], [], [], [], []
    for i in range(repeats):
        bare.append(_time(catalog_root, run=None, source=False)[0])
        seconds, setup, _ = _time(catalog_root, run=f"keys-{i}", source=True)
        keys.append(seconds)
        setups.append(setup)
        seconds, _, report = _time(catalog_root, run=f"kept-{i}", source=False)
        kept.append(seconds)
        assert report is not None
        kept_mb.append(report["kept_bytes"] / 1e6)
    b, k, s = (statistics.median(t[0] for t in runs) for runs in (bare, keys, kept))
    wall = statistics.median(t[1] for t in keys) / statistics.median(t[1] for t in bare) - 1
    mb = statistics.median(kept_mb)
    return {
        "loader_cpu_s": round(b, 4),
        "with_keys_cpu_s": round(k, 4),
        "with_samples_cpu_s": round(s, 4),
        "keys_overhead": round(k / b - 1, 4),
        "keys_overhead_wall": round(wall, 4),
        "keys_setup_s": round(statistics.median(setups), 4),
        "samples_mb": round(mb, 2),
        "samples_cpu_ms_per_mb": round((s - b) * 1e3 / mb, 2) if mb else None,
        "batches": ROWS // BATCH,
        "repeats": repeats,
    }


RANK_SCRIPT = """
import json, sys, time
import batchscope
from loaders.record import column
root, rank, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
period = 1.0 / {rate}
def batches():
    start = time.time()
    for step in range(steps):
        time.sleep(max(0.0, start + step * period - time.time()))
        yield [{{"id": f"doc-{{(step * {ranks} + rank) % {rows}}}"}}]
rec = batchscope.record(batches(), run="live", root=root, rank=rank, world_size={ranks}, source="web@v1", keys=lambda b: [s["id"] for s in b])
logged = {{}}
for step, _ in enumerate(rec):
    rec.log(step, loss=1.0 + 0.01 * (step % 17))
    logged[step] = time.time()
json.dump(logged, open(out, "w"))
"""


def live(catalog_root: str, workdir: Path, *, seconds: float) -> dict[str, Any]:
    """Median seconds from a step's first ``rec.log`` to a live page drawing its loss point (8 ranks at 10 steps/s)."""
    from app.pages.progress import POLL_MS

    from .load import serving

    steps = int(seconds * STEPS_PER_SECOND)
    script = RANK_SCRIPT.format(rate=STEPS_PER_SECOND, ranks=LIVE_RANKS, rows=ROWS)
    seen: dict[int, float] = {}
    env = {**os.environ, "PYTHONPATH": str(harness.REPO)}
    with serving(catalog_root, workdir / "live-logs") as served:
        base = served.base_url
        outs = [workdir / f"logged-{r}.json" for r in range(LIVE_RANKS)]
        ranks = [
            subprocess.Popen([sys.executable, "-c", script, catalog_root, str(r), str(steps), str(o)], env=env) for r, o in enumerate(outs)
        ]
        version = None
        deadline = time.monotonic() + seconds + 120
        while any(p.poll() is None for p in ranks) and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{base}/api/runs/live/live", timeout=5) as answer:
                    now = json.load(answer)
                if now["version"] != version:
                    version = now["version"]
                    request = urllib.request.Request(f"{base}/runs/live", headers={"HX-Request": "true"})
                    with urllib.request.urlopen(request, timeout=10) as answer:
                        fragment = answer.read().decode()
                    marker = fragment.split('data-last-loss-step="', 1)
                    if len(marker) == 2 and marker[1].split('"', 1)[0].isdigit():
                        shown = int(marker[1].split('"', 1)[0])
                        at = time.time()
                        for step in range(shown + 1):
                            seen.setdefault(step, at)
            except OSError:
                pass
            time.sleep(POLL_MS / 1000)
        for p in ranks:
            p.wait(timeout=120)
    logged: dict[int, float] = {}
    for out in outs:
        for step, at in json.loads(out.read_text()).items():
            logged[int(step)] = min(logged.get(int(step), at), at)  # the step is logged once a rank logged its loss
    first = min(seen) if seen else 0
    latencies = [seen[s] - logged[s] for s in sorted(logged) if s in seen and s > first]  # steps logged after the page opened
    return {
        "ranks": LIVE_RANKS,
        "steps_per_second": STEPS_PER_SECOND,
        "steps": steps,
        "steps_seen": len(latencies),
        "median_s": round(statistics.median(latencies), 3) if latencies else None,
        "p95_s": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 3) if latencies else None,
        "poll_ms": POLL_MS,
    }


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    root = Path(workdir) / "record"
    catalog = build(root)
    costs = overhead(catalog.root, repeats=3 if quick else 7)
    follow = live(catalog.root, root, seconds=8 if quick else 30)
    return harness.document(
        NAME,
        quick=quick,
        baseline={"system": "the same DataLoader without batchscope.record", "cpu_seconds": costs["loader_cpu_s"]},
        results=[{"measure": "loader overhead", **costs}, {"measure": "live page latency", **follow}],
        ratios={
            "with keys / without (CPU)": harness.ratio(costs["with_keys_cpu_s"], costs["loader_cpu_s"], 4),
            "with samples kept / without (CPU)": harness.ratio(costs["with_samples_cpu_s"], costs["loader_cpu_s"], 4),
        },
        goals={
            "keys_overhead": harness.goal(
                f"<= {GOAL_OVERHEAD:.0%} of the loader's own time", costs["keys_overhead"], costs["keys_overhead"] <= GOAL_OVERHEAD
            ),
            "live_median_s": harness.goal(
                f"<= {GOAL_LIVE_S:g} s (median) from a step's loss being logged to the page drawing it",
                follow["median_s"],
                follow["median_s"] is not None and follow["median_s"] <= GOAL_LIVE_S,
            ),
        },
        notes=[
            f"loader: DataLoader(batch {BATCH}, shuffled, main process) over {ROWS} rows of one Parquet file, each row read "
            "by index, tokenized (word level) and padded to 128 ids",
            "keys: record(source='web@v1', keys=column('id')), flushed every 0.5 s by its thread; samples: record() "
            "without a source, every sample (id and 128 token ids) kept in <run>.samples",
            f"live: {LIVE_RANKS} rank processes at {STEPS_PER_SECOND} steps/s each, one batchscope serve process, a client "
            "polling like static/live.js; latency counts steps logged after the page first showed the run",
        ],
    )

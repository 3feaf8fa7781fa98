"""Streaming replay benchmark: what rank r read at step s of a run on MosaicML Streaming, by the replay and by
Streaming's own ways to reach step s (iterating its DataLoader, or resuming from a state dict), at s = 1e5.

The data is a real MDS stream of N samples (text and tokens) written by Streaming's ``MDSWriter``; the run is one
rank, per-device batch 8, ``shuffle=True`` (py1e), one epoch, so step 1e5 lies in it. Every system produces the same
output: the decoded samples of the batch at step s (the replay's are checked equal to what Streaming's resumed
loader yields).

- replay lookup: ``StreamingReplay.batch(step, 0)`` once the epoch's order exists (memory-mapped), at step 0, at the
  last step, and at random steps: the target is <= 1 ms, flat in the step;
- replay, cold: a fresh process opens the run (reads the index, computes the epoch's order with Streaming's own
  ``generate_work``, writes it to the cache) and decodes the batch at step s; warm: another process reuses the cached
  order (checked against its digest) and does the same;
- Streaming resume: a fresh ``StreamingDataset`` + ``DataLoader``, ``load_state_dict`` at step s, and its first batch;
- Streaming iterate: its DataLoader's first batch and then K steps, timed, extrapolated linearly to s (labelled).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

from . import harness

NAME = "replay_streaming"
BATCH = 8
SEED = 1234
STEP = 10**5
QUICK_STEP = 10**4
GOAL_MS = 1.0
FLAT_TOLERANCE = 2.0


def write_data(folder: Path, samples: int) -> str:
    """One MDS stream of ``samples`` (text, 16 tokens) at ``folder``, written once and reused when complete."""
    index = folder / "index.json"
    if index.exists() and sum(s["samples"] for s in json.loads(index.read_text())["shards"]) == samples:
        return str(folder)
    import shutil

    import numpy as np

    from loaders.replay.streaming.library import import_streaming

    import_streaming()
    from streaming.base.format.mds.writer import MDSWriter

    shutil.rmtree(folder, ignore_errors=True)
    with MDSWriter(out=str(folder), columns={"text": "str", "tokens": "ndarray:int32"}, size_limit=1 << 24) as writer:
        for number in range(samples):
            writer.write({"text": f"sample {number}", "tokens": np.arange(number % 1000, number % 1000 + 16, dtype=np.int32)})
    return str(folder)


def _settings(local: str) -> Any:
    from loaders.replay.streaming import Launch, StreamingSettings, StreamSpec

    return StreamingSettings(
        streams=(StreamSpec(local),), launches=(Launch(batch_size=BATCH),), epochs=1, shuffle=True, shuffle_seed=SEED, num_canonical_nodes=1
    )


def _texts(samples: list[dict[str, Any]]) -> list[str]:
    return [s["text"] for s in samples]


def replay_reach(*, local: str, step: int, cache_dir: str) -> dict[str, Any]:
    """In a fresh process: open the replay (cached order or not) and decode the batch at ``step``."""
    from loaders.replay.streaming import StreamingReplay
    from loaders.replay.streaming.library import streaming

    streaming()  # imports are not timed (as for Streaming's own measurements)
    settings = _settings(local)
    with harness.RssProbe() as probe:
        start = time.perf_counter()
        replay = StreamingReplay(settings, cache_dir=cache_dir)
        opened = time.perf_counter() - start
        texts = _texts([replay.decoded(s) for s in replay.batch(step, 0)])
        elapsed = time.perf_counter() - start
    return {"seconds": round(elapsed, 4), "open_s": round(opened, 4), "texts": texts, **probe.to_json()}


def streaming_resume(*, local: str, step: int) -> dict[str, Any]:
    """In a fresh process: Streaming's own resumption at ``step`` (a state dict's sample_in_epoch) to its first batch."""
    from loaders.replay.streaming.library import import_streaming

    import_streaming()
    import torch
    from streaming.base.dataset import StreamingDataset

    with harness.RssProbe() as probe:
        start = time.perf_counter()
        dataset = StreamingDataset(local=local, batch_size=BATCH, shuffle=True, shuffle_seed=SEED, num_canonical_nodes=1)
        state = {"epoch": 0, "sample_in_epoch": step * BATCH, "num_canonical_nodes": 1, "shuffle_seed": SEED, "initial_physical_nodes": 1}
        dataset.load_state_dict(state)
        loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=0, collate_fn=list)
        texts = _texts(next(iter(loader)))
        elapsed = time.perf_counter() - start
    return {"seconds": round(elapsed, 4), "texts": texts, **probe.to_json()}


def streaming_iterate(*, local: str, steps: int) -> dict[str, Any]:
    """In a fresh process: Streaming's DataLoader from the start, its first batch, then ``steps`` more, timed."""
    from loaders.replay.streaming.library import import_streaming

    import_streaming()
    import torch
    from streaming.base.dataset import StreamingDataset

    start = time.perf_counter()
    dataset = StreamingDataset(local=local, batch_size=BATCH, shuffle=True, shuffle_seed=SEED, num_canonical_nodes=1)
    batches = iter(torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=0, collate_fn=list))
    next(batches)
    first = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps):
        next(batches)
    return {"first_batch_s": round(first, 4), "per_step_ms": round((time.perf_counter() - start) / steps * 1e3, 4), "steps_timed": steps}


def lookups(local: str, cache_dir: str, *, count: int) -> dict[str, Any]:
    """Lookup medians of the replay once its order exists: step 0, the last step, random steps; and with decoding."""
    from loaders.replay.streaming import StreamingReplay

    replay = StreamingReplay(_settings(local), cache_dir=cache_dir)
    last = replay.total_steps - 1
    rng = random.Random(SEED)
    steps = [rng.randrange(replay.total_steps) for _ in range(count)]
    return {
        "total_steps": replay.total_steps,
        "step_0": harness.time_repeated(lambda: replay.batch(0, 0), repeat=count, warmup=3).to_json(),
        "last_step": harness.time_repeated(lambda: replay.batch(last, 0), repeat=count, warmup=3).to_json(),
        "random_steps": harness.time_calls(lambda s: replay.batch(s, 0), steps, warmup=3).to_json(),
        "random_steps_decoded": harness.time_calls(lambda s: [replay.decoded(x) for x in replay.batch(s, 0)], steps, warmup=3).to_json(),
    }


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Measure the replay and Streaming's own ways to reach step s (see the module docstring)."""
    step = QUICK_STEP if quick else STEP
    samples = (step + step // 4) * BATCH
    root = Path(workdir) / "replay_streaming"
    local = write_data(root / f"stream-{harness.count_label(samples)}", samples)
    cache = root / "cache"
    import shutil

    shutil.rmtree(cache, ignore_errors=True)
    timeout = 600.0
    cold = harness.isolated("bench.bench_replay_streaming:replay_reach", timeout=timeout, local=local, step=step, cache_dir=str(cache))
    warm = harness.isolated("bench.bench_replay_streaming:replay_reach", timeout=timeout, local=local, step=step, cache_dir=str(cache))
    resumed = harness.isolated("bench.bench_replay_streaming:streaming_resume", timeout=timeout, local=local, step=step)
    iterate_steps = 300 if quick else 2000
    iterated = harness.isolated("bench.bench_replay_streaming:streaming_iterate", timeout=timeout, local=local, steps=iterate_steps)
    looked = lookups(local, str(cache), count=50 if quick else 300)
    same = cold.get("texts") is not None and cold.get("texts") == resumed.get("texts") == warm.get("texts")
    iterate_s = None
    if iterated.get("status") == "ok":
        iterate_s = round(iterated["first_batch_s"] + step * iterated["per_step_ms"] / 1e3, 2)
    for entry in (cold, warm, resumed):
        entry.pop("texts", None)
    worst = max(looked["step_0"]["median_ms"], looked["last_step"]["median_ms"], looked["random_steps"]["median_ms"])
    flat = harness.ratio(looked["last_step"]["median_ms"], looked["step_0"]["median_ms"])
    label = harness.count_label(step)
    ratios = {
        f"Streaming resume at step {label} / replay cold": harness.ratio(resumed.get("seconds"), cold.get("seconds")),
        f"Streaming resume at step {label} / replay warm (cached order)": harness.ratio(resumed.get("seconds"), warm.get("seconds")),
        f"Streaming iterate to step {label} (extrapolated) / replay cold": harness.ratio(iterate_s, cold.get("seconds")),
        f"Streaming resume at step {label} / replay lookup (order exists)": harness.ratio(
            None if resumed.get("seconds") is None else resumed["seconds"] * 1e3, looked["random_steps_decoded"]["median_ms"]
        ),
        "lookup flatness: last step / step 0": flat,
    }
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "mosaicml-streaming",
            "what": f"StreamingDataset resumed from a state dict at step {label} to its first batch (fresh process)",
        },
        results=[
            {"system": "batchscope replay", "what": "lookup once the epoch's order exists", **looked},
            {"system": "batchscope replay", "what": f"fresh process, no cached order: open + decoded batch at step {label}", **cold},
            {"system": "batchscope replay", "what": f"fresh process, cached order: open + decoded batch at step {label}", **warm},
            {"system": "mosaicml-streaming", "what": f"resume from a state dict at step {label} + first batch", **resumed},
            {
                "system": "mosaicml-streaming",
                "what": f"iterate the DataLoader to step {label}",
                **iterated,
                "extrapolated_s": iterate_s,
                "extrapolated": True,
            },
        ],
        ratios=ratios,
        goals={
            "lookup_ms": harness.goal(f"<= {GOAL_MS:g} ms median per (step, rank) lookup once the order exists", worst, worst <= GOAL_MS),
            "flat_in_step": harness.goal(f"<= {FLAT_TOLERANCE} (last step / step 0)", flat, flat is not None and flat <= FLAT_TOLERANCE),
            "same_batch": harness.goal("the replay's batch at step s equals what Streaming's resumed loader yields", float(same), same),
        },
        notes=[
            f"data: one MDS stream of {samples} samples (text, 16 int32 tokens) written by Streaming's MDSWriter; run: 1 rank, "
            f"per-device batch {BATCH}, shuffle py1e (seed {SEED}), num_canonical_nodes 1, one epoch of {samples // BATCH} steps",
            "replay cold/warm and Streaming resume/iterate each run in a fresh process; imports are not timed",
            f"Streaming iterate: {iterate_steps} steps timed after its first batch, extrapolated linearly to step {label} (not run)",
            "lookup = StreamingReplay.batch(step, rank): sample ids with their provenance; _decoded adds reading each sample "
            "with Streaming's shard reader",
        ],
    )

"""Inspector pages (issue 4): a step/rank page of 8 packed 4,096-token sequences, and a listing deep in 10 M rows.

- **Step/rank page**: server time of ``/runs/{run}/steps/{s}/ranks/0`` for steps not viewed
  before (each request recomputes the batch through the read path), p50 and p95, and the size
  of the first HTML (token views longer than the threshold load as fragments). Baseline, in
  the same run: ``run.batch(s, 0)`` alone, i.e. the read path's share of the page.
- **Deep listing**: ``/datasets/{name}/versions/{id}?start=9000000`` of a 10-million-row
  dataset with cold caches. Baseline, in the same run: the first page (``?start=0``), cold.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import harness

SEQ_LEN = 4096
SEQUENCES = 8
FULL_ROWS, QUICK_ROWS = 10_000_000, 1_000_000
SHARDS = 20
ROW_GROUP = 10_000


def _words(seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=int(rng.integers(2, 9)))) for _ in range(3000)]


def _build_text(catalog: Any, directory: Path) -> None:
    """A corpus of long documents and a word-level tokenizer, for packing into 4,096-token sequences."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = _words(0)
    vocab = {"[UNK]": 0, "<|endoftext|>": 1}
    for word in words:
        vocab.setdefault(word, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(["<|endoftext|>"])
    catalog.put_tokenizer("bench-words", tokenizer.to_str())
    rng = np.random.default_rng(1)
    rows = 4000
    texts = [" ".join(rng.choice(words, size=int(rng.integers(200, 1500)))) for _ in range(rows)]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "docs.parquet"
    pq.write_table(pa.table({"id": [f"doc-{i}" for i in range(rows)], "text": texts}), path, row_group_size=200, compression="zstd")
    catalog.register("bench-docs", [str(path)], key="id", tag="v1", tokenizer="bench-words")


def _build_rows(catalog: Any, directory: Path, rows: int) -> Any:
    """``rows`` short rows in ``SHARDS`` shards of 10,000-row row groups."""
    directory.mkdir(parents=True, exist_ok=True)
    per_shard = rows // SHARDS
    paths = []
    for shard in range(SHARDS):
        path = directory / f"part-{shard:03d}.parquet"
        if not path.exists():
            start = shard * per_shard
            ids = pa.array(np.arange(start, start + per_shard)).cast(pa.string())
            table = pa.table(
                {"id": pa.compute.binary_join_element_wise("row-", ids, ""), "value": np.arange(start, start + per_shard) % 997}
            )
            pq.write_table(table, path, row_group_size=ROW_GROUP, compression="zstd")
        paths.append(str(path))
    return catalog.register("bench-rows", paths, key="id", tag="v1")


def _client(root: str) -> Any:
    from fastapi.testclient import TestClient

    from app.factory import create_app
    from app.settings import Settings

    return TestClient(create_app(Settings(root=root, flags_path=str(Path(root) / "bench-flags.sqlite"))))


def _timed_get(client: Any, url: str) -> tuple[float, int]:
    start = time.perf_counter()
    response = client.get(url)
    elapsed = time.perf_counter() - start
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:300]}")
    return elapsed, len(response.content)


def run(workdir: Path, *, quick: bool) -> dict[str, Any]:
    """Measure both pages against their in-run baselines."""
    from loaders import Catalog, Pack, ReadPlan, Source, Tokenize
    from loaders.catalog.version import clear_read_caches

    base = Path(workdir) / "inspector" / ("quick" if quick else "full")
    catalog = Catalog(base / "catalog")
    if "bench-docs" not in catalog.datasets():
        _build_text(catalog, base / "docs")
    plan = ReadPlan(
        [Source("bench-docs@v1", transforms=[Tokenize("text")])],
        seed=0,
        global_batch_size=SEQUENCES,
        steps=10_000,
        streams=SEQUENCES,
        transforms=[Pack(seq_len=SEQ_LEN, docs_per_block=16)],
    )
    run_ = catalog.create_run("bench-packed", plan, exist_ok=True)
    version = _build_rows(catalog, base / "rows", QUICK_ROWS if quick else FULL_ROWS)

    client = _client(catalog.root)
    client.get(f"/runs/{run_.name}/steps/0/ranks/0")  # warm imports and templates
    steps = list(range(100, 100 + (6 if quick else 20)))
    page_times, sizes, batch_times = [], [], []
    for step in steps:
        elapsed, size = _timed_get(client, f"/runs/{run_.name}/steps/{step}/ranks/0")
        page_times.append(elapsed)
        sizes.append(size)
    fresh = Catalog(catalog.root).run(run_.name)
    for step in steps:
        start = time.perf_counter()
        fresh.batch(step, 0, world_size=1)
        batch_times.append(time.perf_counter() - start)
    pages = harness.Timing(tuple(page_times))
    batches = harness.Timing(tuple(batch_times))

    deep = version.rows - (version.rows // 10)
    listing, first = [], []
    for _ in range(3 if quick else 5):
        clear_read_caches()
        listing.append(_timed_get(client, f"/datasets/bench-rows/versions/{version.id}?start={deep}")[0])
        clear_read_caches()
        first.append(_timed_get(client, f"/datasets/bench-rows/versions/{version.id}?start=0")[0])
    deep_t, first_t = harness.Timing(tuple(listing)), harness.Timing(tuple(first))

    results = [
        {
            "page": "step/rank, 8 packed sequences of 4,096 tokens",
            "server_ms": {"p50": round(pages.median * 1000, 1), "p95": round(pages.p95 * 1000, 1)},
            "first_html_bytes": {"max": max(sizes), "median": sorted(sizes)[len(sizes) // 2]},
            "read_path_ms": {"p50": round(batches.median * 1000, 1), "p95": round(batches.p95 * 1000, 1)},
            "steps": steps,
        },
        {
            "page": f"version listing at row {deep:,} of {version.rows:,}",
            "server_ms": {"median": round(deep_t.median * 1000, 1), "max": round(max(listing) * 1000, 1)},
            "first_page_ms": {"median": round(first_t.median * 1000, 1)},
        },
    ]
    return harness.document(
        "inspector",
        quick=quick,
        baseline={"step_rank": "run.batch(step, 0) alone (same steps, fresh process state)", "listing": "the first page, cold"},
        results=results,
        ratios={
            "step/rank page p50 / run.batch p50": harness.ratio(pages.median, batches.median),
            "listing at 90% / first page": harness.ratio(deep_t.median, first_t.median),
        },
        goals={
            "rank_page_p50_ms": harness.goal("<= 100 ms server time (p50)", round(pages.median * 1000, 1), pages.median <= 0.1),
            "rank_page_p95_ms": harness.goal("<= 200 ms server time (p95)", round(pages.p95 * 1000, 1), pages.p95 <= 0.2),
            "rank_page_html_bytes": harness.goal("<= 1 MB first HTML", max(sizes), max(sizes) <= 1 << 20),
            "deep_listing_ms": harness.goal(
                f"<= 200 ms at row {deep:,} of {version.rows:,}", round(deep_t.median * 1000, 1), deep_t.median <= 0.2
            ),
        },
        notes=["Quick mode lists a 1-million-row dataset; the goal is stated for 10 million rows (full mode)."] if quick else [],
    )


if __name__ == "__main__":
    import json

    print(json.dumps(run(Path("bench/work"), quick=True), indent=1))

"""Replay fixtures: tiny Hugging Face ``save_to_disk`` folders written by ``datasets`` itself, and what the real read
paths (torch ``DistributedSampler`` + ``DataLoader``) hand each rank, computed by running them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

SEQ = 8


def row(i: int) -> dict[str, Any]:
    """Row ``i`` of the corpus: an id, a text, 8 token ids and labels that mask the first two tokens."""
    ids = [(i * 7 + t) % 97 + 3 for t in range(SEQ)]
    return {"id": f"doc-{i:05d}", "text": f"document {i} of the corpus", "input_ids": ids, "labels": [-100, -100, *ids[2:]]}


def hf_corpus(directory: Path, rows: int = 45, *, shards: int = 2, split: str | None = None) -> Path:
    """A ``save_to_disk`` folder of ``rows`` rows in ``shards`` Arrow files of small record batches (a DatasetDict
    with one split when ``split`` is given)."""
    import datasets

    datasets.disable_progress_bars()
    data = datasets.Dataset.from_list([row(i) for i in range(rows)])
    path = directory / "corpus"
    batch, datasets.config.DEFAULT_MAX_BATCH_SIZE = datasets.config.DEFAULT_MAX_BATCH_SIZE, 7  # small record batches
    try:
        if split is not None:
            datasets.DatasetDict({split: data}).save_to_disk(str(path), num_shards={split: shards})
        else:
            data.save_to_disk(str(path), num_shards=shards)
    finally:
        datasets.config.DEFAULT_MAX_BATCH_SIZE = batch
    return path


def token_digest(ids: Any) -> str:
    """A digest of one sample's token ids, the same for tensors, arrays and lists."""
    array = ids.numpy() if hasattr(ids, "numpy") else np.asarray(ids)
    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.int64).tobytes()).hexdigest()[:16]


def read_received(path: Path) -> dict[tuple[int, int], list[str]]:
    """``(step, rank) → sample digests`` from the JSON lines a real job wrote (``{"step", "rank", "samples"}``)."""
    found = {}
    for line in path.read_text().splitlines():
        data = json.loads(line)
        found[(data["step"], data["rank"])] = data["samples"]
    return found

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


def recording_lm(received: list[tuple[int, int, list[str]]], rank: int = 0) -> Any:
    """A tiny real language model whose every forward pass appends ``(step, rank, sample digests)`` to ``received``;
    its ``step`` is set by :func:`step_callback` to the optimizer steps done so far."""
    import torch

    class RecordingLM(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(128, 8)
            self.head = torch.nn.Linear(8, 128)
            self.step = 0

        def forward(self, input_ids: Any, labels: Any = None, **_: Any) -> dict[str, Any]:
            if self.training:
                received.append((self.step, rank, [token_digest(row) for row in input_ids]))
            logits = self.head(self.embed(input_ids))
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 128), labels[:, 1:].reshape(-1), ignore_index=-100)
            return {"loss": loss, "logits": logits}

    return RecordingLM()


def step_callback(model: Any) -> Any:
    """A ``TrainerCallback`` telling ``model`` which optimizer step its next batches belong to."""
    from transformers import TrainerCallback

    class StepOf(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            model.step = state.global_step

    return StepOf()


def by_step(received: list[tuple[int, int, list[str]]]) -> dict[tuple[int, int], list[str]]:
    """``(step, rank) → sample digests in the order received`` (a step's batches concatenated)."""
    found: dict[tuple[int, int], list[str]] = {}
    for step, rank, digests in received:
        found.setdefault((step, rank), []).extend(digests)
    return found


def replayed_digests(run: Any) -> dict[tuple[int, int], list[str]]:
    """``(step, rank) → sample digests`` of every step of a replayed run, by its own batches."""
    return {
        (step, rank): [token_digest(s.inputs["input_ids"]) for s in run.batch(step, rank).samples]
        for step in range(run.total_steps)
        for rank in range(run.world_size)
    }

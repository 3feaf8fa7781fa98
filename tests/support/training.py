"""Real training processes for the adapter tests: a tiny language model that records a digest of every batch it
receives, the run it trains on, and the kill-and-resume check that every step was trained exactly once.

The training scripts (``tests/support/train_*.py``) import only the process side (``TinyLM``, ``record``); the
tests use the rest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
RECEIVED = "received.jsonl"  # one line per batch the model received: {"pid", "step", "digest"}


def tensor_digest(*tensors: Any) -> str:
    """A digest of tensors' (or arrays') int64 contents, the same in the trainer and in the test."""
    digest = hashlib.sha256()
    for tensor in tensors:
        array = tensor.detach().cpu().numpy() if isinstance(tensor, torch.Tensor) else np.asarray(tensor)
        digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
        digest.update(b"|")
    return digest.hexdigest()[:24]


def record(directory: str | Path, step: int | None, *tensors: Any) -> None:
    """Append what the model just received to ``directory/received.jsonl`` (flushed: a SIGKILL keeps it)."""
    line = json.dumps({"pid": os.getpid(), "step": step, "digest": tensor_digest(*tensors)})
    with open(Path(directory) / RECEIVED, "a", encoding="utf-8") as out:
        out.write(line + "\n")


PAUSE_SECONDS = 60.0  # a batch that "hangs" in training until the test kills the process


def pause_if(batch_number: int, pause_at: int) -> None:
    """Stall the ``pause_at``-th batch (0-based) a process trains, so the kill lands inside it."""
    if batch_number == pause_at:
        time.sleep(PAUSE_SECONDS)


class TinyLM(torch.nn.Module):
    """Embedding + linear next-token model; ``forward(input_ids, labels)`` returns ``{"loss", "logits"}`` and
    records the tensors it received (``labels`` shifted inside, -100 ignored, as Hugging Face models do)."""

    def __init__(self, vocab: int = 256, width: int = 8, received: str | None = None, pause_at: int = -1) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.head = torch.nn.Linear(width, vocab)
        self.received = received
        self.pause_at = pause_at
        self.batches = 0

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None, **_: Any) -> dict[str, torch.Tensor]:
        if self.received is not None and self.training:
            record(self.received, None, input_ids, labels if labels is not None else input_ids)
            pause_if(self.batches, self.pause_at)
            self.batches += 1
        logits = self.head(self.embed(input_ids))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100
            )
        return out


def job_arguments(description: str) -> argparse.Namespace:
    """The command line every training script takes: ROOT RUN OUT --max-steps N --every K [--accumulate A]
    [--pause-at B] [--resume]."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("root")
    parser.add_argument("run")
    parser.add_argument("out")
    parser.add_argument("--max-steps", type=int, required=True, help="optimizer steps to train")
    parser.add_argument("--every", type=int, required=True, help="checkpoint every K optimizer steps")
    parser.add_argument("--accumulate", type=int, default=1, help="batches per optimizer step")
    parser.add_argument("--pause-at", type=int, default=-1, help="stall the B-th batch this process trains")
    parser.add_argument("--resume", action="store_true", help="resume from the last checkpoint")
    return parser.parse_args()


# -- the test side ------------------------------------------------------------------------------------------------
def make_lm_run(root: Path, *, steps: int, name: str = "lm", catalog: str = "catalog") -> Any:
    """A packed, tokenized run (``global_batch_size=2``, ``seq_len=16``) over a small text dataset, in ``root/catalog``."""
    from loaders import Catalog, Pack, ReadPlan, Source, Tokenize
    from tests.conftest import word_tokenizer
    from tests.support.readpath import write_text_dataset

    catalog = Catalog(root / catalog)
    write_text_dataset(catalog, "corpus", 80, row_group=4, shards=2)
    words = ["document", "of", "word", "corpus:", "<|endoftext|>"] + [str(i) for i in range(80)]
    catalog.put_tokenizer("words", word_tokenizer(words))
    plan = ReadPlan(
        [Source("corpus@v1", transforms=[Tokenize("text", tokenizer="words")])],
        seed=5,
        global_batch_size=2,
        steps=steps,
        streams=2,
        transforms=[Pack(seq_len=16)],
    )
    return catalog.create_run(name, plan)


def start(script: str | Path, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
    """Run ``script`` (a name in ``tests/support``, or a path) in a fresh Python with the repository importable."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, str(ROOT / "tests" / "support" / script), *args]
    return subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def received(directory: Path) -> list[dict[str, Any]]:
    """Every batch the model received, in order, across processes."""
    path = directory / RECEIVED
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def kill_when(process: subprocess.Popen[str], ready: Callable[[], bool], *, settle: float, seconds: float = 120) -> None:
    """SIGKILL ``process`` ``settle`` seconds after ``ready()`` holds (the ledger timer flushes meanwhile)."""
    deadline = time.monotonic() + seconds
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the trainer stopped before the kill point:\n{process.communicate()[0]}")
        time.sleep(0.05)
    time.sleep(settle)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def finish(process: subprocess.Popen[str], *, seconds: float = 180) -> None:
    output = process.communicate(timeout=seconds)[0]
    assert process.returncode == 0, output


def assert_each_step_trained_once(
    first: list[dict[str, Any]], second: list[dict[str, Any]], checkpoint_batches: int, expected: list[str]
) -> None:
    """The batches in the checkpoint (the first ``checkpoint_batches`` the killed process received) and everything the
    resumed process received are exactly the run's batches, each once, in order."""
    trained = [r["digest"] for r in first[:checkpoint_batches]] + [r["digest"] for r in second]
    assert len(first) > checkpoint_batches, "the kill came before any step beyond the checkpoint was trained"
    assert trained == expected, _first_difference(trained, expected)


def _first_difference(trained: list[str], expected: list[str]) -> str:
    for step, (got, want) in enumerate(zip(trained, expected)):
        if got != want:
            later = expected.index(got) if got in expected else None
            return f"step {step}: the model received the batch of step {later}"
    return f"{len(trained)} batches trained, {len(expected)} expected"


def verify_cli(run: Any, *args: str) -> Any:
    """``batchscope verify RUN`` (in this process): ``.exit_code`` and ``.output`` (stdout and stderr)."""
    from typer.testing import CliRunner

    from app.cli import app

    return CliRunner().invoke(app, ["verify", run.name, "--root", run.catalog.root, *args])


def untrained_steps(run: Any, steps: Iterable[int]) -> list[int]:
    """Steps of rank 0 (world size 1) the ledger holds as fetched but not trained."""
    out = []
    for step in steps:
        entry = run.ledger.entry(step, 0, 1)
        if entry is not None and not entry.trained:
            out.append(step)
    return out

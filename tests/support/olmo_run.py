"""OLMo-style token files and a real OLMo-core training run over them, for the replay tests and benchmark.

Token files are written the way OLMo's tokenization tools write them: headerless ``np.memmap`` arrays (``.npy`` by
name) of concatenated documents, each document ending with the EOS token; label masks are ``bool`` memmaps of the same
length. :func:`train` runs ``tests/support/olmo_train.py`` under torchrun on gloo ranks and returns what each rank
received at each step.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tests.support.processes import free_port

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "olmo_train.py"
VOCAB = 1000
EOS = 0
PAD = 1
#: A token repeated in one document so the instance filter (when configured) masks the instance holding it.
REPEATED = 7


def write_token_file(path: Path, documents: list[np.ndarray], *, dtype: type = np.uint16) -> np.ndarray:
    """Write ``documents`` (each already ending with EOS) concatenated as a headerless memmap; returns the tokens."""
    tokens = np.concatenate(documents).astype(dtype)
    array = np.memmap(path, dtype=dtype, mode="w+", shape=tokens.shape)
    array[:] = tokens
    array.flush()
    del array
    return tokens


def random_documents(rng: np.random.Generator, tokens: int, *, vocab: int = VOCAB, repeated_run: bool = False) -> list[np.ndarray]:
    """Documents of 3 to 40 tokens (EOS last) adding up to exactly ``tokens`` tokens."""
    documents: list[np.ndarray] = []
    left = tokens
    while left:
        first_repeats = repeated_run and not documents
        length = min(left, 20 if first_repeats else int(rng.integers(3, 41)))
        body = rng.integers(PAD + 1, vocab, size=length - 1)
        if first_repeats:
            body[:10] = REPEATED
        documents.append(np.append(body, EOS))
        left -= length
    return documents


@dataclass(frozen=True)
class Corpus:
    """Token files (and their label masks) written in a folder."""

    paths: list[str]
    label_mask_paths: list[str]
    dtype: str


def write_corpus(
    folder: Path, *, sizes: tuple[int, ...] = (700, 613, 655), dtype: str = "uint16", vocab: int = VOCAB, seed: int = 3
) -> Corpus:
    """One token file per size (tokens), each with a label mask masking every document's first token; the first file
    also has the Dolma toolkit's metadata beside it (``part-00.csv.gz``: ``start,end,id,src,loc`` per document)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths, masks = [], []
    for number, size in enumerate(sizes):
        documents = random_documents(rng, size, vocab=vocab, repeated_run=number == 1)
        path = folder / f"part-{number:02d}.npy"
        tokens = write_token_file(path, documents, dtype=np.dtype(dtype).type)
        starts = np.concatenate([[0], np.flatnonzero(tokens == EOS)[:-1] + 1])
        mask = np.ones(len(tokens), dtype=np.bool_)
        mask[starts] = False
        if number == 0:
            ends = np.flatnonzero(tokens == EOS) + 1
            rows = [f"{a},{b},part-00-doc{k},s3://raw/part-00.jsonl.gz,{k}\n" for k, (a, b) in enumerate(zip([0, *ends[:-1]], ends))]
            (folder / "part-00.csv.gz").write_bytes(gzip.compress("".join(rows).encode()))
        mask_path = folder / f"part-{number:02d}.mask.npy"
        memmap = np.memmap(mask_path, dtype=np.bool_, mode="w+", shape=mask.shape)
        memmap[:] = mask
        memmap.flush()
        del memmap
        paths.append(str(path))
        masks.append(str(mask_path))
    return Corpus(paths, masks, dtype)


def write_spec(out: Path, corpus: Corpus, **settings: Any) -> Path:
    """The training spec ``olmo_train.py`` reads: the corpus, the data loader and trainer settings, where to write."""
    spec = {
        "paths": corpus.paths,
        "label_mask_paths": corpus.label_mask_paths,
        "metadata": [{"label": Path(p).stem} for p in corpus.paths],
        "dtype": corpus.dtype,
        "vocab_size": VOCAB,
        "eos": EOS,
        "pad": PAD,
        "sequence_length": 16,
        "global_batch_size": 64,
        "seed": 17,
        "ranks": 2,
        "duration": {"value": 2, "unit": "epochs"},
        "save_interval": 25,
        "generate_doc_lengths": True,
        "instance_filter": {"repetition_max_period": 2, "repetition_min_period": 1, "repetition_max_count": 6},
        "dataset_work_dir": str(out / "dataset-work"),
        "trainer_work_dir": str(out / "trainer-work"),
        "save_folder": str(out / "checkpoints"),
        "received": str(out / "received"),
    }
    spec.update(settings)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "spec.json"
    path.write_text(json.dumps(spec, indent=1))
    return path


def train(spec_path: Path, *, ranks: int, timeout: float = 600) -> None:
    """Run OLMo-core's trainer on ``ranks`` gloo processes over the spec; raise with its output when it fails."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={ranks}",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(SCRIPT),
        str(spec_path),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "OLMO_SHARED_FS": "1", "LOG_FILTER_TYPE": "rank0_only"}
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"OLMo-core training exited with status {done.returncode}:\n{done.stdout[-6000:]}")


def received(folder: Path, ranks: int) -> dict[tuple[int, int], dict[str, Any]]:
    """What each rank received: ``{(trainer step, rank): batch}``, the trainer's steps counting from 1."""
    import torch

    out = {}
    for rank in range(ranks):
        for entry in torch.load(folder / f"rank{rank}.pt", weights_only=False):
            out[(entry["step"], rank)] = {**entry["batch"], "epoch": entry["epoch"]}
    return out


def built_once(base: Path, name: str, build: Callable[[Path], None]) -> Path:
    """``base/name`` built by ``build`` exactly once for the whole test session, even across xdist workers.

    Under xdist every worker has its own basetemp below a shared parent: the first worker to take the lock builds,
    the others wait for it and reuse the folder (a failed build is not marked done, so the next worker retries).
    """
    from filelock import FileLock

    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (folder / ".done").exists():
            if folder.exists():
                import shutil

                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            build(folder)
            (folder / ".done").write_text("")
    return folder

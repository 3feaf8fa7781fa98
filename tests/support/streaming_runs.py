"""Ground truth for the Streaming replay: small MDS streams written by Streaming's own ``MDSWriter``, real torchrun
jobs that train on them (``tests/support/streaming_train.py``), and what each rank's DataLoader yielded.

Every sample has a ``uid`` (``<stream>-<row>``) beside its content, so a test can check the replay's provenance
(stream, shard, row) independently of Streaming, and a digest of all its decoded fields, so it can check the content.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "streaming_train.py"


def sample_digest(sample: dict[str, Any]) -> str:
    """A digest of every field of a decoded Streaming sample (text, arrays by dtype and shape, images by pixels)."""
    digest = hashlib.sha256()
    for key in sorted(sample):
        value = sample[key]
        digest.update(key.encode() + b"=")
        if isinstance(value, np.ndarray):
            digest.update(f"array {value.dtype} {value.shape}:".encode() + np.ascontiguousarray(value).tobytes())
        elif isinstance(value, str):
            digest.update(b"str:" + value.encode())
        elif isinstance(value, bytes):
            digest.update(b"bytes:" + value)
        elif type(value).__module__.startswith("PIL."):
            digest.update(f"image {value.mode} {value.size}:".encode() + value.tobytes())
        else:
            digest.update(f"{type(value).__name__}:{value!r}".encode())
        digest.update(b";")
    return digest.hexdigest()[:24]


# -- data --------------------------------------------------------------------------------------------------
WORDS = "the a cat dog sat ran on under mat log sun rain and then".split()


def write_stream(folder: Path, name: str, count: int, *, kind: str, shard_bytes: int = 900) -> str:
    """Stream ``name`` of ``count`` samples (``text``, ``tokens`` or ``image``) in shards of about ``shard_bytes``."""
    from loaders.replay.streaming.library import import_streaming

    import_streaming()
    from PIL import Image
    from streaming.base.format.mds.writer import MDSWriter

    columns = {"uid": "str", "text": "str"}
    if kind == "tokens":
        columns["tokens"] = "ndarray:int32"
    if kind == "image":
        columns["image"] = "png"
    out = folder / name
    with MDSWriter(out=str(out), columns=columns, size_limit=shard_bytes) as writer:
        for row in range(count):
            rng = np.random.default_rng(row * 7 + len(name))
            text = " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 2 + row % 6))
            sample: dict[str, Any] = {"uid": f"{name}-{row}", "text": text}
            if kind == "tokens":
                sample["tokens"] = rng.integers(0, 50_000, 3 + row % 9).astype(np.int32)
            if kind == "image":
                sample["image"] = Image.new("RGB", (5, 3), (row * 3 % 256, 60, 255 - row % 200))
            writer.write(sample)
    return str(out)


# -- jobs ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """One ground-truth run: its StreamingDataset arguments and launches, and what its ranks yielded."""

    name: str
    streams: list[dict[str, Any]]
    dataset: dict[str, Any]
    epochs: int
    launches: list[dict[str, Any]]  # {"ranks", "batch_size", "workers"} (+ "stop_after" / "resume" / "start_step")
    records: dict[tuple[int, int], list[tuple[str, str]]]  # (step, rank) → [(uid, digest)] as the DataLoader yielded
    states: list[dict[str, Any]]  # the state dict each stopped launch saved


def _variants(data: Path) -> dict[str, dict[str, Any]]:
    """The runs: two weighted streams; repeat/choose with a non-default shuffle and batching; a resumption 2 → 3 ranks."""
    return {
        "mixture": {
            "streams": [
                {"local": write_stream(data, "web", 150, kind="text"), "proportion": 0.6},
                {"local": write_stream(data, "code", 70, kind="tokens"), "proportion": 0.4},
            ],
            "dataset": {"shuffle": True, "shuffle_seed": 17},
            "epochs": 2,
            "launches": [{"ranks": 2, "batch_size": 4, "workers": 2}],
        },
        "weighted": {
            "streams": [
                {"local": write_stream(data, "prose", 150, kind="text"), "repeat": 1.5},
                {"local": write_stream(data, "tokens", 70, kind="tokens"), "choose": 40},
            ],
            "dataset": {
                "shuffle": True,
                "shuffle_algo": "py1s",
                "shuffle_seed": 5,
                "shuffle_block_size": 16,
                "num_canonical_nodes": 4,
                "partition_algo": "orig",
                "batching_method": "stratified",
            },
            "epochs": 2,
            "launches": [{"ranks": 2, "batch_size": 4, "workers": 1}],
        },
        "resumed": {
            "streams": [
                {"local": write_stream(data, "notes", 200, kind="text")},
                {"local": write_stream(data, "pictures", 100, kind="image", shard_bytes=2000)},
            ],
            "dataset": {"shuffle": True, "shuffle_algo": "py1br", "shuffle_block_size": 32, "num_canonical_nodes": 4},
            "epochs": 2,
            "launches": [{"ranks": 2, "batch_size": 6, "workers": 2, "stop_after": 10}, {"ranks": 3, "batch_size": 4, "workers": 1}],
        },
    }


def release_shared_memory(folders: list[str]) -> list[str]:
    """Unlink the shared memory Streaming registered for datasets over ``folders`` (left behind only when a process
    died before its cleanup); other jobs' Streaming memory is left alone. Returns the names unlinked."""
    from loaders.replay.streaming.library import import_streaming

    import_streaming()
    from streaming.base.constant import LOCALS, SHM_TO_CLEAN
    from streaming.base.shared.prefix import _get_path, _unpack_locals

    ours = {os.path.abspath(f) for f in folders}
    shm = Path("/dev/shm")
    released = []
    for entry in sorted(shm.glob(f"*_{LOCALS}")) if shm.is_dir() else []:
        try:
            local_dirs, prefix = _unpack_locals(entry.read_bytes())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if ours & {os.path.abspath(d) for d in local_dirs}:
            for name in SHM_TO_CLEAN:
                path = shm / _get_path(prefix, name).lstrip("/")
                if path.exists():
                    path.unlink()
                    released.append(path.name)
    return released


def _torchrun(nproc: int, jobs: list[dict[str, Any]], folder: Path) -> None:
    jobs_file = folder / f"jobs-{nproc}.json"
    jobs_file.write_text(json.dumps(jobs))
    launcher = ["-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--nnodes=1", "--standalone"]
    command = [sys.executable, *launcher, str(SCRIPT), str(jobs_file)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=folder)
    finally:  # Streaming's shared memory of these datasets, had a process died before releasing it
        release_shared_memory([s["local"] for job in jobs for s in job["streams"]])
    if done.returncode != 0:
        raise RuntimeError(f"torchrun --nproc_per_node={nproc} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}")


def generate(folder: Path) -> None:
    """Write the data and run every launch of every variant for real (launches of the same size share one torchrun)."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    variants = _variants(data)
    by_launch: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for name, variant in variants.items():
        for number, launch in enumerate(variant["launches"]):
            job = {"streams": variant["streams"], "dataset": variant["dataset"], "epochs": variant["epochs"], "batch_size": launch["batch_size"],
                   "workers": launch["workers"], "out": str(folder / name / f"launch-{number}")}  # fmt: skip
            if "stop_after" in launch:
                job["stop_after"] = launch["stop_after"]
            if number:
                job["resume"] = str(folder / name / f"launch-{number - 1}" / "state.json")
                job["start_step"] = variant["launches"][number - 1]["stop_after"]
            by_launch.setdefault(number, []).append((launch["ranks"], job))
    for number in sorted(by_launch):  # the first launches, then the resumptions (which read the states they saved)
        for ranks in sorted({r for r, _ in by_launch[number]}):
            _torchrun(ranks, [job for r, job in by_launch[number] if r == ranks], folder)
    (folder / "variants.json").write_text(json.dumps(variants))


def load(folder: Path) -> dict[str, Variant]:
    """The variants :func:`generate` ran, with what each rank's DataLoader yielded at each step."""
    variants = json.loads((folder / "variants.json").read_text())
    out = {}
    for name, variant in variants.items():
        records: dict[tuple[int, int], list[tuple[str, str]]] = {}
        states = []
        for number, launch in enumerate(variant["launches"]):
            launch_folder = folder / name / f"launch-{number}"
            for rank in range(launch["ranks"]):
                for line in (launch_folder / f"rank-{rank}.jsonl").read_text().splitlines():
                    entry = json.loads(line)
                    records[(entry["step"], rank)] = [tuple(pair) for pair in entry["samples"]]
            if (launch_folder / "state.json").exists():
                states.append(json.loads((launch_folder / "state.json").read_text()))
        out[name] = Variant(name, variant["streams"], variant["dataset"], variant["epochs"], variant["launches"], records, states)
    return out


def settings_of(variant: Variant, **options: Any) -> Any:
    """The replay settings of a ground-truth run: its streams, its StreamingDataset arguments, and its launches (each
    resumed one with the state dict the launch before it saved)."""
    from loaders.replay.streaming import Launch, ResumeState, StreamingSettings, StreamSpec

    launches = tuple(
        Launch(batch_size=launch["batch_size"], ranks_per_node=launch["ranks"], workers=launch["workers"],
               resume=ResumeState.from_state_dict(variant.states[number - 1]) if number else None)
        for number, launch in enumerate(variant.launches)
    )  # fmt: skip
    return StreamingSettings(
        streams=tuple(StreamSpec(**s) for s in variant.streams), launches=launches, epochs=variant.epochs, **variant.dataset, **options
    )


def truth(base: Path) -> dict[str, Variant]:
    """The ground truth, generated once under ``base`` however many test processes ask (a file lock serializes them)."""
    from filelock import FileLock

    folder = base / "streaming-truth"
    with FileLock(str(base / "streaming-truth.lock")):
        if not (folder / "variants.json").exists():
            generate(folder)
    return load(folder)

"""What an OLMo-core checkpoint says about its data: ``config.json``, the trainer state, ``data_paths.txt``, its version.

An OLMo-core checkpoint directory (``stepN/``) holds ``config.json`` (written by ``ConfigSaverCallback``: the
experiment config, whose ``dataset``, ``data_loader`` and ``trainer`` parts say what was read), ``train/rank0.pt``
(the trainer state: global step, epoch, and the data loader's seed, batches processed and dataset fingerprint),
``data_paths.txt`` (the token files in the order the dataset used them) and ``.metadata.json`` (the OLMo-core
version that wrote it). Only ``config.json`` is required; a run replayed without a trainer state has nothing to check
its files against but their pins.

>>> state = TrainerState.from_dict({"global_step": 25, "epoch": 1, "max_steps": 60, "world_size": 2,
...     "data_loader": {"seed": 17, "epoch": 1, "batches_processed": 25, "tokens_processed": 1600,
...     "dataset_fingerprint": "e974", "dataset_fingerprint_version": "v2.0", "dataset_type": "fsl",
...     "sequence_length": 16, "max_target_sequence_length": None}})
>>> state.seed, state.batches_processed
(17, 25)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import CatalogCorrupt, NotFound

CONFIG = "config.json"
TRAIN_STATE = "train/rank0.pt"
DATA_PATHS = "data_paths.txt"
METADATA = ".metadata.json"


class CheckpointNotFound(NotFound):
    """The checkpoint directory or its ``config.json`` does not exist."""


@dataclass(frozen=True)
class TrainerState:
    """The parts of an OLMo-core trainer state (``train/rank0.pt``) that say where the data loader was."""

    global_step: int
    epoch: int
    max_steps: int | None
    world_size: int | None
    seed: int
    loader_epoch: int | None
    batches_processed: int
    tokens_processed: int
    dataset_fingerprint: str
    dataset_fingerprint_version: str
    dataset_type: str
    sequence_length: int | None
    max_target_sequence_length: int | None

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> "TrainerState":
        """From the trainer's ``state_dict()`` (as ``torch.load`` returns it)."""
        loader = state["data_loader"]
        return cls(
            global_step=int(state["global_step"]),
            epoch=int(state["epoch"]),
            max_steps=None if state.get("max_steps") is None else int(state["max_steps"]),
            world_size=None if state.get("world_size") is None else int(state["world_size"]),
            seed=int(loader["seed"]),
            loader_epoch=None if loader.get("epoch") is None else int(loader["epoch"]),
            batches_processed=int(loader["batches_processed"]),
            tokens_processed=int(loader["tokens_processed"]),
            dataset_fingerprint=str(loader["dataset_fingerprint"]),
            dataset_fingerprint_version=str(loader["dataset_fingerprint_version"]),
            dataset_type=str(loader.get("dataset_type", "fsl")),
            sequence_length=loader.get("sequence_length"),
            max_target_sequence_length=loader.get("max_target_sequence_length"),
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TrainerState":
        return cls(**data)


@dataclass(frozen=True)
class OlmoCheckpoint:
    """What a checkpoint says about the run's data, with the SHA-256 of each checkpoint file it was read from."""

    path: str
    config: dict[str, Any]
    state: TrainerState | None
    data_paths: tuple[str, ...] | None
    olmo_core_version: str | None
    read: dict[str, str]

    @property
    def where(self) -> str:
        return f"checkpoint {self.path}"


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def load_trainer_state(path: Path) -> dict[str, Any]:
    """A trainer state file, unpickled with ``torch.load(weights_only=True)`` (numpy arrays of its RNG state allowed)."""
    import numpy as np
    import torch

    core = getattr(np, "_core", None) or np.core
    reconstruct = core.multiarray._reconstruct
    allowed = [
        reconstruct,
        (reconstruct, "numpy.core.multiarray._reconstruct"),
        np.ndarray,
        np.dtype,
        *{type(np.dtype(t)) for t in (np.uint8, np.uint32, np.int64, np.float64)},
    ]
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:
        raise CatalogCorrupt(f"trainer state {path} cannot be read as an OLMo-core trainer state: {exc}".splitlines()[0]) from exc


def read_checkpoint(path: str | Path) -> OlmoCheckpoint:
    """Read what ``path`` (a checkpoint directory, or a ``config.json`` with no trainer state) says about the data.

    >>> read_checkpoint("/nonexistent/step100")
    Traceback (most recent call last):
    ...
    loaders.replay.olmo.checkpoint.CheckpointNotFound: OLMo-core checkpoint /nonexistent/step100 has no config.json
    """
    path = Path(path).expanduser().absolute()
    folder = path.parent if path.is_file() else path
    config_path = path if path.is_file() else path / CONFIG
    if not config_path.is_file():
        raise CheckpointNotFound(f"OLMo-core checkpoint {path} has no {CONFIG}")
    raw = config_path.read_bytes()
    read = {config_path.name: _sha256(raw)}
    try:
        config = json.loads(raw)
    except ValueError as exc:
        raise CatalogCorrupt(f"{config_path} is not JSON: {exc}") from exc
    if not isinstance(config, dict) or "dataset" not in config or not isinstance(config.get("data_loader"), dict):
        raise CatalogCorrupt(f"{config_path} has no 'dataset' and 'data_loader' sections (not an OLMo-core experiment config)")
    state = None
    if path.is_dir() and (folder / TRAIN_STATE).is_file():
        state_path = folder / TRAIN_STATE
        read[TRAIN_STATE] = _sha256(state_path.read_bytes())
        raw_state = load_trainer_state(state_path)
        try:
            state = TrainerState.from_dict(raw_state)
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogCorrupt(f"trainer state {state_path} lacks the data loader's state ({exc!r})") from exc
    data_paths = None
    if (folder / DATA_PATHS).is_file():
        text = (folder / DATA_PATHS).read_text()
        read[DATA_PATHS] = _sha256(text.encode())
        data_paths = tuple(line for line in text.splitlines() if line.strip())
    version = None
    if (folder / METADATA).is_file():
        try:
            version = json.loads((folder / METADATA).read_text()).get("version")
        except ValueError:
            version = None
    keep = {key: config[key] for key in ("dataset", "data_loader", "trainer", "train_module") if key in config}
    return OlmoCheckpoint(path=str(path), config=keep, state=state, data_paths=data_paths, olmo_core_version=version, read=read)

"""An OLMo-core run's data settings: its ``config.json`` decoded by OLMo-core, paths mapped to where the files are now,
checked against the trainer state, and the step arithmetic of its trainer.

The dataset and data loader are built by OLMo-core's own config classes (``NumpyFSLDatasetConfig.build()``,
``NumpyDataLoaderBase.wrap_numpy_dataset``) from the checkpoint's ``config.json``, with only the file locations
rewritten (``path_map``) and the working directories pointed at the replay's own. Everything that would make the
replay differ from what trained is refused in one line naming the setting: another dataset type, a seed or sequence
length the trainer state contradicts, a dataset fingerprint that differs, a trainer state whose steps do not follow
from one constant global batch.

>>> map_path("s3://bucket/data/part-0.npy", (("s3://bucket/data", "/mnt/data"),))
'/mnt/data/part-0.npy'
>>> steps_of({"value": 2, "unit": "epochs"}, batches_per_epoch=30, global_batch_size=64)
60
>>> steps_of({"value": 1000, "unit": "tokens"}, batches_per_epoch=30, global_batch_size=64)
16
"""

from __future__ import annotations

import copy
import math
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import storage
from ...errors import InvalidPlan, NotFound, StateMismatch
from .checkpoint import OlmoCheckpoint, TrainerState

#: The dataset configs a replay reproduces exactly (their class names in ``config.json``'s ``_CLASS_``).
SUPPORTED = ("NumpyFSLDatasetConfig",)
#: Trainer callbacks that change the global batch or the sequence length during a run (not replayed).
SCHEDULERS = ("BatchSizeSchedulerCallback", "SequenceLengthSchedulerCallback")
#: Parallelism that makes the data-parallel world smaller than the world (then it must be given).
MODEL_PARALLEL = ("tp_config", "cp_config", "pp_config", "ep_config")


@dataclass(frozen=True)
class ReplayOptions:
    """How to replay: where the training paths are now (``(prefix then, prefix now)`` pairs), the data-parallel
    world size (default: the trainer state's world size when the run has no model parallelism), and a data seed the
    caller asserts (refused when it contradicts the checkpoint)."""

    path_map: tuple[tuple[str, str], ...] = ()
    dp_world_size: int | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.dp_world_size is not None and self.dp_world_size < 1:
            raise InvalidPlan(f"dp_world_size must be at least 1, got {self.dp_world_size}")
        for pair in self.path_map:
            if len(pair) != 2 or not all(isinstance(p, str) and p for p in pair):
                raise InvalidPlan(f"path_map holds (prefix then, prefix now) pairs of non-empty strings, got {pair!r}")

    def to_json(self) -> dict[str, Any]:
        return {"path_map": [list(p) for p in self.path_map], "dp_world_size": self.dp_world_size, "seed": self.seed}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ReplayOptions":
        return cls(path_map=tuple(tuple(p) for p in data["path_map"]), dp_world_size=data["dp_world_size"], seed=data["seed"])  # type: ignore[misc]


def map_path(path: str, path_map: tuple[tuple[str, str], ...]) -> str:
    """``path`` with the first matching prefix of ``path_map`` replaced; a remote path nothing maps is refused."""
    for then, now in path_map:
        stem = then.rstrip("/")
        if path == stem or path.startswith(stem + "/"):
            return now.rstrip("/") + path[len(stem) :]
    if storage.is_remote(path):
        raise InvalidPlan(f"token file {path} is remote: map it to a local copy (path_map=[({posixpath.dirname(path)!r}, '/local/dir')])")
    return path


def class_name(section: dict[str, Any]) -> str:
    return str(section.get("_CLASS_", "?")).rsplit(".", 1)[-1]


def dataset_config(checkpoint: OlmoCheckpoint, options: ReplayOptions, work_dir: Path) -> Any:
    """The checkpoint's dataset config, decoded by OLMo-core, with its files mapped and the replay's working directory."""
    from olmo_core.data import NumpyFSLDatasetConfig

    if not isinstance(checkpoint.config["dataset"], dict):
        raise InvalidPlan(f"{checkpoint.where}: the dataset is a list of instance sources (OLMo-core's composable pipeline), not replayed")
    section = copy.deepcopy(checkpoint.config["dataset"])
    name = class_name(section)
    if name not in SUPPORTED:
        raise InvalidPlan(
            f"{checkpoint.where}: dataset {name} is not replayed (replayed: {', '.join(SUPPORTED)}, concatenated and chunked)"
        )
    if section.get("source_mixture_config") is not None:
        raise InvalidPlan(
            f"{checkpoint.where}: dataset {name} with a source_mixture_config is not replayed (only token files listed in paths or a mix)"
        )
    for key in ("paths", "label_mask_paths"):
        if section.get(key) is not None:
            section[key] = [map_path(str(p), options.path_map) for p in section[key]]
            for number, path in enumerate(section[key]):
                if not section.get("expand_glob") and not Path(path).is_file():
                    raise NotFound(f"{checkpoint.where}: file {path} (config.json dataset.{key}[{number}]) is missing")
    if section.get("mix_base_dir") is not None:
        section["mix_base_dir"] = map_path(str(section["mix_base_dir"]), options.path_map)
    section["work_dir"] = str(work_dir / "dataset")
    config = NumpyFSLDatasetConfig.from_dict(section)
    if type(config) is not NumpyFSLDatasetConfig:
        raise InvalidPlan(f"{checkpoint.where}: dataset config decodes to {type(config).__name__}, not NumpyFSLDatasetConfig")
    return config


def build_dataset(checkpoint: OlmoCheckpoint, options: ReplayOptions, work_dir: Path) -> Any:
    """The run's dataset, built and prepared by OLMo-core; what OLMo-core refuses to build is refused in one line."""
    from olmo_core.exceptions import OLMoConfigurationError

    config = dataset_config(checkpoint, options, work_dir)
    try:
        dataset = config.build()
        dataset.prepare()
    except (OLMoConfigurationError, RuntimeError, ValueError, OSError) as exc:
        raise InvalidPlan(f"{checkpoint.where}: OLMo-core cannot build the dataset: {str(exc).splitlines()[0]}") from exc
    return dataset


def loader_config(checkpoint: OlmoCheckpoint) -> Any:
    """The checkpoint's data loader config, decoded by OLMo-core."""
    from olmo_core.data import NumpyDataLoaderConfig

    section = copy.deepcopy(checkpoint.config["data_loader"])
    if class_name(section) != "NumpyDataLoaderConfig":
        raise InvalidPlan(f"{checkpoint.where}: data loader {class_name(section)} is not replayed (replayed: NumpyDataLoaderConfig)")
    section.pop("work_dir", None)
    return NumpyDataLoaderConfig.from_dict(section)


def refuse_schedules(checkpoint: OlmoCheckpoint) -> None:
    """Refuse a run whose trainer changes the global batch or sequence length as it goes."""
    callbacks = (checkpoint.config.get("trainer") or {}).get("callbacks") or {}
    for name, callback in callbacks.items():
        if isinstance(callback, dict) and class_name(callback) in SCHEDULERS and callback.get("enabled", True):
            raise InvalidPlan(
                f"{checkpoint.where}: trainer callback {name!r} ({class_name(callback)}) changes batches during the run; not replayed"
            )


def default_dp_world_size(checkpoint: OlmoCheckpoint, options: ReplayOptions) -> int | None:
    """The data-parallel world size: given, or the trainer state's world size when nothing else divides the world."""
    if options.dp_world_size is not None:
        return options.dp_world_size
    module = checkpoint.config.get("train_module") or {}
    parallel = [key for key in MODEL_PARALLEL if module.get(key)]
    if parallel:
        raise InvalidPlan(f"{checkpoint.where}: the run uses {', '.join(parallel)}: give its data-parallel world size (dp_world_size)")
    return None if checkpoint.state is None else checkpoint.state.world_size


def steps_of(duration: dict[str, Any], *, batches_per_epoch: int, global_batch_size: int) -> int:
    """The trainer's number of steps for a ``Duration`` (``{"value", "unit"}``), counted from the first step."""
    value, unit = int(duration["value"]), str(duration["unit"])
    if unit == "steps":
        return value
    if unit == "epochs":
        return value * batches_per_epoch
    if unit == "tokens":
        return math.ceil(value / global_batch_size)
    raise InvalidPlan(f"unknown duration unit {unit!r} (steps, epochs, tokens)")


def total_steps(checkpoint: OlmoCheckpoint, *, batches_per_epoch: int, global_batch_size: int) -> int:
    """How many steps the run takes: its ``max_duration``, cut by ``hard_stop``; checked against the trainer state."""
    trainer = checkpoint.config.get("trainer") or {}
    duration = trainer.get("max_duration") or {"value": 1, "unit": "epochs"}
    steps = steps_of(duration, batches_per_epoch=batches_per_epoch, global_batch_size=global_batch_size)
    state = checkpoint.state
    if state is not None and state.max_steps is not None and state.max_steps != steps:
        raise StateMismatch(
            f"{checkpoint.where}: the trainer state says the run takes {state.max_steps} steps, its max_duration "
            f"({duration['value']} {duration['unit']}) gives {steps} with {batches_per_epoch} batches per epoch"
        )
    if trainer.get("hard_stop"):
        steps = min(steps, steps_of(trainer["hard_stop"], batches_per_epoch=batches_per_epoch, global_batch_size=global_batch_size))
    return steps


def check_state(checkpoint: OlmoCheckpoint, *, dataset: Any, batches_per_epoch: int, global_batch_size: int) -> None:
    """Refuse, naming the setting, whatever in the trainer state contradicts the dataset the replay built."""
    state: TrainerState | None = checkpoint.state
    if state is None:
        return
    where = f"{checkpoint.where} (train/rank0.pt)"
    if state.dataset_type != "fsl":
        raise StateMismatch(f"{where}: the data loader state is of a {state.dataset_type!r} dataset, the config's is fixed-length ('fsl')")
    for name in ("sequence_length", "max_target_sequence_length"):
        stored, ours = getattr(state, name), getattr(dataset, name)
        if stored != ours:
            raise StateMismatch(f"{where}: {name} {ours} contradicts the trainer state's {stored}")
    if state.dataset_fingerprint_version != dataset.fingerprint_version:
        raise StateMismatch(
            f"{where}: dataset fingerprint version {state.dataset_fingerprint_version} differs from the installed "
            f"OLMo-core's {dataset.fingerprint_version}; the files cannot be checked against it"
        )
    if state.dataset_fingerprint != dataset.fingerprint:
        raise StateMismatch(fingerprint_message(where, checkpoint, dataset))
    done = (state.epoch - 1) * batches_per_epoch + state.batches_processed
    if done != state.global_step or state.tokens_processed != state.batches_processed * global_batch_size:
        raise StateMismatch(
            f"{where}: step {state.global_step} (epoch {state.epoch}, {state.batches_processed} batches and "
            f"{state.tokens_processed} tokens processed) does not follow from {batches_per_epoch} batches of "
            f"{global_batch_size} tokens per epoch (global batch size or dataset changed during the run?)"
        )


def fingerprint_message(where: str, checkpoint: OlmoCheckpoint, dataset: Any) -> str:
    """Which setting makes the dataset fingerprint differ, as far as the checkpoint tells."""
    assert checkpoint.state is not None
    ours = dataset.fingerprint
    head = f"{where}: dataset fingerprint {checkpoint.state.dataset_fingerprint[:12]} differs from {ours[:12]} of the files here"
    if checkpoint.data_paths is not None:
        then = [posixpath.basename(p) for p in checkpoint.data_paths]
        now = [Path(str(p)).name for p in dataset.paths]
        if len(then) != len(now):
            return f"{head}: data_paths.txt lists {len(then)} token files, the config resolves to {len(now)}"
        for number, (a, b) in enumerate(zip(then, now)):
            if a != b:
                return f"{head}: token file {number} is {b} here, {a} in data_paths.txt"
    settings = ", ".join(f"{f}={getattr(dataset, f)}" for f in dataset.fingerprint_fields)
    names = "names match data_paths.txt" if checkpoint.data_paths is not None else "names cannot be compared (no data_paths.txt)"
    return (
        f"{head}: OLMo-core fingerprints {type(dataset).__name__}, {settings} and each token file's name and size; "
        f"the {len(dataset.paths)} {names}, so a file's size ({sum(dataset.file_sizes)} bytes in all here) or one of those settings differs from training"
    )

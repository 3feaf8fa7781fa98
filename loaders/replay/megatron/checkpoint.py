"""The training arguments a Megatron-LM checkpoint saved (``state_dict["args"]``), and the iteration it reached.

Megatron-LM saves its ``args`` namespace in every checkpoint: ``iter_NNNNNNN/common.pt`` in the distributed
(``torch_dist``) format, ``iter_NNNNNNN/mp_rank_00[_000]/model_optim_rng.pt`` in the legacy one. The file is read
with ``torch.load(weights_only=True)`` and megatron-core's own list of safe classes, memory-mapped, so a legacy
checkpoint's weights are not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import RegistrationError
from ._extra import megatron_module
from .args import MegatronArgs, from_mapping

STATE_FILES = ("common.pt", "mp_rank_00/model_optim_rng.pt", "mp_rank_00_000/model_optim_rng.pt")


@dataclass(frozen=True)
class SavedArgs:
    """A checkpoint's arguments, the iteration it was saved at and the samples consumed by then."""

    args: MegatronArgs
    iteration: int | None
    consumed_train_samples: int | None
    path: Path


def state_file(path: str | Path) -> Path:
    """The file holding ``args``: ``path`` itself, or found below a checkpoint folder or an ``iter_*`` folder."""
    path = Path(path)
    if path.is_file():
        return path
    tracker = path / "latest_checkpointed_iteration.txt"
    if tracker.is_file():
        text = tracker.read_text().strip()
        path = path / ("release" if text == "release" else f"iter_{int(text):07d}")
    for name in STATE_FILES:
        if (path / name).is_file():
            return path / name
    raise RegistrationError(f"checkpoint {path}: no {', '.join(STATE_FILES)} (and no latest_checkpointed_iteration.txt above it)")


def read_checkpoint_args(path: str | Path) -> SavedArgs:
    """The arguments saved in a Megatron-LM checkpoint (a checkpoint folder, an ``iter_*`` folder or the file)."""
    import pickle

    import torch

    file = state_file(path)
    megatron_module("megatron.core.safe_globals").register_safe_globals()
    try:
        state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
    except (pickle.UnpicklingError, RuntimeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RegistrationError(f"checkpoint {file}: cannot be read safely ({first})") from None
    saved = state.get("args") if isinstance(state, dict) else None
    if saved is None:
        raise RegistrationError(f"checkpoint {file}: holds no saved training arguments ('args')")
    values = dict(vars(saved))
    return SavedArgs(
        args=from_mapping(values, where=str(file)),
        iteration=state.get("iteration"),
        consumed_train_samples=values.get("consumed_train_samples"),
        path=file,
    )

"""Recording a Megatron-Energon loader: each batch's samples are kept for themselves (text, tokens, media fields and
Energon's own ``__key__``), and its ``__restore_key__`` is noted beside them, so a page can rebuild the batch with
Energon's ``restore_sample`` wherever the dataset is available and say whether it matches what was recorded.

``megatron.energon`` is imported on use (the ``energon`` extra: ``pip install 'batchscope[energon]'``).

>>> loader = get_savable_loader(get_train_dataset(path, batch_size=8, shuffle_buffer_size=100,
...                             max_samples_per_sequence=10, worker_config=WorkerConfig(rank, world_size, 2)))  # doctest: +SKIP
>>> rec = record_energon(loader, path=path, batch_size=8, shuffle_buffer_size=100, max_samples_per_sequence=10,
...                      run="vlm", root="batchscope-data", rank=rank, world_size=world_size)           # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

from .extract import samples as generic_samples
from .recorder import Recorder, RecordOptions

EXTRA = "energon"
#: Fields of an Energon batch that describe it rather than its samples (the key is kept, as ``energon_key``).
META = ("__restore_key__", "__subflavors__", "__sources__")


def _energon() -> Any:
    try:
        import megatron.energon as energon
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"recording Megatron-Energon needs the '{EXTRA}' extra: pip install 'batchscope[{EXTRA}]'") from exc
    return energon


def plain(value: Any) -> Any:
    """A restore key (nested tuples of names and numbers) as JSON lists, and back with :func:`restore_key`."""
    return [plain(v) for v in value] if isinstance(value, (tuple, list)) else value


def restore_key(value: Any) -> Any:
    return tuple(restore_key(v) for v in value) if isinstance(value, list) else value


def batch_samples(batch: Any) -> list[dict[str, Any]]:
    """One dict per sample of an Energon batch (a dataclass of per-sample lists): every field but the batch's own."""
    if not dataclasses.is_dataclass(batch):
        return generic_samples(batch)
    columns = {
        ("energon_key" if f.name == "__key__" else f.name): getattr(batch, f.name) for f in dataclasses.fields(batch) if f.name not in META
    }
    return generic_samples(columns)


def note(batch: Any) -> Any:
    """What the ledger keeps of each micro-batch: its restore key."""
    return plain(getattr(batch, "__restore_key__", None))


def record_energon(
    loader: Any,
    *,
    path: str | os.PathLike[str],
    batch_size: int,
    shuffle_buffer_size: int | None,
    max_samples_per_sequence: int | None,
    run: str,
    root: Any = None,
    rank: int = 0,
    world_size: int = 1,
    options: RecordOptions = RecordOptions(),
) -> Recorder:
    """:func:`batchscope.record` for an Energon savable loader built from ``path`` with these settings (kept in the run's
    manifest so a page can rebuild a batch with ``restore_sample``)."""
    config = {
        "path": os.path.abspath(os.fspath(path)),
        "batch_size": batch_size,
        "shuffle_buffer_size": shuffle_buffer_size,
        "max_samples_per_sequence": max_samples_per_sequence,
    }
    return Recorder(
        loader, run=run, root=root, rank=rank, world_size=world_size, samples=batch_samples, options=options,
        hook=EXTRA, hook_config=config, note=note,
    )  # fmt: skip


@functools.lru_cache(maxsize=8)
def _loader(path: str, batch_size: int, shuffle: int | None, per_sequence: int | None, rank: int, world_size: int) -> Any:
    energon = _energon()
    config = energon.WorkerConfig(rank=rank, world_size=world_size, num_workers=0)
    dataset = energon.get_train_dataset(
        path, batch_size=batch_size, shuffle_buffer_size=shuffle, max_samples_per_sequence=per_sequence, worker_config=config
    )
    return energon.get_savable_loader(dataset)


def restore(config: dict[str, Any], rank: int, world_size: int, key: Any) -> list[dict[str, Any]]:
    """The samples of the batch ``key`` names, rebuilt by Energon's ``restore_sample`` from the dataset at
    ``config["path"]`` (raises when the dataset or Energon is not available)."""
    if not os.path.isdir(config["path"]):
        raise FileNotFoundError(f"the Energon dataset {config['path']} is not available here")
    loader = _loader(
        config["path"], config["batch_size"], config["shuffle_buffer_size"], config["max_samples_per_sequence"], rank, world_size
    )
    return batch_samples(loader.restore_sample(restore_key(key)))

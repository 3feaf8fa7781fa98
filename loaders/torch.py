"""PyTorch adapter: an IterableDataset for ``DataLoader`` (any ``num_workers``) that works under torchrun.

Workers build batches (step ``s`` goes to worker ``s mod num_workers``, and
``DataLoader`` hands them out round-robin, so steps arrive in order); the
main process records each batch in the ledger as the trainer receives it.

>>> loader = make_loader(run, num_workers=2)            # doctest: +SKIP
>>> for batch in loader:                                 # doctest: +SKIP
...     loss = model(batch["input_ids"]); loader.log(batch["step"], loss=float(loss))
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from .catalog import Catalog
from .collate import collate_numpy
from .errors import StateMismatch
from .ledger import batch_summary
from .reader import STATE_FORMAT
from .run import Run


def collate_torch(batch_dict: dict[str, Any]) -> dict[str, Any]:
    """numpy arrays → tensors; everything else unchanged."""
    return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in batch_dict.items()}


class BatchscopeDataset(IterableDataset):
    """Batches of one rank as collated tensors; picklable (re-opens the run in each worker)."""

    def __init__(self, root: str, run: str, rank: int, world_size: int, *, start_step: int = 0, end_step: int | None = None) -> None:
        super().__init__()
        self.root = root
        self.run_name = run
        self.rank = rank
        self.world_size = world_size
        self.start_step = start_step
        self.end_step = end_step

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        run = Catalog(self.root).run(self.run_name)
        reader = run.reader(
            self.rank, self.world_size, start_step=self.start_step, end_step=self.end_step,
            ledger=False, worker=worker, num_workers=workers, prefetch=2, threads=1, steps_per_task=1,
        )
        with reader:
            for batch in reader:
                item = collate_torch(collate_numpy(batch))
                item["_batchscope"] = batch_summary(batch)
                yield item


class Loader:
    """A ``DataLoader`` over :class:`BatchscopeDataset` that writes the ledger and saves/restores its position."""

    def __init__(self, run: Run, rank: int, world_size: int, *, num_workers: int = 0, start_step: int = 0, end_step: int | None = None, **dataloader_options: Any) -> None:
        run.check_world_size(world_size)
        self.run = run
        self.rank = rank
        self.world_size = world_size
        self.num_workers = num_workers
        self.next_step = start_step
        self.end_step = end_step
        self._options = dataloader_options
        self._writer = None

    def _dataloader(self) -> DataLoader:
        dataset = BatchscopeDataset(self.run.catalog.root, self.run.name, self.rank, self.world_size, start_step=self.next_step, end_step=self.end_step)
        return DataLoader(dataset, batch_size=None, num_workers=self.num_workers, **self._options)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._writer is None:
            if self.rank == 0:
                self.run.record_world_size(self.next_step, self.world_size)
            self._writer = self.run.ledger.writer(self.rank, self.world_size)
        for item in self._dataloader():
            summary = item.pop("_batchscope")
            self._writer.record_summary(summary)
            self.next_step = summary["step"] + 1
            yield item

    def log(self, step: int, **metrics: Any) -> None:
        """Record metrics for ``step`` in the ledger."""
        if self._writer is None:
            self._writer = self.run.ledger.writer(self.rank, self.world_size)
        self._writer.log(step, **metrics)

    def state_dict(self) -> dict[str, Any]:
        """The next step to read (flushes the ledger first, so it covers everything before this state)."""
        if self._writer is not None:
            self._writer.flush()
        return {"format": STATE_FORMAT, "run": self.run.name, "fingerprint": self.run.fingerprint, "step": self.next_step, "world_size": self.world_size, "rank": self.rank}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("format") != STATE_FORMAT or state.get("fingerprint") != self.run.fingerprint or state.get("run") != self.run.name:
            raise StateMismatch(
                f"loader state belongs to run {state.get('run')!r} (plan {str(state.get('fingerprint'))[:12]}), "
                f"not run {self.run.name!r} (plan {self.run.fingerprint[:12]})"
            )
        self.next_step = int(state["step"])

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_loader(run: Run, *, rank: int | None = None, world_size: int | None = None, **options: Any) -> Loader:
    """A :class:`Loader` for this process; rank and world size default to torchrun's ``RANK``/``WORLD_SIZE``."""
    rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", "1")) if world_size is None else world_size
    return Loader(run, rank, world_size, **options)

"""PyTorch adapter: an IterableDataset for ``DataLoader`` (any ``num_workers``) that works under torchrun.

Workers build batches (step ``s`` goes to worker ``s mod num_workers``, and
``DataLoader`` hands them out round-robin, so steps arrive in order); the
main process records each batch in the ledger as the trainer receives it.

>>> loader = make_loader(run, num_workers=2)            # doctest: +SKIP
>>> for batch in loader:                                 # doctest: +SKIP
...     loss = model(batch["input_ids"]); loader.log(batch["step"], loss=float(loss))   # marks the step trained
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from .run.catalog import Catalog
from .run.facade import Run
from .sampling.collate import collate_numpy
from .training.ledger_writer import batch_summary
from .training.progress import Progress

__all__ = ["BatchscopeDataset", "Loader", "collate_torch", "make_loader"]


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
            self.rank,
            self.world_size,
            start_step=self.start_step,
            end_step=self.end_step,
            ledger=False,
            worker=worker,
            num_workers=workers,
            prefetch=2,
            threads=1,
            steps_per_task=1,
        )
        with reader:
            for batch in reader:
                item = collate_torch(collate_numpy(batch))
                item["_batchscope"] = batch_summary(batch)
                yield item


class Loader:
    """A ``DataLoader`` over :class:`BatchscopeDataset` that writes the ledger and saves/restores its position.

    Like :class:`~loaders.training.reader.Reader`, its state means *trained*: ``log(step, ...)`` or ``mark_trained(step)``
    moves it, and batches handed out but not marked are delivered again after a resume. It has ``state_dict`` and
    ``load_state_dict``, so frameworks that save stateful dataloaders (PyTorch Lightning) checkpoint it as is. A new
    iteration continues after the last batch handed out (or where ``load_state_dict`` put it).
    """

    def __init__(
        self,
        run: Run,
        rank: int,
        world_size: int,
        *,
        num_workers: int = 0,
        start_step: int = 0,
        end_step: int | None = None,
        flush_seconds: float = 2.0,
        mark_on_handout: bool = False,
        **dataloader_options: Any,
    ) -> None:
        run.check_world_size(world_size)
        self.run = run
        self.rank = rank
        self.world_size = world_size
        self.num_workers = num_workers
        self.next_step = start_step
        self.end_step = end_step
        self.progress = Progress(
            run, rank, world_size, start_step=start_step, flush_seconds=flush_seconds, mark_on_handout=mark_on_handout, what="loader"
        )
        self._options = dataloader_options

    def _dataloader(self) -> DataLoader:
        dataset = BatchscopeDataset(
            self.run.catalog.root, self.run.name, self.rank, self.world_size, start_step=self.next_step, end_step=self.end_step
        )
        return DataLoader(dataset, batch_size=None, num_workers=self.num_workers, **self._options)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.progress.open()
        for item in self._dataloader():
            summary = item.pop("_batchscope")
            self.progress.handed_out(summary["step"], lambda: summary)
            self.next_step = summary["step"] + 1
            yield item

    def log(self, step: int, **metrics: Any) -> None:
        """Record metrics for ``step`` in the ledger and mark it trained."""
        self.progress.log(step, metrics)

    def mark_trained(self, step: int) -> None:
        """The trainer finished ``step`` (and every step handed out before it): a state saved now resumes after it."""
        self.progress.mark_trained(step)

    def state_dict(self) -> dict[str, Any]:
        """Where a resume continues: after the last trained step (flushes the ledger first)."""
        return self.progress.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at ``state["step"]``; refuses a state saved under another run, plan or read format."""
        self.next_step = self.progress.load_state_dict(state)

    def close(self) -> None:
        """Stop the ledger's flush timer and write what is buffered."""
        self.progress.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_loader(run: Run, *, rank: int | None = None, world_size: int | None = None, **options: Any) -> Loader:
    """A :class:`Loader` for this process; rank and world size default to torchrun's ``RANK``/``WORLD_SIZE``."""
    rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", "1")) if world_size is None else world_size
    return Loader(run, rank, world_size, **options)

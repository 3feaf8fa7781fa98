"""PyTorch Lightning: a DataModule that serves one rank's batches and a Callback that marks them trained.

Lightning saves the loader's state in its own checkpoints (the loader is a stateful dataloader: it has
``state_dict``/``load_state_dict``) and restores it on ``trainer.fit(..., ckpt_path=...)``. Lightning fetches one
batch ahead of the one it trains; :class:`BatchscopeCallback` marks a batch trained (logging its loss) when
Lightning finishes it, before any checkpoint of that step is written, so a resume continues with the first batch
not trained — the prefetched one included. Every checkpoint waits until every rank's ledger is on disk (fsynced)
through the step it describes.

A batchscope step is one batch of each rank: with ``accumulate_grad_batches=A`` one optimizer step (what
``max_steps`` and ``global_step`` count) trains ``A`` batchscope steps, so ``max_steps × A`` must not exceed the
run's steps; ``fit`` refuses it otherwise, naming both numbers, instead of waiting forever for batches the run
does not have. Without ``max_steps`` (``-1``) the run is one epoch of the loader: ``max_epochs=1`` trains it to its
end, and other ``max_epochs`` are refused.

>>> import lightning as L                                                    # doctest: +SKIP
>>> from loaders.adapters.lightning import BatchscopeCallback, BatchscopeDataModule
>>> trainer = L.Trainer(max_steps=100, callbacks=[BatchscopeCallback(), L.pytorch.callbacks.ModelCheckpoint(
...     dirpath="ckpt", every_n_train_steps=10, save_top_k=-1)])             # doctest: +SKIP
>>> trainer.fit(model, datamodule=BatchscopeDataModule(run), ckpt_path="last")   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import lightning as L

from ..errors import InvalidPlan
from ..run.facade import Run
from ..torch import Loader, make_loader
from .steps import check_optimizer_steps


class BatchscopeDataModule(L.LightningDataModule):
    """Serves ``run`` to this process's rank (``trainer.global_rank`` of ``trainer.world_size``).

    ``loader_options`` go to :func:`loaders.torch.make_loader` (``num_workers``, ``flush_seconds``...). Needs a
    :class:`BatchscopeCallback` among the trainer's callbacks; batches are dicts of tensors with ``step`` (see
    :func:`loaders.sampling.collate.collate_numpy`).
    """

    def __init__(self, run: Run, **loader_options: Any) -> None:
        super().__init__()
        self.run = run
        self.loader_options = loader_options
        self.loader: Loader | None = None

    def setup(self, stage: str) -> None:
        """At ``fit`` start: refuse a ``max_steps`` the run cannot feed (see :mod:`loaders.adapters.steps`)."""
        if stage != "fit" or self.trainer is None:
            return
        trainer = self.trainer
        accumulate = trainer.accumulate_grad_batches
        if trainer.max_steps >= 0:
            arguments = f"Trainer(max_steps={trainer.max_steps}, accumulate_grad_batches={accumulate})"
            check_optimizer_steps(self.run, trainer.max_steps, accumulate, arguments=arguments)
        elif trainer.max_epochs != 1:  # the whole run is one epoch of the loader; later epochs would be empty
            raise InvalidPlan(
                f"Trainer(max_steps=-1, max_epochs={trainer.max_epochs}): run {self.run.name} is one epoch of its loader "
                f"({self.run.total_steps} steps); set max_steps (at most {self.run.total_steps // max(1, accumulate)}) "
                "or max_epochs=1"
            )

    def train_dataloader(self) -> Loader:
        """The rank's :class:`~loaders.torch.Loader`; Lightning restores its state when resuming from a checkpoint."""
        trainer = self.trainer
        if trainer is None or not any(isinstance(c, BatchscopeCallback) for c in trainer.callbacks):
            raise RuntimeError(
                "BatchscopeDataModule needs a BatchscopeCallback in Trainer(callbacks=[...]): without it no batch is "
                "marked trained and checkpoints would resume at the first step"
            )
        if self.loader is None:
            self.loader = make_loader(self.run, rank=trainer.global_rank, world_size=trainer.world_size, **self.loader_options)
        return self.loader

    def teardown(self, stage: str) -> None:
        """Flush and close the ledger."""
        if self.loader is not None:
            self.loader.close()


class BatchscopeCallback(L.Callback):
    """Marks each batch trained when Lightning finishes it (logging its loss), for every batchscope loader in use,
    and makes every rank's ledger durable before a checkpoint is written.

    Lightning runs checkpoint callbacks after all others, so a checkpoint taken at the end of a step includes it.
    """

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        """Every rank fsyncs its ledger, then waits for the others: the checkpoint (written by rank 0 after this hook)
        is never ahead of any rank's ledger."""
        for loader in _loaders(trainer, required=False):
            loader.progress.flush(sync=True)
        if trainer.world_size > 1:
            trainer.strategy.barrier("batchscope-ledger")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = batch.get("step") if isinstance(batch, dict) else None
        if step is None:
            raise RuntimeError("BatchscopeCallback: the batch has no 'step' field; is the train dataloader a batchscope Loader?")
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        for loader in _loaders(trainer):
            if loss is None:
                loader.mark_trained(int(step))
            else:
                loader.log(int(step), loss=float(loss))


def _loaders(trainer: L.Trainer, *, required: bool = True) -> list[Loader]:
    """The batchscope loaders among the trainer's train dataloaders (``required``: at least one)."""
    found = trainer.train_dataloader
    candidates = found.values() if isinstance(found, dict) else found if isinstance(found, (list, tuple)) else [found]
    loaders = [c for c in candidates if isinstance(c, Loader)]
    if not loaders and required:
        raise RuntimeError("BatchscopeCallback: no batchscope Loader among the train dataloaders (use BatchscopeDataModule)")
    return loaders

"""A real PyTorch Lightning job for the adapter test: Trainer.fit with ModelCheckpoint every few steps, resumable.

Arguments: see tests.support.training.job_arguments.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch

from loaders import Catalog
from loaders.adapters.lightning import BatchscopeCallback, BatchscopeDataModule
from tests.support.training import TinyLM, job_arguments, pause_if, record


class Module(L.LightningModule):
    def __init__(self, out: str, pause_at: int) -> None:
        super().__init__()
        self.model = TinyLM()
        self.out = out
        self.pause_at = pause_at
        self.batches = 0

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        record(self.out, int(batch["step"]), batch["input_ids"], batch["loss_mask"])
        labels = batch["input_ids"].masked_fill(batch["loss_mask"] == 0, -100)
        pause_if(self.batches, self.pause_at)
        self.batches += 1
        return self.model(batch["input_ids"], labels)["loss"]

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    args = job_arguments(__doc__)

    torch.manual_seed(0)
    checkpoints = Path(args.out) / "checkpoints"
    saver = L.pytorch.callbacks.ModelCheckpoint(dirpath=checkpoints, filename="{step}", every_n_train_steps=args.every, save_top_k=-1)
    trainer = L.Trainer(
        max_steps=args.max_steps,
        accumulate_grad_batches=args.accumulate,
        callbacks=[BatchscopeCallback(), saver],
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    last = max(checkpoints.glob("step=*.ckpt"), key=lambda p: int(p.stem.split("=")[1]), default=None) if args.resume else None
    run = Catalog(args.root).run(args.run)
    trainer.fit(Module(args.out, args.pause_at), datamodule=BatchscopeDataModule(run, flush_seconds=0.1), ckpt_path=last)


if __name__ == "__main__":
    main()

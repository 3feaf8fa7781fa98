"""A real distributed job over a ``save_to_disk`` folder, for the replay tests: run it under torchrun (gloo, CPU).

Each rank first reads the folder the plain way — ``load_from_disk(...).shuffle(seed=3)``, torch's
``DistributedSampler(seed=11)`` and ``DataLoader(batch_size=2)`` for 2 epochs, with ``drop_last`` off and then on — and
then trains a tiny model with ``transformers.Trainer`` (per-device batch 1, gradient accumulation 2, 2 epochs, seed
13). It writes what each rank received at each step (``{"step", "rank", "samples", "indices"}`` per line), the loss
of the plain loops as TensorBoard events (rank 0, ``SummaryWriter``) and the Trainer's ``trainer_state.json``.

Arguments: FOLDER OUT.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import datasets
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from tests.support.replays import by_step, recording_lm, step_callback, token_digest


class Indexed(Dataset):
    """The dataset the job trains on, each row with the index the sampler drew (what a job logs to be verified)."""

    def __init__(self, data: datasets.Dataset) -> None:
        self.data = data.with_format("torch", columns=["input_ids", "labels"])

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {**self.data[index], "index": torch.tensor(index)}


def plain_loops(folder: str, out: Path, rank: int, world: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    data = Indexed(datasets.load_from_disk(folder).shuffle(seed=3))
    for drop_last in (False, True):
        name = f"plain-drop{int(drop_last)}"
        sampler = DistributedSampler(data, num_replicas=world, rank=rank, seed=11, drop_last=drop_last)
        loader = DataLoader(data, batch_size=2, sampler=sampler, drop_last=drop_last)
        writer = SummaryWriter(str(out / f"{name}-tb")) if rank == 0 else None
        step = 0
        with open(out / f"{name}-r{rank}.jsonl", "w") as log:
            for epoch in range(2):
                sampler.set_epoch(epoch)
                for batch in loader:
                    tokens = torch.tensor([float(batch["input_ids"].float().mean())])
                    dist.all_reduce(tokens)  # the ranks really train together
                    samples = [token_digest(row) for row in batch["input_ids"]]
                    log.write(json.dumps({"step": step, "rank": rank, "samples": samples, "indices": batch["index"].tolist()}) + "\n")
                    if writer is not None:
                        writer.add_scalar("train/loss", float(tokens[0]) / world / 100, step)
                    step += 1
        if writer is not None:
            writer.close()


def trainer_run(folder: str, out: Path, rank: int) -> None:
    from transformers import Trainer, TrainingArguments

    received: list = []
    torch.manual_seed(0)
    model = recording_lm(received, rank)
    args = TrainingArguments(
        str(out / "trainer"),
        per_device_train_batch_size=1,
        gradient_accumulation_steps=2,
        num_train_epochs=2,
        seed=13,
        learning_rate=0.01,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        ddp_backend="gloo",
    )
    trainer = Trainer(model=model, args=args, train_dataset=datasets.load_from_disk(folder), callbacks=[step_callback(model)])
    trainer.train()
    if rank == 0:
        trainer.save_state()
    with open(out / f"trainer-r{rank}.jsonl", "w") as log:
        for (step, r), samples in by_step(received).items():
            log.write(json.dumps({"step": step, "rank": r, "samples": samples}) + "\n")


def main() -> None:
    folder, out = sys.argv[1], Path(sys.argv[2])
    datasets.disable_progress_bars()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    plain_loops(folder, out, rank, world)
    trainer_run(folder, out, rank)
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)  # skip interpreter teardown (gloo's threads): every file above is closed


if __name__ == "__main__":
    main()

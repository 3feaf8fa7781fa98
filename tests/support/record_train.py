"""A real distributed job recorded with batchscope.record: torchrun, gloo, a DataLoader with workers over a
DistributedSampler, gradient-free "training" with all-reduce, and a checkpoint (the recorder's state) every step."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

import batchscope
from loaders.record import column
from tests.support.record_loader import make_loader


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("run")
    parser.add_argument("state")
    parser.add_argument("--sleep", type=float, default=0.0)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    state_path = Path(args.state)
    state_path.parent.mkdir(parents=True, exist_ok=True)
    (state_path.parent / f"pid-{rank}").write_text(str(os.getpid()))
    start = json.loads(state_path.read_text())["step"] if state_path.exists() else 0
    loader: DataLoader = make_loader(args.root, rank, world_size, workers=2)
    rec = batchscope.record(
        itertools.islice(iter(loader), start, None),  # the resumed job skips what its checkpoint covers
        run=args.run,
        root=args.root,
        rank=rank,
        world_size=world_size,
        source="corpus@v1",
        keys=column("id"),
        start_step=start,
    )
    yielded = open(state_path.parent / f"yielded-{rank}.txt", "a")
    weight = torch.zeros(1)
    for batch in rec:
        step = rec.step - 1
        yielded.write(f"{step} {time.time():.3f}\n")
        yielded.flush()
        lengths = torch.tensor([float(len(t)) for t in batch["text"]])
        per_sample = (weight - lengths) ** 2
        loss = per_sample.mean()
        dist.all_reduce(loss)
        weight += 0.01 * (lengths.mean() - weight)
        dist.all_reduce(weight)
        weight /= world_size
        rec.log(step, loss=float(loss) / world_size, sample_loss=per_sample.tolist())
        saved = rec.state_dict()  # every rank: its records are on disk up to here
        dist.barrier()  # a checkpoint is collective
        if rank == 0:
            tmp = state_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(saved))
            os.replace(tmp, state_path)
        time.sleep(args.sleep)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

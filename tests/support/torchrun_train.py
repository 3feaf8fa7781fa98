"""A real distributed training script for the torchrun tests: gloo all-reduce, ledger, saved reader state.

A checkpoint every ``--every`` steps is the common pattern: a barrier, then rank 0 alone takes the loader's state and
writes it (the other ranks' ledgers must already hold what it describes). ``--pause-after S`` stalls rank 0 right after
the first checkpoint at step S or later (the test kills the job there); ``--max-steps N`` stops after N steps.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from loaders import Catalog
from loaders.torch import make_loader
from tests.support.training import record


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("run")
    parser.add_argument("state")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--pause-after", type=int, default=-1)
    parser.add_argument("--max-steps", type=int, default=-1)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    Path(args.state).parent.mkdir(parents=True, exist_ok=True)
    (Path(args.state).parent / f"pid-{world_size}-{rank}").write_text(str(os.getpid()))
    run = Catalog(args.root).run(args.run)
    loader = make_loader(run, num_workers=args.workers)
    state_path = Path(args.state)
    if state_path.exists():
        loader.load_state_dict(json.loads(state_path.read_text()))
    weight = torch.zeros(1)
    received = state_path.parent / f"received-w{world_size}-r{rank}"
    received.mkdir(exist_ok=True)
    with loader:
        for batch in loader:
            # A real (tiny) model step: a scalar fit to the mean token length, averaged across ranks.
            lengths = torch.tensor([float(len(t)) for t in batch["text"]])
            record(received, batch["step"], batch["index"], lengths)  # what this rank's model step received
            loss = ((weight - lengths) ** 2).mean()
            dist.all_reduce(loss)
            loss /= world_size
            weight += 0.01 * (lengths.mean() - weight)
            dist.all_reduce(weight)
            weight /= world_size
            loader.log(batch["step"], loss=float(loss))
            step = int(batch["step"]) + 1  # steps trained
            if step % args.every == 0:
                dist.barrier()  # every rank has trained (and marked) the steps the checkpoint covers
                if rank == 0:
                    tmp = state_path.with_suffix(".tmp")
                    tmp.write_text(json.dumps(loader.state_dict()))
                    os.replace(tmp, state_path)
                    if 0 <= args.pause_after <= step:
                        time.sleep(120)  # killed here, right after the checkpoint
            if step == args.max_steps:
                break
            time.sleep(args.sleep)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""A torchrun job reading a LitData StreamingDataLoader (shuffled, 2 ranks) under batchscope.record; each rank writes
the keys and texts its trainer got, per step, for the test to compare with the recorded run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch.distributed as dist

import batchscope
from loaders.record import column


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("chunks")
    parser.add_argument("out")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    from litdata import StreamingDataLoader, StreamingDataset

    loader = StreamingDataLoader(StreamingDataset(args.chunks, shuffle=True, seed=5), batch_size=4, num_workers=1)
    rec = batchscope.record(
        loader, run="lit", root=args.root, rank=rank, world_size=world_size, source="corpus@v1", keys=column("id"), hook="litdata"
    )
    got = []
    for batch in rec:
        got.append({"keys": list(batch["id"]), "text": list(batch["text"])})
        rec.log(rec.step - 1, loss=float(len(got)))
    Path(args.out, f"yielded-{rank}.json").write_text(json.dumps(got))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""A real training job on MosaicML Streaming, run under torchrun (gloo, CPU): ``StreamingDataset`` over MDS streams,
``StreamingDataLoader`` with worker processes, a tiny all-reduced model step, and a record of exactly which samples
each rank's DataLoader yielded at each step.

``python -m torch.distributed.run --nproc_per_node N tests/support/streaming_train.py JOBS.json`` runs the jobs the
file lists, one after the other (see ``tests/support/streaming_runs.py``, which writes them and reads the records).
Each rank appends ``{"step", "epoch", "samples": [[uid, digest], ...]}`` to ``<out>/rank-<rank>.jsonl``; a job with
``stop_after`` saves rank 0's ``loader.state_dict()`` to ``<out>/state.json`` after that many steps and stops, as a
job does at a checkpoint before it is stopped; a job with ``resume`` loads such a state and goes on from there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from loaders.replay.streaming.library import import_streaming
from tests.support.streaming_runs import sample_digest


def collate(samples: list[dict]) -> dict[str, list]:
    """Runs in the DataLoader worker: each sample's uid and the digest of every field Streaming decoded."""
    return {"uid": [s["uid"] for s in samples], "digest": [sample_digest(s) for s in samples]}


def run_job(job: dict, rank: int, world_size: int) -> None:
    import_streaming()
    from streaming.base.dataloader import StreamingDataLoader
    from streaming.base.dataset import StreamingDataset
    from streaming.base.stream import Stream

    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    dataset = StreamingDataset(streams=[Stream(**s) for s in job["streams"]], batch_size=job["batch_size"], **job["dataset"])
    loader = StreamingDataLoader(dataset, batch_size=job["batch_size"], num_workers=job["workers"], collate_fn=collate)
    first_epoch = 0
    if job.get("resume"):
        state = json.loads(Path(job["resume"]).read_text())
        loader.load_state_dict(state)
        first_epoch = state["epoch"]
    step = job.get("start_step", 0)
    weight = torch.zeros(1)
    with open(out / f"rank-{rank}.jsonl", "a", encoding="utf-8") as records:
        for epoch in range(first_epoch, job["epochs"]):
            for batch in loader:
                records.write(
                    json.dumps({"step": step, "epoch": epoch, "samples": [list(p) for p in zip(batch["uid"], batch["digest"])]}) + "\n"
                )
                # A real (tiny) model step, kept in lockstep across ranks: fit a scalar to the mean uid length.
                target = torch.tensor([float(len(u)) for u in batch["uid"]]).mean()
                loss = (weight - target) ** 2
                dist.all_reduce(loss)
                weight += 0.1 * (target - weight)
                dist.all_reduce(weight)
                weight /= world_size
                step += 1
                if job.get("stop_after") == step:
                    state = loader.state_dict()  # as a checkpoint does; rank 0's is the one saved
                    if rank == 0:
                        (out / "state.json").write_text(json.dumps(state))
                    dist.barrier()
                    return


def main() -> None:
    jobs = json.loads(Path(sys.argv[1]).read_text())
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    for job in jobs:
        run_job(job, rank, world_size)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()

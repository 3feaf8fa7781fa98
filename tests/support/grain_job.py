"""One process of a real multi-process Grain job, for the replay tests: its own slice of a shuffled, repeated
``MapDataset`` over a ``save_to_disk`` folder, iterated by Grain, each step's samples written as digests.

Pipeline: ``source(load_from_disk(FOLDER)).seed(21).shuffle().repeat(2)[p::P].map(to_numpy).batch(2)``.

Arguments: FOLDER PROCESS_INDEX PROCESS_COUNT OUT.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from loaders.replay.grain import import_grain
from tests.support.replays import token_digest


def to_numpy(record: dict) -> dict:
    return {"input_ids": np.asarray(record["input_ids"], dtype=np.int64)}


def main() -> None:
    import datasets

    folder, process, count, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    grain = import_grain()
    ds = grain.MapDataset.source(datasets.load_from_disk(folder)).seed(21).shuffle().repeat(2)
    ds = ds[process::count].map(to_numpy).batch(2)
    with open(out, "w") as log:
        for step, batch in enumerate(ds.to_iter_dataset()):
            log.write(json.dumps({"step": step, "rank": process, "samples": [token_digest(row) for row in batch["input_ids"]]}) + "\n")
    os._exit(0)


if __name__ == "__main__":
    main()

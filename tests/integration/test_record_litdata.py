"""Recording LitData's StreamingDataLoader under torchrun (2 ranks, shuffled chunks, a worker each): the recorded run
holds exactly the batches each rank's trainer got, read back as the version's rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loaders import Catalog
from loaders.record.litdata import optimize_version
from tests.support.readpath import write_text_dataset

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "record_litdata.py"


def test_streaming_dataloader_batches_are_recorded_per_rank(tmp_path):
    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "corpus", 64, row_group=4, shards=2)
    chunks = optimize_version(catalog, "corpus@v1", tmp_path / "chunks", chunk_bytes="2kb")
    out = tmp_path / "out"
    out.mkdir()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--nnodes=1", "--master_addr=127.0.0.1"]
    command += [f"--master_port={port}", str(SCRIPT), catalog.root, chunks, str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    run = catalog.run("lit")
    keys = []
    for rank in range(2):
        got = json.loads((out / f"yielded-{rank}.json").read_text())
        assert got and run.total_steps >= len(got)
        for step, batch in enumerate(got):
            recorded = run.batch(step, rank)
            assert recorded.keys == batch["keys"] and [s.record["text"] for s in recorded.samples] == batch["text"]
            keys += batch["keys"]
    assert sorted(keys) == sorted(f"corpus-{i}" for i in range(64))  # one epoch over both ranks, each row once
    assert keys[:8] != [f"corpus-{i}" for i in range(8)]  # shuffled

"""batchscope tail: one line per step as the ranks log it — loss and worst sample with its anchor URL — following a
run that is being recorded while the command runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import batchscope
from loaders import Catalog
from loaders.record import column
from tests.support.readpath import write_text_dataset

CLI = str(Path(sys.executable).parent / "batchscope")


def test_tail_prints_each_new_step_with_its_loss_and_worst_sample_as_it_arrives(tmp_path):
    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "alpha", 40, row_group=3, shards=2)
    loader = iter([[{"id": f"alpha-{s * 3 + i}"} for i in range(3)] for s in range(6)])
    rec = batchscope.record(loader, run="t", root=catalog.root, source="alpha@v1", keys=column("id"), flush_seconds=0)
    batches = iter(rec)
    for step in range(2):
        next(batches)
        rec.log(step, loss=1.5 + step, sample_loss=[0.1, 0.2 + step, 0.3])
    once = subprocess.run(
        [CLI, "tail", "t", "--root", catalog.root, "--once"], capture_output=True, text=True, env={**os.environ, "BATCHSCOPE_PORT": "8123"}
    )
    assert once.returncode == 0, once.stderr
    assert once.stdout.splitlines() == [
        "step 0  loss 1.5000  worst: rank 0 #2 sample_loss 0.3000 key alpha-2  http://127.0.0.1:8123/runs/t/steps/0/ranks/0#sample-2",
        "step 1  loss 2.5000  worst: rank 0 #1 sample_loss 1.2000 key alpha-4  http://127.0.0.1:8123/runs/t/steps/1/ranks/0#sample-1",
    ]
    follow = subprocess.Popen([CLI, "tail", "t", "--root", catalog.root, "--idle", "4"], stdout=subprocess.PIPE, text=True)
    try:
        assert follow.stdout is not None
        assert follow.stdout.readline().startswith("step 0  loss 1.5000")
        assert follow.stdout.readline().startswith("step 1  loss 2.5000")
        next(batches)
        started = time.monotonic()
        rec.log(2, loss=9.0, sample_loss=[7.0, 0.0, 0.0])  # logged while tail runs
        line = follow.stdout.readline()
        assert line.startswith("step 2  loss 9.0000  worst: rank 0 #0 sample_loss 7.0000 key alpha-6"), line
        assert time.monotonic() - started < 3
    finally:
        rec.close()
        follow.wait(timeout=30)
    assert follow.returncode == 0

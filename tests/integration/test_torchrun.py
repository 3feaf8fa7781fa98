"""torchrun on 2 ranks, SIGKILL mid-run, resume on 1 rank: every step trained exactly once (by the digests of the
tensors each rank's model step received), and the ledger equals one uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loaders import Catalog, ReadPlan, Source
from tests.support.processes import torchrun_command
from tests.support.readpath import write_text_dataset
from tests.support.training import received, tensor_digest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "torchrun_train.py"


def _torchrun(nproc: int, root: str, run: str, state: Path, *, sleep: float) -> subprocess.Popen:
    command = torchrun_command(str(SCRIPT), root, run, str(state), "--sleep", str(sleep), nproc=nproc)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_sigkill_and_elastic_resume_matches_one_uninterrupted_run(tmp_path):
    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "corpus", 150, row_group=4, shards=3)
    run = catalog.create_run("job", ReadPlan([Source("corpus@v1")], seed=11, global_batch_size=4, steps=40, streams=2))
    state = tmp_path / "state" / "reader.json"

    first = _torchrun(2, catalog.root, "job", state, sleep=0.15)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if state.exists() and json.loads(state.read_text())["step"] >= 12:
            break
        assert first.poll() is None, first.communicate()[0]
        time.sleep(0.05)
    else:
        first.kill()
        pytest.fail("first torchrun did not reach step 12")
    victim = int((state.parent / "pid-2-1").read_text())
    os.kill(victim, signal.SIGKILL)
    output = first.communicate(timeout=120)[0]
    assert first.returncode != 0, output
    saved = json.loads(state.read_text())
    assert 12 <= saved["step"] < 40 and saved["world_size"] == 2

    second = _torchrun(1, catalog.root, "job", state, sleep=0.0)
    output = second.communicate(timeout=180)[0]
    assert second.returncode == 0, output

    run = catalog.run("job")
    assert [(s.start_step, s.world_size) for s in run.world_size_history()] == [(0, 2), (saved["step"], 1)]
    for step in range(run.total_steps):
        world_size = run.world_size_at(step)
        for rank in range(world_size):
            entry = run.ledger.entry(step, rank, world_size)
            assert entry is not None, f"step {step} rank {rank} missing from the ledger"
            assert entry.digest == run.batch(step, rank, world_size=world_size).digest
    # The combined run read exactly what one uninterrupted single-rank run reads.
    combined = [
        key
        for step in range(40)
        for rank in range(run.world_size_at(step))
        for key in run.ledger.entry(step, rank, run.world_size_at(step)).keys
    ]
    uninterrupted = [s.key for step in range(40) for s in run.batch(step, 0, world_size=1).samples]
    assert combined == uninterrupted
    # Each rank's model received exactly the batches of one uninterrupted run: the killed job's steps before the saved
    # state (later ones were rolled back with it), then the resumed job's.
    for world_size, rank, steps in [(2, 0, range(saved["step"])), (2, 1, range(saved["step"])), (1, 0, range(saved["step"], 40))]:
        got = [(r["step"], r["digest"]) for r in received(state.parent / f"received-w{world_size}-r{rank}") if r["step"] in steps]
        expected = []
        for step in steps:
            batch = run.batch(step, rank, world_size=world_size)
            lengths = [float(len(record["text"])) for record in batch.records]
            expected.append((step, tensor_digest(batch.indices, lengths)))
        assert got == expected, (world_size, rank)
    cli = subprocess.run(
        [str(Path(sys.executable).parent / "batchscope"), "verify", "job", "--root", catalog.root], capture_output=True, text=True
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "0 mismatched, 0 without a ledger entry, 0 fetched but not trained, 0 unreadable" in cli.stdout

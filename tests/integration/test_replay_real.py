"""The frameworks' read paths running for real, in several processes, hashed at every step — and the replays equal
them, 100 %: Hugging Face ``datasets`` with torch's DistributedSampler and DataLoader on 2 torchrun ranks (gloo,
CPU; 2 epochs, over 50 steps, drop_last off and on), ``transformers.Trainer`` on the same 2 ranks with gradient
accumulation, and a Grain pipeline sliced over 2 processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app as cli
from loaders import Catalog
from loaders.replay.attach import Imports, attach
from tests.support.processes import free_port
from tests.support.replays import hf_corpus, read_received, replayed_digests

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return hf_corpus(tmp_path_factory.mktemp("real"), rows=101)


@pytest.fixture(scope="module")
def hf_job(corpus, tmp_path_factory) -> Path:
    """What 2 torchrun ranks received (the plain loops and the Trainer), in a folder of logs."""
    out = tmp_path_factory.mktemp("hf-job")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(ROOT / "tests" / "support" / "train_replay_hf.py"),
        str(corpus),
        str(out),
    ]
    done = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _received(out: Path, name: str) -> dict:
    return {**read_received(out / f"{name}-r0.jsonl"), **read_received(out / f"{name}-r1.jsonl")}


@pytest.mark.parametrize("drop_last", [False, True])
def test_datasets_with_distributed_sampler_on_two_ranks_is_replayed_exactly(tmp_path, corpus, hf_job, drop_last):
    name = f"plain-drop{int(drop_last)}"
    received = _received(hf_job, name)
    logged = tmp_path / "indices.jsonl"
    logged.write_text("".join(line for r in (0, 1) for line in (hf_job / f"{name}-r{r}.jsonl").read_text().splitlines(keepends=True)))
    argv = ["--dataset", str(corpus), "--shuffle-seed", "3", "--seed", "11", "--world-size", "2", "--batch-size", "2", "--epochs", "2"]
    argv += ["--drop-last"] if drop_last else []
    catalog = Catalog(tmp_path / "catalog")
    imports = Imports(metrics=(str(hf_job / f"{name}-tb"),), batches=str(logged))
    run = attach(catalog, "hf", "job", argv, imports=imports)
    assert run.total_steps == (50 if drop_last else 52) and len(received) == 2 * run.total_steps
    assert replayed_digests(run) == received
    assert len(run.ledger.series("train/loss", world_size_at=run.world_size_at)) == run.total_steps
    verified = CliRunner().invoke(cli, ["verify", "job", "--root", catalog.root])
    assert verified.exit_code == 0 and f"{2 * run.total_steps} replayed and matching what the run logged" in verified.output


def test_a_trainer_with_gradient_accumulation_on_two_ranks_is_replayed_exactly(tmp_path, corpus, hf_job):
    received = _received(hf_job, "trainer")
    argv = ["--dataset", str(corpus), "--world-size", "2", "--per-device-train-batch-size", "1", "--gradient-accumulation-steps", "2"]
    argv += ["--num-train-epochs", "2", "--seed", "13"]
    state = hf_job / "trainer" / "trainer_state.json"
    run = attach(Catalog(tmp_path / "catalog"), "hf-trainer", "job", argv, imports=Imports(metrics=(str(state),)))
    assert run.total_steps == 52 and replayed_digests(run) == received
    assert len(run.ledger.series("loss", world_size_at=run.world_size_at)) == 52


def test_a_grain_pipeline_sliced_over_two_processes_is_replayed_exactly(tmp_path, corpus):
    script = ROOT / "tests" / "support" / "grain_job.py"
    logs = [tmp_path / f"grain-r{p}.jsonl" for p in (0, 1)]
    jobs = [
        subprocess.Popen([sys.executable, str(script), str(corpus), str(p), "2", str(logs[p])], env=ENV, stderr=subprocess.PIPE, text=True)
        for p in (0, 1)
    ]
    for job in jobs:
        assert job.wait(timeout=240) == 0, job.stderr.read() if job.stderr else ""
    received = {**read_received(logs[0]), **read_received(logs[1])}
    argv = ["--source", str(corpus), "--process-count", "2", "--batch-size", "2", "--dataset-seed", "21", "--epochs", "2"]
    argv += ["--pipeline", "shuffle,repeat,slice,batch"]
    run = attach(Catalog(tmp_path / "catalog"), "grain", "job", argv)
    assert run.total_steps == 51 and replayed_digests(run) == received

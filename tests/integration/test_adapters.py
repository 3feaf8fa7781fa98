"""Lightning and Hugging Face Trainer jobs on a run of 16 steps, SIGKILLed after a checkpoint with batches fetched
beyond it, then resumed from that checkpoint up to max_steps (12 batches): by the digests of the tensors the model
received, every step is trained exactly once, and the plain ``batchscope verify`` agrees (before the resume it reports
the fetched-but-untrained steps as prefetched; after it the steps beyond max_steps as not reached, exit 0 both times).
A ``max_steps`` the run cannot feed is refused when ``fit`` starts, naming both numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loaders.adapters.inputs import causal_lm_inputs
from loaders.sampling.collate import collate_numpy
from loaders.torch import collate_torch
from tests.support.training import (
    assert_each_step_trained_once,
    finish,
    kill_when,
    make_lm_run,
    received,
    start,
    tensor_digest,
    untrained_steps,
    verify_cli,
)

pytestmark = pytest.mark.slow

STEPS = 12  # batches the jobs train (max_steps); the run has 16
RUN_STEPS = 16
PAUSE = ["--pause-at", "6"]  # the first process stalls in batch 6, where the test kills it


def _batches(run):
    return [collate_torch(collate_numpy(run.batch(step, 0, world_size=1))) for step in range(STEPS)]


def _kill_after_seven_batches(process, out: Path) -> list[dict]:
    kill_when(process, lambda: len(received(out)) >= 7, settle=0.5)  # the ledger timer (0.1 s) has flushed the fetches
    return received(out)


def _assert_verify_reports(run, *, trained: int, untrained: list[int]) -> None:
    assert untrained_steps(run, range(RUN_STEPS)) == untrained
    killed = verify_cli(run)  # the killed job: its trained steps verify, the batches in flight were prefetched
    assert killed.exit_code == 0, killed.output
    assert f"steps {untrained[0]}-{untrained[-1]} prefetched" in killed.output
    assert f"{trained} verified, 0 mismatched, 0 without a ledger entry, 0 fetched but not trained" in killed.output


def _assert_verified(run, *, prefetched: int) -> None:
    result = verify_cli(run)
    assert result.exit_code == 0, result.output
    assert f"{STEPS} verified, 0 mismatched, 0 without a ledger entry, 0 fetched but not trained" in result.output
    assert f"{prefetched} prefetched, {RUN_STEPS - STEPS - prefetched} not reached (trained through step {STEPS - 1};" in result.output


def test_lightning_fit_killed_and_resumed_from_its_checkpoint_trains_every_step_once(tmp_path):
    run = make_lm_run(tmp_path, steps=RUN_STEPS)
    out = tmp_path / "out"
    out.mkdir()
    common = [run.catalog.root, run.name, str(out), "--max-steps", str(STEPS), "--every", "4"]
    first = _kill_after_seven_batches(start("train_lightning.py", *common, *PAUSE), out)
    checkpoints = sorted(int(p.stem.split("=")[1]) for p in (out / "checkpoints").glob("step=*.ckpt"))
    assert checkpoints == [4]
    # Step 6 was in training_step and step 7 already prefetched by Lightning: fetched, never trained.
    _assert_verify_reports(run, trained=6, untrained=[6, 7])

    finish(start("train_lightning.py", *common, "--resume"))
    second = received(out)[len(first) :]
    expected = [tensor_digest(b["input_ids"], b["loss_mask"]) for b in _batches(run)]
    assert_each_step_trained_once(first, second, 4, expected)
    assert [r["step"] for r in second] == list(range(4, STEPS))
    _assert_verified(run, prefetched=1)  # Lightning fetched the batch after max_steps


def test_lightning_refuses_a_max_steps_the_run_cannot_feed_when_fit_starts(tmp_path):
    run = make_lm_run(tmp_path, steps=RUN_STEPS)
    out = tmp_path / "out"
    out.mkdir()
    job = start("train_lightning.py", run.catalog.root, run.name, str(out), "--max-steps", "9", "--every", "4", "--accumulate", "2")
    output = job.communicate(timeout=180)[0]  # before: fit trained 16 batches, then waited forever for more
    assert job.returncode != 0
    assert "Trainer(max_steps=9, accumulate_grad_batches=2) needs 18 batches per rank, but run lm has 16 steps" in output
    assert received(out) == [] and run.ledger.entries() == []  # refused before any batch


def test_hf_trainer_killed_and_resumed_from_its_checkpoint_trains_every_step_once(tmp_path):
    run = make_lm_run(tmp_path, steps=RUN_STEPS)
    out = tmp_path / "out"
    out.mkdir()
    # 6 optimizer steps of 2 accumulated batches; a checkpoint every 2 optimizer steps (4 batches).
    common = [run.catalog.root, run.name, str(out), "--max-steps", "6", "--every", "2", "--accumulate", "2"]
    first = _kill_after_seven_batches(start("train_hf.py", *common, *PAUSE), out)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["checkpoint-2"]
    saved = json.loads((out / "checkpoints" / "checkpoint-2" / "trainer_state.json").read_text())
    assert saved["stateful_callbacks"]["BatchscopeCallback"]["attributes"]["batchscope_state"]["step"] == 4
    # Batch 6 was in forward and batch 7 fetched with it for the same optimizer step: fetched, never trained.
    _assert_verify_reports(run, trained=6, untrained=[6, 7])

    finish(start("train_hf.py", *common, "--resume"))
    second = received(out)[len(first) :]
    expected = [tensor_digest(*causal_lm_inputs(b).values()) for b in _batches(run)]
    assert_each_step_trained_once(first, second, 4, expected)
    _assert_verified(run, prefetched=0)
    losses = [run.ledger.metrics(step, 0, 1).get("loss") for step in range(STEPS)]
    assert all(isinstance(loss, float) and loss > 0 for loss in losses)


def test_lightning_without_max_steps_trains_the_run_in_one_epoch_and_refuses_more_epochs(tmp_path):
    import lightning as L

    from loaders.adapters.lightning import BatchscopeCallback, BatchscopeDataModule
    from loaders.errors import InvalidPlan
    from tests.support.train_lightning import Module

    run = make_lm_run(tmp_path, steps=6)
    out = tmp_path / "out"
    out.mkdir()

    def fit(**limits) -> L.Trainer:
        quiet = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
        trainer = L.Trainer(callbacks=[BatchscopeCallback()], accelerator="cpu", devices=1, **quiet, **limits)
        trainer.fit(Module(str(out), -1), datamodule=BatchscopeDataModule(run))
        return trainer

    with pytest.raises(InvalidPlan, match=r"Trainer\(max_steps=-1, max_epochs=1000\): run lm is one epoch of its loader \(6 steps\)"):
        fit(max_steps=-1)  # Lightning would go on through 999 empty epochs
    assert fit(max_steps=-1, max_epochs=1).global_step == 6 and len(received(out)) == 6
    assert verify_cli(run).exit_code == 0

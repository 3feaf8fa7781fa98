"""The sampling of a real ``transformers.Trainer`` run (accelerate's seedable sampler, gradient accumulation with a
short last step per epoch), replayed: every optimizer step holds exactly the samples the model received."""

from __future__ import annotations

import json

import pytest

from loaders import Catalog
from loaders.errors import ReplayError, SettingMismatch
from loaders.replay.attach import Imports, attach
from tests.support.replays import by_step, hf_corpus, recording_lm, replayed_digests, step_callback


def _train(corpus, out, *, batch, accumulate, epochs, seed, data_seed=None, drop_last=False):
    import datasets
    import torch
    from transformers import Trainer, TrainingArguments

    received = []
    torch.manual_seed(0)
    model = recording_lm(received)
    args = TrainingArguments(
        str(out),
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulate,
        num_train_epochs=epochs,
        seed=seed,
        data_seed=data_seed,
        dataloader_drop_last=drop_last,
        learning_rate=0.01,
        use_cpu=True,
        report_to=[],
        save_strategy="steps",
        save_steps=1000,
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=datasets.load_from_disk(str(corpus)), callbacks=[step_callback(model)])
    trainer.train()
    trainer.save_state()
    return by_step(received), trainer


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return hf_corpus(tmp_path_factory.mktemp("trainer"), rows=23)


def test_a_trainer_run_with_gradient_accumulation_is_replayed_step_for_step(tmp_path, corpus):
    # 23 rows in batches of 2: 12 batches an epoch (the last holds one row), 5 per optimizer step: the epoch's 3rd
    # step takes the 2 batches left; 2 epochs
    received, trainer = _train(corpus, tmp_path / "out", batch=2, accumulate=5, epochs=2, seed=9)
    argv = [
        "--dataset",
        str(corpus),
        "--world-size",
        "1",
        "--per-device-train-batch-size",
        "2",
        "--gradient-accumulation-steps",
        "5",
        "--num-train-epochs",
        "2",
        "--seed",
        "9",
    ]
    state = tmp_path / "out" / "trainer_state.json"
    run = attach(Catalog(tmp_path / "catalog"), "hf-trainer", "job", argv, imports=Imports(metrics=(str(state),)))
    assert run.total_steps == trainer.state.global_step == 6
    assert replayed_digests(run) == received
    assert [len(run.batch(s, 0).samples) for s in range(6)] == [10, 10, 3, 10, 10, 3]
    logged = [e["loss"] for e in json.loads(state.read_text())["log_history"] if "loss" in e]
    assert [v for _, v in run.ledger.series("loss", world_size_at=run.world_size_at)] == logged


def test_the_data_seed_and_the_checkpoint_state_are_read_as_the_trainer_reads_them(tmp_path, corpus):
    received, trainer = _train(corpus, tmp_path / "out", batch=3, accumulate=2, epochs=1, seed=1, data_seed=77, drop_last=True)
    trainer.save_model(str(tmp_path / "out" / "checkpoint"))
    trainer.state.save_to_json(str(tmp_path / "out" / "checkpoint" / "trainer_state.json"))
    argv = [
        "--dataset",
        str(corpus),
        "--world-size",
        "1",
        "--gradient-accumulation-steps",
        "2",
        "--seed",
        "1",
        "--data-seed",
        "77",
        "--dataloader-drop-last",
        "--checkpoint",
        str(tmp_path / "out" / "checkpoint"),
    ]
    run = attach(Catalog(tmp_path / "catalog"), "hf-trainer", "job", argv)
    assert run.settings["per_device_train_batch_size"] == 3 and replayed_digests(run) == received
    with pytest.raises(SettingMismatch, match=r"--per-device-train-batch-size 4 contradicts .*trainer_state.json: train_batch_size is 3"):
        attach(Catalog(tmp_path / "catalog"), "hf-trainer", "other", [*argv, "--per-device-train-batch-size", "4"])
    with pytest.raises(ReplayError, match=r"give --max-steps N or --num-train-epochs E"):
        attach(Catalog(tmp_path / "catalog"), "hf-trainer", "other", argv[:-2] + ["--per-device-train-batch-size", "3"])

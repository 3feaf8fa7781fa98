"""A replayed run's loss curve imported from what the run logged: TensorBoard event files written by torch's own
``SummaryWriter``, JSON lines, CSV and a Trainer's ``trainer_state.json`` — into the ledger every page reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loaders import Catalog
from loaders.errors import ReplayError
from loaders.replay.attach import Imports, attach
from loaders.replay.metrics import read_metrics
from loaders.replay.tensorboard import scalar_events
from tests.support.replays import hf_corpus

LOSSES = [2.5, 2.25, 9.0, 2.0, 1.75]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return hf_corpus(tmp_path_factory.mktemp("metrics"), rows=20)


def _summary_writer(directory) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(directory))
    for step, loss in enumerate(LOSSES):
        writer.add_scalar("train/loss", loss, step)
        writer.add_scalar("train/learning_rate", 0.5 / (step + 1), step, new_style=True)  # a TF2-style scalar tensor
        writer.add_histogram("weights", np.arange(step + 3, dtype=np.float32), step)
        writer.add_text("note", f"step {step}", step)
    writer.close()


def test_tensorboard_scalars_written_by_summary_writer_are_read_exactly(tmp_path):
    _summary_writer(tmp_path / "tb")
    points = read_metrics(str(tmp_path / "tb"))
    assert [(s, v["train/loss"]) for s, _, v in points] == list(enumerate(LOSSES))
    assert [v["train/learning_rate"] for _, _, v in points] == pytest.approx([0.5 / (s + 1) for s in range(5)], rel=1e-6)
    assert {name for _, _, v in points for name in v} == {"train/loss", "train/learning_rate"}


def test_a_corrupt_event_record_is_refused_naming_the_file_and_offset(tmp_path):
    _summary_writer(tmp_path / "tb")
    path = next((tmp_path / "tb").glob("*tfevents*"))
    data = bytearray(path.read_bytes())
    data[60] ^= 0x01
    with pytest.raises(ReplayError, match=rf"{path.name}: record at byte \d+ fails its (data|length) checksum"):
        list(scalar_events(bytes(data), where=str(path)))


def test_json_lines_csv_and_trainer_state_give_the_same_curve(tmp_path):
    (tmp_path / "log.jsonl").write_text("".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in enumerate(LOSSES)))
    (tmp_path / "log.csv").write_text("step,loss,lr\n" + "".join(f"{s},{v},0.1\n" for s, v in enumerate(LOSSES)))
    history = [{"epoch": 0.1 * (s + 1), "loss": v, "learning_rate": 0.1, "step": s + 1} for s, v in enumerate(LOSSES)]
    history.append({"epoch": 1.0, "step": 5, "train_runtime": 3.2, "train_loss": 3.5, "total_flos": 10.0})
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 5, "log_history": history}))
    for name, base in (("log.jsonl", 0), ("log.csv", 0), ("trainer_state.json", 1)):
        points = read_metrics(str(tmp_path / name), step_base=base)
        assert [(s, v["loss"]) for s, _, v in points] == list(enumerate(LOSSES)), name
    assert "train_runtime" not in {k for _, _, v in read_metrics(str(tmp_path / "trainer_state.json"), step_base=1) for k in v}


def test_imported_metrics_are_the_ledger_every_page_reads(tmp_path, corpus):
    _summary_writer(tmp_path / "tb")
    lines = [{"step": 2, "rank": r, "sample_loss": [1.0, 2.0 + r]} for r in range(2)]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["--dataset", str(corpus), "--seed", "0", "--world-size", "2", "--batch-size", "2"]
    run = attach(
        Catalog(tmp_path / "catalog"), "hf", "job", argv, imports=Imports(metrics=(str(tmp_path / "tb"), str(tmp_path / "samples.jsonl")))
    )
    assert run.ledger.series("train/loss", world_size_at=run.world_size_at) == list(enumerate(LOSSES))
    assert run.ledger.metrics(2, 1, 2)["sample_loss"] == [1.0, 3.0]


def test_metrics_outside_the_run_are_refused_naming_the_step_and_nothing_is_attached(tmp_path, corpus):
    (tmp_path / "log.jsonl").write_text(json.dumps({"step": 40, "loss": 1.0}) + "\n")
    argv = ["--dataset", str(corpus), "--seed", "0", "--world-size", "2", "--batch-size", "2"]
    catalog = Catalog(tmp_path / "catalog")
    with pytest.raises(ReplayError, match=r"log.jsonl: logged step 40 is the run's step 39, outside steps 0 to 4 \(--metrics-step-base 1"):
        attach(catalog, "hf", "job", argv, imports=Imports(metrics=(str(tmp_path / "log.jsonl"),), step_base=1))
    assert catalog.runs() == [] and catalog.datasets() == []

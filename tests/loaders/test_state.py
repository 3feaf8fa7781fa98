"""State means trained: a saved state resumes after the last batch the trainer finished, not the last handed out."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from loaders import Catalog, ReadPlan, Source, StateMismatch
from loaders.run.facade import Run
from loaders.run.manifest import fingerprint
from loaders.training.reader_state import LEGACY_STATE_FORMAT, STATE_FORMAT
from tests.support.readpath import write_text_dataset

PLAN = ReadPlan([Source("alpha@v1")], seed=3, global_batch_size=4, steps=10, streams=2)


@pytest.fixture
def run(tmp_path) -> Run:
    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "alpha", 60, row_group=3, shards=2)
    return catalog.create_run("job", PLAN)


def _ledger_lines(run: Run, name: str = "w1-r0.jsonl") -> list[dict]:
    return [json.loads(line) for line in (Path(run.directory) / "ledger" / name).read_text().splitlines()]


def test_prefetched_but_untrained_batches_are_delivered_again_after_a_resume(run):
    # A framework that fetches two batches ahead of the one it trains (Lightning fetches one).
    with run.reader(0, 1, flush_seconds=0, prefetch=2) as reader:
        batches = iter(reader)
        window = [next(batches), next(batches)]
        while window[0].step < 4:
            trained = window.pop(0)
            reader.log(trained.step, loss=0.5)
            window.append(next(batches))
        state = reader.state_dict()
    assert [b.step for b in window] == [4, 5]
    assert state["format"] == STATE_FORMAT and state["step"] == 4 and state["fetched"] == 6
    assert state["read_format"] == run.read_format
    ledger = run.ledger
    assert [(s, ledger.entry(s, 0, 1).trained) for s in range(6)] == [(0, True), (1, True), (2, True), (3, True), (4, False), (5, False)]
    with run.reader(0, 1, flush_seconds=0) as resumed:
        resumed.load_state_dict(state)
        steps = []
        for batch in resumed:
            steps.append(batch.step)
            resumed.mark_trained(batch.step)
    assert steps == list(range(4, 10))
    assert all(run.ledger.entry(s, 0, 1).trained for s in range(10))
    records = [(line["t"], line["step"]) for line in _ledger_lines(run) if line["t"] != "metrics"]
    assert records[:3] == [("batch", 0), ("batch", 1), ("trained", 0)]
    assert records.count(("batch", 4)) == 2 and records.count(("trained", 4)) == 1


def test_marks_cover_earlier_steps_and_cannot_run_ahead(run):
    with run.reader(0, 1, ledger=False) as reader:
        batches = iter(reader)
        for _ in range(3):
            next(batches)
        with pytest.raises(ValueError, match="step 3 cannot be marked trained: it was not handed out yet"):
            reader.mark_trained(3)
        reader.mark_trained(1)  # a trainer that marks every other step: 0 and 1 are done
        assert reader.state_dict()["step"] == 2
        reader.log(7, eval_loss=1.0)  # metrics of a step not handed out log, but mark nothing
        assert reader.state_dict()["step"] == 2


def test_a_loop_that_never_marks_is_warned_or_opts_out(run):
    with run.reader(0, 1, ledger=False) as reader:
        for batch in reader:
            if batch.step == 2:
                break
        with pytest.warns(UserWarning, match="none was marked trained, so this state resumes at step 0"):
            assert reader.state_dict()["step"] == 0
    with run.reader(0, 1, flush_seconds=0, mark_on_handout=True) as reader, warnings.catch_warnings():
        warnings.simplefilter("error")
        for batch in reader:
            if batch.step == 2:
                break
        assert reader.state_dict()["step"] == 3
    assert run.ledger.entry(2, 0, 1).trained  # handed out counts as trained in this mode


def test_a_state_from_another_read_format_is_refused_naming_both(run):
    stored = json.loads((Path(run.directory) / "run.json").read_text())
    resolved = {k: v for k, v in stored["resolved"].items() if k != "read_format"}
    old = Run(run.catalog, {**stored, "resolved": resolved, "fingerprint": fingerprint(stored["plan"], resolved)})
    assert old.read_format == 1 != run.read_format
    with old.reader(0, 1, ledger=False) as reader:
        state = reader.state_dict()
    with run.reader(0, 1, ledger=False) as reader, pytest.raises(StateMismatch) as refused:
        reader.load_state_dict(state)
    assert f"read format 1, but run 'job' reads format {run.read_format}" in str(refused.value)


def test_old_states_still_load_when_they_pin_this_run(run):
    legacy = {"format": LEGACY_STATE_FORMAT, "run": "job", "fingerprint": run.fingerprint, "step": 6, "world_size": 1, "rank": 0}
    with run.reader(0, 1, ledger=False) as reader:
        reader.load_state_dict(legacy)
        assert next(iter(reader)).step == 6
    with run.reader(0, 1, ledger=False) as reader, pytest.raises(StateMismatch, match="belongs to run"):
        reader.load_state_dict({**legacy, "fingerprint": "0" * 32})
    with run.reader(0, 1, ledger=False) as reader, pytest.raises(StateMismatch, match="outside run 'job'"):
        reader.load_state_dict({**legacy, "step": 11})


def test_the_torch_loader_state_means_trained_too(run):
    from loaders.torch import make_loader

    with make_loader(run, rank=0, world_size=1, flush_seconds=0) as loader:
        items = iter(loader)
        first, second = next(items), next(items)  # one batch ahead, as Lightning fetches
        loader.log(first["step"], loss=0.1)
        state = loader.state_dict()
    assert (state["step"], state["fetched"], second["step"]) == (1, 2, 1)
    with make_loader(run, rank=0, world_size=1, flush_seconds=0) as resumed:
        resumed.load_state_dict(state)
        assert next(iter(resumed))["step"] == 1
    with make_loader(run, rank=0, world_size=1) as other, pytest.raises(StateMismatch, match="loader state belongs to run"):
        other.load_state_dict({**state, "run": "another"})

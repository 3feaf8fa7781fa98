"""batchscope.record: batches yielded unchanged, rows read back exactly, samples kept for themselves, bad input."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import batchscope
from loaders import Catalog
from loaders.record import RecordRefused, RecordWarning, column
from loaders.record.kept import KEY
from loaders.run.kinds import RunLike
from tests.support.readpath import write_text_dataset


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "alpha", 40, row_group=3, shards=3)
    return catalog


def _loader(steps: int, size: int = 4, *, offset: int = 0) -> list[list[dict]]:
    return [[{"id": f"alpha-{(offset + s * size + i) % 40}", "n": s * size + i} for i in range(size)] for s in range(steps)]


def test_batches_are_yielded_unchanged_and_read_back_as_the_source_rows_they_name(catalog):
    loader = _loader(5)
    rec = batchscope.record(loader, run="keys", root=catalog.root, source="alpha@v1", keys=column("id"), flush_seconds=0)
    assert [batch for batch in rec] == loader
    run = catalog.run("keys")
    version = catalog.resolve("alpha@v1")
    assert isinstance(run, RunLike) and type(run).__name__ == "RecordedRun"
    assert run.kind == "recorded" and run.total_steps == 5 and run.world_size_history()[0].world_size == 1
    for step, batch in enumerate(loader):
        read = run.batch(step, 0)
        assert read.keys == [s["id"] for s in batch]
        assert [s.record for s in read.samples] == [version.sample(s["id"]) for s in batch]
        assert all(s.address.dataset == "alpha" and s.address.version == version.id for s in read.samples)
        check = run.compare(read)
        assert check.status == "recorded" and check.verified is None and check.ledger_digest == read.digest
    # The ledger is the one every run writes: entries per (step, rank), keys, digests.
    assert [e.step for e in run.ledger.entries()] == list(range(5)) and run.ledger.problems() == []


def test_without_a_source_samples_are_kept_content_addressed_with_an_address_and_a_permalink(catalog):
    loader = [
        {"text": ["a", "b", "a"], "input_ids": np.array([[1, 2], [3, 4], [1, 2]])},
        {"text": ["c", "big"], "input_ids": np.array([[5, 6], [7, 8]])},
    ]
    loader[1]["text"][1] = "x" * 5000
    rec = batchscope.record(loader, run="kept", root=catalog.root, flush_seconds=0, max_sample_bytes=1000)
    with pytest.warns(RecordWarning, match=r"a sample was not kept \(5,0\d\d bytes, over the per-sample limit of 1,000\)"):
        got = list(rec)
    assert got is not None and rec.report["omitted"] == 1 and rec.report["kept_samples"] == 3
    run = catalog.run("kept")
    first = run.batch(0, 0)
    assert [s.record["text"] for s in first.samples] == ["a", "b", "a"]
    assert [s.record["input_ids"] for s in first.samples] == [[1, 2], [3, 4], [1, 2]]
    assert first.keys[0] == first.keys[2] != first.keys[1]  # same content, same key
    for sample in first.samples:
        version = catalog.resolve(f"{sample.address.dataset}@{sample.address.version}")
        assert version.name == "kept.samples" and version.sample(sample.key)[KEY] == sample.key
    big = run.batch(1, 0).samples[1]
    assert big.record["omitted"].startswith("not kept: 5,0") and big.record["text"] is None
    assert run.compare(run.batch(1, 0)).status == "recorded"


def test_a_key_not_in_the_source_is_named_once_and_the_batch_still_yielded(catalog):
    loader = _loader(3)
    loader[1][2]["id"] = "no-such-row"
    loader[2][0]["id"] = "another-missing-row"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = batchscope.record(loader, run="bad", root=catalog.root, source="alpha@v1", keys=column("id"), flush_seconds=0)
        assert list(rec) == loader
    messages = [str(w.message) for w in caught if issubclass(w.category, RecordWarning)]
    assert len(messages) == 1 and "key 'no-such-row' (step 1, rank 0) is not in alpha@" in messages[0]
    sample = catalog.run("bad").batch(1, 0).samples[2]
    assert sample.address.dataset == "bad.samples" and sample.record["recorded_key"] == "no-such-row"
    assert sample.record["id"] == "no-such-row"  # the sample itself, as the loader yielded it


def test_micro_batches_make_one_trainer_step_and_log_writes_metrics_like_the_reader(catalog):
    loader = _loader(6, size=2)
    rec = batchscope.record(loader, run="accum", root=catalog.root, source="alpha@v1", keys=column("id"), micro_batches=3, flush_seconds=0)
    for i, _ in enumerate(rec):
        if (i + 1) % 3 == 0:
            step = rec.step - 1
            rec.log(step, loss=float(step + 1), sample_loss=[0.5, 4.0, 1.0, 0.0, 2.0, 3.0])
    run = catalog.run("accum")
    assert run.total_steps == 2
    assert run.batch(1, 0).keys == [s["id"] for b in loader[3:] for s in b]
    assert run.ledger.entry(1, 0, 1).recorded["micro"] == [2, 2, 2]
    assert run.ledger.series("loss") == [(0, 1.0), (1, 2.0)]
    assert run.ledger.metrics(0, 0, 1)["sample_loss"][1] == 4.0


def test_a_world_size_or_rank_that_contradicts_the_records_is_refused_naming_both(catalog):
    batchscope.record([], run="two", root=catalog.root, rank=0, world_size=2, flush_seconds=0).close()
    with pytest.raises(RecordRefused, match=r"run 'two' was recorded with world size 2; this job gives world_size=4"):
        batchscope.record([], run="two", root=catalog.root, rank=0, world_size=4)
    with pytest.raises(RecordRefused, match=r"rank 2 is not below world_size 2"):
        batchscope.record([], run="two", root=catalog.root, rank=2, world_size=2)
    with pytest.raises(RecordRefused, match=r"was recorded with source no source; this job gives alpha@"):
        batchscope.record([], run="two", root=catalog.root, rank=0, world_size=2, source="alpha@v1", keys=column("id"))
    held = batchscope.record([], run="two", root=catalog.root, rank=1, world_size=2)
    with pytest.raises(RecordRefused, match=rf"rank 1 of run 'two' is already being recorded by process {os.getpid()}"):
        batchscope.record([], run="two", root=catalog.root, rank=1, world_size=2)
    held.close()
    catalog.create_run("native", batchscope.ReadPlan([batchscope.Source("alpha@v1")], seed=0, global_batch_size=2, steps=2))
    with pytest.raises(RecordRefused, match=r"run 'native' exists and is a native run"):
        batchscope.record([], run="native", root=catalog.root)


def test_a_full_disk_is_one_warning_training_goes_on_and_the_gap_is_recorded(catalog, tmp_path):
    ledger = Path(catalog.root) / "runs" / "full" / "ledger"
    ledger.mkdir(parents=True)
    (ledger / "w1-r0.jsonl").symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    loader = _loader(6)
    yielded = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = batchscope.record(loader, run="full", root=catalog.root, source="alpha@v1", keys=column("id"), flush_seconds=0)
        for i, batch in enumerate(rec):
            yielded.append(batch)
            if i == 2:  # space comes back
                (ledger / "w1-r0.jsonl").unlink()
    assert yielded == loader
    messages = [str(w.message) for w in caught if issubclass(w.category, RecordWarning)]
    assert len(messages) == 1 and "No space left on device" in messages[0] and "training goes on" in messages[0]
    run = catalog.run("full")
    assert [(g.first, g.last, "No space left" in g.reason) for g in run.ledger.gaps()] == [(0, 2, True)]
    assert [e.step for e in run.ledger.entries()] == [3, 4, 5]
    missing = run.compare(run.batch(1, 0))
    assert missing.status == "no-ledger" and "steps 0-2 of rank 0 are a gap" in missing.reasons[0]


def test_a_version_gone_or_a_moved_tag_is_said_not_hidden(catalog):
    rec = batchscope.record(_loader(2), run="honest", root=catalog.root, source="alpha@v1", keys=column("id"), flush_seconds=0)
    list(rec)
    write_text_dataset(catalog, "alpha", 41, row_group=3, shards=3, tag="v1")  # the tag moves to a new version
    run = catalog.run("honest")
    check = run.compare(run.batch(0, 0))
    assert check.status == "recorded" and "the source alpha@v1 now names version" in check.reasons[0]
    version = run.source["version"]
    os.unlink(Path(catalog.root) / "datasets" / "alpha" / "versions" / f"{version}.json")
    fresh = catalog.run("honest")
    gone = fresh.compare(fresh.batch(0, 0))
    assert gone.status == "mismatch" and gone.verified is False and "cannot be read" in gone.reasons[0]


def test_a_resumed_job_continues_the_same_run_without_duplicated_or_missing_steps(catalog):
    loader = _loader(8)
    rec = batchscope.record(loader, run="resume", root=catalog.root, source="alpha@v1", keys=column("id"))
    state = None
    for i, _ in enumerate(rec):
        if i == 3:
            state = rec.state_dict()  # a checkpoint after step 3... (step 4 is next)
        if i == 5:
            break  # ...and the job dies at step 5 (steps 4 and 5 were recorded, then rolled back by the resume)
    rec.close()
    again = batchscope.record(loader[state["step"] :], run="resume", root=catalog.root, source="alpha@v1", keys=column("id"))
    again.load_state_dict(state)
    assert list(again) == loader[4:]
    run = catalog.run("resume")
    assert run.total_steps == 8 and [e.step for e in run.ledger.entries()] == list(range(8))
    assert [run.batch(s, 0).keys for s in range(8)] == [[x["id"] for x in b] for b in loader]


def test_the_ledger_reads_appended_bytes_like_the_whole_file(catalog, tmp_path):
    rec = batchscope.record(_loader(6), run="inc", root=catalog.root, source="alpha@v1", keys=column("id"), flush_seconds=0)
    for i, _ in enumerate(rec):
        rec.log(i, loss=float(i))
    whole = (Path(catalog.root) / "runs" / "inc" / "ledger" / "w1-r0.jsonl").read_bytes()
    from loaders.training.ledger import Ledger

    target = tmp_path / "growing"
    target.mkdir()
    growing = Ledger(str(target))
    rng = np.random.default_rng(0)
    cuts = sorted(rng.choice(len(whole), 12, replace=False).tolist()) + [len(whole)]
    start = 0
    for cut in cuts:  # appended in pieces that split lines anywhere, read after every piece
        with open(target / "w1-r0.jsonl", "ab") as out:
            out.write(whole[start:cut])
        start = cut
        growing.steps()
    fresh = Ledger(str(target))
    assert [e.__dict__ for e in growing.entries()] == [e.__dict__ for e in fresh.entries()]
    assert growing.series("loss") == fresh.series("loss") == [(i, float(i)) for i in range(6)]
    assert growing.problems() == fresh.problems() == []
    edited = whole.replace(b'"loss":2.0', b'"loss":20.0')  # rewritten, not appended to: read again whole
    (target / "w1-r0.jsonl").write_bytes(edited)
    assert growing.series("loss")[2] == (2, 20.0)
    assert json.loads(whole.splitlines()[0])["t"] == "batch"


def test_the_training_thread_writes_its_own_turns_and_the_watchdog_writes_what_a_long_step_leaves_waiting(catalog):
    import threading
    import time

    from loaders.record.writer import WATCH_SECONDS

    flush = 0.3
    rec = batchscope.record(_loader(40), run="turns", root=catalog.root, source="alpha@v1", keys=column("id"), flush_seconds=flush)
    turns: list[str] = []
    original = rec.writer._write

    def spy(items):  # noqa: ANN001, ANN202
        turns.append(threading.current_thread().name)
        return original(items)

    rec.writer._write = spy
    ledger = Path(catalog.root) / "runs" / "turns" / "ledger"
    batches = iter(rec)
    for _ in range(30):
        next(batches)
        time.sleep(0.02)  # a fast loop: each turn is the training thread's own
    assert turns and set(turns) == {threading.current_thread().name}
    rec.writer.flush()  # a turn just taken, then one more step, then a long one
    next(batches)
    before = len(turns)
    time.sleep(flush + WATCH_SECONDS + 0.3)  # the watchdog writes what waits (a SIGKILL now would lose nothing)
    assert turns[before:] == ["batchscope-record"]
    written = [json.loads(line) for f in ledger.iterdir() for line in f.read_text().splitlines()]
    assert sorted(r["step"] for r in written if r["t"] == "batch") == list(range(31))
    rec.close()

"""The ledger: unreadable lines are reported by file:line (never skipped silently); the flush timer writes the tail."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from loaders.run.facade import Run
from loaders.training.ledger import Ledger
from tests.support.readpath import text_run


@pytest.fixture
def run(tmp_path) -> Run:
    return text_run(tmp_path, steps=6, global_batch_size=2, rows=40)


def _path(run: Run) -> Path:
    return Path(run.directory) / "ledger" / "w1-r0.jsonl"


def test_garbage_and_edited_lines_are_reported_with_file_and_line(run):
    lines = _path(run).read_text().splitlines()
    batch_2 = next(i for i, line in enumerate(lines) if json.loads(line)["t"] == "batch" and json.loads(line)["step"] == 2)
    edited = json.loads(lines[batch_2])
    edited["rank"] = 1
    lines[batch_2] = json.dumps(edited)
    lines.insert(3, "this is not json")
    lines.insert(5, json.dumps({"t": "batch", "step": 9, "rank": 0, "world_size": 1, "digest": "x", "indices": [1], "keys": []}))
    _path(run).write_text("\n".join(lines) + "\n")
    problems = Ledger(str(Path(run.directory) / "ledger")).problems()
    moved = batch_2 + 3  # two lines inserted before it; numbers start at 1
    assert [(p.file, p.line, p.fatal) for p in problems] == [("w1-r0.jsonl", n, True) for n in (4, 6, moved, moved + 2)]
    assert "not JSON" in problems[0].reason and "different lengths" in problems[1].reason
    assert "rank 1 of world size 1 in the ledger of rank 0 of 1" in problems[2].reason
    assert "step 2 marked trained but never handed out" in problems[3].reason  # its batch line was refused
    assert str(problems[0]).startswith("w1-r0.jsonl:4: ")


def test_a_torn_last_line_is_no_failure_and_the_next_writer_marks_it(run):
    text = _path(run).read_text()
    _path(run).write_text(text + '{"t":"batch","step":6,"ra')  # a crash mid-write
    ledger = Ledger(str(Path(run.directory) / "ledger"))
    torn = text.count("\n") + 1
    assert [(p.line, p.fatal) for p in ledger.problems()] == [(torn, False)]
    writer = run.ledger.writer(0, 1, flush_seconds=0)
    writer.log(5, loss=2.0)
    writer.close()
    after = _path(run).read_text().splitlines()
    assert after[torn - 1] == '{"t":"batch","step":6,"ra' and json.loads(after[torn])["t"] == "torn"
    assert [(p.line, p.fatal) for p in ledger.problems()] == [(torn, False)]
    assert ledger.metrics(5, 0, 1) == {"loss": 2.0}


def test_the_flush_timer_writes_the_tail_of_an_idle_writer_and_stops_on_close(run):
    path = _path(run)
    before = path.read_text()
    writer = run.ledger.writer(0, 1, flush_seconds=0.3)
    writer.log(3, loss=9.0)
    assert path.read_text() == before  # buffered, not written by the append itself
    deadline = time.monotonic() + 3
    while path.read_text() == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert json.loads(path.read_text().splitlines()[-1])["metrics"] == {"loss": 9.0}
    writer.close()
    assert not any(t.name == "batchscope-ledger-flush" for t in threading.enumerate())


def _fsynced(monkeypatch) -> list[str]:
    """Paths fsynced from now on (the real ``os.fsync`` runs; the list records which file each call synced)."""
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def test_a_saved_state_is_never_ahead_of_the_ledger(tmp_path, monkeypatch):
    run = text_run(tmp_path, steps=8, global_batch_size=2, rows=40, trained=False)
    path = _path(run)
    synced = _fsynced(monkeypatch)
    with run.reader(0, 1, flush_seconds=3600) as reader:  # the timer never fires: marks and states do the writing
        for batch in reader:
            if batch.step % 2:
                reader.log(batch.step, loss=1.0)
                # A mark is on disk as it is made (another rank's checkpoint may rely on it), before any state.
                assert Ledger(str(path.parent)).entry(batch.step, 0, 1).trained
            if batch.step % 3 == 2:
                synced.clear()
                state = reader.state_dict()
                # The state's steps are trained in the file, and the file was fsynced before the state was returned.
                on_disk = Ledger(str(path.parent))
                assert all(on_disk.entry(s, 0, 1).trained for s in range(state["step"]))
                assert str(path) in synced
    assert sum(e.trained for e in Ledger(str(path.parent)).entries()) == 8

"""``batchscope verify`` answers what users ask: did every batch the job trained match what the plan reads?

It checks every (step, rank) of the trained range (steps 0 through the last step any rank marked trained); steps
after it are prefetched or not reached, and fail nothing. Exit codes: 0 verified, 1 mismatch, 2 cannot check (in the
trained range, or nothing trained), 3 a gap (fetched, never trained, though later steps were). Each failure has its
own line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app as cli
from loaders.run.facade import Run
from loaders.training.verification import verify_run
from tests.support.readpath import text_run


@pytest.fixture
def run(tmp_path) -> Run:
    return text_run(tmp_path, steps=6, global_batch_size=4, rows=50)


def _verify(run: Run, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["verify", run.name, "--root", run.catalog.root, *args])
    return result.exit_code, result.output


def _ledger(run: Run) -> Path:
    return Path(run.directory) / "ledger" / "w1-r0.jsonl"


def _edit_batch_line(run: Run, step: int, edit) -> None:
    lines = _ledger(run).read_text().splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record["t"] == "batch" and record["step"] == step:
            edit(record)
            lines[i] = json.dumps(record)
    _ledger(run).write_text("\n".join(lines) + "\n")


def test_a_fully_trained_run_verifies_with_exit_0(run):
    code, output = _verify(run)
    assert code == 0, output
    assert "job: 6 verified, 0 mismatched, 0 without a ledger entry, 0 fetched but not trained, 0 unreadable" in output


def test_a_deleted_ledger_cannot_be_checked(run):
    _ledger(run).unlink()
    code, output = _verify(run)
    assert code == 2, output
    assert "✗ nothing to check: the ledger of run job marks no step trained (no ledger file w1-r0.jsonl)" in output
    assert "0 verified" in output and "6 not reached (no step trained; steps 0-5; exit 2: cannot check)" in output


def test_a_job_that_stopped_before_the_plan_ended_verifies_with_the_plain_command(tmp_path):
    run = text_run(tmp_path, steps=10, global_batch_size=4, trained=False)
    with run.reader(0, 1, flush_seconds=0, prefetch=2) as reader:  # max_steps=4: trains 0-3, fetched 4 ahead
        for batch in reader:
            if batch.step == 4:
                break
            reader.log(batch.step, loss=1.0)
    code, output = _verify(run)
    assert code == 0, output
    assert "· rank 0 of 1: step 4 prefetched (fetched after the last trained step, never trained)" in output
    assert "job: 4 verified, 0 mismatched, 0 without a ledger entry, 0 fetched but not trained, 0 unreadable ledger line(s); " in output
    assert "1 prefetched, 5 not reached (trained through step 3; steps 0-9; exit 0: verified)" in output
    code, output = _verify(run, "--steps", "2:6")  # --steps narrows the same check
    assert code == 0 and "job: 2 verified" in output and "1 prefetched, 1 not reached (trained through step 3; steps 2-5" in output
    narrowed = verify_run(run, range(2, 6))
    assert (narrowed.count("verified"), narrowed.count("prefetched"), narrowed.count("not-reached")) == (2, 1, 1)
    code, output = _verify(run, "--steps", "5:10")
    assert code == 2 and "✗ nothing to check: no step of steps 5-9 was trained (the run trained through step 3)" in output


def test_a_rank_whose_records_are_missing_inside_the_trained_range_cannot_be_checked(tmp_path):
    run = text_run(tmp_path, steps=6, global_batch_size=4, trained=False)
    for rank in (0, 1):
        with run.reader(rank, 2, flush_seconds=0) as reader:
            for batch in reader:
                reader.log(batch.step, loss=1.0)
    (Path(run.directory) / "ledger" / "w2-r1.jsonl").unlink()  # rank 1's records never reached the disk
    code, output = _verify(run)
    assert code == 2, output
    assert "✗ rank 1 of 2: no ledger record for steps 0-5 (no ledger file w2-r1.jsonl), though the run trained through step 5" in output
    assert "6 verified, 0 mismatched, 6 without a ledger entry" in output


def test_garbage_lines_fail_by_file_and_line(run):
    lines = _ledger(run).read_text().splitlines()
    lines.insert(1, "{garbage")
    _ledger(run).write_text("\n".join(lines) + "\n")
    code, output = _verify(run)
    assert code == 2, output
    assert "✗ ledger w1-r0.jsonl:2: not JSON" in output and "1 unreadable ledger line(s)" in output


def test_edited_keys_are_a_mismatch_even_with_the_digest_intact(run):
    _edit_batch_line(run, 3, lambda record: record["keys"].__setitem__(1, "alpha-999"))
    code, output = _verify(run)
    assert code == 1, output
    differing = run.batch(3, 0, world_size=1).indices[1]
    assert "✗ step 3 rank 0: keys differ at 1 position(s) (#1: 'alpha-999' in the ledger" in output
    assert f"differing samples (global indices): [{differing}]" in output and "5 verified, 1 mismatched" in output


def test_edited_indices_are_a_mismatch(run):
    _edit_batch_line(run, 0, lambda record: record["indices"].reverse())
    code, output = _verify(run, "--steps", "0:2")
    assert code == 1 and "✗ step 0 rank 0: global indices differ at 4 position(s)" in output, output


def test_a_gap_fetched_but_never_trained_while_later_steps_were_has_its_own_exit_code(run):
    with run.reader(0, 1, flush_seconds=0, start_step=2, end_step=4) as reader:  # a rerun of 2 and 3, never trained
        for _ in reader:
            pass
    code, output = _verify(run)
    assert code == 3, output
    assert "✗ rank 0 of 1: steps 2-3 fetched but never marked trained, though the run trained through step 5" in output
    assert "4 verified, 0 mismatched, 0 without a ledger entry, 2 fetched but not trained" in output
    assert _verify(run, "--steps", "0:2")[0] == 0 and _verify(run, "--steps", "4:6")[0] == 0


def test_steps_fetched_again_after_the_last_trained_step_are_prefetched_not_a_failure(run):
    with run.reader(0, 1, flush_seconds=0, start_step=4) as reader:  # a rerun of 4 and 5 that was never trained
        for _ in reader:
            pass
    code, output = _verify(run)
    assert code == 0, output
    assert "· rank 0 of 1: steps 4-5 prefetched" in output and "4 verified" in output and "2 prefetched, 0 not reached" in output


def test_a_torn_last_line_is_reported_but_does_not_fail(run):
    with _ledger(run).open("a") as out:
        out.write('{"t":"metrics","st')
    code, output = _verify(run)
    assert code == 0, output
    assert "! ledger w1-r0.jsonl:19: torn by an interrupted write" in output

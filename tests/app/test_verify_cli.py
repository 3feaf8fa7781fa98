"""``batchscope verify`` tells the truth: exit 0 only when every step it checked was verified and trained.

Exit codes: 0 verified, 1 mismatch, 2 cannot check, 3 fetched but not trained. Each failure has its own line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import app as cli
from loaders.run.facade import Run
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
    assert "✗ rank 0 of 1: no ledger record for steps 0-5 (no ledger file w1-r0.jsonl)" in output
    assert "0 verified" in output and "6 without a ledger entry" in output and "exit 2: cannot check" in output


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


def test_fetched_but_untrained_steps_are_reported_with_their_own_exit_code(run):
    with run.reader(0, 1, flush_seconds=0, start_step=4) as reader:  # a rerun of 4 and 5 that was never trained
        for _ in reader:
            pass
    code, output = _verify(run)
    assert code == 3, output
    assert "! rank 0 of 1: steps 4-5 fetched but never marked trained" in output
    assert "4 verified, 0 mismatched, 0 without a ledger entry, 2 fetched but not trained" in output
    assert _verify(run, "--steps", "0:4")[0] == 0


def test_a_torn_last_line_is_reported_but_does_not_fail(run):
    with _ledger(run).open("a") as out:
        out.write('{"t":"metrics","st')
    code, output = _verify(run)
    assert code == 0, output
    assert "! ledger w1-r0.jsonl:19: torn by an interrupted write" in output

"""Failures look like failures: after ``batchscope verify`` finds a mismatch, the home, runs and run pages say so.

``verify`` keeps its result beside the ledger (``runs/{run}/verification.json``); pages read it back only while
the ledger still holds what it judged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app import urls
from app.cli import app as cli
from app.factory import create_app
from app.settings import Settings
from loaders.run.facade import Run
from loaders.training.verify_record import last_verification, record_path, verification_state
from tests.app.dom import soup
from tests.support.local_client import local_client
from tests.support.readpath import text_run


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return text_run(tmp_path, steps=6, global_batch_size=4, rows=50)


@pytest.fixture
def client(run: Run, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=run.catalog.root, flags_path=str(tmp_path / "flags.sqlite"))))


def _verify(run: Run) -> int:
    return CliRunner().invoke(cli, ["verify", run.name, "--root", run.catalog.root]).exit_code


def _ledger(run: Run) -> Path:
    return Path(run.directory) / "ledger" / "w1-r0.jsonl"


def _edit_key(run: Run, step: int, key: str) -> None:
    lines = _ledger(run).read_text().splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record["t"] == "batch" and record["step"] == step:
            record["keys"][0] = key
            lines[i] = json.dumps(record)
    _ledger(run).write_text("\n".join(lines) + "\n")


def _listed(client: TestClient, run: Run) -> dict:
    return next(r for r in client.get(urls.api(urls.home())).json()["runs"] if r["name"] == run.name)


def test_a_run_is_not_called_verified_before_verify_checked_it(run: Run, client: TestClient) -> None:
    listed = _listed(client, run)
    assert (listed["status"], listed["verification"]) == ("complete", "not verified")
    assert _verify(run) == 0
    listed = _listed(client, run)
    assert (listed["status"], listed["verification"]) == ("complete", "verified")
    assert listed["verification_label"].startswith("✓ verified: 6 (step, rank) of steps 0-5")


def test_a_mismatch_found_by_verify_is_the_status_of_the_run_on_every_page(run: Run, client: TestClient) -> None:
    original = _ledger(run).read_text()
    _edit_key(run, 3, "edited-key")
    assert _verify(run) == 1
    listed = _listed(client, run)
    assert listed["status"] == "mismatch" and listed["verification"] == "mismatch"
    assert listed["verification_url"] == urls.rank(run.name, 3, 0)
    for page in (urls.home(), urls.runs()):
        row = soup(client.get(page)).select_one("tr.run-row")
        assert row["data-status"] == "mismatch" and "bad" in row.select_one(".run-status")["class"]
        assert row.select_one(".run-verification a")["href"] == urls.rank(run.name, 3, 0)
    assert [r["status"] for r in client.get(urls.api(urls.runs())).json()["runs"]] == ["mismatch"]
    twin = client.get(urls.api(urls.run(run.name))).json()
    assert (twin["status"], twin["verification"]) == ("mismatch", "mismatch")
    assert "1 (step, rank) of steps 0-5 differ" in twin["verification_label"]
    head = soup(client.get(urls.run(run.name))).select_one(".run-state")
    assert head.select_one(".run-status").get_text() == "mismatch" and "bad" in head.select_one(".run-status")["class"]
    # The ledger record is put back: the mismatch is no longer blamed on it, and nothing claims "verified" either.
    _ledger(run).write_text(original)
    listed = _listed(client, run)
    assert (listed["status"], listed["verification"]) == ("complete", "not verified")


def test_the_record_is_checked_against_the_ledger_when_read(run: Run) -> None:
    assert _verify(run) == 0
    root = run.catalog.root
    assert verification_state(root, run).status == "verified"
    with _ledger(run).open("a") as ledger:  # the ledger grows (a resumed job appends): what was checked still stands
        ledger.write("\n")
    assert verification_state(root, run).status == "verified"
    _ledger(run).write_text("\n".join(_ledger(run).read_text().splitlines()[:-3]) + "\n")  # lines removed
    assert verification_state(root, run).status == "not verified"
    Path(record_path(root, run.name)).write_text("{not json")
    assert last_verification(root, run) is None and verification_state(root, run).status == "not verified"

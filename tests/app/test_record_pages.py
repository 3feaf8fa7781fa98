"""Recorded runs in the inspector: the same pages as any run, saying "recorded" (never "verified"), without the plan
panels a recorded run has no data for, and following the run live."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import batchscope
from loaders import Catalog
from loaders.record import column
from tests.app.dom import soup
from tests.support.readpath import write_text_dataset


@pytest.fixture
def catalog(tmp_path) -> Catalog:
    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "alpha", 40, row_group=3, shards=3)
    loader = [[{"id": f"alpha-{s * 4 + i}"} for i in range(4)] for s in range(6)]
    loader[2][1] = {"id": "missing-key", "text": "kept for itself"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rank in range(2):
            rec = batchscope.record(
                loader[rank::2],
                run="rec",
                root=catalog.root,
                rank=rank,
                world_size=2,
                source="alpha@v1",
                keys=column("id"),
                flush_seconds=0,
            )
            for i, _ in enumerate(rec):
                rec.log(i, loss=1.0 + i + rank, sample_loss=[0.1, 9.0 + rank, 0.3, 0.2])
    return catalog


def test_run_page_says_how_it_was_recorded_and_draws_its_metrics(make_client, catalog):
    page = soup(make_client(root=catalog.root).get("/runs/rec"))
    assert page.select_one("h1 .run-kind")["data-kind"] == "recorded"
    assert "3 steps recorded" in page.select_one(".recorded-facts").get_text(" ", strip=True)
    source = page.select_one("table.recorded-source").get_text(" ", strip=True)
    assert "alpha@v1" in source and "rec.samples" in source and "1.0 MB per sample" in source
    assert page.select_one("figure.chart[data-metric=loss]") is not None
    assert page.select_one("#live-marker .live-badge").get_text(strip=True) == "complete"
    assert page.select_one("#mixture") is None and "Plan (as written)" not in page.get_text()


def test_step_and_rank_pages_say_recorded_rank_by_logged_loss_and_show_kept_samples(make_client, catalog):
    client = make_client(root=catalog.root)
    step = soup(client.get("/runs/rec/steps/1"))
    badges = [b.get_text(strip=True) for b in step.select("tr.rank-share .verify")]
    assert (
        len(badges) == 2 and all(b.startswith("● recorded") for b in badges) and "verified" not in step.select_one("#step-ranks").get_text()
    )
    worst = step.select("tr.step-sample")[0]
    assert (worst["data-rank"], worst["data-position"]) == ("1", "1")  # sample_loss 10.0
    data = client.get("/api/runs/rec/steps/1/ranks/0").json()
    assert data["verification"]["status"] == "recorded" and data["verified"] is None
    kept = data["samples"][1]
    assert kept["dataset"] == "rec.samples" and kept["fields"]["recorded_key"] == "missing-key"
    assert client.get(kept["url"]).status_code == 200  # the kept sample's permalink resolves
    assert data["samples"][0]["fields"]["id"] == "alpha-8" and data["samples"][0]["loss"] == 0.1
    rank = soup(client.get("/runs/rec/steps/1/ranks/0"))
    assert rank.select_one("form.against") is None and rank.select_one("h1 .run-kind") is not None
    assert client.get("/runs/rec/steps/1/ranks/0?against=alpha@v1").status_code == 422


def test_live_page_reports_progress_and_changes_version_when_the_ledger_grows(make_client, catalog):
    client = make_client(root=catalog.root)
    before = client.get("/api/runs/rec/live").json()
    assert before["kind"] == "recorded" and before["last_step"] == 2 and before["status"] == "complete" and before["total_steps"] == 3
    rec = batchscope.record([[{"id": "alpha-1"}]], run="rec", root=catalog.root, rank=0, world_size=2, source="alpha@v1", keys=column("id"))
    rec.load_state_dict({**rec.state_dict(), "step": 3})
    for _ in rec:
        rec.state_dict()  # written, and the job goes on (its loader is not exhausted yet)
        after = client.get("/api/runs/rec/live").json()
        break
    rec.close()
    assert after["version"] != before["version"] and after["last_step"] == 3 and after["total_steps"] is None
    assert after["status"] == "running"  # rank 0 records again: the run's length is not known any more
    home = soup(client.get("/"))
    assert "not known yet" in home.select_one("tr.run-row").get_text() and home.select_one(".run-kind").get_text() == "recorded"
    html = soup(client.get("/runs/rec/live"))
    assert html.select_one("#live-marker")["data-live"] == "/api/runs/rec/live"


def test_verify_counts_recorded_steps_and_fails_when_a_row_no_longer_resolves(catalog, tmp_path):
    import subprocess
    import sys

    batchscope_cli = str(Path(sys.executable).parent / "batchscope")
    done = subprocess.run([batchscope_cli, "verify", "rec", "--root", catalog.root], capture_output=True, text=True)
    assert (
        done.returncode == 0 and "6 recorded (written while training, not recomputed)" in done.stdout and "exit 0: recorded" in done.stdout
    )
    samples = catalog.resolve("rec.samples")
    (Path(catalog.root) / "datasets" / "rec.samples" / "versions" / f"{samples.id}.json").unlink()
    done = subprocess.run([batchscope_cli, "verify", "rec", "--root", catalog.root], capture_output=True, text=True)
    assert done.returncode == 1 and "step 1 rank 0" in done.stderr and "cannot be read" in done.stderr


def test_where_names_the_recorded_run_and_says_in_one_line_why_it_cannot_list_its_reads(make_client, catalog):
    from loaders.record.run import WHERE_REASON

    client = make_client(root=catalog.root)
    version = catalog.resolve("alpha@v1")
    where = client.get(f"/api/datasets/alpha/versions/{version.id}/samples/alpha-8").json()["where"]
    assert [(w["run"], w["error"], w["reads"]) for w in where] == [("rec", WHERE_REASON, [])]

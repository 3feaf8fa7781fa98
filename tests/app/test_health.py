"""The run health page: counts per check, a strip over steps, each finding linked to an anchor that exists on its
step/rank page, its JSON twin, its summary on the run page, and a lint that fills in over requests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app import urls
from app.factory import create_app
from app.pages import health
from app.settings import Settings
from loaders import Catalog
from loaders.checks import CHECKS, lint
from tests.app.dom import soup
from tests.support.lint_catalog import PLANTED
from tests.support.local_client import local_client


@pytest.fixture
def catalog(lint_catalog: Catalog, tmp_path: Path) -> Catalog:
    """A copy of the planted catalog's own files (the data files stay where they are): the page stores its lint here."""
    shutil.copytree(lint_catalog.root, tmp_path / "catalog")
    return Catalog(tmp_path / "catalog")


@pytest.fixture
def client(catalog: Catalog, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "flags.sqlite"))))


def test_counts_strip_and_findings_linked_to_existing_anchors(client: TestClient, catalog: Catalog) -> None:
    page = soup(client.get(urls.run_health("lint-chats")))
    expected = lint(catalog.run("lint-chats"), catalog=catalog, workers=1)
    rows = {tr["data-check"]: int(tr["data-count"]) for tr in page.select("tr.health-check")}
    assert rows == expected.counts() and list(rows) == [c.name for c in CHECKS]
    findings = page.select("tr.finding")
    assert len(findings) == len(expected.findings)
    for row in findings:
        href = row.select_one("a.finding-link")["href"]
        path, anchor = href.split("#")
        assert soup(client.get(path)).select_one(f"#{anchor}") is not None, href
    bars = page.select("svg.health-strip a")
    assert len(bars) == catalog.run("lint-chats").total_steps  # one bar per step for a short run
    assert bars[0]["href"] == urls.run_health("lint-chats", steps="0:1")


def test_filters_and_json_twin(client: TestClient) -> None:
    data = client.get(urls.api(urls.run_health("lint-texts", check="duplicate"))).json()
    assert {r["key"] for r in data["rows"]} == PLANTED["duplicate"] and data["shown"] == 2 and data["check"] == "duplicate"
    assert data["complete"] is True and data["kind"] == "native"
    assert {c["name"]: c["count"] for c in data["checks"]}["empty-document"] == 1
    assert sum(bar["warning"] + bar["info"] + bar["error"] for bar in data["strip"]) == data["findings"]
    first = data["rows"][0]
    window = client.get(urls.api(urls.run_health("lint-texts", steps=f"{first['step']}:{first['step'] + 1}"))).json()
    assert window["step_filter"] == [first["step"], first["step"] + 1] and all(r["step"] == first["step"] for r in window["rows"])


def test_the_run_page_shows_a_summary_that_loads_when_revealed(client: TestClient) -> None:
    run = soup(client.get(urls.run("lint-media")))
    section = run.select_one("section#health-summary")
    assert section["hx-get"] == urls.run_health("lint-media", summary=1) and section.select_one("a")["href"] == urls.run_health(
        "lint-media"
    )
    assert client.get(urls.api(urls.run("lint-media"))).json()["health_url"] == urls.run_health("lint-media")
    response = client.get(urls.run_health("lint-media", summary=1), headers={"HX-Request": "true"})
    fragment = soup(response)
    assert [el.name for el in fragment.find_all(recursive=False)] == ["section"] and response.headers["vary"] == "HX-Request"
    summary = fragment.select_one("section#health-summary")
    assert summary["data-findings"] == "6" and not summary.has_attr("hx-trigger")  # complete: no more polling
    assert {a.select_one("code").get_text() for a in summary.select("p.small a")} == {
        "decode-failure",
        "blank-image",
        "frozen-video",
        "silent-audio",
    }


def test_a_long_lint_fills_in_over_requests(client: TestClient, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "BUDGET_SECONDS", 0.0)
    monkeypatch.setattr("loaders.checks.cache.CHUNK_SAMPLES", 16)
    first = client.get(urls.api(urls.run_health("lint-texts"))).json()
    assert first["complete"] is False and first["steps"] == [0, 2]
    page = soup(client.get(urls.run_health("lint-texts")))
    progress = page.select_one("p.health-progress")
    assert progress["hx-get"] == urls.run_health("lint-texts") and progress["hx-target"] == "#health"
    for _ in range(5):
        last = client.get(urls.api(urls.run_health("lint-texts"))).json()
    assert last["complete"] is True and last["steps"] == [0, 9]
    assert last["findings"] == len(lint(catalog.run("lint-texts"), catalog=catalog, workers=1).findings)

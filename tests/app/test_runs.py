"""Run, step and step/rank pages: computed by the read path, checked against the ledger, DOM-tested with their JSON twins."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from tests.app.dom import soup
from tests.support.local_client import local_client


@pytest.fixture
def runs_client(runs_catalog: Catalog, tmp_path: Path) -> TestClient:
    settings = Settings(root=runs_catalog.root, flags_path=str(tmp_path / "flags.sqlite"), token_fragment_threshold=10)
    return local_client(create_app(settings), follow_redirects=False)


PAGES = [
    ("/runs/pretrain", "h1", "run pretrain"),
    ("/runs/pretrain/steps/3", "h1", "pretrain · step 3"),
    ("/runs/pretrain/steps/3/ranks/1", "h1", "pretrain · step 3 · rank 1"),
    ("/runs/pretrain/steps/9/ranks/0", "h1", "pretrain · step 9 · rank 0"),
    ("/runs/plain/steps/0/ranks/3", "h1", "plain · step 0 · rank 0"),
]


@pytest.mark.parametrize("url, selector, text", PAGES[:4])
def test_pages_and_json_twins(runs_client, url, selector, text):
    page = runs_client.get(url)
    assert page.status_code == 200 and page.headers["vary"] == "HX-Request"
    assert " ".join(soup(page).select_one(selector).get_text(" ").split()) == text
    twin = runs_client.get("/api" + url)
    assert twin.status_code == 200 and twin.headers["content-type"].startswith("application/json")


def test_step_rank_json_is_exactly_what_the_read_path_gives(runs_client, runs_catalog):
    run = runs_catalog.run("pretrain")
    data = runs_client.get("/api/runs/pretrain/steps/3/ranks/1").json()
    batch = run.batch(3, 1, world_size=2)
    assert {k: data[k] for k in ("run", "step", "rank", "world_size", "digest", "verified")} == {
        "run": "pretrain",
        "step": 3,
        "rank": 1,
        "world_size": 2,
        "digest": batch.digest,
        "verified": True,
    }
    assert [s["index"] for s in data["samples"]] == batch.indices
    for got, sample in zip(data["samples"], batch.samples):
        assert (got["key"], got["dataset"], got["version"], got["shard"], got["row"]) == (
            sample.key,
            sample.address.dataset,
            sample.address.version,
            sample.address.shard,
            sample.address.row,
        )
        assert got["inputs"]["input_ids"] == sample.inputs["input_ids"]
        assert got["fields"] == sample.record
        assert [d["key"] for d in got["documents"]] == [d.key for d in sample.documents]
    # After the resume the world size is 1: rank 1 no longer exists at step 9.
    assert runs_client.get("/api/runs/pretrain/steps/9/ranks/0").json()["world_size"] == 1


def test_rank_page_lays_out_each_sample(runs_client, runs_catalog):
    run = runs_catalog.run("pretrain")
    batch = run.batch(3, 0, world_size=2)
    dom = soup(runs_client.get("/runs/pretrain/steps/3/ranks/0"))
    samples = dom.select("article.sample")
    assert [a["id"] for a in samples] == [f"sample-{i}" for i in range(len(batch))]
    for article, sample in zip(samples, batch.samples):
        key_link = article.select_one(".sample-head a.key")
        assert key_link.get_text() == sample.key
        assert key_link["href"].endswith(f"/samples/{sample.key}") and sample.address.version in key_link["href"]
        rows = article.select(".documents tbody tr")
        assert [r.select_one("a.key").get_text() for r in rows] == [d.key for d in sample.documents]
        assert article.select_one("form.flag-form input[name=index]")["value"] == str(sample.index)
    assert dom.select_one(".verify")["data-verified"] == "true"
    assert dom.select_one("a[rel=next]")["href"] == "/runs/pretrain/steps/4/ranks/0"
    assert [a.get_text() for a in dom.select("#rank-picker a")] == ["rank 0", "rank 1"]
    losses = runs_catalog.run("pretrain").ledger.metrics(3, 0, 2)["sample_loss"]
    shown = [a.select_one(".sample-head").get_text(" ") for a in samples]
    assert all(f"loss {loss:.4f}" in text for loss, text in zip(losses, shown))


def test_token_views_load_as_fragments_with_document_boundaries(runs_client, runs_catalog):
    dom = soup(runs_client.get("/runs/pretrain/steps/3/ranks/0"))
    deferred = dom.select_one("article.sample [hx-get]")
    assert deferred is not None  # 24 tokens > threshold 10: loaded when revealed
    fragment = runs_client.get(deferred["hx-get"], headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and fragment.headers["vary"] == "HX-Request"
    body = soup(fragment)
    assert body.select_one("html") is None and body.select_one("section.field") is not None
    sample = runs_catalog.run("pretrain").batch(3, 0, world_size=2).samples[0]
    tokens = body.select("[data-token-index], .tok, span[title]")
    assert len(tokens) >= len(sample.inputs["input_ids"])


def test_step_page_lists_every_rank(runs_client, runs_catalog):
    run = runs_catalog.run("pretrain")
    dom = soup(runs_client.get("/runs/pretrain/steps/2"))
    rows = dom.select("tr.rank-share")
    assert [r.select_one("a")["href"] for r in rows] == ["/runs/pretrain/steps/2/ranks/0", "/runs/pretrain/steps/2/ranks/1"]
    data = runs_client.get("/api/runs/pretrain/steps/2").json()
    for rank, share in enumerate(data["ranks"]):
        batch = run.batch(2, rank, world_size=2)
        assert share["digest"] == batch.digest and share["verified"] is True
        assert share["tokens"] == sum(len(s.inputs["input_ids"]) for s in batch.samples)
        assert share["loss"] == pytest.approx(run.ledger.metrics(2, rank, 2)["loss"])


def test_run_page_plan_sources_world_sizes_and_curves(runs_client, runs_catalog):
    run = runs_catalog.run("pretrain")
    dom = soup(runs_client.get("/runs/pretrain"))
    version_link = dom.select_one("a[href*='/datasets/docs/versions/']")
    assert run.sources[0].version in version_link["href"]
    data = runs_client.get("/api/runs/pretrain").json()
    assert data["world_sizes"] == [{"start_step": 0, "world_size": 2}, {"start_step": 6, "world_size": 1}]
    assert {m["name"] for m in data["metrics"]} == {"loss"}
    chart = dom.select_one("figure.chart[data-metric=loss] svg")
    links = [a.get("href") or a.get("xlink:href") for a in chart.select("a")]
    outliers = [o["step"] for m in data["metrics"] for o in m["outliers"]]
    assert sorted(links) == sorted([f"/runs/pretrain/steps/{s}" for s in range(12)] + [f"/runs/pretrain/steps/{s}" for s in outliers])
    jump = runs_client.get("/runs/pretrain?step=5")
    assert jump.status_code == 303 and jump.headers["location"] == "/runs/pretrain/steps/5"


def test_no_ledger_and_mismatch_badges(runs_catalog, tmp_path):
    copy = tmp_path / "catalog"
    shutil.copytree(runs_catalog.root, copy)
    ledger = next((copy / "runs" / "pretrain" / "ledger").glob("w2-r0.jsonl"))
    lines = []
    for line in ledger.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("t") == "batch" and entry["step"] == 4:
            entry["samples"][1] = "0" * 16
            entry["digest"] = "f" * 32
        if entry.get("t") == "batch" and entry["step"] == 5:
            entry["keys"][0] = "edited-key"  # digests intact
        if entry.get("t") == "trained" and entry["step"] == 3:
            continue  # fetched, never marked trained
        if entry.get("t") == "batch" and entry["step"] == 2:
            entry["digest"] = "e" * 32  # the batch record damaged; every sample's own record intact
        lines.append(json.dumps(entry))
    ledger.write_text("\n".join(lines) + "\n")
    client = local_client(create_app(Settings(root=str(copy), flags_path=str(tmp_path / "f.sqlite"))))
    run = Catalog(copy).run("pretrain")
    bad = client.get("/api/runs/pretrain/steps/4/ranks/0").json()
    assert bad["verified"] is False and bad["verification"]["differing"] == [run.batch(4, 0, world_size=2).samples[1].index]
    dom = soup(client.get("/runs/pretrain/steps/4/ranks/0"))
    assert dom.select_one(".verify")["data-verified"] == "false"
    assert "#1" in dom.select_one(".differing").get_text()
    edited = client.get("/api/runs/pretrain/steps/5/ranks/0").json()
    assert edited["verified"] is False and edited["verification"]["differing"] == [run.batch(5, 0, world_size=2).indices[0]]
    digest_only = client.get("/api/runs/pretrain/steps/2/ranks/0").json()["verification"]
    assert digest_only["status"] == "mismatch" and digest_only["differing"] == []  # no sample is blamed
    assert digest_only["label"] == "✗ the batch digest differs from the ledger's"
    assert "no sample is blamed" in digest_only["reasons"][-1]
    dom = soup(client.get("/runs/pretrain/steps/2/ranks/0"))
    assert dom.select_one(".differing") is None and "no sample is blamed" in dom.select_one(".verify-reasons").get_text()
    untrained = client.get("/api/runs/pretrain/steps/3/ranks/0").json()["verification"]
    assert untrained["status"] == "untrained" and "never marked trained" in untrained["label"]
    none = client.get("/api/runs/plain/steps/0/ranks/0").json()
    assert none["verified"] is None and none["verification"]["label"] == "no ledger"


@pytest.mark.parametrize(
    "url, status, message",
    [
        ("/api/runs/nope", 404, "no run named 'nope'"),
        ("/api/runs/pretrain/steps/12", 404, "steps 0 to 11"),
        ("/api/runs/pretrain/steps/-1/ranks/0", 404, "steps 0 to 11"),
        ("/api/runs/pretrain/steps/1000000000000000000000000000000/ranks/0", 404, "steps 0 to 11"),
        ("/api/runs/pretrain/steps/8/ranks/1", 404, "world size 1"),
        ("/api/runs/pretrain/steps/2/ranks/2", 404, "world size 2"),
        ("/api/runs/pretrain/steps/two/ranks/0", 422, "step"),
        ("/api/runs/pretrain/steps/2/ranks/x", 422, "rank"),
        ("/api/runs/pretrain/steps/2/ranks/0?against=other@v1", 404, "no dataset named 'other'"),
    ],
)
def test_errors_have_one_shape_and_say_what_exists(runs_client, url, status, message):
    response = runs_client.get(url)
    assert response.status_code == status
    body = response.json()
    assert body["ok"] is False and body["status"] == status and message in body["error"]
    html = runs_client.get(url[len("/api") :])
    assert html.status_code == status and message.split("'")[0] in soup(html).get_text()


def test_against_a_version_shows_what_changes(runs_client, runs_catalog):
    data = runs_client.get("/api/runs/pretrain/steps/3/ranks/0?against=docs@v2").json()["against"]
    alternative = runs_catalog.run("pretrain").against("docs@v2").batch(3, 0, world_size=2)
    assert [c["other_keys"] for c in data["samples"]] == [[d.key for d in s.documents] for s in alternative.samples]
    assert data["changed"] == sum(1 for c in data["samples"] if c["status"] != "same")
    dom = soup(runs_client.get("/runs/pretrain/steps/3/ranks/0?against=docs@v2"))
    assert len(dom.select("tr.comparison")) == len(data["samples"])


def test_a_kept_rank_page_follows_new_flags_and_ledger_lines(runs_catalog, tmp_path):
    copy = tmp_path / "catalog"
    shutil.copytree(runs_catalog.root, copy)
    client = local_client(create_app(Settings(root=str(copy), flags_path=str(tmp_path / "f.sqlite"))))
    url = "/runs/pretrain/steps/8/ranks/0"
    first = client.get(url)
    assert client.get(url).text == first.text  # served again from the page cache
    form = soup(first).select("form.flag-form")[1]
    fields = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    assert client.post("/flags", data={**fields, "note": "spike here", "tags": ""}, headers={"HX-Request": "true"}).status_code == 200
    flagged = soup(client.get(url))
    assert "spike here" in flagged.select("form.flag-form")[1].get_text()
    run = Catalog(copy).run("pretrain")
    writer = run.ledger.writer(0, 1, flush_seconds=0)
    writer.log(8, loss=123.456)
    writer.close()
    assert "loss 123.4560" in soup(client.get(url)).select_one(".page-head .facts").get_text()

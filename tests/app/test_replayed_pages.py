"""A replayed run on every page a run has: run (chart, outliers, replay panel), step (loss ranking), step/rank (tokens,
loss mask, what the run logged), sample permalinks, flags and where — each saying "replayed", never "verified"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from loaders.replay.attach import Imports, attach
from tests.app.dom import soup
from tests.support.local_client import local_client
from tests.support.replays import hf_corpus

SPIKE = 5
ARGV = ["--shuffle-seed", "3", "--seed", "5", "--world-size", "2", "--batch-size", "3", "--epochs", "2", "--key", "id"]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> Catalog:
    """Run ``hf-job`` attached with a loss curve spiking at step 7 (per-sample losses there) and logged indices for
    steps 0-4, step 4 of rank 0 logged wrong."""
    base = tmp_path_factory.mktemp("replayed")
    corpus = hf_corpus(base, rows=45)
    catalog = Catalog(base / "catalog")
    probe = attach(catalog, "hf", "probe", ["--dataset", str(corpus), *ARGV])
    metrics = base / "metrics.jsonl"
    lines = [{"step": s, "loss": 9.0 if s == SPIKE else 2.0 + 0.01 * (s % 3)} for s in range(probe.total_steps)]
    lines += [{"step": SPIKE, "rank": r, "sample_loss": [1.0 + r, 5.0 + r, 3.0]} for r in range(2)]
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    logged = base / "batches.jsonl"
    rows = []
    for step in range(5):
        for rank in range(2):
            indices = probe.batch(step, rank).indices
            rows.append({"step": step, "rank": rank, "indices": indices[::-1] if (step, rank) == (4, 0) else indices})
    logged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    attach(catalog, "hf", "hf-job", ["--dataset", str(corpus), *ARGV], imports=Imports(metrics=(str(metrics),), batches=str(logged)))
    return catalog


@pytest.fixture
def client(replayed, tmp_path: Path):
    settings = Settings(root=replayed.root, flags_path=str(tmp_path / "flags.sqlite"))
    return local_client(create_app(settings), follow_redirects=False)


def _text(response) -> str:
    return " ".join(soup(response).get_text(" ").split())


def test_the_run_page_shows_the_replay_its_files_and_the_imported_curve_with_its_spike(client, replayed):
    page = client.get(urls.run("hf-job"))
    assert page.status_code == 200
    dom = soup(page)
    assert dom.select_one(".run-kind").get_text(" ", strip=True) == "replayed · Hugging Face datasets + torch DistributedSampler"
    lines = {
        th.get_text(strip=True): td.get_text(" ", strip=True) for th, td in (tr.select("th, td") for tr in dom.select(".replay-lines tr"))
    }
    assert lines["sampler"].startswith("torch DistributedSampler(num_replicas=2, rank=r, shuffle=True, seed=5, drop_last=False)")
    version = replayed.run("hf-job").version(0)
    assert dom.select_one(".replay-documents a")["href"] == urls.version("corpus", version.id)
    assert {td.get_text() for td in dom.select(".replay-pins td:nth-of-type(2)")} == {"dataset description"}
    spike = dom.select_one(f'figure[data-metric="loss"] tr.outlier[data-step="{SPIKE}"]')
    assert spike["data-kind"] == "spike" and spike.a["href"] == urls.step("hf-job", SPIKE)
    assert not dom.select("#mixture") and "Plan (as written)" not in page.text and "verified" not in _text(page)
    twin = client.get(urls.api(urls.run("hf-job"))).json()
    assert (twin["kind"], twin["label"], twin["plan"], twin["replay"]["framework"]) == ("replayed", "replayed", None, "hf")


def test_the_step_page_ranks_every_sample_by_the_loss_the_run_logged(client):
    page = client.get(urls.step("hf-job", SPIKE))
    dom = soup(page)
    ranked = [
        (a["href"], float(tr.select_one("td.num").get_text()))
        for tr in dom.select("table.step-samples tbody tr")
        for a in tr.select("a")[:1]
    ]
    assert [loss for _, loss in ranked][:2] == [6.0, 5.0]
    assert ranked[0][0] == urls.rank("hf-job", SPIKE, 1) + urls.sample_anchor(1)
    assert dom.select("table.ranks th")[7].get_text() == "logged" and "verified" not in _text(page)


@pytest.mark.parametrize(
    "step, rank, label",
    [
        (2, 1, "✓ replayed · matches the indices the run logged"),
        (4, 0, "✗ replayed · 2 sample(s) differ from what the run logged"),
        (9, 0, "replayed · the run logged no batches to compare"),
    ],
)
def test_the_rank_page_compares_with_what_the_run_logged(client, replayed, step, rank, label):
    page = client.get(urls.rank("hf-job", step, rank))
    dom = soup(page)
    assert dom.select_one(".verify").get_text(strip=True) == label
    assert not dom.select("form.against") and "verified" not in _text(page)
    batch = replayed.run("hf-job").batch(step, rank)
    twin = client.get(urls.api(urls.rank("hf-job", step, rank))).json()
    assert [s["index"] for s in twin["samples"]] == batch.indices and twin["kind"] == "replayed"
    assert [s["key"] for s in twin["samples"]] == [s.record["id"] for s in batch.samples]


def test_the_rank_page_draws_tokens_with_the_loss_mask_of_the_labels(client):
    dom = soup(client.get(urls.rank("hf-job", 0, 0)))
    view = dom.select_one("#sample-0 .tokens")
    tokens = view.select(".tok[title]")
    assert len(tokens) == 8 and [("masked" in t.get("class", [])) for t in tokens] == [True, True] + [False] * 6


def test_against_is_refused_on_a_replayed_run(client):
    response = client.get(urls.api(urls.rank("hf-job", 0, 0)) + "?against=corpus@latest")
    assert (
        response.status_code == 422 and "?against= re-resolves a native run's read plan; run hf-job is replayed" in response.json()["error"]
    )


def test_a_sample_links_to_its_permalink_and_where_finds_it_back(client, replayed):
    run = replayed.run("hf-job")
    entry = client.get(urls.api(urls.rank("hf-job", 6, 1))).json()["samples"][2]
    sample = client.get(entry["url"])
    assert sample.status_code == 200
    where = client.get(urls.api(entry["url"])).json()["where"]
    reads = {(r["step"], r["rank"], r["sample"]) for w in where if w["run"] == "hf-job" for r in w["reads"]}
    assert (6, 1, 2) in reads
    record = run.version(0).index_of(entry["shard"], entry["row"])
    assert reads == {(r.step, r.rank, r.sample) for r in run.where(0, record).reads}


def test_a_flag_made_on_a_replayed_sample_links_back_to_its_anchor(client):
    page = soup(client.get(urls.rank("hf-job", SPIKE, 1)))
    form = page.find(id="sample-1").select_one("form.flag-form")
    fields = {i["name"]: i.get("value", "") for i in form.select("input[type=hidden]")}
    posted = client.post(form["action"], data={**fields, "note": "spike sample", "tags": "spike"})
    assert posted.status_code == 303
    flag = client.get(urls.api(posted.headers["location"])).json()["flag"]
    assert flag["context_url"] == urls.rank("hf-job", SPIKE, 1) + "#sample-1"
    assert soup(client.get(urls.rank("hf-job", SPIKE, 1))).find(id="sample-1").select_one(".flag-notes a")["href"] == urls.flag(flag["id"])
    flags = client.get(urls.flags())
    assert flags.status_code == 200 and flag["context_url"] in {a["href"] for a in soup(flags).select("a")}
    home = soup(client.get(urls.home()))
    assert {tr.a.get_text(): tr["data-status"] for tr in home.select("tr.run-row")}["hf-job"] == "replayed"


def test_a_step_beyond_the_run_is_a_404_naming_it(client, replayed):
    steps = replayed.run("hf-job").total_steps
    response = client.get(urls.api(urls.step("hf-job", steps)))
    assert response.status_code == 404
    assert response.json()["error"] == f"step {steps} is outside replayed run hf-job (steps 0 to {steps - 1})"


def test_the_documents_of_a_replayed_run_are_a_browsable_version(client, replayed):
    version = replayed.run("hf-job").version(0)
    listing = client.get(urls.version("corpus", version.id))
    assert listing.status_code == 200 and "doc-00000" in listing.text
    found = client.get(urls.api(urls.version("corpus", version.id, q="document 17 ", column="text"))).json()["listing"]
    assert [row["index"] for row in found["rows"]] == [17]


def test_a_pinned_file_changed_since_attaching_is_a_409_naming_it_and_the_server_keeps_serving(tmp_path):
    corpus = hf_corpus(tmp_path, rows=12)
    catalog = Catalog(tmp_path / "catalog")
    attach(catalog, "hf", "job", ["--dataset", str(corpus), "--seed", "1", "--world-size", "2", "--batch-size", "2"])
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "flags.sqlite"))), follow_redirects=False)
    state = corpus / "state.json"
    state.write_text(state.read_text().replace('"_split": null', '"_split": "train"'))
    expected = f"{state}: pinned by replayed run job at"
    for url in (urls.rank("job", 0, 1), urls.run("job")):
        response = client.get(urls.api(url))
        assert response.status_code == 409 and response.json()["error"].startswith(expected)
        page = client.get(url)
        assert page.status_code == 409 and expected in _text(page)
    assert client.get("/").status_code == 200


def test_the_live_marker_says_replayed_and_stops_asking_and_tail_prints_the_imported_steps(client, replayed):
    from typer.testing import CliRunner

    from app.cli import app as cli

    run = replayed.run("hf-job")
    marker = soup(client.get(urls.run("hf-job"))).select_one("#live-marker")
    assert marker["data-status"] == "replayed" and marker.has_attr("data-final")  # nothing adds to what was imported
    live = client.get(urls.api(urls.run_live("hf-job"))).json()
    assert (live["kind"], live["status"], live["logged_steps"], live["last_step"]) == (
        "replayed",
        "replayed",
        run.total_steps,
        run.total_steps - 1,
    )
    result = CliRunner().invoke(cli, ["tail", "hf-job", "--root", replayed.root, "--from", str(SPIKE)])  # returns: no --once needed
    lines = result.output.splitlines()
    assert result.exit_code == 0 and len(lines) == run.total_steps - SPIKE
    worst = f"step {SPIKE}  loss 9.0000  worst: rank 1 #1 sample_loss 6.0000 key {run.batch(SPIKE, 1).keys[1]}  "
    assert lines[0].startswith(worst) and lines[0].endswith(urls.rank("hf-job", SPIKE, 1) + "#sample-1")

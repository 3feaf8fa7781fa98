"""Where was this read: the sample page's panel and JSON twin, and the flags page's steps, against ``run.batch``."""

from __future__ import annotations

import pytest

from app import urls
from app.pages import where as where_page
from loaders import Catalog
from tests.app.dom import soup
from tests.support.readpath import forward_reads


@pytest.fixture
def runs_client(make_client, runs_catalog: Catalog):
    return make_client(root=runs_catalog.root)


def _expected(catalog: Catalog, record: int) -> dict[str, set[tuple[int, int, int, int]]]:
    """run → {(epoch, step, rank, sample)} of docs@v1's ``record``, by reading every step."""
    out = {}
    for name in ("plain", "pretrain"):
        reads = forward_reads(catalog.run(name)).get((0, record), set())
        out[name] = {(epoch, step, rank, sample) for epoch, step, rank, _, sample in reads}
    return out


def test_the_json_twin_lists_exactly_the_reads_the_batches_hold(runs_client, runs_catalog):
    version = runs_catalog.resolve("docs@v1")
    for key, record in (("doc-5", 5), ("doc-30", 30)):
        body = runs_client.get(urls.api(urls.sample("docs", version, key))).json()
        listed = {run["run"]: {(r["epoch"], r["step"], r["rank"], r["sample"]) for r in run["reads"]} for run in body["where"]}
        assert listed == _expected(runs_catalog, record)
        pretrain = next(run for run in body["where"] if run["run"] == "pretrain")
        assert pretrain["next_epoch"] is None and pretrain["error"] == ""
        for read in pretrain["reads"]:  # trained on 2 ranks for steps 0-5, then 1
            assert read["world_size"] == (2 if read["step"] < 6 else 1)
            assert read["url"] == urls.rank("pretrain", read["step"], read["rank"]) + urls.sample_anchor(read["sample"])


def test_the_panel_links_each_read_to_its_rank_page_anchor(runs_client, runs_catalog):
    version = runs_catalog.resolve("docs@v1")
    page = soup(runs_client.get(urls.sample("docs", version, "doc-5")))
    panel = page.select_one("section#where-read")
    links = {a["href"] for a in panel.select("a.where-link")}
    expected = _expected(runs_catalog, 5)
    assert links == {
        urls.rank(run, step, rank) + urls.sample_anchor(sample) for run, reads in expected.items() for _, step, rank, sample in reads
    }
    assert {div["data-run"] for div in panel.select(".where-run")} == {"plain", "pretrain"}


def test_a_version_no_run_pins_says_so_and_where_run_narrows_the_panel(runs_client, runs_catalog):
    v2 = runs_catalog.resolve("docs@v2")
    page = soup(runs_client.get(urls.sample("docs", v2, "doc-5")))
    assert page.select_one("#where-read").get_text(" ", strip=True).endswith("No run reads this version.")
    v1 = runs_catalog.resolve("docs@v1")
    body = runs_client.get(urls.api(urls.sample("docs", v1, "doc-5", where_run="plain"))).json()
    assert [run["run"] for run in body["where"]] == ["plain"]
    assert runs_client.get(urls.api(urls.sample("docs", v1, "doc-5", where_run="nope"))).status_code == 404


def test_later_epochs_come_a_page_at_a_time(runs_client, runs_catalog, monkeypatch):
    monkeypatch.setattr(where_page, "WHERE_EPOCHS", 1)
    version = runs_catalog.resolve("docs@v1")
    first = next(r for r in runs_client.get(urls.api(urls.sample("docs", version, "doc-5"))).json()["where"] if r["run"] == "pretrain")
    assert first["epochs"] > 1 and first["next_epoch"] == 1 and {r["epoch"] for r in first["reads"]} <= {0}
    assert first["more_url"] == urls.sample("docs", version, "doc-5", where_run="pretrain", where_epoch=1)
    later = runs_client.get(urls.api(first["more_url"])).json()["where"][0]
    assert {r["epoch"] for r in later["reads"]} <= {1} and later["first_epoch"] == 1


def test_the_flags_page_lists_the_steps_each_flag_touched_and_counts_them_per_run(runs_client, runs_catalog):
    version = runs_catalog.resolve("docs@v1")
    for key in ("doc-5", "doc-7", "doc-5"):
        assert runs_client.post("/api/flags", json={"dataset": "docs", "version": version.id, "key": key}).status_code == 201
    body = runs_client.get(urls.api(urls.flags())).json()
    expected = [_expected(runs_catalog, record) for record in (5, 7)]
    touched = {run["run"]: run["steps"] for run in body["reads"]["runs"]}
    assert touched == {
        run: len({s for e in expected for _, s, _, _ in e[run]}) for run in ("plain", "pretrain") if any(e[run] for e in expected)
    }
    by_flag = body["reads"]["flags"]
    doc7 = next(f for f in body["flags"] if f["key"] == "doc-7")
    steps7 = {(r["run"], r["step"], r["rank"], r["sample"]) for r in by_flag[str(doc7["id"])]["reads"]}
    assert steps7 == {(run, s, r, i) for run, reads in expected[1].items() for _, s, r, i in reads}
    page = soup(runs_client.get(urls.flags()))
    rows = {tr["data-run"]: tr.select_one(".steps-touched").get_text(strip=True) for tr in page.select("tr.flagged-run")}
    assert rows == {run: str(n) for run, n in touched.items()}
    assert page.select("a.flag-read")


def test_a_single_field_or_an_htmx_swap_of_the_fields_leaves_the_panel_out(runs_client, runs_catalog):
    version = runs_catalog.resolve("docs@v1")
    assert runs_client.get(urls.api(urls.sample("docs", version, "doc-5", field="text"))).json()["where"] is None
    swapped = runs_client.get(urls.sample("docs", version, "doc-5"), headers={"HX-Request": "true"})
    assert swapped.status_code == 200 and soup(swapped).select("section.field") and not soup(swapped).select("#where-read")


def test_the_flags_page_bounds_the_packed_epochs_it_inverts_and_marks_the_run(runs_client, runs_catalog, monkeypatch):
    monkeypatch.setattr(where_page, "PACKED_EPOCHS", 2)
    version = runs_catalog.resolve("docs@v1")
    for key in ("doc-5", "doc-7"):
        runs_client.post("/api/flags", json={"dataset": "docs", "version": version.id, "key": key})
    reads = runs_client.get(urls.api(urls.flags())).json()["reads"]
    runs = {run["run"]: run for run in reads["runs"]}
    assert runs["pretrain"]["partial"] and not runs["plain"]["partial"]  # pretrain reaches 3 epochs, plain 1
    flags = sorted(reads["flags"].values(), key=lambda f: f["flag"])
    newest_first = flags[::-1]  # the page lists (and so inverts) the newest flag first: it gets the 2 epochs
    assert {r["epoch"] for r in newest_first[0]["reads"] if r["run"] == "pretrain"} <= {0, 1}
    assert not [r for r in newest_first[1]["reads"] if r["run"] == "pretrain"]
    assert any("packed runs 2 epochs in all" in note for note in reads["notes"])
    page = soup(runs_client.get(urls.flags()))
    assert page.select_one("tr.flagged-run[data-run=pretrain] td").get_text(strip=True).endswith("*")


def test_a_flag_page_lists_every_read_of_its_sample(runs_client, runs_catalog):
    version = runs_catalog.resolve("docs@v1")
    stored = runs_client.post("/api/flags", json={"dataset": "docs", "version": version.id, "key": "doc-7"}).json()
    body = runs_client.get(urls.api(urls.flag(stored["id"]))).json()
    listed = {run["run"]: {(r["epoch"], r["step"], r["rank"], r["sample"]) for r in run["reads"]} for run in body["where"]}
    assert listed == _expected(runs_catalog, 7) and body["where_error"] == ""
    links = {a["href"] for a in soup(runs_client.get(urls.flag(stored["id"]))).select("#where-read a.where-link")}
    assert links == {r["url"] for run in body["where"] for r in run["reads"]}

"""Step and step/rank pages for loss forensics, on a real server: masks and padding on model inputs, samples ranked by
logged loss, per-token loss heat, anchors every link lands on, and flags that link back to them."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from bs4 import BeautifulSoup

from app import urls
from app.flags import FlagStore
from app.pages.forensics import padding_warning, sort_samples, token_stats
from loaders import Catalog
from tests.browser.conftest import serving
from tests.conftest import word_tokenizer, write_parquet
from tests.support.forensics import SPIKE, WORST, build_forensics_catalog, sample_loss


@pytest.fixture(scope="module")
def forensics_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return build_forensics_catalog(tmp_path_factory.mktemp("forensics"), write_parquet, word_tokenizer)


@pytest.fixture(scope="module")
def http(forensics_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A client of a real ``batchscope serve`` on 127.0.0.1 over the forensics catalog (flags in a fresh database)."""
    logs = tmp_path_factory.mktemp("forensics-server")
    with serving(forensics_catalog.root, logs, flags_path=str(logs / "flags.sqlite")) as base:
        with httpx.Client(base_url=base, follow_redirects=False, timeout=60) as client:
            yield client


def dom(response: httpx.Response) -> BeautifulSoup:
    assert response.status_code == 200, response.text
    return BeautifulSoup(response.text, "html.parser")


def test_token_stats_and_padding_rule() -> None:
    stats = token_stats({"input_ids": [5, 6, 7, 0], "loss_mask": [0, 1, 1, 0], "padding": 1})
    assert (stats.tokens, stats.trained, stats.padding, stats.content) == (4, 2, 1, 3)
    assert token_stats({"image": [[0]]}).tokens == 0
    assert padding_warning(9, 16) == "mostly padding: 9 of 16 tokens of this sequence (56%) are padding"
    assert padding_warning(8, 16) is None  # exactly half is not "mostly"
    assert padding_warning(0, 0) is None


def test_sort_samples_orders_and_keeps_positions_for_ties() -> None:
    items = [(0, 2.0, 5, "b"), (1, None, 9, "a"), (2, 7.0, 5, "a"), (3, 2.0, 1, "b")]
    keys = {"loss": lambda x: x[1], "length": lambda x: x[2], "source": lambda x: x[3], "position": lambda x: (x[0],)}

    def order(sort: str) -> list[int]:
        return [x[0] for x in sort_samples(items, sort, **keys)]

    assert order("loss") == [2, 0, 3, 1]  # highest first, no loss last, ties by position
    assert order("length") == [1, 0, 2, 3]
    assert order("source") == [1, 2, 0, 3]
    assert order("position") == [0, 1, 2, 3]


def test_rank_page_draws_mask_and_padding_on_model_inputs(http: httpx.Client, forensics_catalog: Catalog) -> None:
    run = forensics_catalog.run("spiky")
    batch = run.batch(3, 0)
    page = dom(http.get(urls.rank("spiky", 3, 0)))
    articles = page.select("article.sample")
    assert len(articles) == len(batch) == 2
    for article, sample in zip(articles, batch.samples):
        ids, mask, padding = sample.inputs["input_ids"], sample.inputs["loss_mask"], sample.inputs["padding"]
        content = len(ids) - padding
        bar = article.select_one(".inputs .tok-bar")
        assert bar.select_one(".trained-count").get_text() == str(sum(mask))
        assert bar.select_one(".masked-count").get_text() == str(content - sum(mask[:content]))
        assert bar.select_one(".padding-count").get_text() == str(padding)
        tokens = article.select(".inputs .tok-seq > .tok")
        # One element per real token, then one run for all the padding: no boundary or piece per padding token.
        assert len(tokens) == content + 1 and tokens[-1]["class"] == ["tok", "pad-run"]
        assert tokens[-1].get_text() == f"{padding} padding tokens"
        assert [("trained" in t["class"]) for t in tokens[:-1]] == [bool(m) for m in mask[:content]]
        assert len(article.select(".inputs .tok-seq .tok.doc-start")) == max(0, len(sample.inputs["doc_spans"]) - 1)
    real, empty = articles
    assert real.select_one(".padding-warning") is None
    assert [a.get_text() for a in real.select(".documents a.key")] == [d["key"] for d in batch.samples[0].inputs["doc_spans"]]
    # The all-padding sequence names no document, has no record, no dataset link and nothing to flag.
    assert empty.select_one(".tag.padding").get_text() == "padding"
    assert empty.select(".documents, a.key, details.record, form.flag-form") == []
    assert empty.select_one(".padding-warning").get_text() == "mostly padding: 16 of 16 tokens of this sequence (100%) are padding"
    assert empty.select_one("button.copy-link")["data-copy"] == urls.rank("spiky", 3, 0) + "#sample-1"
    data = http.get(urls.api(urls.rank("spiky", 3, 0))).json()
    assert [(s["tokens"], s["trained_tokens"], s["padding"], s["all_padding"], s["documents"] == []) for s in data["samples"]] == [
        (16, sum(batch.samples[0].inputs["loss_mask"]), batch.samples[0].inputs["padding"], False, False),
        (16, 0, 16, True, True),
    ]
    assert "sample_loss" not in data["metrics"] and "token_loss" not in data["metrics"]


def test_rank_page_draws_logged_token_loss_as_heat(http: httpx.Client, forensics_catalog: Catalog) -> None:
    page = dom(http.get(urls.rank("spiky", 5, 1)))
    first = page.select("article.sample")[0]
    assert first.select_one(".heat-legend").get_text(" ", strip=True).startswith("token_loss 0")
    tokens = first.select(".tok-seq > .tok:not(.pad-run)")
    assert "heat0" in tokens[0]["class"] and "token_loss 0" in tokens[0]["title"]
    assert "token_loss 0.25" in tokens[1]["title"]


def test_rank_page_sorts_samples_by_loss_keeping_anchors(http: httpx.Client) -> None:
    page = dom(http.get(urls.rank("spiky", SPIKE, 0), params={"sort": "loss"}))
    assert [a["id"] for a in page.select("article.sample")] == ["sample-1", "sample-0"]  # 10.0 before 9.5
    assert [a.select_one(".sample-loss").get_text() for a in page.select("article.sample")] == [
        f"loss {sample_loss(SPIKE, 0, 1):.4f}",
        f"loss {sample_loss(SPIKE, 0, 0):.4f}",
    ]
    assert page.select_one(".sorts a[aria-current]").get_text() == "loss (highest first)"
    by_length = dom(http.get(urls.rank("spiky", SPIKE, 0), params={"sort": "length"}))
    assert [a["id"] for a in by_length.select("article.sample")] == ["sample-0", "sample-1"]  # the padding sequence last
    unknown = dom(http.get(urls.rank("spiky", SPIKE, 0), params={"sort": "nonsense"}))
    assert unknown.select_one(".sorts a[aria-current]").get_text() == "position"


def test_step_page_ranks_every_sample_of_every_rank_by_loss(http: httpx.Client) -> None:
    page = dom(http.get(urls.step("spiky", SPIKE)))
    rows = page.select("tr.step-sample")
    expected = sorted(((r, p) for r in range(2) for p in range(2)), key=lambda rp: -sample_loss(SPIKE, *rp))
    assert [(int(r["data-rank"]), int(r["data-position"])) for r in rows] == expected
    assert expected[0] == WORST
    assert page.select_one(".padding-warning").get_text().startswith("mostly padding: ")
    for row in rows:
        href = row.select_one("a")["href"]
        path, anchor = href.split("#")
        assert path == urls.rank("spiky", SPIKE, int(row["data-rank"])) and anchor == f"sample-{row['data-position']}"
        assert dom(http.get(path)).find(id=anchor) is not None  # every link lands on an existing anchor
    data = http.get(urls.api(urls.step("spiky", SPIKE))).json()
    assert data["sort"] == "loss" and [s["loss"] for s in data["samples"]] == [sample_loss(SPIKE, *rp) for rp in expected]
    by_rank = http.get(urls.api(urls.step("spiky", SPIKE)), params={"sort": "position"}).json()["samples"]
    assert [(s["rank"], s["position"]) for s in by_rank] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_flag_from_the_rank_page_links_back_to_an_existing_anchor(http: httpx.Client, forensics_catalog: Catalog) -> None:
    rank, position = WORST
    page = dom(http.get(urls.rank("spiky", SPIKE, rank)))
    article = page.find(id=f"sample-{position}")
    form = article.select_one("form.flag-form")
    fields = {i["name"]: i.get("value", "") for i in form.select("input[type=hidden]")}
    sample = forensics_catalog.run("spiky").batch(SPIKE, rank).samples[position]
    assert (fields["index"], fields["position"]) == (str(sample.index), str(position))
    posted = http.post(form["action"], data={**fields, "note": "spike", "tags": "spike"})
    assert posted.status_code == 303
    flag = http.get(urls.api(posted.headers["location"])).json()["flag"]
    assert flag["context_url"] == urls.rank("spiky", SPIKE, rank) + f"#sample-{position}"
    path, anchor = flag["context_url"].split("#")
    assert dom(http.get(path)).find(id=anchor).select_one(".flag-notes a")["href"] == urls.flag(flag["id"])
    seen_in = dom(http.get(urls.flag(flag["id"]))).find("a", href=flag["context_url"])
    assert seen_in.get_text() == f"spiky step {SPIKE} rank {rank} #{position}"


def test_api_flag_with_only_the_global_index_gets_the_position(http: httpx.Client, forensics_catalog: Catalog) -> None:
    sample = forensics_catalog.run("spiky").batch(4, 1).samples[0]
    body = {"dataset": "docs", "version": "v1", "key": sample.key, "run": "spiky", "step": 4, "rank": 1, "index": sample.index}
    flag = http.post(urls.api(urls.flags()), json=body).json()
    assert (flag["index"], flag["position"], flag["context_url"]) == (sample.index, 0, urls.rank("spiky", 4, 1) + "#sample-0")
    elsewhere = http.post(urls.api(urls.flags()), json={**body, "step": 5}).json()  # not read at step 5: no anchor
    assert (elsewhere["position"], elsewhere["context_url"]) == (None, urls.rank("spiky", 5, 1))


def test_flags_made_before_positions_were_kept_still_open(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE flags (id INTEGER PRIMARY KEY AUTOINCREMENT, dataset TEXT NOT NULL, version TEXT NOT NULL,"
            " key TEXT NOT NULL, note TEXT NOT NULL DEFAULT '', created TEXT NOT NULL, run TEXT, step INTEGER, rank INTEGER,"
            " sample_index INTEGER);"
            "INSERT INTO flags (dataset, version, key, created, run, step, rank, sample_index)"
            " VALUES ('docs', 'abc', 'k', '2025-01-01', 'r', 3, 1, 450);"
        )
    store = FlagStore(str(path))
    old = store.get(1)
    assert (old.index, old.position, old.context_url) == (450, None, urls.rank("r", 3, 1))  # no dead #sample-450
    new = store.add(dataset="docs", version="abc", key="k", run="r", step=3, rank=1, index=450, position=2)
    assert new.context_url == urls.rank("r", 3, 1) + "#sample-2"

"""The SQL pages, CSV and JSON twins, column statistics, search counts, sorting, and a run's find page, through the DOM."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from tests.app.dom import soup
from tests.support.local_client import local_client

DOCS = 'SELECT id, text, score, blob FROM "docs@v1" ORDER BY score DESC'


def test_sql_page_renders_cells_by_kind_and_links_each_row_to_its_permalink(client: TestClient, inspector_catalog: Catalog) -> None:
    chat = inspector_catalog.resolve("chat@v1")
    page = soup(client.get(urls.sql(q='SELECT * FROM "chat@v1"')))
    table = page.select_one("#rows table.sql-table")
    assert [th.get_text(" ", strip=True) for th in table.select("thead th")][1:] == [
        "id text",
        "messages chat",
        "input_ids tokens",
        "loss_mask mask",
    ]
    rows = table.select("tbody tr")
    assert [r.select_one("a.row-link")["href"] for r in rows] == [
        urls.sample("chat", chat, k) for k in ("good", "no-im-end", "shifted-mask")
    ]
    first = [td.get_text(" ", strip=True) for td in rows[0].select("td")]
    records = inspector_catalog.resolve("chat@v1").read(0, [0])
    assert first[2] == "2 turns (user, assistant)" and first[3] == f"{len(records[0]['input_ids'])} tokens"
    assert first[4] == f"{sum(records[0]['loss_mask'])}/{len(records[0]['loss_mask'])} trained"
    for link in rows:
        assert client.get(link.select_one("a.row-link")["href"]).status_code == 200
    limits = page.select_one(".limits").get_text()
    assert limits == "Limits: at most 10 s, 1 GiB of memory and 10,000 rows per query."


def test_json_twin_csv_export_and_paging_agree(make_client, inspector_catalog: Catalog) -> None:  # type: ignore[no-untyped-def]
    client = make_client(page_size=5)
    version = inspector_catalog.resolve("docs@v1")
    records = sorted((r for s, i in enumerate(version.shards) for r in version.read(s, range(i.rows))), key=lambda r: -r["score"])
    body = client.get(urls.api(urls.sql(q=DOCS))).json()
    assert body["columns"] == ["id", "text", "score", "blob"] and body["row_count"] == 12 and not body["truncated"]
    assert [r["id"] for r in body["rows"]] == [r["id"] for r in records[:5]]
    assert body["links"] == [urls.sample("docs", version, r["id"]) for r in records[:5]]
    assert body["rows"][0]["blob"]["size"] == len(records[0]["blob"])
    later = client.get(urls.api(urls.sql(q=DOCS, start=10))).json()
    assert [r["id"] for r in later["rows"]] == [r["id"] for r in records[10:]]
    pager = soup(client.get(urls.sql(q=DOCS))).select_one("nav.pager")
    assert pager.select_one("a[rel=next]")["href"] == urls.sql(q=DOCS, start=5)
    exported = client.get(urls.sql_csv(q=DOCS))
    assert exported.headers["content-type"].startswith("text/csv") and "attachment" in exported.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(exported.text)))
    assert rows[0] == ["id", "text", "score", "blob"] and [r[0] for r in rows[1:]] == [r["id"] for r in records]
    assert rows[1][2] == repr(records[0]["score"])


def test_a_bad_query_is_400_with_one_line_and_the_page_keeps_it(client: TestClient) -> None:
    query = 'SELECT nope FROM "docs@v1"'
    response = client.get(urls.sql(q=query))
    assert response.status_code == 400
    page = soup(response)
    assert page.select_one("textarea[name=q]").get_text() == query
    assert page.select_one(".sql-error .message").get_text() == 'Binder Error: Referenced column "nope" not found in FROM clause!'
    twin = client.get(urls.api(urls.sql(q="COPY (SELECT 1) TO '/tmp/x'")))
    assert twin.status_code == 400 and twin.json() == {
        "ok": False,
        "error": "only queries run here: COPY is refused (no writes, settings, files, attached databases or extensions)",
        "status": 400,
    }
    fragment = client.get(urls.sql(q="SELEC"), headers={"HX-Request": "true"})  # the form's htmx request swaps the error in
    assert fragment.status_code == 400 and soup(fragment).select_one("section#rows .sql-error") is not None


def test_the_version_sql_page_runs_its_rows_and_a_tag_redirects(client: TestClient, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("docs@v2")
    moved = client.get(urls.version_sql("docs", "v2", q="SELECT 1"))
    assert moved.status_code == 307 and moved.headers["location"] == urls.version_sql("docs", version, q="SELECT 1")
    body = client.get(urls.api(urls.version_sql("docs", version))).json()
    assert body["query"] == f'SELECT * FROM "docs@{version.short_id}"' and body["row_count"] == version.rows
    assert body["version"] == version.ref and body["tables"][0]["version"] == version.id


@pytest.fixture(scope="module")
def pets(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from tests.support import peers

    root = tmp_path_factory.mktemp("pets")
    peers.hf_dataset().to_parquet(str(root / "pets.parquet"))
    catalog = Catalog(root / "catalog")
    catalog.register("pets", [str(root / "pets.parquet")], key="text", tag="v1")
    return catalog


def test_images_are_thumbnails_when_rows_have_keys(pets: Catalog, tmp_path: Path) -> None:
    client = local_client(create_app(Settings(root=pets.root, flags_path=str(tmp_path / "f.sqlite"))))
    version = pets.resolve("pets@v1")
    page = soup(client.get(urls.sql(q='SELECT text, label, picture FROM "pets@v1" ORDER BY text')))
    thumbs = [img["src"] for img in page.select("#rows img")]
    keys = sorted(r["text"] for r in page_rows(client, 'SELECT text FROM "pets@v1"'))
    assert thumbs == [urls.thumbnail("pets", version, key, "picture") for key in keys]
    assert all(client.get(src).headers["content-type"].startswith("image/") for src in thumbs)
    assert "·" in page.select("#rows tbody tr")[0].select("td")[2].get_text()  # class names beside ids
    keyless = soup(client.get(urls.sql(q='SELECT picture FROM "pets@v1"')))
    assert not keyless.select("#rows img") and keyless.select_one(".link-note").get_text().startswith("rows link to their samples when")


def page_rows(client: TestClient, query: str) -> list[dict]:
    return client.get(urls.api(urls.sql(q=query))).json()["rows"]


def test_search_shows_at_least_then_the_exact_count(client: TestClient, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("docs@v1")
    page = soup(client.get(urls.version("docs", version, q="BETA", column="text")))
    counting = page.select_one(".match-count")
    assert counting["hx-get"] == urls.version_count("docs", version, q="BETA", column="text") and counting["hx-trigger"] == "load"
    assert counting.get_text(" ", strip=True).startswith("at least")
    exact = client.get(counting["hx-get"], headers={"HX-Request": "true"})
    expected = sum("beta" in r["text"] for s, i in enumerate(version.shards) for r in version.read(s, range(i.rows)))
    assert soup(exact).select_one(".match-count.exact")["data-matches"] == str(expected)
    assert client.get(urls.api(counting["hx-get"])).json()["matches"] == expected


def test_any_column_sorts_the_listing_and_pages_keep_the_order(make_client, inspector_catalog: Catalog) -> None:  # type: ignore[no-untyped-def]
    client = make_client(page_size=5)
    version = inspector_catalog.resolve("docs@v1")
    records = [r for s, i in enumerate(version.shards) for r in version.read(s, range(i.rows))]
    by_score = sorted(records, key=lambda r: -r["score"])
    first = client.get(urls.api(urls.version("docs", version, sort="score", desc=True))).json()["listing"]
    assert [r["key"] for r in first["rows"]] == [r["id"] for r in by_score[:5]] and first["sort"] == {"column": "score", "descending": True}
    page = soup(client.get(urls.version("docs", version, sort="score", desc=True)))
    following = page.select_one("#rows nav.pager a[rel=next]")["href"]
    assert following == urls.version("docs", version, start=5, sort="score", desc=True)
    assert [r["key"] for r in client.get(urls.api(following)).json()["listing"]["rows"]] == [r["id"] for r in by_score[5:10]]
    header = page.select_one("#rows th a.sort.active.desc")
    assert header.get_text() == "score" and header["href"] == urls.version("docs", version, sort="score")
    searched = client.get(urls.api(urls.version("docs", version, q="alpha", column="text", sort="id"))).json()["listing"]
    alpha = sorted(r["id"] for r in records if "alpha" in r["text"])
    assert [r["key"] for r in searched["rows"]] == alpha[:5] and searched["search"]["total"] == len(alpha)
    assert client.get(urls.api(urls.version("docs", version, sort="nope"))).json()["error"] == (
        f"cannot sort by 'nope': {version.ref} has the columns id, text, score, meta, blob"
    )


def test_column_statistics_panel_loads_when_opened_and_facets_open_the_rows(client: TestClient, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("docs@v1")
    panel = soup(client.get(urls.version("docs", version))).select_one("#column-stats [hx-get]")
    assert panel["hx-get"] == urls.version_columns("docs", version) and panel.select_one("a")["href"] == panel["hx-get"]
    fragment = soup(client.get(panel["hx-get"], headers={"HX-Request": "true"}))
    cards = {card["data-column"]: card for card in fragment.select("article.column-card")}
    assert list(cards) == ["id", "text", "score", "meta", "blob"]
    assert cards["score"].select_one(".nulls").get_text() == "0"
    twin = client.get(urls.api(urls.version_columns("docs", version))).json()
    assert [c["profile"]["name"] for c in twin["columns"]] == ["id", "text", "score", "meta", "blob"]
    text = twin["columns"][1]["profile"]
    assert text["integral"] and text["histogram"][0]["low"] == text["low"] and text["histogram"][-1]["high"] == text["high"]
    titles = [t.get_text() for t in cards["text"].select("figure.bars title")]
    assert len(cards["text"].select("figure.bars rect.fill")) == len(text["histogram"]) == len(titles)
    assert sum(int(t.rpartition(": ")[2]) for t in titles) == 12
    first = text["histogram"][0]
    assert titles[0] == f"length {int(first['low'])}–{int(first['high'])}: {first['count']}"


def test_facets_link_to_the_sql_page_of_their_rows(tmp_path: Path) -> None:
    import pyarrow as pa

    from tests.conftest import write_parquet

    catalog = Catalog(tmp_path / "catalog")
    table = pa.table({"id": [f"r{i}" for i in range(12)], "lang": ["en", "fr", "en", "de"] * 3})
    version = catalog.register("langs", write_parquet(table, tmp_path / "src"), key="id", tag="v1")
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    card = soup(client.get(urls.version_columns("langs", version))).select_one('article[data-column="lang"]')
    facets = {a.get_text(): a["href"] for a in card.select(".facets a")}
    assert set(facets) == {"en", "fr", "de"}
    rows = client.get(urls.api(facets["en"])).json()["rows"]
    assert sorted(r["id"] for r in rows) == sorted(f"r{i}" for i in range(12) if table["lang"][i].as_py() == "en")


@pytest.fixture
def runs_client(make_client, runs_catalog: Catalog) -> TestClient:  # type: ignore[no-untyped-def]
    return make_client(root=runs_catalog.root)


def test_find_page_lists_every_read_with_links_and_a_histogram(runs_client: TestClient, runs_catalog: Catalog) -> None:
    where = "text LIKE 'alpha%'"
    body = runs_client.get(urls.api(urls.find("pretrain", where=where))).json()
    assert body["count"] == len(body["matches"]) > 0 and body["packed"] is True and body["kind"] == "native"
    for match in body["matches"]:
        assert {"step", "rank", "position", "key", "source"} <= set(match)
        assert match["url"] == urls.rank("pretrain", match["step"], match["rank"]) + urls.sample_anchor(match["position"])
    assert sum(b["count"] for b in body["histogram"]) == body["count"]
    page = soup(runs_client.get(urls.find("pretrain", where=where)))
    assert page.select_one("#find-where").get_text() == where
    first = page.select_one("tr.find-match a.read-link")["href"]
    rank_page = soup(runs_client.get(first.split("#")[0]))
    assert rank_page.select_one("#" + first.split("#")[1]) is not None
    assert len(page.select("figure.bars rect.fill")) == len(body["histogram"])
    narrowed = runs_client.get(urls.api(body["histogram"][0]["url"])).json()
    assert narrowed["steps"] == f"{body['histogram'][0]['start']}:{body['histogram'][0]['end']}"
    assert all(body["histogram"][0]["start"] <= m["step"] < body["histogram"][0]["end"] for m in narrowed["matches"])


def test_find_page_keeps_a_bad_predicate_and_says_why(runs_client: TestClient) -> None:
    response = runs_client.get(urls.find("plain", where="length(text)"))
    assert response.status_code == 400
    page = soup(response)
    assert page.select_one("#find-where").get_text() == "length(text)"
    assert page.select_one(".sql-error .message").get_text() == "the predicate is BIGINT, not a boolean: 'length(text)'"
    steps = runs_client.get(urls.api(urls.find("plain", where="true", steps="9:3")))
    assert steps.status_code == 422 and steps.json()["error"] == "steps '9:3' is not A:B with 0 <= A < B (A: or :B leave one end open)"
    assert runs_client.get(urls.api(urls.find("nope", where="true"))).status_code == 404


def test_a_shard_changed_after_a_query_fails_its_next_page_naming_the_shard(tmp_path: Path) -> None:
    import pyarrow as pa

    from tests.conftest import write_parquet

    catalog = Catalog(tmp_path / "catalog")
    paths = write_parquet(pa.table({"id": [f"r{i}" for i in range(8)], "n": list(range(8))}), tmp_path / "src", shards=2, row_group=2)
    version = catalog.register("data", paths, key="id", tag="v1")
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    query = 'SELECT id, n FROM "data@v1"'
    assert client.get(urls.api(urls.sql(q=query))).json()["row_count"] == 8
    data = bytearray(Path(paths[0]).read_bytes())
    data[version.shards[0].boundaries[1] + 3] ^= 0xFF  # same size, inside row group 1
    Path(paths[0]).write_bytes(bytes(data))
    again = client.get(urls.api(urls.sql(q=query, start=2)))  # the result is kept for paging, but its shards are checked
    assert again.status_code == 500 and again.json()["error"].startswith(
        f"dataset data version {version.short_id} shard 0 (part-0.parquet): bytes"
    )

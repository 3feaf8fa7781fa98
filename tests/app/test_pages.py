"""Every page and its JSON twin, table-driven: status, DOM content, JSON content, ``Vary``; tags redirect to ids."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from fastapi.testclient import TestClient

from app import urls
from loaders import Catalog
from tests.app.dom import soup

Url = Callable[[Catalog], str]


def vid(catalog: Catalog, ref: str) -> str:
    return catalog.resolve(ref).id


# (id, url, CSS selector → expected texts in the HTML, JSON check)
PAGES: list[tuple[str, Url, dict[str, list[str]], Callable[[Any, Catalog], None]]] = [
    (
        "home",
        lambda c: urls.home(),
        {"#datasets td:first-child a": ["chat", "docs", "packed"]},
        lambda j, c: (
            [d["name"] for d in j["datasets"]] == ["chat", "docs", "packed"]
            and j["runs"] == []
            and j["datasets"][1]["rows"] == 11
            or pytest.fail(str(j))
        ),
    ),
    (
        "runs",
        lambda c: urls.runs(),
        {"h1": ["Runs"]},
        lambda j, c: j["runs"] == [] or pytest.fail(str(j)),
    ),
    (
        "datasets",
        lambda c: urls.datasets(),
        {"#datasets td:first-child a": ["chat", "docs", "packed"]},
        lambda j, c: (
            [(d["name"], d["latest"], d["rows"]) for d in j["datasets"]][1] == ("docs", vid(c, "docs@latest"), 11) or pytest.fail(str(j))
        ),
    ),
    (
        "dataset",
        lambda c: urls.dataset("docs"),
        {"h1": ["docs"]},
        lambda j, c: (
            [v["id"] for v in j["versions"]] == [vid(c, "docs@v2"), vid(c, "docs@v1")]
            and j["tags"]["v1"] == vid(c, "docs@v1")
            or pytest.fail(str(j))
        ),
    ),
    (
        "version",
        lambda c: urls.version("docs", vid(c, "docs@v1")),
        {"table.schema td code": ["id", "text", "score", "meta", "blob"], "tr.sample td.key a": [f"doc-{i}" for i in range(12)]},
        lambda j, c: (
            j["rows"] == 12
            and [r["key"] for r in j["listing"]["rows"]] == [f"doc-{i}" for i in range(12)]
            and {col["name"]: col["kind"] for col in j["columns"]}
            == {"id": "text", "text": "text", "score": "scalar", "meta": "json", "blob": "binary"}
            and next(col for col in j["columns"] if col["name"] == "score")["max"] == "2.75"
            or pytest.fail(str(j)[:2000])
        ),
    ),
    (
        "sample",
        lambda c: urls.sample("docs", vid(c, "docs@v1"), "doc-4"),
        {"h1 .key": ["doc-4"], ".field h3": ["id", "text", "score", "meta", "blob"]},
        lambda j, c: (
            j["key"] == "doc-4"
            and (j["shard"], j["row"], j["index"]) == (0, 4, 4)
            and j["fields"]["score"] == 1.0
            and j["fields"]["meta"] == {"source": "books", "lang": "en"}
            and j["fields"]["blob"]["size"] == 5
            and j["kinds"]["text"] == "text"
            or pytest.fail(str(j))
        ),
    ),
    (
        "flags",
        lambda c: urls.flags(),
        {"h1": ["Flags"]},
        lambda j, c: j["flags"] == [] and j["total"] == 0 or pytest.fail(str(j)),
    ),
]


@pytest.mark.parametrize("name, url, selectors, check", PAGES, ids=[p[0] for p in PAGES])
def test_page_and_its_json_twin(
    client: TestClient,
    inspector_catalog: Catalog,
    name: str,
    url: Url,
    selectors: dict[str, list[str]],
    check: Callable[[Any, Catalog], None],
) -> None:
    address = url(inspector_catalog)
    page = client.get(address)
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["vary"] == "HX-Request"
    dom = soup(page)
    assert dom.select_one("html") is not None and dom.select_one("header.top") is not None
    for selector, expected in selectors.items():
        assert [e.get_text(strip=True) for e in dom.select(selector)] == expected, selector
    assert dom.select_one("a.json-link")["href"] == urls.api(address)
    twin = client.get(urls.api(address))
    assert twin.status_code == 200
    assert twin.headers["content-type"] == "application/json"
    assert twin.headers["vary"] == "HX-Request"
    check(twin.json(), inspector_catalog)


@pytest.mark.parametrize(
    "ref, builder",
    [
        ("v1", lambda v: urls.version("docs", v)),
        ("latest", lambda v: urls.version("docs", v)),
        ("v1", lambda v: urls.sample("docs", v, "doc-3")),
    ],
)
def test_tag_in_url_redirects_to_version_id(
    client: TestClient, inspector_catalog: Catalog, ref: str, builder: Callable[[str], str]
) -> None:
    full = inspector_catalog.resolve(f"docs@{ref}").id
    for api in (False, True):
        wrapped = urls.api if api else (lambda u: u)
        response = client.get(wrapped(builder(ref)) + "?start=3&field=blob")
        assert response.status_code == 307
        assert response.headers["location"] == wrapped(builder(full)) + "?start=3&field=blob"


def test_id_prefix_redirects_and_full_id_does_not(client: TestClient, inspector_catalog: Catalog) -> None:
    full = inspector_catalog.resolve("docs@v2").id
    response = client.get(urls.version("docs", full[:8]))
    assert response.status_code == 307 and response.headers["location"] == urls.version("docs", full)
    assert client.get(urls.version("docs", full)).status_code == 200


def test_media_url_with_a_tag_redirects(client: TestClient, inspector_catalog: Catalog) -> None:
    full = inspector_catalog.resolve("docs@v1").id
    response = client.get(urls.media("docs", "v1", "doc-3", "blob"))
    assert response.status_code == 307 and response.headers["location"] == urls.media("docs", full, "doc-3", "blob")


def test_home_lists_runs_as_links(make_client: Callable[..., TestClient], tmp_path: Any) -> None:
    run_dir = tmp_path / "catalog" / "runs" / "run-7"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{}")  # Catalog.runs() lists directories holding a run manifest
    client = make_client(root=str(tmp_path / "catalog"))
    links = soup(client.get(urls.home())).select("#runs td a")
    assert [(a.get_text(), a["href"]) for a in links] == [("run-7", urls.run("run-7"))]
    # Its manifest is empty: the run is listed with the error instead of taking the page down.
    listed = client.get(urls.api(urls.home())).json()["runs"]
    assert [(r["name"], r["url"], r["status"]) for r in listed] == [("run-7", "/runs/run-7", "error")]
    assert "run-7" in listed[0]["error"]
    assert soup(client.get(urls.home())).select_one("#runs .error-inline").get_text() == listed[0]["error"]

"""htmx fragments are blocks of the page template: only the block for HX-Request, the page for history restores."""

from __future__ import annotations

from typing import Callable

from fastapi.testclient import TestClient

from app import urls
from loaders import Catalog
from tests.app.dom import soup

HX = {"HX-Request": "true"}


def top_level_tags(html: str) -> list[str]:
    from bs4 import BeautifulSoup

    return [el.name + ("#" + el["id"] if el.get("id") else "") for el in BeautifulSoup(html, "html.parser").find_all(recursive=False)]


def test_version_page_fragment_is_the_rows_block(client: TestClient, inspector_catalog: Catalog) -> None:
    url = urls.version("docs", inspector_catalog.resolve("docs@v1").id, start=3)
    fragment = client.get(url, headers=HX)
    assert fragment.status_code == 200 and fragment.headers["vary"] == "HX-Request"
    assert top_level_tags(fragment.text) == ["section#rows"]
    assert [a.get_text() for a in soup(fragment).select("tr.sample td.key a")] == [f"doc-{i}" for i in range(3, 12)]
    whole = client.get(url)
    assert soup(whole).select_one("html") is not None
    assert str(soup(whole).select_one("section#rows")) == str(soup(fragment).select_one("section#rows"))


def test_history_restore_gets_the_whole_page(client: TestClient, inspector_catalog: Catalog) -> None:
    url = urls.version("docs", inspector_catalog.resolve("docs@v1").id)
    response = client.get(url, headers={**HX, "HX-History-Restore-Request": "true"})
    assert soup(response).select_one("html header.top") is not None


def test_pager_links_keep_a_real_href_beside_hx_get(client: TestClient, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("docs@v1")
    dom = soup(client.get(urls.version("docs", version.id), headers=HX))
    # 12 rows fit one page: only a client with a smaller page size shows pager links
    assert dom.select("nav.pager a") == []


def test_pager_links(make_client: Callable[..., TestClient], inspector_catalog: Catalog) -> None:
    client = make_client(page_size=5)
    version = inspector_catalog.resolve("docs@v1")
    dom = soup(client.get(urls.version("docs", version.id, start=5), headers=HX))
    links = {a.get_text(strip=True): (a["href"], a["hx-get"], a.get("rel")) for a in dom.select("nav.pager")[0].select("a")}
    assert links == {
        "« first": (urls.version("docs", version.id), urls.version("docs", version.id), None),
        "‹ prev": (urls.version("docs", version.id, end=5), urls.version("docs", version.id, end=5), ["prev"]),
        "next ›": (urls.version("docs", version.id, start=10), urls.version("docs", version.id, start=10), ["next"]),
        "last »": (urls.version("docs", version.id, end=12), urls.version("docs", version.id, end=12), None),
    }


def test_field_fragment_renders_one_field_in_full(make_client: Callable[..., TestClient], inspector_catalog: Catalog) -> None:
    client = make_client(text_collapse_chars=20)
    version = inspector_catalog.resolve("docs@v1")
    page = soup(client.get(urls.sample("docs", version.id, "doc-9")))
    text_field = [f for f in page.select("section.field") if f.select_one("h3").get_text() == "text"][0]
    expand = text_field.select_one("p.expand a")
    assert expand["href"] == expand["hx-get"] == urls.sample("docs", version.id, "doc-9", field="text")
    assert expand["hx-target"] == "closest .field"
    assert len(text_field.select_one(".text-body").get_text()) < 30
    fragment = client.get(expand["hx-get"], headers=HX)
    assert top_level_tags(fragment.text) == ["section"]
    full = soup(fragment).select_one("section.field .text-body").get_text()
    assert full == "document 9: " + "alpha " * 10
    assert soup(fragment).select_one("p.expand") is None


def test_long_token_views_load_when_revealed(make_client: Callable[..., TestClient], inspector_catalog: Catalog) -> None:
    client = make_client(token_fragment_threshold=5)
    version = inspector_catalog.resolve("packed@v1")
    page = soup(client.get(urls.sample("packed", version.id, "pack-0")))
    deferred = page.select_one(".tokens.deferred")
    assert deferred["hx-trigger"] == "revealed" and deferred["hx-swap"] == "outerHTML"
    assert deferred["hx-get"] == deferred.select_one("a")["href"] == urls.sample("packed", version.id, "pack-0", field="input_ids")
    assert page.select(".tok") == []
    fragment = soup(client.get(deferred["hx-get"], headers=HX))
    assert [t.select_one(".i").get_text() for t in fragment.select(".tok-seq .tok")] == ["5", "6", "7", "8", "9", "10"]
    # the short sequence (4 tokens) is shown in the page itself
    other = soup(client.get(urls.sample("packed", version.id, "pack-1")))
    assert other.select_one(".tokens.deferred") is None and len(other.select(".tok-seq .tok")) == 4


def test_flags_page_fragment_is_the_list_block(client: TestClient) -> None:
    assert top_level_tags(client.get(urls.flags(), headers=HX).text) == ["section#flags"]

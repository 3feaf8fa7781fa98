"""Hostile dataset text is data: shown literally (checked through the DOM), never executed or interpreted."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pyarrow as pa
import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app import urls
from loaders import Catalog
from tests.app.dom import form_token, soup
from tests.conftest import write_parquet

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
TEMPLATE = "{{7*7}} {% print 1 %}"
CONTROL = "a\x00b\x1b[31mred\u202eevil\x07"
COLUMN = '"><svg onload=alert(1)>'
BIG = "x" * 1_000_000
ROWS = {
    SCRIPT: SCRIPT,
    IMG: IMG,
    TEMPLATE: TEMPLATE,
    "ctl": CONTROL,
    "big": BIG,
    "a/b?c#d e": "path-like key",
    "..": "dot-dot key",
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    root: Path = tmp_path_factory.mktemp("hostile")
    keys = list(ROWS)
    table = pa.table(
        {
            "id": keys,
            "text": [ROWS[k] for k in keys],
            COLUMN: [SCRIPT] * len(keys),
            "meta": [{"<b>k</b>": IMG, "{{7*7}}": SCRIPT}] * len(keys),
            "messages": pa.array(
                [[{"role": "<script>", "content": IMG}, {"role": "assistant", "content": TEMPLATE}]] * len(keys),
                pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
            ),
        }
    )
    catalog = Catalog(root / "catalog")
    catalog.register("hostile", write_parquet(table, root / "src", row_group=2), key="id", tag="v1")
    return catalog


@pytest.fixture
def hostile_client(make_client: Callable[..., TestClient], hostile: Catalog) -> TestClient:
    return make_client(root=hostile.root)


def assert_inert(dom: BeautifulSoup) -> None:
    """No markup from the data: only our own scripts, no images, SVG or event-handler attributes."""
    assert all(s.get("src", "").startswith("/static/") and not s.string for s in dom.find_all("script"))
    assert dom.find_all(["img", "svg", "iframe", "object", "embed"]) == []
    assert not [(el.name, a) for el in dom.find_all(True) for a in el.attrs if a.lower().startswith("on")]


def sample_dom(client: TestClient, catalog: Catalog, key: str, **query: str) -> BeautifulSoup:
    response = client.get(urls.sample("hostile", catalog.resolve("hostile@v1").id, key, **query))
    assert response.status_code == 200, response.text[:500]
    return soup(response)


def field_text(dom: BeautifulSoup, column: str) -> str:
    field = [f for f in dom.select("section.field") if f.select_one("h3").get_text() == column][0]
    return field.select_one(".text-body").get_text()


def test_listing_shows_everything_literally(hostile_client: TestClient, hostile: Catalog) -> None:
    dom = soup(hostile_client.get(urls.version("hostile", hostile.resolve("hostile@v1").id)))
    assert_inert(dom)
    assert [a.get_text() for a in dom.select("tr.sample td.key a")] == list(ROWS)
    assert COLUMN in [th.get_text() for th in dom.select("table.listing th")]
    assert [code.get_text() for code in dom.select("table.schema td code")][2] == COLUMN
    assert len(hostile_client.get(urls.version("hostile", hostile.resolve("hostile@v1").id)).content) < 200_000


@pytest.mark.parametrize("key", [SCRIPT, IMG, TEMPLATE])
def test_markup_and_template_syntax_stay_text(hostile_client: TestClient, hostile: Catalog, key: str) -> None:
    dom = sample_dom(hostile_client, hostile, key)
    assert_inert(dom)
    assert dom.select_one("h1 .key").get_text() == key
    assert field_text(dom, "text") == ROWS[key]
    assert field_text(dom, COLUMN) == SCRIPT
    tree = [f for f in dom.select("section.field") if f.select_one("h3").get_text() == "meta"][0]
    assert [k.get_text() for k in tree.select(".k")] == ["<b>k</b>", "{{7*7}}"]
    assert [r.get_text() for r in dom.select(".turn .role")] == ["<script>", "assistant"]
    assert dom.select_one("form.flag-form input[name=key]")["value"] == key
    assert hostile_client.get(urls.api(urls.sample("hostile", hostile.resolve("hostile@v1").id, key))).json()["fields"]["text"] == ROWS[key]


def test_control_characters_are_visible_symbols(hostile_client: TestClient, hostile: Catalog) -> None:
    dom = sample_dom(hostile_client, hostile, "ctl")
    assert_inert(dom)
    assert field_text(dom, "text") == "a␀b␛[31mred⟨U+202E⟩evil␇"
    assert [c["title"].split()[0] for c in dom.select(".text-body .ctl")] == ["U+0000", "U+001B", "U+202E", "U+0007"]
    assert "\x00" not in hostile_client.get(urls.sample("hostile", hostile.resolve("hostile@v1").id, "ctl")).text


def test_a_one_megabyte_line_is_collapsed_then_expandable(hostile_client: TestClient, hostile: Catalog) -> None:
    page = hostile_client.get(urls.sample("hostile", hostile.resolve("hostile@v1").id, "big"))
    assert len(page.content) < 100_000
    dom = soup(page)
    assert len(field_text(dom, "text")) == 2000 + 1  # the shown part and the cut mark
    expand = dom.select_one("p.expand a")
    full = hostile_client.get(expand["href"], headers={"HX-Request": "true"})
    assert soup(full).select_one(".text-body").get_text() == BIG


@pytest.mark.parametrize("key", ["a/b?c#d e", ".."])
def test_hostile_keys_make_working_permalinks(hostile_client: TestClient, hostile: Catalog, key: str) -> None:
    dom = sample_dom(hostile_client, hostile, key)
    assert dom.select_one("h1 .key").get_text() == key
    assert field_text(dom, "text") == ROWS[key]
    copy = dom.select_one("button.copy-link")["data-copy"]
    assert copy == urls.sample("hostile", hostile.resolve("hostile@v1").id, key)
    assert soup(hostile_client.get(copy)).select_one("h1 .key").get_text() == key


def test_hostile_flag_notes_are_text(hostile_client: TestClient, hostile: Catalog) -> None:
    version = hostile.resolve("hostile@v1")
    response = hostile_client.post(
        urls.flags(),
        data={"dataset": "hostile", "version": version.id, "key": IMG, "note": SCRIPT + TEMPLATE, "csrf_token": form_token(hostile_client)},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert_inert(soup(response))
    for url in (urls.flags(), urls.home(), urls.flag(1)):
        dom = soup(hostile_client.get(url))
        assert_inert(dom)
        assert dom.select_one(".note").get_text() == SCRIPT + TEMPLATE
        assert dom.select_one("a.sample-link .key").get_text() == IMG

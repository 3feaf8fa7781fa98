"""Keyset paging and search over a 10,000-row version with small row groups: exact rows, and only the needed groups read."""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from app import urls
from loaders import Catalog
from loaders.catalog.version import clear_read_caches, row_group_cache
from tests.app.dom import soup
from tests.conftest import write_parquet

ROWS = 10_000
NEEDLE_EVERY = 997


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    root = tmp_path_factory.mktemp("big")
    catalog = Catalog(root / "catalog")
    table = pa.table(
        {
            "id": [f"r{i:05d}" for i in range(ROWS)],
            "text": [f"row {i} " + ("has a Needle" if i % NEEDLE_EVERY == 0 else "hay") for i in range(ROWS)],
            "n": list(range(ROWS)),
        }
    )
    catalog.register("big", write_parquet(table, root / "src", shards=4, row_group=100), key="id", tag="v1")
    return catalog


@pytest.fixture
def big_client(make_client: Callable[..., TestClient], big: Catalog) -> Callable[..., TestClient]:
    return lambda **kw: make_client(root=big.root, **kw)


def listing(client: TestClient, catalog: Catalog, **query: Any) -> dict[str, Any]:
    response = client.get(urls.api(urls.version("big", catalog.resolve("big@v1").id, **query)))
    assert response.status_code == 200, response.text
    return response.json()["listing"]


def indices(block: dict[str, Any]) -> list[int]:
    return [row["index"] for row in block["rows"]]


@pytest.mark.parametrize(
    "query, expected",
    [
        ({}, range(0, 50)),
        ({"start": 5000}, range(5000, 5050)),
        ({"start": 2480}, range(2480, 2530)),  # crosses from shard 0 into shard 1
        ({"end": 5000}, range(4950, 5000)),
        ({"end": ROWS}, range(9950, 10000)),
        ({"start": 9990}, range(9990, 10000)),
        ({"end": 20}, range(0, 20)),
    ],
)
def test_pages_hold_exactly_their_rows(big_client: Callable[..., TestClient], big: Catalog, query: dict, expected: range) -> None:
    block = listing(big_client(), big, **query)
    assert indices(block) == list(expected)
    assert [row["key"] for row in block["rows"]] == [f"r{i:05d}" for i in expected]
    assert [row["record"]["n"] for row in block["rows"]] == list(expected)


def test_last_page_reads_only_the_last_row_group(big_client: Callable[..., TestClient], big: Catalog) -> None:
    version = big.resolve("big@v1")
    client = big_client()
    clear_read_caches()
    block = listing(client, big, end=ROWS)
    assert indices(block) == list(range(9950, 10000))
    assert set(row_group_cache()._items) == {(version.shards[3].checksum, 24)}
    assert block["pager"]["next"] is None and block["pager"]["last"] is None
    assert block["pager"]["prev"] == urls.version("big", version.id, end=9950)


def test_following_next_and_prev_links_walks_the_rows(big_client: Callable[..., TestClient], big: Catalog) -> None:
    client = big_client(page_size=300)
    block = listing(client, big, start=2400)
    seen = indices(block)
    for _ in range(3):
        block = client.get(urls.api(block["pager"]["next"])).json()["listing"]
        seen += indices(block)
    assert seen == list(range(2400, 3600))
    back = client.get(urls.api(block["pager"]["prev"])).json()["listing"]
    assert indices(back) == list(range(3000, 3300))


def test_search_pages_forward_and_backward(big_client: Callable[..., TestClient], big: Catalog) -> None:
    client = big_client(page_size=4)
    expected = [i for i in range(ROWS) if i % NEEDLE_EVERY == 0]
    assert len(expected) == 11
    block = listing(client, big, q="needle", column="text")
    found = indices(block)
    while block["pager"]["next"]:
        block = client.get(urls.api(block["pager"]["next"])).json()["listing"]
        found += indices(block)
    assert found == expected
    back = listing(client, big, q="NEEDLE", column="text", end=ROWS)
    assert indices(back) == expected[-4:]
    earlier = client.get(urls.api(back["pager"]["prev"])).json()["listing"]
    assert indices(earlier) == expected[-8:-4]


def test_search_with_no_time_left_scans_one_row_group_and_links_onward(big_client: Callable[..., TestClient], big: Catalog) -> None:
    client = big_client(search_seconds=0)
    version = big.resolve("big@v1")
    block = listing(client, big, q="needle", column="text", start=850)
    assert indices(block) == []
    assert block["search"] == {
        "query": "needle",
        "column": "text",
        "scanned_from": 850,
        "scanned_to": 900,
        "stopped_early": True,
        "total": None,  # counted in all by the count URL, which the page loads
        "count_url": urls.version_count("big", version.id, q="needle", column="text"),
    }
    assert block["pager"]["next"] == urls.version("big", version.id, start=900, q="needle", column="text")
    block = client.get(urls.api(block["pager"]["next"])).json()["listing"]
    assert indices(block) == [997]


def test_search_results_are_highlighted(big_client: Callable[..., TestClient], big: Catalog) -> None:
    version = big.resolve("big@v1")
    dom = soup(big_client().get(urls.version("big", version.id, q="needle", column="text")))
    rows = dom.select("tr.sample")
    assert [r["id"] for r in rows] == [urls.sample_id(i) for i in range(0, ROWS, NEEDLE_EVERY)]
    assert {m.get_text() for m in dom.select("tr.sample mark")} == {"Needle"}
    form = dom.select_one("form.search")
    assert form.select_one("input[name=q]")["value"] == "needle"
    assert [o["value"] for o in form.select("select[name=column] option")] == ["id", "text"]

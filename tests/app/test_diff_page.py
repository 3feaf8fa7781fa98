"""The version diff page against small v1/v2 pairs and the changes their builder recorded, plus tiny hostile catalogs."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from app import urls
from app.factory import create_app
from app.renderers.diff import spread, token_diff_view
from app.settings import Settings
from loaders import Catalog
from loaders.diff import field_diff
from loaders.media import image_info, probe, video_source
from loaders.media.image import image_from_value
from tests.app.dom import soup
from tests.conftest import write_parquet
from tests.support.local_client import local_client
from tests.support.pairs import DiffCatalog

HX = {"HX-Request": "true"}
PNG = b"\x89PNG\r\n\x1a\n"
#: Row changes per page: web-text has 13, so the cursor is followed several times.
PAGE = 4


@pytest.fixture
def diffs(diff_catalog: DiffCatalog, tmp_path: Path) -> TestClient:
    """A client over the diff catalog with pages of ``PAGE`` row changes."""
    settings = Settings(root=diff_catalog.root, flags_path=str(tmp_path / "flags.sqlite"), page_size=PAGE)
    return local_client(create_app(settings), follow_redirects=False)


def ids(catalog: DiffCatalog, name: str) -> tuple[str, str]:
    return catalog.resolve(f"{name}@v1").id, catalog.resolve(f"{name}@v2").id


def pages(client: TestClient, url: str) -> Iterator[object]:
    """Every page of a diff listing, following the ``rel=next`` link of each (at most 50 pages)."""
    for _ in range(50):
        response = client.get(url)
        assert response.status_code == 200, response.text[:500]
        dom = soup(response)
        yield dom
        link = dom.select_one("#diff-rows nav.pager a[rel=next]")
        if link is None:
            return
        url = link["href"]
    raise AssertionError("more than 50 pages")


def listed(client: TestClient, url: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"added": [], "removed": [], "changed": [], "edited": []}
    for dom in pages(client, url):
        for item in dom.select("#diff-rows li.change"):
            out[item["data-change"]].append(item["data-key"])
    return out


# -- the listing equals what the builder recorded ---------------------------
@pytest.mark.parametrize("name", ["web-text", "images"])
def test_listed_changes_equal_the_recorded_ones(diffs: TestClient, diff_catalog: DiffCatalog, name: str) -> None:
    recorded = diff_catalog.changes[name]
    a, b = ids(diff_catalog, name)
    found = listed(diffs, urls.diff(name, a, b))
    assert sorted(found["added"]) == sorted(recorded.added)
    assert sorted(found["removed"]) == sorted(recorded.removed)
    assert sorted(found["changed"]) == sorted(recorded.edited)
    assert found["edited"] == []
    every = found["added"] + found["removed"] + found["changed"]
    assert len(every) == len(set(every))  # no key listed twice across pages
    dom = soup(diffs.get(urls.diff(name, a, b)))
    counts = {dd["data-count"]: int(dd.get_text().replace(",", "")) for dd in dom.select(".diff-counts dd")}
    unchanged = diff_catalog.resolve(f"{name}@v1").rows - len(recorded.removed) - len(recorded.edited)
    assert counts == {  # no "edited": rows are matched by key, so a removed and an added row are never one edited row
        "added": len(recorded.added),
        "removed": len(recorded.removed),
        "changed": len(recorded.edited),
        "unchanged": unchanged,
    }


def test_keys_come_in_key_order_and_the_json_twin_pages_alike(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    a, b = ids(diff_catalog, "web-text")
    first = soup(diffs.get(urls.diff("web-text", a, b)))
    keys = [li["data-key"] for li in first.select("li.change")]
    assert keys == sorted(keys) and len(keys) == PAGE
    data = diffs.get(urls.api(urls.diff("web-text", a, b))).json()
    assert [row["key"] for row in data["listing"]["rows"]] == keys
    assert data["listing"]["next"] == keys[-1]
    assert data["same_dataset"] is True and data["identical"] is False and data["key"] == "id"
    second = diffs.get(urls.api(urls.diff("web-text", a, b, after=keys[-1]))).json()
    assert second["listing"]["rows"][0]["key"] > keys[-1]


def test_tags_and_prefixes_redirect_to_ids_keeping_the_query(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    a, b = ids(diff_catalog, "web-text")
    response = diffs.get(urls.diff("web-text", "v1", "v2", change="added", column="text"))
    assert response.status_code == 307 and response.headers["vary"] == "HX-Request"
    assert response.headers["location"] == urls.diff("web-text", a, b, change="added", column="text")
    assert diffs.get(urls.diff("web-text", a[:8], "latest")).headers["location"] == urls.diff("web-text", a, b)
    assert diffs.get(urls.api(urls.diff("web-text", "v1", "v2"))).headers["location"] == urls.api(urls.diff("web-text", a, b))
    assert diffs.get(urls.diff("web-text", a, b)).status_code == 200
    # The compare form's target resolves both and lands on the canonical diff.
    assert diffs.get(urls.diff_compare("web-text", a="v1", b="v2")).headers["location"] == urls.diff("web-text", a, b)


def test_filters_by_change_type_and_column(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    recorded = diff_catalog.changes["web-text"]
    a, b = ids(diff_catalog, "web-text")
    added = listed(diffs, urls.diff("web-text", a, b, change="added"))
    assert sorted(added["added"]) == sorted(recorded.added) and not added["removed"] + added["changed"]
    n_chars = listed(diffs, urls.diff("web-text", a, b, column="n_chars"))
    v1, v2 = diff_catalog.resolve("web-text@v1"), diff_catalog.resolve("web-text@v2")
    expected = sorted(k for k in recorded.edited if v1.sample(k)["n_chars"] != v2.sample(k)["n_chars"])
    assert sorted(n_chars["changed"]) == expected and not n_chars["added"] + n_chars["removed"]
    dom = soup(diffs.get(urls.diff("web-text", a, b, change="changed")))
    active = [f["data-change"] for f in dom.select("nav.facets a.facet.active[data-change]")]
    assert active == ["changed"]
    assert all(li.select_one(".tag") is not None for li in dom.select("li.change"))  # every changed row names its columns


def test_bad_filters_answer_in_the_error_shape(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    a, b = ids(diff_catalog, "web-text")
    bad_change = diffs.get(urls.api(urls.diff("web-text", a, b, change="renamed")))
    assert bad_change.status_code == 422 and bad_change.json()["ok"] is False and "change" in bad_change.json()["error"]
    bad_column = diffs.get(urls.api(urls.diff("web-text", a, b, column="nope")))
    assert bad_column.status_code == 400 and "nope" in bad_column.json()["error"]
    no_key = diffs.get(urls.api(urls.diff("web-text", a, b, key="not-a-key")))
    assert no_key.status_code == 404 and "not-a-key" in no_key.json()["error"]


def test_malformed_and_missing_versions(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    for spec in ("v1", "v1..", "..v2", "v1..other@", "a@v1..v2"):
        response = diffs.get(urls.api(f"/datasets/web-text/diff/{spec}"))
        assert response.status_code == 422, spec
        assert set(response.json()) == {"ok", "error", "status"} and "A..B" in response.json()["error"]
    missing = diffs.get(urls.api(urls.diff("web-text", "v1", "v9")))
    assert missing.status_code == 404 and "v9" in missing.json()["error"] and "v1" in missing.json()["error"]
    page = diffs.get(urls.diff("web-text", "v1", "v9"))
    assert page.status_code == 404 and "v9" in soup(page).select_one("main").get_text()
    assert diffs.get(urls.api(urls.diff("no-such-data", "v1", "v2"))).status_code == 404


def test_versions_of_different_datasets_diff_and_say_so(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    a = diff_catalog.resolve("web-text@v1").id
    b = diff_catalog.resolve("images@v2")
    redirect = diffs.get(urls.diff("web-text", "v1", "images@v2"))
    assert redirect.status_code == 307 and redirect.headers["location"] == urls.diff("web-text", a, f"images@{b.id}")
    dom = soup(diffs.get(redirect.headers["location"]))
    warnings = [li.get_text() for li in dom.select(".diff-warnings li")]
    assert any("different datasets" in w for w in warnings)
    assert dom.select_one("h1").get_text().count("images@") == 1
    assert int(dom.select_one("dd[data-count=added]").get_text().replace(",", "")) == b.rows
    added = {row["column"] for row in diffs.get(urls.api(redirect.headers["location"])).json()["schema"]["added"]}
    assert added == {"image", "label", "caption", "format"}


# -- fragments ----------------------------------------------------------------
def top_level(html: str) -> list[str]:
    from bs4 import BeautifulSoup

    return [el.name + ("#" + el["id"] if el.get("id") else "") for el in BeautifulSoup(html, "html.parser").find_all(recursive=False)]


def test_htmx_gets_the_rows_block_and_the_row_detail(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    a, b = ids(diff_catalog, "web-text")
    whole = soup(diffs.get(urls.diff("web-text", a, b)))
    next_link = whole.select_one("nav.pager a[rel=next]")
    assert next_link["href"] == next_link["hx-get"] and next_link["hx-target"] == "#diff-rows"
    fragment = diffs.get(next_link["href"], headers=HX)
    assert fragment.status_code == 200 and fragment.headers["vary"] == "HX-Request"
    assert top_level(fragment.text) == ["section#diff-rows"]
    page = diffs.get(next_link["href"])
    assert str(soup(page).select_one("section#diff-rows")) == str(soup(fragment).select_one("section#diff-rows"))
    changed = whole.select_one("li.change[data-change=changed]")
    slot = changed.select_one(".detail-slot")
    assert slot["hx-get"] == slot.select_one("a")["href"] == urls.diff("web-text", a, b, key=changed["data-key"])
    detail = diffs.get(slot["hx-get"], headers=HX)
    assert detail.headers["vary"] == "HX-Request"
    assert top_level(detail.text) == ["article"] and soup(detail).select_one("article.row-diff")["data-key"] == changed["data-key"]
    standalone = soup(diffs.get(slot["hx-get"]))
    assert standalone.select_one("html") is not None and standalone.select_one("#diff-detail article.row-diff") is not None


# -- field diffs ------------------------------------------------------------------
def side_text(node: object) -> str:
    return "".join(
        "" if getattr(child, "name", None) == "span" and "gap" in child.get("class", []) else child.get_text()
        for child in node.children  # type: ignore[attr-defined]
    )


def test_text_diff_rebuilds_both_versions_with_highlights(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    recorded = diff_catalog.changes["web-text"]
    v1, v2 = diff_catalog.resolve("web-text@v1"), diff_catalog.resolve("web-text@v2")
    typo = next(k for k in recorded.notes["edits"]["typo_fixed"] if len(v1.sample(k)["text"]) < 1000)
    dom = soup(diffs.get(urls.diff("web-text", v1.id, v2.id, key=typo)))
    pane = dom.select_one('.diff-field[data-column="text"] .text-diff')
    left, right = pane.select_one(".side-a .text-body"), pane.select_one(".side-b .text-body")
    assert left.select("del") and right.select("ins") and not left.select("ins") and not right.select("del")
    assert side_text(left).replace("↵", "") == v1.sample(typo)["text"]
    assert side_text(right).replace("↵", "") == v2.sample(typo)["text"]
    sides = dom.select(".row-diff .sides a")
    assert [a["href"] for a in sides] == [urls.sample("web-text", v1, typo), urls.sample("web-text", v2, typo)]


def test_token_diff_aligns_both_sequences(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    v1, v2 = diff_catalog.resolve("sft-chat@v1"), diff_catalog.resolve("sft-chat@v2")
    key = diff_catalog.changes["sft-chat"].edited[0]
    dom = soup(diffs.get(urls.diff("sft-chat", v1.id, v2.id, key=key)))
    pane = dom.select_one('.diff-field[data-column="input_ids"] .token-diff')
    a_blocks, b_blocks = pane.select(".tok-block.side-a"), pane.select(".tok-block.side-b")
    assert len(a_blocks) == len(b_blocks) > 1
    for blocks, version in ((a_blocks, v1), (b_blocks, v2)):
        expected = [int(i) for i in version.sample(key)["input_ids"]]
        shown = sum(len(block.select(".tok")) + sum(int(g["data-cut"]) for g in block.select(".gap")) for block in blocks)
        assert shown == len(expected)
        assert [int(t.get_text()) for t in blocks[0].select(".tok .i")][:4] == expected[:4]
    assert pane.select(".side-b .tok-ins") or pane.select(".side-a .tok-del")
    paths = dom.select('.diff-field[data-column="messages"] table.path-diff tr')
    assert any(row.select_one("td.path") is not None and row.select_one("td.path").get_text().startswith("messages[") for row in paths)


def test_retokenized_blocks_are_marked() -> None:
    view = token_diff_view(field_diff("ids", "tokens", [5, 1, 23, 7], [5, 12, 3, 7]))
    assert view.retokenized == 1 and view.changed == 1
    changed = [block for block in view.blocks if block.op != "equal"]
    assert [t.piece for t in changed[0].a_tokens] == ["1", "23"] and [t.piece for t in changed[0].b_tokens] == ["12", "3"]
    assert all("tok-retok" in t.classes for t in changed[0].a_tokens + changed[0].b_tokens)


def re_encoded_image(catalog: DiffCatalog) -> str:
    v1, v2 = catalog.resolve("images@v1"), catalog.resolve("images@v2")
    for key in sorted(catalog.changes["images"].notes["re_encoded"]):
        first = image_info(image_from_value(v1.sample(key)["image"]), where="test")
        second = image_info(image_from_value(v2.sample(key)["image"]), where="test")
        if (first.width, first.height) == (second.width, second.height):
            return key
    raise AssertionError("no re-encoded image of the same size in the diff catalog")


def test_image_diff_shows_both_thumbnails_and_a_cacheable_heatmap(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    key = re_encoded_image(diff_catalog)
    v1, v2 = diff_catalog.resolve("images@v1"), diff_catalog.resolve("images@v2")
    dom = soup(diffs.get(urls.diff("images", v1.id, v2.id, key=key)))
    images = [img["src"] for img in dom.select('.diff-field[data-column="image"] .image-diff img')]
    heatmap = urls.diff_heatmap("images", v1.id, v2.id, key, "image")
    assert images == [urls.thumbnail("images", v1, key, "image"), urls.thumbnail("images", v2, key, "image"), heatmap]
    for src in images[:2]:
        assert diffs.get(src).status_code == 200
    response = diffs.get(heatmap)
    assert response.status_code == 200 and response.content.startswith(PNG) and response.headers["content-type"] == "image/png"
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    tag = response.headers["etag"]
    assert tag.startswith('"') and not tag.startswith("W/")
    info = image_info(image_from_value(v1.sample(key)["image"]), where="test")
    picture = Image.open(io.BytesIO(response.content)).convert("RGB")
    assert picture.size == (info.width, info.height)
    assert picture.getextrema() != ((0, 0), (0, 0), (0, 0))  # a re-encoded JPEG is not pixel-identical
    again = diffs.get(heatmap, headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.headers["etag"] == tag
    other = diffs.get(urls.diff_heatmap("images", v1.id, v2.id, key, "caption"))
    assert other.status_code == 422 and "caption" in soup(other).select_one("main").get_text()  # a text column has no pixels
    moved = diffs.get(urls.diff_heatmap("images", "v1", "v2", key, "image"))
    assert moved.status_code == 307 and moved.headers["location"] == heatmap


def test_video_diff_pairs_the_same_frames(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    notes = diff_catalog.changes["videos"].notes["re_encoded"]
    key = min(notes)
    v1, v2 = diff_catalog.resolve("videos@v1"), diff_catalog.resolve("videos@v2")
    sources = [video_source(v.sample(key)["video"], shard_uri=v.shards[v.find(key)[0]].uri, where="test") for v in (v1, v2)]
    frames = min(probe(source, where="test").frame_count for source in sources)
    dom = soup(diffs.get(urls.diff("videos", v1.id, v2.id, key=key)))
    rows = dom.select('.diff-field[data-column="video"] table.frame-pairs tbody tr')
    expected = spread(frames)
    assert len(expected) == 4 and expected[0] == 0 and expected[-1] == frames - 1
    assert [[img["src"] for img in row.select("img")] for row in rows] == [
        [
            urls.frame("videos", v1, key, "video", i, size=urls.THUMBNAIL_SIDE),
            urls.frame("videos", v2, key, "video", i, size=urls.THUMBNAIL_SIDE),
        ]
        for i in expected
    ]
    assert diffs.get(rows[1].select("img")[1]["src"]).status_code == 200


# -- links from the dataset and version pages ------------------------------------------
def test_dataset_and_version_pages_link_their_diffs(diffs: TestClient, diff_catalog: DiffCatalog) -> None:
    a, b = ids(diff_catalog, "web-text")
    dataset = soup(diffs.get(urls.dataset("web-text")))
    assert [link["href"] for link in dataset.select("a.diff-parent")] == [urls.diff("web-text", a, b)]
    form = dataset.select_one("form.compare")
    assert form["action"] == urls.diff_compare("web-text")
    assert [s.select_one("option[selected]")["value"] for s in form.select("select")] == [a, b]
    version = soup(diffs.get(urls.version("web-text", b)))
    assert version.select_one("a.diff-parent")["href"] == urls.diff("web-text", a, b)


# -- keyless data, retyped columns, hostile strings, broken shards -------------------------------------
@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Catalog, TestClient]:
    """``notes``: keyless v1/v2 (one text edited, one row dropped, a hostile one), with ``score`` retyped int → string."""
    catalog = Catalog(tmp_path / "catalog")
    hostile = "<script>alert(1)</script> \u202egnp.exe"
    texts = [
        "the quick brown fox jumps over the lazy dog",
        "a second plain row of text",
        hostile,
        "dropped in v2 entirely, nothing like it",
    ]
    v1 = pa.table({"text": texts, "score": [1, 2, 3, 4]})
    texts2 = ["the quick brown fox jumped over the lazy dog", "a second plain row of text", hostile + " <b>bold</b>"]
    v2 = pa.table({"text": texts2, "score": ["1", "2", "3"]})
    catalog.register("notes", write_parquet(v1, tmp_path / "v1"), tag="v1")
    catalog.register("notes", write_parquet(v2, tmp_path / "v2"), tag="v2")
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "flags.sqlite"))), follow_redirects=False)
    return catalog, client


def test_keyless_rows_pair_as_edited_and_retyped_columns_are_shown(tiny: tuple[Catalog, TestClient]) -> None:
    catalog, client = tiny
    a, b = catalog.resolve("notes@v1"), catalog.resolve("notes@v2")
    dom = soup(client.get(urls.diff("notes", a.id, b.id)))
    kinds = sorted(li["data-change"] for li in dom.select("li.change"))
    assert kinds == ["edited", "edited", "removed"]
    retyped = [tr.select("td")[1].get_text() for tr in dom.select("table.schema-changes tr.schema-retyped")]
    assert retyped == ["score"]
    assert "content hash" in dom.select_one(".matched-by").get_text()
    edited = dom.select_one("li.change[data-change=edited]")
    detail = soup(client.get(edited.select_one(".detail-link")["href"]))
    links = [link["href"] for link in detail.select(".row-diff .sides a")]
    assert len(links) == 2 and all(link.startswith(urls.version("notes", v) + "/samples/") for link, v in zip(links, (a, b)))
    for link in links:
        assert client.get(link).status_code == 200  # each side's permalink opens that version's row


def test_hostile_strings_stay_text(tiny: tuple[Catalog, TestClient]) -> None:
    catalog, client = tiny
    a, b = catalog.resolve("notes@v1"), catalog.resolve("notes@v2")
    data = client.get(urls.api(urls.diff("notes", a.id, b.id, change="edited"))).json()
    hostile = next(row for row in data["listing"]["rows"] if "script" in str(row["fields"]))
    page = client.get(urls.diff("notes", a.id, b.id, key=hostile["key"]))
    dom = soup(page)
    assert dom.select("main script") == [] and dom.select("main b") == []
    body = dom.select_one(".text-diff").get_text()
    assert "<script>alert(1)</script>" in body and "<b>bold</b>" in body
    assert "\u202e" not in page.text and "⟨U+202E⟩" in body


def test_a_modified_shard_is_a_clear_500(tiny: tuple[Catalog, TestClient], tmp_path: Path) -> None:
    catalog, client = tiny
    a, b = catalog.resolve("notes@v1"), catalog.resolve("notes@v2")
    shard = Path(b.shards[0].uri)
    data = bytearray(shard.read_bytes())
    data[100] ^= 1
    shard.write_bytes(bytes(data))
    response = client.get(urls.api(urls.diff("notes", a.id, b.id)))
    assert response.status_code == 500
    message = response.json()["error"]
    assert "notes" in message and b.id[:12] in message and "shard 0" in message and "checksum" in message
    shard.unlink()
    missing = client.get(urls.api(urls.diff("notes", a.id, b.id)))
    assert missing.status_code == 500 and "missing" in missing.json()["error"]


def png(color: tuple[int, int, int], *, dot: tuple[int, int] | None = None) -> bytes:
    picture = Image.new("RGB", (8, 6), color)
    if dot is not None:
        picture.putpixel(dot, (255, 255, 255))
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def test_keyless_image_rows_get_a_heatmap_of_both_keys(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog")
    captions = ["a red square", "a blue square"]
    v1 = pa.table({"caption": captions, "image": [png((200, 0, 0)), png((0, 0, 200))]})
    v2 = pa.table({"caption": captions, "image": [png((200, 0, 0)), png((0, 0, 200), dot=(5, 2))]})
    a = catalog.register("pics", write_parquet(v1, tmp_path / "v1"), tag="v1", kinds={"image": "image"})
    b = catalog.register("pics", write_parquet(v2, tmp_path / "v2"), tag="v2", kinds={"image": "image"})
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "flags.sqlite"))), follow_redirects=False)
    rows = client.get(urls.api(urls.diff("pics", a.id, b.id))).json()["listing"]["rows"]
    assert [row["change"] for row in rows] == ["edited"]
    edited = soup(client.get(urls.diff("pics", a.id, b.id))).select_one(".diff-counts .count-edited")
    assert edited.select_one("dd").get_text() == "1" and "at least 0.8 alike, counted as one edited row" in edited["title"]
    a_key, b_key = rows[0]["a"]["key"], rows[0]["b"]["key"]
    assert a_key != b_key  # content hashes of the two rows
    dom = soup(client.get(urls.diff("pics", a.id, b.id, key=rows[0]["key"])))
    heatmap = dom.select('.diff-field[data-column="image"] .image-diff img')[-1]["src"]
    assert heatmap == urls.diff_heatmap("pics", a.id, b.id, a_key, "image", b_key=b_key)
    picture = Image.open(io.BytesIO(client.get(heatmap).content)).convert("RGB")
    hot = [(x, y) for x in range(8) for y in range(6) if picture.getpixel((x, y)) != (0, 0, 0)]
    assert hot == [(5, 2)]

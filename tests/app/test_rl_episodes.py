"""Episodes: the table sorted by return and length, the timeline at ``?t=``, immutable frames, the field renderer."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from loaders.media import draw_frame_code, read_frame_code
from tests.app.dom import soup
from tests.conftest import write_parquet
from tests.support.local_client import local_client

EPISODE = pa.struct(
    [
        ("frames", pa.list_(pa.binary())),
        ("actions", pa.list_(pa.int32())),
        ("rewards", pa.list_(pa.float32())),
        ("dones", pa.list_(pa.bool_())),
    ]
)
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("env", pa.string()),
        ("episode", EPISODE),
        ("length", pa.int32()),
        ("return", pa.float32()),
        ("termination", pa.string()),
    ]
)
LENGTHS = [6, 3, 9, 4, 7]


def frame_png(t: int) -> bytes:
    """A 64 x 64 frame whose bottom band encodes ``t`` (8 bits), as the demo's gridworld frames do."""
    img = Image.new("RGB", (64, 64), (225, 225, 215))
    draw_frame_code(img, t, bits=8, number=False)
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def episode_row(number: int, length: int, *, drop_frame: bool = False, nan_at: int | None = None) -> dict[str, Any]:
    rewards = [round(0.1 * ((number + t) % 5) - 0.2, 2) for t in range(length)]
    if nan_at is not None:
        rewards[nan_at] = float("nan")
    frames = [frame_png(t) for t in range(length)]
    if drop_frame:
        frames = frames[:-1]
    finite = [r for r in rewards if math.isfinite(r)]
    return {
        "id": f"ep-{number}",
        "env": "grid-v0",
        "episode": {
            "frames": frames,
            "actions": [(number + t) % 4 for t in range(length)],
            "rewards": rewards,
            "dones": [t == length - 1 for t in range(length)],
        },
        "length": length,
        "return": float(np.sum(np.asarray(finite, dtype=np.float32), dtype=np.float32)),
        "termination": "goal" if number % 2 else "timeout",
    }


def build_episode_catalog(root: Path, rows: list[dict[str, Any]] | None = None, name: str = "episodes") -> tuple[Catalog, list[str]]:
    catalog = Catalog(root / "catalog")
    rows = rows if rows is not None else [episode_row(n, length) for n, length in enumerate(LENGTHS)]
    paths = write_parquet(pa.Table.from_pylist(rows, schema=SCHEMA), root / "src" / name, shards=2, row_group=2)
    catalog.register(name, paths, key="id", tag="v1", notes={"actions": ["up", "right", "down", "left"]})
    return catalog, paths


@pytest.fixture(scope="module")
def eps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Catalog, list[str]]:
    return build_episode_catalog(tmp_path_factory.mktemp("episodes"))


def make_client(catalog: Catalog, tmp_path: Path, **settings: Any) -> TestClient:
    return local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"), **settings)), follow_redirects=False)


@pytest.fixture
def client(eps: Any, tmp_path: Path) -> TestClient:
    return make_client(eps[0], tmp_path)


def vid(catalog: Catalog) -> str:
    return catalog.resolve("episodes@v1").id


def stored(paths: list[str]) -> list[dict[str, Any]]:
    return pa.concat_tables([pq.read_table(p) for p in paths]).to_pylist()


def sum_rewards(row: dict[str, Any]) -> float:
    return sum(r for r in row["episode"]["rewards"] if math.isfinite(r))


def table_keys(html: Any) -> list[str]:
    return [tr["data-key"] for tr in html.select("table.rl-episodes tbody tr")]


@pytest.mark.parametrize("sort", ["index", "return", "-return", "length", "-length"])
def test_table_sorts_by_return_and_length(client: TestClient, eps: Any, sort: str) -> None:
    catalog, paths = eps
    rows = stored(paths)
    key = sort.lstrip("-")
    value = (lambda i: i) if key == "index" else (lambda i: sum_rewards(rows[i]) if key == "return" else len(rows[i]["episode"]["actions"]))
    sign = -1 if sort.startswith("-") else 1
    order = sorted(range(len(rows)), key=lambda i: (sign * value(i), i) if key != "index" else i)
    html = soup(client.get(urls.episodes("episodes", vid(catalog), sort=None if sort == "index" else sort)))
    assert table_keys(html) == [rows[i]["id"] for i in order]
    assert [td.get_text() for td in html.select("td.rl-length")] == [str(len(rows[i]["episode"]["actions"])) for i in order]
    assert [td.get_text() for td in html.select("td.rl-return")] == [f"{sum_rewards(rows[i]):.4g}" for i in order]


def test_table_pages_by_cursor(eps: Any, tmp_path: Path) -> None:
    catalog, paths = eps
    rows = stored(paths)
    small = make_client(catalog, tmp_path, page_size=2)
    order = sorted(range(len(rows)), key=lambda i: (-len(rows[i]["episode"]["actions"]), i))
    seen, url = [], urls.episodes("episodes", vid(catalog), sort="-length")
    while url:
        html = soup(small.get(url))
        seen += table_keys(html)
        link = html.select_one("nav.pager a[rel=next]")
        url = link["href"] if link else None
    assert seen == [rows[i]["id"] for i in order]
    data = small.get(urls.api(urls.episodes("episodes", vid(catalog), sort="-length", start=2))).json()
    assert [r["key"] for r in data["rows"]] == [rows[i]["id"] for i in order[2:4]] and data["total"] == len(rows)


def frame_code_at(client: TestClient, url: str) -> int:
    answer = client.get(url)
    assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"
    return read_frame_code(np.asarray(Image.open(io.BytesIO(answer.content)).convert("RGB")), bits=8)


def test_timeline_opens_at_t(client: TestClient, eps: Any) -> None:
    catalog, paths = eps
    row = next(r for r in stored(paths) if r["id"] == "ep-2")
    page = client.get(urls.episode("episodes", vid(catalog), "ep-2", t=5))
    html = soup(page)
    assert html.select_one("#rl-scrubber")["value"] == "5" and html.select_one("#rl-scrubber")["max"] == str(
        len(row["episode"]["actions"]) - 1
    )
    assert frame_code_at(client, html.select_one("#rl-frame")["src"]) == 5
    assert html.select_one("#rl-reward").get_text() == f"{row['episode']['rewards'][5]:.4g}"
    assert (
        html.select_one("#rl-action").get_text()
        == f"{row['episode']['actions'][5]} {['up', 'right', 'down', 'left'][row['episode']['actions'][5]]}"
    )
    assert html.select_one("#rl-return").get_text() == f"{sum(row['episode']['rewards'][:6]):.4g}"
    charts = html.select(".rl-chart svg")
    assert [f.parent["data-chart"] for f in charts] == ["reward", "return", "action"]
    for svg in charts:  # every chart has its cursor at t=5 and one link per step
        x0, x1, p0, p1 = (float(svg[a]) for a in ("data-x0", "data-x1", "data-px0", "data-px1"))
        assert float(svg.select_one("line.chart-cursor")["x1"]) == pytest.approx(p0 + (5 - x0) * (p1 - p0) / (x1 - x0), abs=0.01)
        assert [a["href"] for a in svg.select("a")] == [urls.episode("episodes", vid(catalog), "ep-2", t=t) for t in range(9)]
    assert html.select_one("a[rel=prev]")["href"] == urls.episode("episodes", vid(catalog), "ep-2", t=4)
    assert html.select_one("tr.current")["data-t"] == "5"
    clamped = soup(client.get(urls.episode("episodes", vid(catalog), "ep-2", t=99)))
    assert clamped.select_one("#rl-scrubber")["value"] == "8" and clamped.select_one("a#rl-next:not([href])") is not None
    data = client.get(urls.api(urls.episode("episodes", vid(catalog), "ep-2", t=5))).json()
    assert data["t"] == 5 and data["length"] == 9 and data["frame_url"] == html.select_one("#rl-frame")["src"]


def test_frames_are_immutable_and_cached(client: TestClient, eps: Any) -> None:
    catalog, _ = eps
    url = urls.episode_frame("episodes", vid(catalog), "ep-0", t=3)
    first = client.get(url)
    assert first.headers["cache-control"] == "public, max-age=31536000, immutable"
    etag = first.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    again = client.get(url, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert frame_code_at(client, url) == 3
    redirect = client.get(urls.episode_frame("episodes", "v1", "ep-0", t=3))
    assert redirect.status_code == 307 and redirect.headers["location"] == url
    missing = client.get(urls.episode_frame("episodes", vid(catalog), "ep-0", t=60))
    assert missing.status_code == 404 and "no frame at step 60" in missing.text


def test_field_renderer_links_the_timeline(client: TestClient, eps: Any) -> None:
    catalog, _ = eps
    html = soup(client.get(urls.sample("episodes", vid(catalog), "ep-3")))
    field = html.select_one(".rl-episode-field")
    assert field.select_one("[data-fact=length]").get_text() == "4 steps"
    assert field.select_one("a[href]")["href"] == urls.episode("episodes", vid(catalog), "ep-3")
    assert field.select_one("img")["src"] == urls.episode_frame("episodes", vid(catalog), "ep-3", t=0)
    assert field.select_one("svg.chart") is not None and not field.select(".rl-warn")
    listing = soup(client.get(urls.version("episodes", vid(catalog))))
    assert any(c.get_text().startswith("4 steps · return") for c in listing.select("span.cell"))


def test_rl_url_builders_match_their_routes() -> None:
    """Every RL route has a builder in ``app.urls`` (lines for the ``TABLE`` of ``tests/app/test_urls.py``)."""
    from urllib.parse import unquote, urlsplit

    from starlette.routing import compile_path

    from app.routers.rl import router

    v = "0123456789abcdef0123456789abcdef"
    built = {
        "/datasets/{name}/versions/{version}/groups": urls.rollout_groups("rl", v, sort="-reward"),
        "/datasets/{name}/versions/{version}/rollouts/{key:path}": urls.rollout("rl", v, "a/b"),
        "/runs/{run}/steps/{step}/rollouts": urls.step_rollouts("r", 3),
        "/runs/{run}/steps/{step}/ranks/{rank}/rollouts": urls.rank_rollouts("r", 3, 1, zero_variance="1"),
        "/datasets/{name}/versions/{version}/episodes": urls.episodes("e", v, sort="-return"),
        "/datasets/{name}/versions/{version}/episodes/{key:path}": urls.episode("e", v, "ep/1", t=4),
        "/media/datasets/{name}/versions/{version}/episodes/{key:path}": urls.episode_frame("e", v, "ep/1", t=4),
    }
    routed = {route.path for route in router.routes}
    assert routed == set(built) | {urls.api(p) for p in built if not p.startswith("/media")}
    for template, url in built.items():
        regex, _, _ = compile_path(template)
        assert regex.match(unquote(urlsplit(url).path)), (template, url)
    assert urls.episode("e", v, "..", t=2) == f"/datasets/e/versions/{v}/episodes/?key=..&t=2"
    assert urls.sample_parts(urls.sample("e", v, "..", field="episode")) == ("e", v, "..")

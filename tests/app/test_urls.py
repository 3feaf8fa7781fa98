"""URL builders: exact shapes, hostile keys stay one path segment, and every route of the app has a builder."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app import urls
from app.factory import create_app
from app.settings import Settings

V = "0123456789abcdef0123456789abcdef"

#: (builder output, route template it must match). Every route of the app appears here.
TABLE = [
    (urls.home(), "/"),
    (urls.api(urls.home()), "/api"),
    (urls.runs(), "/runs"),
    (urls.api(urls.runs()), "/api/runs"),
    (urls.datasets(), "/datasets"),
    (urls.api(urls.datasets()), "/api/datasets"),
    (urls.dataset("web-text"), "/datasets/{name}"),
    (urls.api(urls.dataset("web-text")), "/api/datasets/{name}"),
    (urls.version("web-text", V), "/datasets/{name}/versions/{version}"),
    (urls.api(urls.version("web-text", V)), "/api/datasets/{name}/versions/{version}"),
    (urls.sample("web-text", V, "k/1"), "/datasets/{name}/versions/{version}/samples/{key:path}"),
    (urls.api(urls.sample("web-text", V, "k/1")), "/api/datasets/{name}/versions/{version}/samples/{key:path}"),
    (urls.flags(), "/flags"),
    (urls.api(urls.flags()), "/api/flags"),
    (urls.flag(7), "/flags/{flag_id}"),
    (urls.api(urls.flag(7)), "/api/flags/{flag_id}"),
    (urls.flag_edit(7), "/flags/{flag_id}/edit"),
    (urls.flag_delete(7), "/flags/{flag_id}/delete"),
    (urls.flags_jsonl(), "/flags.jsonl"),
    (urls.flags_keys(), "/flags/keys.txt"),
    (urls.media("web-text", V, "k/1", "image"), "/media/datasets/{name}/versions/{version}/samples/{key:path}"),
    (urls.login(), "/login"),
    (urls.media_view("web-text", V, "k/1", "image"), "/view/datasets/{name}/versions/{version}/samples/{key:path}"),
    (urls.api(urls.media_view("web-text", V, "k/1", "image")), "/api/view/datasets/{name}/versions/{version}/samples/{key:path}"),
    (urls.rollout_groups("web-text", V), "/datasets/{name}/versions/{version}/groups"),
    (urls.api(urls.rollout_groups("web-text", V)), "/api/datasets/{name}/versions/{version}/groups"),
    (urls.rollout("web-text", V, "k/1"), "/datasets/{name}/versions/{version}/rollouts/{key:path}"),
    (urls.api(urls.rollout("web-text", V, "k/1")), "/api/datasets/{name}/versions/{version}/rollouts/{key:path}"),
    (urls.episodes("web-text", V), "/datasets/{name}/versions/{version}/episodes"),
    (urls.api(urls.episodes("web-text", V)), "/api/datasets/{name}/versions/{version}/episodes"),
    (urls.episode("web-text", V, "k/1"), "/datasets/{name}/versions/{version}/episodes/{key:path}"),
    (urls.api(urls.episode("web-text", V, "k/1")), "/api/datasets/{name}/versions/{version}/episodes/{key:path}"),
    (urls.episode_frame("web-text", V, "k/1", t=0), "/media/datasets/{name}/versions/{version}/episodes/{key:path}"),
    (urls.diff("web-text", V, V), "/datasets/{name}/diff/{spec}"),
    (urls.api(urls.diff("web-text", V, V)), "/api/datasets/{name}/diff/{spec}"),
    (urls.diff_compare("web-text", a="v1", b="v2"), "/datasets/{name}/diff/"),
    (urls.api(urls.diff_compare("web-text", a="v1", b="v2")), "/api/datasets/{name}/diff/"),
    (urls.diff_heatmap("web-text", V, V, "k/1", "image"), "/media/datasets/{name}/diff/{spec}/heatmap"),
    (urls.run("run-1"), "/runs/{run}"),
    (urls.api(urls.run("run-1")), "/api/runs/{run}"),
    (urls.run_live("run-1"), "/runs/{run}/live"),
    (urls.api(urls.run_live("run-1")), "/api/runs/{run}/live"),
    (urls.step("run-1", 12), "/runs/{run}/steps/{step}"),
    (urls.api(urls.step("run-1", 12)), "/api/runs/{run}/steps/{step}"),
    (urls.run_health("run-1"), "/runs/{run}/health"),
    (urls.api(urls.run_health("run-1")), "/api/runs/{run}/health"),
    (urls.rank("run-1", 12, 3), "/runs/{run}/steps/{step}/ranks/{rank}"),
    (urls.api(urls.rank("run-1", 12, 3)), "/api/runs/{run}/steps/{step}/ranks/{rank}"),
    (urls.input_view("run-1", 12, 3, 0, "input_ids"), "/runs/{run}/steps/{step}/ranks/{rank}/samples/{position}/view/{name}"),
    (urls.api(urls.input_view("run-1", 12, 3, 0, "input_ids")), "/api/runs/{run}/steps/{step}/ranks/{rank}/samples/{position}/view/{name}"),
    (urls.input_media("run-1", 12, 3, 0, "image"), "/runs/{run}/steps/{step}/ranks/{rank}/samples/{position}/inputs/{name}"),
    (urls.input_media("run-1", 12, 3, 0, "frames", 2), "/runs/{run}/steps/{step}/ranks/{rank}/samples/{position}/inputs/{name}/{j}"),
    (urls.step_rollouts("run-1", 12), "/runs/{run}/steps/{step}/rollouts"),
    (urls.api(urls.step_rollouts("run-1", 12)), "/api/runs/{run}/steps/{step}/rollouts"),
    (urls.rank_rollouts("run-1", 12, 3), "/runs/{run}/steps/{step}/ranks/{rank}/rollouts"),
    (urls.api(urls.rank_rollouts("run-1", 12, 3)), "/api/runs/{run}/steps/{step}/ranks/{rank}/rollouts"),
    (urls.sql(q="SELECT 1"), "/sql"),
    (urls.api(urls.sql(q="SELECT 1")), "/api/sql"),
    (urls.sql_csv(q="SELECT 1"), "/sql.csv"),
    (urls.version_sql("web-text", V), "/datasets/{name}/versions/{version}/sql"),
    (urls.api(urls.version_sql("web-text", V)), "/api/datasets/{name}/versions/{version}/sql"),
    (urls.version_columns("web-text", V), "/datasets/{name}/versions/{version}/columns"),
    (urls.api(urls.version_columns("web-text", V)), "/api/datasets/{name}/versions/{version}/columns"),
    (urls.version_count("web-text", V, q="a", column="text"), "/datasets/{name}/versions/{version}/count"),
    (urls.api(urls.version_count("web-text", V, q="a", column="text")), "/api/datasets/{name}/versions/{version}/count"),
    (urls.find("run-1", where="x > 1"), "/runs/{run}/find"),
    (urls.api(urls.find("run-1", where="x > 1")), "/api/runs/{run}/find"),
    (urls.api_docs(), "/api/docs"),
    (urls.openapi(), "/api/openapi.json"),
]

#: Routes that later modules add; their builders exist now (DESIGN.md's URL scheme).
PLANNED = [
    (urls.run("run-1"), "/runs/run-1"),
    (urls.step("run-1", 12), "/runs/run-1/steps/12"),
    (urls.rank("run-1", 12, 3), "/runs/run-1/steps/12/ranks/3"),
    (urls.api(urls.rank("run-1", 12, 3)), "/api/runs/run-1/steps/12/ranks/3"),
    (urls.sample_anchor(4), "#sample-4"),
    (urls.diff("web-text", "a1", "b2"), "/datasets/web-text/diff/a1..b2"),
    (urls.api(urls.diff("web-text", "a1", "b2")), "/api/datasets/web-text/diff/a1..b2"),
]


def app_paths() -> set[str]:
    """Every path template the app routes (walking included routers)."""
    paths: set[str] = set()
    pending = list(create_app(Settings(root="/nonexistent-catalog")).routes)
    while pending:
        route = pending.pop()
        original = getattr(route, "original_router", None)
        if original is not None:
            pending.extend(original.routes)
        elif hasattr(route, "path"):
            paths.add(route.path)
    return paths - {"/static"}


def test_every_route_has_a_builder() -> None:
    routed = app_paths()
    assert routed == {template for _, template in TABLE}


@pytest.mark.parametrize("built, template", TABLE)
def test_builders_match_their_routes(built: str, template: str) -> None:
    from starlette.routing import compile_path

    regex, _, _ = compile_path(template)
    assert regex.match(unquote(urlsplit(built).path)), (built, template)


@pytest.mark.parametrize("built, expected", PLANNED)
def test_planned_urls(built: str, expected: str) -> None:
    assert built == expected


def test_exact_shapes() -> None:
    assert urls.sample("d", V, "a/b?c#d e") == f"/datasets/d/versions/{V}/samples/a%2Fb%3Fc%23d%20e"
    assert urls.version("d", V, start=100, q=None) == f"/datasets/d/versions/{V}?start=100"
    assert urls.sample("d", V, "..") == f"/datasets/d/versions/{V}/samples/?key=.."
    assert urls.sample("d", V, "") == f"/datasets/d/versions/{V}/samples/?key="
    assert urls.flags(dataset="web", tag="bad mask") == "/flags?dataset=web&tag=bad+mask"
    assert urls.static("app.css", "abc") == "/static/app.css?v=abc"


@given(st.text(max_size=40))
def test_any_key_is_one_segment_or_a_query(key: str) -> None:
    url = urls.sample("d", V, key)
    parts = urlsplit(url)
    tail = parts.path.split("/samples/", 1)[1]
    if tail:
        assert "/" not in tail and unquote(tail) == key and not parts.query
    else:
        assert parse_qs(parts.query, keep_blank_values=True)["key"] == [key]

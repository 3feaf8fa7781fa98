"""Every router answers a bad request parameter with the one error shape: its exact status and message are pinned here."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any, Callable

import pytest
from fastapi.testclient import TestClient

import app.routers
from app import urls
from app.errors import BadQuery
from app.factory import create_app
from app.pages.diff import MalformedDiff
from app.pages.media import MediaRequestError
from app.settings import Settings
from loaders import Catalog
from loaders.checks import CHECKS
from loaders.errors import InvalidPlan
from tests.app.dom import soup
from tests.support.local_client import local_client

Case = Callable[[Catalog], tuple[str, int, str]]


def _v1(catalog: Catalog) -> str:
    return catalog.resolve("docs@v1").id


def _ref(catalog: Catalog) -> str:
    return catalog.resolve("docs@v1").ref


#: router module → cases: (URL, status, the whole message). URLs under /api answer JSON; the others (media bytes, login) HTML.
CASES: dict[str, list[Case]] = {
    "auth": [
        lambda c: (
            "/login?next=" + "x" * 2001,
            422,
            "query parameter 'next': String should have at most 2000 characters (got '" + "x" * 76 + "...)",
        ),
    ],
    "datasets": [
        lambda c: (urls.api(urls.version("docs", _v1(c), start=1, end=5)), 422, "give start (1) or end (5), not both"),
        lambda c: (
            urls.api(urls.version("docs", _v1(c), q="alpha", column="nope")),
            422,
            f"cannot search column 'nope' of {_ref(c)}: searchable columns are id, text",
        ),
        lambda c: (
            urls.api(urls.version("docs", _v1(c), start=-1)),
            422,
            "query parameter 'start': Input should be greater than or equal to 0 (got '-1')",
        ),
    ],
    "diff": [
        lambda c: (
            urls.api(urls.diff("docs", _v1(c), c.resolve("docs@v2").id, change="nope")),
            422,
            "query parameter 'change': Input should be 'added', 'removed', 'changed' or 'edited' (got 'nope')",
        ),
        lambda c: (
            urls.api(urls.dataset("docs") + "/diff/v1"),
            422,
            "diff 'v1' is not A..B: give two versions of the dataset (tags, id prefixes or ids) such as v1..v2, "
            "or A..other-dataset@B to compare with another dataset",
        ),
    ],
    "flags": [
        lambda c: ("/api/flags?before=-1", 422, "query parameter 'before': Input should be greater than or equal to 0 (got '-1')"),
    ],
    "health": [
        lambda c: (
            urls.api(urls.run_health("pretrain", check="nope")),
            422,
            "check='nope' is not a check; checks: " + ", ".join(check.name for check in CHECKS),
        ),
        lambda c: (urls.api(urls.run_health("pretrain", steps="3-7")), 422, "steps='3-7' is not A:B (B exclusive)"),
        lambda c: (
            urls.api(urls.run_health("no-such-run")),
            404,
            f"no run named 'no-such-run' in catalog {c.root} (runs: plain, pretrain)",
        ),
    ],
    "input_media": [
        lambda c: (
            "/runs/pretrain/steps/0/ranks/-1/samples/0/inputs/input_ids",
            422,
            "path parameter 'rank': Input should be greater than or equal to 0 (got '-1')",
        ),
        lambda c: (
            "/runs/pretrain/steps/0/ranks/5/samples/0/inputs/input_ids",
            404,
            "rank 5 is not below the world size 2 in force at step 0 of run pretrain",
        ),
    ],
    "media": [
        lambda c: (urls.add_query(urls.media("docs", _v1(c), "doc-1", "text"), thumb=5), 422, "thumb=5 is out of range: 16-4096 pixels"),
        lambda c: (urls.api(urls.media_view("docs", _v1(c), "doc-1", "text")), 422, f"{_ref(c)} column 'text' is text, not image or video"),
    ],
    "query": [
        lambda c: (urls.api(urls.sql(q="SELEC 1")), 400, 'Parser Error: syntax error at or near "SELEC" (line 1, column 1)'),
        lambda c: (
            urls.api(urls.version_sql("docs", _v1(c), q='SELECT * FROM "docs@v9"')),
            400,
            "unknown table \"docs@v9\": dataset docs has no tag or version 'v9' (tags: latest, v1, v2; versions: "
            + ", ".join(sorted(v.id[:12] for v in c.versions("docs")))
            + ")",
        ),
        lambda c: (
            "/sql.csv?q=" + "COPY%20(SELECT%201)%20TO%20'x'",
            400,
            "only queries run here: COPY is refused (no writes, settings, files, attached databases or extensions)",
        ),
        lambda c: (urls.api(urls.find("plain", where="length(text)")), 400, "the predicate is BIGINT, not a boolean: 'length(text)'"),
        lambda c: (
            urls.api(urls.version_count("docs", _v1(c), q="a", column="nope")),
            422,
            f"cannot search column 'nope' of {_ref(c)}: searchable columns are id, text",
        ),
    ],
    "rl": [
        lambda c: (
            urls.api(urls.rollout_groups("docs", _v1(c), sort="nope")),
            422,
            "sort 'nope' is not one of index, reward, advantage, length, finish, std, size, truncation (prefix - for descending) for view 'groups'",
        ),
        lambda c: (urls.api(urls.rollout_groups("docs", _v1(c), view="table")), 422, "view 'table' is not one of groups, rollouts"),
        lambda c: (urls.api(urls.rollout_groups("docs", _v1(c), layout="wide")), 422, "layout 'wide' is not one of grid, stacked"),
        lambda c: (urls.api(urls.episodes("docs", _v1(c))), 422, f"{_ref(c)} has no episode column (kinds: id=text, text=text)"),
        lambda c: (
            urls.api(urls.rollout_groups("docs", _v1(c), column="text")),
            422,
            f"column 'text' of {_ref(c)} is not a rollout column (rollout columns: none)",
        ),
    ],
    "live": [
        lambda c: (
            urls.api(urls.run_live("no-such-run")),
            404,
            f"no run named 'no-such-run' in catalog {c.root} (runs: {', '.join(c.runs())})",
        ),
    ],
    "runs": [
        lambda c: (
            urls.api(urls.run("pretrain")) + "?from=-1",
            422,
            "query parameter 'from': Input should be greater than or equal to 0 (got '-1')",
        ),
        lambda c: (urls.api(urls.rank("pretrain", 7, 1)), 404, "rank 1 is not below the world size 1 in force at step 7 of run pretrain"),
        lambda c: (
            urls.api(urls.rank_rollouts("pretrain", 0, 2)),
            404,
            "rank 2 is not below the world size 2 in force at step 0 of run pretrain",
        ),
    ],
}


@pytest.fixture
def client(runs_catalog: Catalog, tmp_path: Path) -> TestClient:
    return local_client(create_app(Settings(root=runs_catalog.root, flags_path=str(tmp_path / "flags.sqlite"))), follow_redirects=False)


def _takes_parameters(dependant: Any) -> bool:
    """True when a route (or a dependency of it) takes a path or query parameter."""
    return bool(dependant.path_params or dependant.query_params) or any(_takes_parameters(d) for d in dependant.dependencies)


def routers_with_parameters() -> set[str]:
    """The modules of ``app.routers`` with a route that takes a path or query parameter."""
    found = set()
    for module in pkgutil.iter_modules(app.routers.__path__):
        router = getattr(importlib.import_module(f"app.routers.{module.name}"), "router", None)
        if any(_takes_parameters(route.dependant) for route in getattr(router, "routes", [])):
            found.add(module.name)
    return found


def test_every_router_with_parameters_has_a_case() -> None:
    assert set(CASES) == routers_with_parameters()


@pytest.mark.parametrize("case", [pytest.param(case, id=f"{name}-{i}") for name, cases in CASES.items() for i, case in enumerate(cases)])
def test_a_bad_parameter_answers_the_error_shape(client: TestClient, runs_catalog: Catalog, case: Case) -> None:
    url, status, message = case(runs_catalog)
    response = client.get(url)
    assert response.status_code == status
    if urls.is_api(url):
        assert response.json() == {"ok": False, "error": message, "status": status}
    else:
        assert soup(response).select_one(".error-inline .message").get_text() == message


def test_request_errors_are_bad_queries_not_read_plan_errors() -> None:
    for error in (MediaRequestError, MalformedDiff):
        assert issubclass(error, BadQuery)
    assert BadQuery.status == 422 and not issubclass(BadQuery, InvalidPlan)

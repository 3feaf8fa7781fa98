"""No broken link: every link reachable from the demo's home page, and every page's JSON twin, answers without an error.

The crawl (``tests.support.crawl``) runs in-process over the real demo
workspace with one flag stored (so the flag pages are linked too). It fetches
each URL *shape* once: URLs that differ only by a step, sample position, flag
id, frame or a numeric query value (page cursors, zoom) count as one; run and
dataset names, ranks, version ids and non-numeric query values (``sort=``,
``view=``, ``change=``, ``field=``...) make new shapes; at most three sample
keys (or key cursors, or rollout groups) per route and version are followed.
Besides the links of each HTML page it fetches the page's JSON twin, whose
answer must match the response schema the OpenAPI document gives for it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from tests.support.crawl import Crawl, crawl, get_routes, route_of
from tests.support.local_client import local_client

#: GET routes no page of the demo links to, and why.
UNLINKED = {
    "/login": "only linked when an access token is set",
    "/api/openapi.json": "loaded by the script of the API docs page",
    "/runs/{run}/live": "live pages poll its JSON twin (data-live); the marker's HTML is tested in tests/app/test_record_pages.py",
    "/runs/{run}/find": "opened by the run page's find form, which needs a predicate typed in (tests/app/test_query_pages.py)",
    "/api/runs/{run}/find": "the find page's JSON twin (tests/app/test_query_pages.py)",
    "/datasets/{name}/versions/{version}/count": "loaded by a search's results page; no demo page links a search",
    "/api/datasets/{name}/versions/{version}/count": "the count's JSON twin (tests/app/test_query_pages.py)",
}


@pytest.fixture(scope="module")
def crawled(demo_catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> tuple[Crawl, object]:
    flags = tmp_path_factory.mktemp("crawl") / "flags.sqlite"
    app = create_app(Settings(root=demo_catalog.root, flags_path=str(Path(flags))))
    client = local_client(app, follow_redirects=False, raise_server_exceptions=False)
    version = demo_catalog.resolve("web-text@v1")
    key = version.key_of(next(iter(version.read(0, [0]))))
    stored = client.post(urls.api(urls.flags()), json={"dataset": "web-text", "version": "v1", "key": key, "note": "crawl"})
    assert stored.status_code == 201
    routes = get_routes(app)
    api_routes = {route.path for route in routes}

    def twin(url: str) -> str | None:
        template = route_of(routes, url)
        if urls.is_api(url) or template is None or urls.api(template) not in api_routes:
            return None
        return urls.api(url)

    document = app.openapi()
    validators: dict[str, jsonschema.Draft202012Validator] = {}

    def check(url: str, response: Any) -> str | None:
        """A JSON answer that does not match the schema its operation documents."""
        if response.status_code != 200 or not response.headers.get("content-type", "").startswith("application/json"):
            return None
        template = re.sub(r"\{(\w+):\w+\}", r"{\1}", route_of(routes, url) or "")  # OpenAPI paths drop the convertor
        if template not in validators:
            schema = document["paths"][template]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            validators[template] = jsonschema.Draft202012Validator({**schema, "components": document["components"]})
        error = jsonschema.exceptions.best_match(validators[template].iter_errors(response.json()))
        return None if error is None else f"{error.json_path}: {error.message[:300]}"

    return crawl(client.get, twin=twin, check=check), app


def test_every_link_and_json_twin_of_the_demo_answers_without_error(crawled: tuple[Crawl, object]) -> None:
    result, app = crawled
    broken = [f"{v.status} {v.url} (linked from {v.referrer or 'the start'})" for v in result.failures(at_least=400)]
    assert broken == []
    off_schema = [f"{v.url}: {v.problem}" for v in result.visits if v.problem]
    assert off_schema == []
    assert sum(1 for v in result.visits if urls.is_api(v.url)) > 100
    assert len(result.visits) < 5000  # the frontier was exhausted, not cut off
    routes = get_routes(app)
    reached = {route_of(routes, v.url) for v in result.visits}
    assert {r.path for r in routes} - reached == set(UNLINKED)

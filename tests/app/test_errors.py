"""One error shape: JSON under /api, an HTML page otherwise, an inline fragment for htmx; 404s say what exists."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app import urls
from loaders import Catalog
from tests.app.dom import soup

HX = {"HX-Request": "true"}


def version_url(catalog: Catalog, **query: object) -> str:
    return urls.version("docs", catalog.resolve("docs@v1").id, **query)


CASES = [
    # (url builder, status, words the message must contain)
    (lambda c: "/no/such/page", 404, ["/no/such/page"]),
    (lambda c: urls.dataset("nope"), 404, ["nope", "chat", "docs", "packed"]),
    (lambda c: urls.version("docs", "v9"), 404, ["v9", "v1", "v2", "latest"]),
    (lambda c: urls.sample("docs", c.resolve("docs@v1").id, "doc-99"), 404, ["doc-99", "docs@"]),
    (lambda c: urls.sample("docs", c.resolve("docs@v1").id, "doc-1", field="nope"), 404, ["nope", "text"]),
    (lambda c: urls.dataset("bad name!"), 422, ["invalid dataset name"]),
    (lambda c: version_url(c, start=-1), 422, ["query parameter 'start'", "-1"]),
    (lambda c: version_url(c, start="abc"), 422, ["query parameter 'start'", "abc"]),
    (lambda c: version_url(c, start=1, end=5), 422, ["start", "end"]),
    (lambda c: version_url(c, q="x", column="score"), 422, ["score", "searchable columns are id, text"]),
    (lambda c: "/flags/abc", 422, ["path parameter 'flag_id'", "abc"]),
    (lambda c: "/flags/12345", 404, ["no flag 12345"]),
]


@pytest.mark.parametrize("url, status, words", CASES)
def test_json_error_shape(client: TestClient, inspector_catalog: Catalog, url, status: int, words: list[str]) -> None:
    address = url(inspector_catalog)
    response = client.get(urls.api(address) if address.startswith("/") else address)
    assert response.status_code == status
    body = response.json()
    assert set(body) == {"ok", "error", "status"}
    assert body["ok"] is False and body["status"] == status
    for word in words:
        assert word in body["error"]


@pytest.mark.parametrize("url, status, words", CASES)
def test_html_error_page_and_inline_fragment(client: TestClient, inspector_catalog: Catalog, url, status: int, words: list[str]) -> None:
    address = url(inspector_catalog)
    page = client.get(address)
    assert page.status_code == status and page.headers["vary"] == "HX-Request"
    dom = soup(page)
    assert dom.select_one("header.top") is not None
    message = dom.select_one(".error-inline .message").get_text()
    assert message == client.get(urls.api(address)).json()["error"].replace("/api/", "/")
    fragment = client.get(address, headers=HX)
    assert fragment.status_code == status
    dom = soup(fragment)
    assert dom.select_one("html") is None and dom.select_one("header") is None
    assert dom.select_one("div.error-inline[role=alert] .message").get_text() == message


def test_exact_json_of_an_unknown_route(client: TestClient) -> None:
    response = client.get("/api/nothing-here")
    assert response.json() == {"ok": False, "error": "no page at /api/nothing-here", "status": 404}


def test_method_not_allowed_has_the_shape(client: TestClient) -> None:
    response = client.delete("/api/flags")
    assert response.status_code == 405
    assert response.json()["error"] == "DELETE is not allowed on /api/flags"


def test_openapi_documents_the_error_shape(client: TestClient) -> None:
    schema = client.get(urls.openapi()).json()
    body = schema["components"]["schemas"]["ErrorBody"]
    assert set(body["properties"]) == {"ok", "error", "status"}
    for path in ("/api/datasets/{name}", "/api/datasets/{name}/versions/{version}", "/api/flags/{flag_id}"):
        responses = schema["paths"][path]["get"]["responses"]
        assert responses["404"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
        assert responses["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")

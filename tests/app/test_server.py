"""Serving: startup lines and the exposure warning, security headers, the access token, the media endpoint."""

from __future__ import annotations

import hashlib
from typing import Callable

import pytest
from fastapi.testclient import TestClient

from app import urls
from app.server import is_loopback, startup_lines
from app.settings import Settings
from loaders import Catalog
from tests.app.dom import form_token, soup


@pytest.mark.parametrize(
    "host, token, warns",
    [
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
        ("0.0.0.0", None, True),
        ("0.0.0.0", "t", False),
        ("10.1.2.3", None, True),
    ],
)
def test_startup_prints_the_url_and_warns_when_exposed(host: str, token: str | None, warns: bool) -> None:
    lines = startup_lines(Settings(root="/r", host=host, port=8123, token=token))
    assert lines[0].endswith(Settings(host=host, port=8123).url)
    assert any("without an access token" in line for line in lines) == warns
    assert any("BATCHSCOPE_ALLOWED_HOSTS" in line for line in lines) == (not is_loopback(host))  # the names it answers to
    assert len(lines) == 1 + warns + (not is_loopback(host))
    assert is_loopback(host) == (not warns and token is None)


def test_security_headers_on_pages_and_errors(client: TestClient) -> None:
    for url in (urls.home(), "/missing", urls.api(urls.home()), urls.static("app.css")):
        headers = client.get(url).headers
        assert headers["x-content-type-options"] == "nosniff"
        assert "script-src 'self'" in headers["content-security-policy"] and "unsafe" not in headers["content-security-policy"]


def test_pages_have_no_inline_script_or_style(client: TestClient, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("chat@v1")
    for url in (urls.home(), urls.version("chat", version.id), urls.sample("chat", version.id, "good"), urls.api_docs()):
        dom = soup(client.get(url))
        assert all(s.get("src") and not s.string for s in dom.find_all("script"))
        assert dom.find_all("style") == [] and dom.select("[style]") == []
        assert all(not h.startswith(("http:", "https:", "//")) for h in [s.get("src", "") for s in dom.find_all("script")])


def test_static_and_vendored_htmx(client: TestClient) -> None:
    htmx = client.get("/static/vendor/htmx.min.js")
    assert htmx.status_code == 200 and 'version:"2.' in htmx.text
    assert client.get("/static/vendor/htmx.LICENSE").status_code == 200


def test_token_guards_everything_but_static_and_login(make_client: Callable[..., TestClient]) -> None:
    client = make_client(token="open sesame")
    api = client.get(urls.api(urls.home()))
    assert api.status_code == 401 and api.json()["status"] == 401
    page = client.get(urls.flags(tag="x"))
    assert page.status_code == 303 and page.headers["location"] == urls.login(urls.flags(tag="x"))
    assert client.get(urls.static("app.css")).status_code == 200
    assert client.get(urls.login()).status_code == 200
    assert client.get(urls.api(urls.home()), headers={"Authorization": "Bearer open sesame"}).status_code == 200
    assert client.get(urls.api(urls.home()), headers={"Authorization": "Bearer wrong"}).status_code == 401
    refused = client.post(urls.login(), data={"token": "nope", "next": "/flags", "csrf_token": form_token(client)})
    assert refused.status_code == 401 and "wrong token" in soup(refused).select_one(".error-inline").get_text()
    login = client.post(urls.login(), data={"token": "open sesame", "next": "//evil.example/x", "csrf_token": form_token(client)})
    assert login.status_code == 303 and login.headers["location"] == "/"
    assert "httponly" in login.headers["set-cookie"].lower() and "samesite=strict" in login.headers["set-cookie"].lower()
    assert client.get(urls.api(urls.home())).status_code == 200  # the cookie now carries the token


def test_media_serves_stored_bytes_immutably(client: TestClient, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("docs@v1")
    url = urls.media("docs", version.id, "doc-3", "blob")
    response = client.get(url)
    assert response.status_code == 200 and response.content == bytes([3]) * 4
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert response.headers["content-disposition"].startswith("attachment;")
    etag = response.headers["etag"]
    assert etag == '"' + hashlib.sha256(bytes([3]) * 4).hexdigest()[:40] + '"'
    again = client.get(url, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    text = client.get(urls.media("docs", version.id, "doc-3", "text"))  # a text field: its whole value, as UTF-8
    assert text.status_code == 200 and text.content == version.sample("doc-3")["text"].encode()
    assert text.headers["content-type"] == "text/plain; charset=utf-8" and text.headers["content-disposition"].startswith("attachment;")
    missing = client.get(urls.media("docs", version.id, "no-such-key", "text"))
    assert missing.status_code == 404 and "no row with key" in soup(missing).select_one(".message").get_text()
    sample = soup(client.get(urls.sample("docs", version.id, "doc-3")))
    assert sample.select_one(".binary a[download]")["href"] == url

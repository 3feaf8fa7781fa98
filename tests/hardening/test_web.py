"""The web server against a real ``batchscope serve`` on 127.0.0.1 (two worker processes, the default here):
cross-site and token-less state changes are refused, other ``Host`` names are refused (DNS rebinding), unrelated
cookies never hide the access token, and a client sending its headers slowly is cut off."""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from bs4 import BeautifulSoup

from app import urls
from app.security import session_value
from loaders import Catalog
from tests.conftest import build_inspector_catalog
from tests.corpus.server import Server, served

TOKEN = "web-hardening-token"
REBIND = "attacker.rebind.example"
#: Seconds the server gives a client to send its headers (short, so the slowloris test is quick).
HEADER_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return build_inspector_catalog(tmp_path_factory.mktemp("web"))


def _serve(catalog: Catalog, logs: Path, **env: str) -> Any:
    settings = {"BATCHSCOPE_FLAGS_PATH": str(logs / "flags.sqlite"), "BATCHSCOPE_WORKERS": "2", **env}
    return served(catalog.root, logs, env=settings)


@pytest.fixture(scope="module")
def server(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with _serve(catalog, tmp_path_factory.mktemp("web-logs"), BATCHSCOPE_HEADER_TIMEOUT=str(HEADER_TIMEOUT)) as running:
        yield running


def request(
    server: Server, method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes | None = None, host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One request exactly as given (``host``: the ``Host`` header, default ``127.0.0.1:<port>``)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        connection.putheader("Host", f"127.0.0.1:{server.port}" if host is None else host)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def page_token(server: Server, path: str) -> tuple[str, dict[str, str]]:
    """The form token and hidden fields of the flag form on ``path``, as the browser gets them."""
    status, _, body = request(server, "GET", path)
    assert status == 200
    form = BeautifulSoup(body, "html.parser").select_one("form.flag-form")
    hidden = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    return hidden.pop("csrf_token"), hidden


def flag_count(server: Server) -> int:
    status, _, body = request(server, "GET", urls.api(urls.flags()))
    assert status == 200
    return int(json.loads(body)["total"])


def form_body(fields: dict[str, str]) -> bytes:
    from urllib.parse import urlencode

    return urlencode(fields).encode()


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


# -- cross-site requests ----------------------------------------------------------------------
def test_cross_site_form_posts_are_refused_and_change_nothing(server: Server, catalog: Catalog) -> None:
    sample = urls.sample("docs", catalog.resolve("docs@v1").id, "doc-1")
    token, hidden = page_token(server, sample)
    before = flag_count(server)
    own = f"http://127.0.0.1:{server.port}"
    forged = [
        ({"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, True),  # the attack as a browser sends it
        ({"Origin": "http://evil.example"}, True),  # an older browser: Origin only
        ({"Sec-Fetch-Site": "same-site"}, True),  # another port or subdomain of the same site
        ({"Origin": "null"}, True),  # a sandboxed frame or a data: page
        ({"Origin": f"http://localhost:{server.port}"}, True),  # same machine, another origin
        ({"Origin": own, "Sec-Fetch-Site": "same-origin"}, False),  # no token: a form another site rendered
        ({}, False),  # no browser headers, no token
    ]
    for headers, with_token in forged:
        fields = {**hidden, "note": "forged", **({"csrf_token": token} if with_token else {})}
        status, _, body = request(server, "POST", urls.flags(), headers={**FORM, **headers}, body=form_body(fields))
        assert status == 403, (headers, status, body[:300])
        assert b"refused POST /flags" in body
    text_plain = {"Content-Type": "text/plain", "Origin": own}  # what a cross-site fetch can send without a preflight
    assert request(server, "POST", urls.api(urls.flags()), headers=text_plain, body=json.dumps({**hidden, "note": "x"}).encode())[0] == 403
    cross_json = {"Content-Type": "application/json", "Origin": "http://evil.example"}
    assert request(server, "POST", urls.api(urls.flags()), headers=cross_json, body=json.dumps(hidden).encode())[0] == 403
    for method in ("PUT", "PATCH", "DELETE"):  # every state-changing method is checked for its origin
        assert request(server, method, urls.api(urls.flags()), headers={"Origin": "http://evil.example"})[0] == 403, method
        assert request(server, method, urls.api(urls.flags()), headers={"Sec-Fetch-Site": "cross-site"})[0] == 403, method
        assert request(server, method, urls.api(urls.flags()), headers={"Origin": own})[0] == 405, method  # no such route
    assert flag_count(server) == before


def test_the_inspectors_own_forms_and_json_clients_still_flag(server: Server, catalog: Catalog) -> None:
    sample = urls.sample("docs", catalog.resolve("docs@v1").id, "doc-2")
    own = f"http://127.0.0.1:{server.port}"
    before = flag_count(server)
    tokens = set()
    for _ in range(4):  # requests spread over both worker processes: one token, accepted by every worker
        token, hidden = page_token(server, sample)
        tokens.add(token)
        fields = {**hidden, "csrf_token": token, "note": "from the page"}
        browser = {**FORM, "Origin": own, "Sec-Fetch-Site": "same-origin", "HX-Request": "true"}
        status, _, body = request(server, "POST", urls.flags(), headers=browser, body=form_body(fields))
        assert status == 200 and b"flagged as #" in body, body[:300]
    assert len(tokens) == 1
    status, _, _ = request(server, "POST", urls.flags(), headers=FORM, body=form_body({**hidden, "csrf_token": token}))
    assert status == 303  # a plain form post (no JavaScript) with the token
    status, _, body = request(
        server, "POST", urls.api(urls.flags()), headers={"Content-Type": "application/json"}, body=json.dumps(hidden).encode()
    )
    assert status == 201, body[:300]
    assert flag_count(server) == before + 6


# -- Host names ------------------------------------------------------------------------------------
def test_other_host_names_are_refused(server: Server) -> None:
    for path in ("/flags.jsonl", urls.api(urls.flags()), urls.home(), urls.flags()):
        status, _, body = request(server, "GET", path, host=REBIND)
        assert status == 421, (path, status)
        assert REBIND.encode() in body and b"BATCHSCOPE_ALLOWED_HOSTS" in body
        assert b'"key"' not in body and b"doc-" not in body
    for host in (REBIND + f":{server.port}", "127.0.0.1.evil.example", "localhost.evil.example"):
        assert request(server, "GET", "/flags.jsonl", host=host)[0] == 421, host
    assert request(server, "GET", "/flags.jsonl", host="")[0] in (400, 421)  # no name at all
    strict = (
        f"127.0.0.1:{server.port}@evil.example",  # userinfo
        f"evil.example@127.0.0.1:{server.port}",
        f"127.0.0.1:{server.port}, evil.example",  # lists
        "localhost,localhost",
        "localhost:0",  # bad ports
        "localhost:65536",
        "localhost:80a",
        "localhost:",
        "localhost: 80",
        "::1",  # an IPv6 address needs brackets
        "[::1",
        "[::1]x",
        "local host",
    )
    for host in strict:
        assert request(server, "GET", "/flags.jsonl", host=host)[0] in (400, 421), host
    duplicated = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:  # two Host headers, the first one allowed
        duplicated.putrequest("GET", "/flags.jsonl", skip_host=True, skip_accept_encoding=True)
        duplicated.putheader("Host", f"127.0.0.1:{server.port}")
        duplicated.putheader("Host", REBIND)
        duplicated.endheaders()
        assert duplicated.getresponse().status in (400, 421)
    finally:
        duplicated.close()
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "localhost", f"[::1]:{server.port}", "LOCALHOST"):
        assert request(server, "GET", "/flags.jsonl", host=host)[0] == 200, host
    status, _, _ = request(server, "POST", urls.api(urls.flags()), host=REBIND, headers={"Content-Type": "application/json"}, body=b"{}")
    assert status == 421


def test_allowed_hosts_setting_names_the_hosts(catalog: Catalog, tmp_path: Path) -> None:
    with _serve(catalog, tmp_path, BATCHSCOPE_ALLOWED_HOSTS="inspector.internal, 10.0.0.7") as other:
        assert request(other, "GET", urls.home(), host="inspector.internal:8000")[0] == 200
        assert request(other, "GET", urls.home(), host="10.0.0.7")[0] == 200
        assert request(other, "GET", urls.home(), host=f"127.0.0.1:{other.port}")[0] == 421  # only the names given
        assert request(other, "GET", urls.home(), host=REBIND)[0] == 421


# -- cookies ----------------------------------------------------------------------------------------
def test_unrelated_cookies_never_hide_the_token(catalog: Catalog, tmp_path: Path) -> None:
    with _serve(catalog, tmp_path, BATCHSCOPE_TOKEN=TOKEN) as guarded:
        api = urls.api(urls.home())
        session = session_value(TOKEN, expires=int(time.time()) + 3600)  # what the login page's cookie holds
        for cookie in (
            f'prefs={{"a":1}}; batchscope_token={session}',
            f'batchscope_token={session}; prefs={{"a":1}}',
            f'theme="dark; batchscope_token={session}',
            f"a=b;;; c; batchscope_token={session}; d=[1,2]",
        ):
            assert request(guarded, "GET", api, headers={"Cookie": cookie})[0] == 200, cookie
        for cookie in (
            'prefs={"a":1}',
            f"batchscope_token={session}x",
            f"other_batchscope_token={session}",
            f"batchscope_token={TOKEN}",
            "",
        ):
            assert request(guarded, "GET", api, headers={"Cookie": cookie})[0] == 401, cookie


# -- slow clients -----------------------------------------------------------------------------------
def _closed(sock: socket.socket) -> bool:
    """True when the server has closed ``sock`` (EOF or reset)."""
    try:
        sock.setblocking(False)
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


@pytest.mark.parametrize("first_request", [False, True], ids=["fresh connection", "after a kept-alive request"])
def test_a_client_sending_headers_slowly_is_cut_off(server: Server, first_request: bool) -> None:
    """Headers sent a byte every 0.2 s would take a minute; the server closes the connection long before they end."""
    headers = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Slow: {'a' * 300}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        if first_request:
            sock.sendall(f"GET /flags.jsonl HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
            answer = sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
        sent = 0
        for sent in range(len(headers)):
            if _closed(sock):
                break
            try:
                sock.sendall(headers[sent : sent + 1])
            except OSError:
                break
            time.sleep(0.2)
        assert sent < len(headers) - 1, "the server waited for every header byte"
    status, _, _ = request(server, "GET", "/flags.jsonl")  # and it still answers everyone else
    assert status == 200

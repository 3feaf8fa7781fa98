"""Security: the token guards every route but static files, the bind address and its warning, only stored bytes are
served (no path from a URL or a record reaches the filesystem), a strict CSP with nothing inline, nosniff, media types."""

from __future__ import annotations

import http.client
import os
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa
import pytest
from bs4 import BeautifulSoup
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import Mount

from app import urls
from app.factory import create_app
from app.security import CSP, session_value
from app.settings import Settings
from app.templating import STATIC_DIR, TEMPLATES_DIR
from loaders import Catalog, DecodeError, ReadPlan, Source
from loaders.media.image import resolve_media_path
from tests.app.dom import form_token
from tests.conftest import build_inspector_catalog, write_parquet
from tests.corpus import media_faults as media
from tests.corpus.checks import assert_inert
from tests.corpus.server import served
from tests.support.local_client import local_client

TOKEN = "s3cret-token"
SECRET = "batchscope-security-secret-41d2"
RUN = "security-run"
TRAVERSALS = (
    "../../../../etc/passwd",
    "..%2F..%2F..%2F..%2Fetc%2Fpasswd",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "..%252F..%252Fetc%252Fpasswd",
    "/etc/passwd",
    "....//....//etc/passwd",
    "..\\..\\..\\etc\\passwd",
)
STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The shared test catalog's datasets, a run that was read, and a media dataset whose stored paths try to escape."""
    root = tmp_path_factory.mktemp("security")
    catalog = build_inspector_catalog(root)
    secret = root / "secret.txt"
    secret.write_text(SECRET)
    shard_dir = root / "src" / "media"
    shard_dir.mkdir(parents=True)
    (shard_dir / "escape.png").symlink_to(secret)
    (shard_dir / "inside.png").write_bytes(media.small_png())
    (shard_dir / "alias.png").symlink_to(shard_dir / "inside.png")  # a link that stays inside is fine
    rows = {
        "png": {"bytes": media.small_png(), "path": None},
        "svg": {"bytes": media.SVG_WITH_SCRIPT, "path": "x.svg"},
        "up": {"bytes": None, "path": "../secret.txt"},
        "absolute": {"bytes": None, "path": str(secret)},
        "symlink": {"bytes": None, "path": "escape.png"},
        "inside": {"bytes": None, "path": "alias.png"},
    }
    table = pa.table({"id": list(rows), "image": pa.array(list(rows.values()), STRUCT), "blob": [media.HTML_WITH_SCRIPT] * len(rows)})
    catalog.register("media", write_parquet(table, shard_dir, row_group=2), key="id", tag="v1")
    run = catalog.create_run(RUN, ReadPlan([Source("docs@v1")], seed=3, global_batch_size=2, steps=4))
    with run.reader(0, 1) as reader:
        for _ in reader:
            pass
    return catalog


@pytest.fixture
def make_client(catalog: Catalog, tmp_path: Path) -> Callable[..., TestClient]:
    def make(**settings: Any) -> TestClient:
        values = {"root": catalog.root, "flags_path": str(tmp_path / "flags.sqlite"), **settings}
        return local_client(create_app(Settings(**values)), follow_redirects=False, raise_server_exceptions=False)

    return make


def route_values(catalog: Catalog) -> dict[str, str]:
    return {
        "name": "docs",
        "version": catalog.resolve("docs@v1").id,
        "key": "doc-1",
        "run": RUN,
        "step": "0",
        "rank": "0",
        "position": "0",
        "flag_id": "1",
        "a": catalog.resolve("docs@v1").id,
        "b": catalog.resolve("docs@v2").id,
    }


def concrete(path: str, values: dict[str, str]) -> str:
    """``/datasets/{name}/samples/{key:path}`` with every parameter filled in (``x`` for unknown ones)."""
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values.get(m.group(1), "x"), path)


def all_routes(app: Any) -> list[Any]:
    """Every route of the app, walking included routers."""
    pending, found = list(app.routes), []
    while pending:
        route = pending.pop(0)
        original = getattr(route, "original_router", None)
        if original is not None:
            pending.extend(original.routes)
        elif hasattr(route, "path"):
            found.append(route)
    return found


def guarded_routes(app: Any) -> list[tuple[str, str]]:
    """``(method, path template)`` of every route that is not a static file or the login page."""
    found = []
    for route in all_routes(app):
        if isinstance(route, Mount) or route.path.startswith(("/static", "/login")):
            continue
        for method in sorted(getattr(route, "methods", None) or {"GET"}):
            if method != "HEAD":
                found.append((method, route.path))
    return sorted(set(found))


# -- the access token ----------------------------------------------------------------------
def test_every_route_but_static_files_needs_the_token(make_client: Callable[..., TestClient], catalog: Catalog) -> None:
    client = make_client(token=TOKEN)
    routes = guarded_routes(client.app)
    assert len(routes) >= 12 and ("GET", urls.openapi()) in routes
    values = route_values(catalog)
    for method, template in routes:
        url = concrete(template, values)
        refused = client.request(method, url)
        if method == "GET" and not urls.is_api(url):
            assert refused.status_code == 303 and refused.headers["location"].startswith(urls.login()), (method, url)
        else:
            assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer"), (method, url)
        assert catalog.resolve("docs@v1").id not in refused.text  # nothing of the catalog leaks
        allowed = client.request(method, url, headers={"Authorization": f"Bearer {TOKEN}"})
        assert allowed.status_code != 401 and not allowed.headers.get("location", "").startswith(urls.login()), (method, url)
        wrong = client.request(method, url, headers={"Authorization": f"Bearer {TOKEN}x"})
        assert wrong.status_code in (303, 401), (method, url)
    for public in (urls.static("app.css"), urls.static("vendor/htmx.min.js"), urls.login()):
        assert client.get(public).status_code == 200


def test_the_login_cookie_opens_pages_json_and_media(make_client: Callable[..., TestClient], catalog: Catalog) -> None:
    client = make_client(token=TOKEN)
    version = catalog.resolve("docs@v1").id
    protected = (
        urls.version("docs", version),
        urls.api(urls.sample("docs", version, "doc-1")),
        urls.media("docs", version, "doc-3", "blob"),
    )
    assert [client.get(u).status_code for u in protected] == [303, 401, 303]
    client.cookies.set("batchscope_token", "forged")
    assert [client.get(u).status_code for u in protected] == [303, 401, 303]
    client.cookies.clear()
    form = BeautifulSoup(client.get(urls.login(protected[0])).text, "html.parser").select_one("form")
    assert form["method"].lower() == "post" and form["action"] == urls.login()
    assert TOKEN not in client.get(urls.login()).text
    login = client.post(urls.login(), data={"token": TOKEN, "next": protected[0], "csrf_token": form_token(client)})
    assert login.status_code == 303 and login.headers["location"] == protected[0]
    assert [client.get(u).status_code for u in protected] == [200, 200, 200]
    cookie = login.headers["set-cookie"]
    assert TOKEN not in cookie and "Max-Age=604800" in cookie and "HttpOnly" in cookie  # a derived, expiring value
    session = client.cookies["batchscope_token"]
    rotated = make_client(token=TOKEN + "-rotated")  # the token changed: every session made for the old one ends
    rotated.cookies.set("batchscope_token", session)
    assert [rotated.get(u).status_code for u in protected] == [303, 401, 303]
    client.cookies.clear()
    client.cookies.set("batchscope_token", session_value(TOKEN, expires=int(time.time()) - 1))  # expired
    assert [client.get(u).status_code for u in protected] == [303, 401, 303]
    client.cookies.clear()
    client.cookies.set("batchscope_token", TOKEN)  # the raw token is not a session
    assert [client.get(u).status_code for u in protected] == [303, 401, 303]


def test_every_route_answers_head_like_get_without_a_body(make_client: Callable[..., TestClient], catalog: Catalog) -> None:
    client = make_client()
    paths = sorted({path for method, path in guarded_routes(client.app) if method == "GET"}) + [urls.static("app.css"), urls.login()]
    assert len(paths) >= 35
    for template in paths:
        url = concrete(template, route_values(catalog))
        got, head = client.get(url), client.head(url)
        assert head.status_code == got.status_code, (url, got.status_code, head.status_code)
        assert head.content == b"", url
        for header in ("content-type", "content-length", "etag", "location", "content-security-policy"):
            assert head.headers.get(header) == got.headers.get(header), (url, header)
    posted_only = [
        path for method, path in guarded_routes(client.app) if method == "POST" and ("GET", path) not in guarded_routes(client.app)
    ]
    for template in posted_only:  # HEAD, like GET, is not a method of a POST-only route
        assert client.head(concrete(template, route_values(catalog))).status_code == 405, template


def test_without_a_token_setting_nothing_asks_for_one(make_client: Callable[..., TestClient], catalog: Catalog) -> None:
    client = make_client()
    assert client.get(urls.home()).status_code == 200
    assert client.get(urls.api(urls.dataset("docs"))).status_code == 200


# -- binding -----------------------------------------------------------------------------------
def listening_addresses(port: int) -> set[str]:
    """Local addresses with a socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.add(address)
    return found


def test_serve_binds_loopback_by_default_and_says_nothing_alarming(catalog: Catalog, tmp_path: Path) -> None:
    with served(catalog.root, tmp_path / "logs", host=None) as server:
        assert listening_addresses(server.port) == {"0100007F"}  # 127.0.0.1, little-endian hex
        assert f"at http://127.0.0.1:{server.port}" in server.stdout.read_text()
        assert server.stderr.read_text().strip() == ""


def test_serve_warns_when_exposed_without_a_token(catalog: Catalog, tmp_path: Path) -> None:
    with served(catalog.root, tmp_path / "logs", host="0.0.0.0") as server:
        assert listening_addresses(server.port) == {"00000000"}
        warning = server.stderr.read_text()
        assert "warning: serving on 0.0.0.0" in warning and "without an access token" in warning and "BATCHSCOPE_TOKEN" in warning
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.request("GET", "/")
        assert connection.getresponse().status == 200


def test_serve_exposed_with_a_token_does_not_warn_and_refuses_strangers(catalog: Catalog, tmp_path: Path) -> None:
    with served(catalog.root, tmp_path / "logs", host="0.0.0.0", env={"BATCHSCOPE_TOKEN": TOKEN}) as server:
        assert "warning" not in server.stderr.read_text()
        assert raw_get(server.port, urls.api(urls.home()))[0] == 401
        assert raw_get(server.port, urls.api(urls.home()), {"Authorization": f"Bearer {TOKEN}"})[0] == 200
        for path in ("/static/../app/settings.py", "/static/%2e%2e/app/settings.py", "/static/..%2fapp%2fsettings.py"):
            status, body = raw_get(server.port, path)
            assert b"Settings" not in body and status in (401, 404), (path, status)


# -- nothing but stored bytes is served -----------------------------------------------------------
def raw_get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET ``path`` exactly as written (no client-side normalisation of ``..`` or percent-escapes)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.putrequest("GET", path, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def server(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    logs = tmp_path_factory.mktemp("security-logs")
    with served(catalog.root, logs, env={"BATCHSCOPE_FLAGS_PATH": str(logs / "flags.sqlite")}) as running:
        yield running


def leaks(body: bytes) -> bool:
    return SECRET.encode() in body or b"root:x:0:0" in body or b"class Settings" in body


def test_no_path_parameter_reaches_the_filesystem(server: Any, catalog: Catalog) -> None:
    values = route_values(catalog)
    app = create_app(Settings(root=catalog.root))
    templates = sorted({r.path for r in all_routes(app) if isinstance(r, APIRoute) and "GET" in r.methods and "{" in r.path})
    assert len(templates) >= 6
    secret = str(Path(catalog.root).parent / "secret.txt")
    checked = 0
    for template in templates:
        for parameter in re.findall(r"\{(\w+)(?::\w+)?\}", template):
            for hostile in (*TRAVERSALS, secret, secret.replace("/", "%2F")):
                path = concrete(template, {**values, parameter: hostile})
                for query in ("", "?field=image", "?field=../../../etc/passwd", "?key=../../etc/passwd&field=image"):
                    status, body = raw_get(server.port, path + query)
                    assert status < 500 and not leaks(body), (path + query, status, body[:300])
                    checked += 1
    assert checked > 100
    for path in (
        "/static/../app/settings.py",
        "/static/%2e%2e/app/settings.py",
        "/static/..%2fapp%2fsettings.py",
        "/static/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/static//etc/passwd",
        "/static/vendor/../../app/security.py",
        "//etc/passwd",
        "/../../etc/passwd",
    ):
        status, body = raw_get(server.port, path)
        assert status in (400, 404) and not leaks(body), (path, status, body[:200])


def test_stored_paths_never_leave_the_shard_directory(server: Any, catalog: Catalog, make_client: Callable[..., TestClient]) -> None:
    version = catalog.resolve("media@v1")
    client = make_client()
    for key in ("up", "absolute", "symlink"):
        page = client.get(urls.sample("media", version.id, key))
        assert page.status_code == 200
        dom = BeautifulSoup(page.text, "html.parser")
        assert_inert(dom)
        for url in resources(dom) + [urls.media("media", version.id, key, "image")]:
            status, body = raw_get(server.port, url)
            assert status < 500 and not leaks(body), (key, url, status)
    shard = version.shards[0].uri
    for path, words in (("../secret.txt", "does not name a file inside"), ("/etc/passwd", "is absolute"), ("escape.png", "symbolic link")):
        with pytest.raises(DecodeError, match=words):
            resolve_media_path(path, shard_uri=shard, where="test")
    assert resolve_media_path("alias.png", shard_uri=shard, where="test") == str(Path(shard).parent / "alias.png")


def resources(dom: BeautifulSoup) -> list[str]:
    """Every same-origin URL a browser would load or a user could open from the page."""
    found = [el.get("src") for el in dom.select("[src]")] + [el.get("href") for el in dom.select("a[href]")]
    found += [el.get("hx-get") for el in dom.select("[hx-get]")]
    return [u for u in dict.fromkeys(found) if u and u.startswith("/") and not u.startswith("//")]


# -- media types -------------------------------------------------------------------------------------
def test_svg_and_html_in_datasets_are_never_served_inline(server: Any, catalog: Catalog, make_client: Callable[..., TestClient]) -> None:
    version = catalog.resolve("media@v1")
    client = make_client()
    seen = 0
    for key in ("svg", "png"):
        dom = BeautifulSoup(client.get(urls.sample("media", version.id, key)).text, "html.parser")
        for url in resources(dom) + [urls.media("media", version.id, key, "image"), urls.media("media", version.id, key, "blob")]:
            response = client.get(url)
            kind = response.headers.get("content-type", "").split(";")[0]
            if media.SVG_WITH_SCRIPT in response.content or media.HTML_WITH_SCRIPT in response.content:
                seen += 1
                assert kind == "application/octet-stream", (url, kind)
                assert response.headers["content-disposition"].startswith("attachment"), url
            elif response.status_code == 200 and kind.startswith("image/"):
                from loaders.media.image import media_type

                assert media_type(response.content) == kind, (url, kind)
            assert response.headers["x-content-type-options"] == "nosniff"
    assert seen >= 2


def test_stored_png_is_served_as_png_or_as_an_attachment(make_client: Callable[..., TestClient], catalog: Catalog) -> None:
    response = make_client().get(urls.media("media", catalog.resolve("media@v1").id, "png", "image"))
    assert response.status_code == 200 and response.content == media.small_png()
    kind = response.headers["content-type"].split(";")[0]
    assert kind == "image/png" or (kind == "application/octet-stream" and response.headers["content-disposition"].startswith("attachment"))


# -- CSP, nosniff, nothing inline ----------------------------------------------------------------------
def csp_directives(value: str) -> dict[str, list[str]]:
    parts = [p.strip().split() for p in value.split(";") if p.strip()]
    return {p[0]: p[1:] for p in parts}


def test_the_policy_is_strict() -> None:
    policy = csp_directives(CSP)
    assert policy["default-src"] == ["'self'"] and policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"] and policy["base-uri"] == ["'none'"]
    for sources in policy.values():
        assert not any(s.startswith("'unsafe") or s == "*" or s.startswith(("http:", "https:")) for s in sources), sources


def test_every_kind_of_answer_carries_the_headers(make_client: Callable[..., TestClient], catalog: Catalog) -> None:
    client = make_client()
    client.app.add_api_route("/boom", _boom)  # a real unexpected exception inside a real app
    version = catalog.resolve("docs@v1").id
    answers = {
        "page": client.get(urls.home()),
        "json": client.get(urls.api(urls.home())),
        "fragment": client.get(urls.version("docs", version), headers={"HX-Request": "true"}),
        "not found": client.get("/nope"),
        "invalid": client.get(urls.version("docs", version, start=-1)),
        "redirect": client.get(urls.version("docs", "v1")),
        "method": client.delete(urls.home()),
        "static": client.get(urls.static("app.js")),
        "media": client.get(urls.media("docs", version, "doc-3", "blob")),
        "openapi": client.get(urls.openapi()),
        "unexpected": client.get("/boom"),
        "refused": make_client(token=TOKEN).get(urls.api(urls.home())),
    }
    assert answers["unexpected"].status_code == 500 and answers["refused"].status_code == 401
    for name, response in answers.items():
        assert response.headers.get("content-security-policy") == CSP, name
        assert response.headers.get("x-content-type-options") == "nosniff", name


def _boom() -> None:
    raise RuntimeError("an unexpected failure")


class _InlineFinder(HTMLParser):
    """Collects inline script bodies, event-handler and style attributes, style elements and javascript: URLs."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "style":
            self.problems.append("<style> element")
        if tag == "script":
            self._in_script = True
            if not dict(attrs).get("src"):
                self.problems.append("<script> without src")
        for name, value in attrs:
            if name.startswith(("on", "hx-on", "data-hx-on")):
                self.problems.append(f"<{tag} {name}=...> event handler")
            if name in ("style", "srcdoc"):
                self.problems.append(f"<{tag} {name}=...>")
            if value and re.sub(r"\s", "", value).lower().startswith(("javascript:", "vbscript:")):
                self.problems.append(f"<{tag} {name}={value!r}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.problems.append(f"inline script body {data.strip()[:60]!r}")


TEMPLATES = sorted(TEMPLATES_DIR.rglob("*.html"))
OWN_SCRIPTS = sorted(p for p in STATIC_DIR.rglob("*.js") if "vendor" not in p.parts)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(TEMPLATES_DIR)))
def test_templates_hold_nothing_inline(template: Path) -> None:
    finder = _InlineFinder()
    finder.feed(template.read_text())
    assert finder.problems == []


@pytest.mark.parametrize("script", OWN_SCRIPTS, ids=lambda p: p.name)
def test_our_scripts_never_turn_text_into_code_or_markup(script: Path) -> None:
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", script.read_text(), flags=re.DOTALL)
    for pattern in (
        r"\beval\s*\(",
        r"\bnew\s+Function\s*\(",
        r"\bset(Timeout|Interval)\s*\(\s*['\"`]",
        r"document\.write",
        r"\.(inner|outer)HTML\s*=",
        r"insertAdjacentHTML",
    ):
        assert not re.search(pattern, code), f"{script.name}: {pattern}"


def test_templates_and_scripts_were_found() -> None:
    assert len(TEMPLATES) >= 10 and any(p.name == "base.html" for p in TEMPLATES)
    assert any(p.name == "app.js" for p in OWN_SCRIPTS)

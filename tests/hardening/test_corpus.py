"""The bad-input corpus against a real ``batchscope serve``: a clear error or a safe page for every case, the server
still answering, nothing in the catalog changed (DESIGN invariant 6)."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from bs4 import BeautifulSoup

from app import urls
from loaders import BatchscopeError, Catalog
from loaders.media.image import media_type
from tests.corpus.checks import assert_inert, assert_shows_literally, diff_snapshots, snapshot
from tests.corpus.make_corpus import CASES, Case, Probe, build, prepare, register
from tests.corpus.recipes import SECRET
from tests.corpus.server import Server, batchscope, served

REFUSED = [c for c in CASES if c.refused]
PROBED = [c for c in CASES if not c.refused]
#: Types a browser shows inline without running anything; everything else must be an attachment.
INLINE_SAFE = {"image/png", "image/jpeg", "image/webp", "image/gif", "video/mp4", "video/webm", "video/quicktime"}
#: A fragment the browser loads by itself (on reveal) stays small enough to lay out, whatever the value's size.
FRAGMENT_LIMIT = 5_000_000


@dataclass
class Corpus:
    catalog: Catalog
    root: Path
    server: Server
    http: httpx.Client
    paths: dict[str, list[str]]
    versions: dict[str, Any]

    def snapshot(self) -> dict[str, str]:
        """The catalog and every registered source file (derived key indexes excepted)."""
        return snapshot(Path(self.catalog.root), self.root / "src")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    """Every case built; the registrable ones registered (then damaged, as their recipe says) and served."""
    root = tmp_path_factory.mktemp("corpus")
    catalog = Catalog(root / "catalog")
    prepare(catalog)
    paths, versions = {}, {}
    for case in CASES:
        paths[case.name] = build(case, root / "src")
        if case.refused:
            continue
        versions[case.name] = register(catalog, case, paths[case.name])
        if case.damage:
            case.damage(paths[case.name])
        if case.after:
            case.after(catalog, versions[case.name])
    env = {"BATCHSCOPE_FLAGS_PATH": str(root / "flags.sqlite")}
    with served(catalog.root, root / "logs", env=env) as server, httpx.Client(base_url=server.url, timeout=120) as http:
        yield Corpus(catalog, root, server, http, paths, versions)


def test_the_corpus_is_big_and_every_case_has_a_check() -> None:
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)
    assert all(c.refused or c.probes for c in CASES)


# -- refused at registration -------------------------------------------------------------
@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_broken_files_are_refused_by_name_and_change_nothing(corpus: Corpus, case: Case) -> None:
    before = corpus.snapshot()
    with pytest.raises(BatchscopeError) as info:
        register(corpus.catalog, case, corpus.paths[case.name])
    error = info.value
    assert error.status == case.refused_status, error.message
    for word in case.refused:
        assert word in error.message, f"{word!r} not in {error.message!r}"
    assert diff_snapshots(before, corpus.snapshot()) == []
    answer = corpus.http.get(urls.api(urls.dataset(case.dataset_name)))
    assert answer.status_code in (404, 422) and answer.json()["ok"] is False
    assert_alive(corpus)


@pytest.mark.parametrize(
    "case", [c for c in REFUSED if c.name in ("truncated-half", "schema-drift", "footer-total-rows-lie")], ids=lambda c: c.name
)
def test_the_cli_refuses_them_with_one_clear_line(corpus: Corpus, case: Case) -> None:
    before = corpus.snapshot()
    command = [batchscope(), "register", case.dataset_name, *corpus.paths[case.name], "--root", corpus.catalog.root]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    line = " ".join(result.stderr.split())
    assert line.startswith("error:") and all(word in line for word in case.refused), result.stderr
    assert diff_snapshots(before, corpus.snapshot()) == []


# -- registered, then probed through the server ---------------------------------------------
@pytest.mark.parametrize("case", PROBED, ids=lambda c: c.name)
def test_hostile_input_gets_a_clear_error_or_a_safe_page(corpus: Corpus, case: Case) -> None:
    version = corpus.versions[case.name]
    before = corpus.snapshot()
    log_start = len(corpus.server.logs())
    for probe in case.probes:
        check(corpus.http, probe.url(version), probe)
    assert_alive(corpus)
    assert diff_snapshots(before, corpus.snapshot()) == []
    log = corpus.server.logs()[log_start:]
    assert "Traceback" not in log and "unexpected error" not in log, log[-3000:]


def test_the_server_survived_the_whole_corpus(corpus: Corpus) -> None:
    for case in PROBED:
        if case.probes:
            corpus.http.get(case.probes[0].url(corpus.versions[case.name]))
    assert corpus.server.process.poll() is None
    assert_alive(corpus)
    home = corpus.http.get(urls.api(urls.home())).json()
    listed = {d["name"] for d in home["datasets"]}
    assert listed == {c.dataset_name for c in PROBED}
    assert not {c.dataset_name for c in REFUSED} & listed


# -- the checks ---------------------------------------------------------------------------
def assert_alive(corpus: Corpus) -> None:
    home = corpus.http.get(urls.home())
    assert home.status_code == 200, corpus.server.logs()[-3000:]


def error_message(response: httpx.Response) -> str:
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        assert body == {"ok": False, "error": body["error"], "status": response.status_code}
        return body["error"]
    found = BeautifulSoup(response.text, "html.parser").select_one(".message")
    assert found is not None, f"error page without a message: {response.text[:300]}"
    return found.get_text()


def contains_exactly(value: Any, wanted: str) -> bool:
    """``wanted`` is a string or a key somewhere in the JSON ``value``."""
    if isinstance(value, str):
        return value == wanted
    if isinstance(value, dict):
        return wanted in value or any(contains_exactly(v, wanted) for v in value.values())
    if isinstance(value, list):
        return any(contains_exactly(v, wanted) for v in value)
    return False


def check_headers(response: httpx.Response) -> None:
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in response.headers["content-security-policy"]


def check(http: httpx.Client, url: str, probe: Probe) -> None:
    """One probe: the status, then the error message or the page's safety, its JSON twin and what it loads."""
    response = http.get(url)
    context = f"GET {url[:200]} -> {response.status_code}"
    assert response.status_code in probe.statuses, f"{context}: {response.text[:500]}"
    check_headers(response)
    assert SECRET not in response.text
    if url.startswith("/media/"):
        if response.status_code == 200:
            check_media(response, context)
        else:
            message = error_message(response)
            assert all(word in message for word in probe.words), f"{context}: {message!r} lacks {probe.words}"
        return
    if response.status_code >= 400:
        message = error_message(response)
        assert all(word in message for word in probe.words), f"{context}: {message!r} lacks {probe.words}"
        twin = http.get(urls.api(url))
        assert twin.status_code == response.status_code and all(word in error_message(twin) for word in probe.words)
        return
    if probe.max_bytes is not None:
        assert len(response.content) <= probe.max_bytes, f"{context}: {len(response.content):,} bytes"
    dom = BeautifulSoup(response.text, "html.parser")
    assert_inert(dom)
    text = dom.get_text()
    for word in probe.words:
        assert word in text, f"{context}: {word!r} not on the page"
    for value in probe.literal:
        assert_shows_literally(dom, value)
    twin = http.get(urls.api(url))
    assert twin.status_code == 200, f"JSON twin of {context}: {twin.text[:300]}"
    data = json.loads(twin.text)  # strict JSON: no NaN or Infinity tokens
    for value in probe.literal:
        assert contains_exactly(data, value), f"{value!r} not exactly in the JSON twin of {url}"
    load_resources(http, dom, context)


def load_resources(http: httpx.Client, dom: BeautifulSoup, context: str) -> None:
    """What a browser fetches by itself for the page (images, videos, fragments loaded on reveal) never fails or leaks."""
    wanted = [el.get("src") for el in dom.select("img[src], video[src], source[src]")]
    wanted += [el.get("hx-get") for el in dom.select("[hx-get]") if re.search(r"\b(load|revealed|intersect)\b", el.get("hx-trigger", ""))]
    wanted += [a.get("href") for a in dom.select("a[href^='/media/']")]
    for resource in dict.fromkeys(w for w in wanted if w):
        headers = {"HX-Request": "true"} if dom.select_one(f"[hx-get='{resource}']") else {}
        response = http.get(resource, headers=headers)
        where = f"{context}: resource {resource[:200]} -> {response.status_code}"
        assert response.status_code < 500, f"{where}: {response.text[:300]}"
        check_headers(response)
        assert SECRET not in response.text, where
        if response.status_code == 200 and not response.headers.get("content-type", "").startswith("text/html"):
            check_media(response, where)
        elif response.headers.get("content-type", "").startswith("text/html"):
            assert len(response.content) <= FRAGMENT_LIMIT, f"{where}: a {len(response.content):,}-byte fragment"
            assert_inert(BeautifulSoup(response.text, "html.parser"))


def check_media(response: httpx.Response, context: str) -> None:
    """Stored bytes come back with a type that matches them, and anything a browser could run is an attachment."""
    kind = response.headers["content-type"].split(";")[0].strip()
    disposition = response.headers.get("content-disposition", "")
    assert kind not in ("text/html", "image/svg+xml", "application/xhtml+xml", "text/xml", "application/xml"), context
    if kind in INLINE_SAFE and kind.startswith("image/"):
        assert media_type(response.content) == kind, f"{context}: served as {kind}, the bytes are {media_type(response.content)}"
    elif kind not in INLINE_SAFE:
        assert disposition.startswith("attachment"), f"{context}: {kind} served inline"
    head = response.content[:200].lstrip().lower()
    if head.startswith((b"<svg", b"<?xml", b"<!doctype", b"<html")):
        assert kind == "application/octet-stream" and disposition.startswith("attachment"), f"{context}: markup served as {kind}"

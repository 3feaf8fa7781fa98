"""Flags: htmx form, JSON API, list and filters, permanent pages, exports, and 20 concurrent writers losing nothing."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path
from typing import Callable

import pytest
from fastapi.testclient import TestClient

from app import urls
from app.flags import FlagFilter, FlagStore
from loaders import Catalog
from loaders.catalog.exclude import read_key_file
from tests.app.dom import form_token, soup

HX = {"HX-Request": "true"}


def form(catalog: Catalog, key: str, *, ref: str = "docs@v1", note: str = "bad", tags: str = "", **extra: object) -> dict[str, str]:
    version = catalog.resolve(ref)
    data = {"dataset": version.name, "version": version.id, "key": key, "note": note, "tags": tags}
    data.update({k: str(v) for k, v in extra.items()})
    return data


def test_htmx_form_post_swaps_in_the_updated_form(client: TestClient, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("docs@v1")
    page = soup(client.get(urls.sample("docs", version.id, "doc-2")))
    flag_form = page.select_one("form.flag-form")
    assert flag_form["hx-post"] == flag_form["action"] == urls.flags() and flag_form["hx-swap"] == "outerHTML"
    hidden = {i["name"]: i["value"] for i in flag_form.select("input[type=hidden]")}
    assert hidden == {"csrf_token": form_token(client), "dataset": "docs", "version": version.id, "key": "doc-2"}
    response = client.post(urls.flags(), data={**hidden, "note": "mask looks off", "tags": "bad-mask, review"}, headers=HX)
    assert response.status_code == 200 and response.headers["vary"] == "HX-Request"
    swapped = soup(response)
    assert [el.name for el in swapped.find_all(recursive=False)] == ["form"]
    assert swapped.select_one("[role=status]").get_text() == "flagged as #1"
    item = swapped.select_one("ul.flag-notes li")
    assert "mask looks off" in item.get_text() and [t.get_text() for t in item.select(".tag")] == ["bad-mask", "review"]
    again = soup(client.get(urls.sample("docs", version.id, "doc-2")))
    assert [a["href"] for a in again.select("form.flag-form ul.flag-notes a")] == [urls.flag(1)]


def test_plain_form_post_redirects_to_the_flag(client: TestClient, inspector_catalog: Catalog) -> None:
    response = client.post(urls.flags(), data={**form(inspector_catalog, "doc-1"), "csrf_token": form_token(client)})
    assert response.status_code == 303 and response.headers["location"] == urls.flag(1)
    page = soup(client.get(urls.flag(1)))
    assert page.select_one("a.sample-link")["href"] == urls.sample("docs", inspector_catalog.resolve("docs@v1").id, "doc-1")


def test_json_api_flags_with_run_context(client: TestClient, inspector_catalog: Catalog) -> None:
    body = {
        "dataset": "docs",
        "version": "v1",
        "key": "doc-5",
        "note": "dup",
        "tags": ["dup"],
        "run": "run-1",
        "step": 3,
        "rank": 1,
        "index": 14,
        "position": 2,
    }
    response = client.post(urls.api(urls.flags()), json=body)
    assert response.status_code == 201, response.text
    flag = response.json()
    assert flag["version"] == inspector_catalog.resolve("docs@v1").id  # a tag is stored as the full id
    assert (flag["index"], flag["position"]) == (14, 2)
    assert flag["context_url"] == urls.rank("run-1", 3, 1) + urls.sample_anchor(2)  # the anchor is the position
    assert client.get(urls.api(urls.flag(flag["id"]))).json()["flag"] == flag


@pytest.mark.parametrize(
    "change, status, words",
    [
        ({"key": "doc-404"}, 404, ["doc-404"]),
        ({"version": "v7"}, 404, ["v7"]),
        ({"dataset": "nope"}, 404, ["nope"]),
        ({"tags": "ok, <bad>"}, 422, ["invalid tag"]),
        ({"step": "-1"}, 422, ["step"]),
    ],
)
def test_bad_flags_are_refused(client: TestClient, inspector_catalog: Catalog, change: dict, status: int, words: list[str]) -> None:
    data = {**form(inspector_catalog, "doc-1"), "csrf_token": form_token(client), **change}
    response = client.post(urls.flags(), data=data, headers=HX)
    assert response.status_code == status
    swapped = soup(response)
    if status == 404:  # the form comes back, with the error, so the reader can fix it
        assert swapped.select_one("form.flag-form input[name=key]")["value"] == data["key"]
    assert all(w in swapped.select_one("[role=alert]").get_text() for w in words)
    assert client.get(urls.api(urls.flags())).json()["total"] == 0


def test_list_filters_and_exports(client: TestClient, inspector_catalog: Catalog) -> None:
    for key, ref, tags in [
        ("doc-1", "docs@v1", "spam"),
        ("doc-2", "docs@v1", "spam, dup"),
        ("good", "chat@v1", "dup"),
        ("doc-2", "docs@v2", "spam"),
    ]:
        assert (
            client.post(urls.api(urls.flags()), json={**form(inspector_catalog, key, ref=ref, tags=tags), "tags": tags}).status_code == 201
        )

    def keys_of(**query: str) -> list[str]:
        return [f["key"] for f in client.get(urls.api(urls.flags(**query))).json()["flags"]]

    assert keys_of() == ["doc-2", "good", "doc-2", "doc-1"]
    assert keys_of(dataset="docs") == ["doc-2", "doc-2", "doc-1"]
    assert keys_of(tag="dup") == ["good", "doc-2"]
    assert keys_of(dataset="docs", tag="dup") == ["doc-2"]
    page = soup(client.get(urls.flags(tag="spam")))
    assert [a["href"] for a in page.select("tr.flag-row td:first-child a")] == [urls.flag(4), urls.flag(2), urls.flag(1)]
    assert {a.get_text(" ", strip=True) for a in page.select(".facets a.facet.tag")} == {"dup 2", "spam 3"}
    lines = client.get(urls.flags_jsonl(dataset="docs")).text.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [4, 2, 1]
    keys = client.get(urls.flags_keys(dataset="docs", tag="spam"))
    assert keys.headers["content-type"].startswith("text/plain") and keys.text == "doc-1\ndoc-2\n"
    home = soup(client.get(urls.home()))
    assert len(home.select("#recent-flags tr.flag-row")) == 4


def test_flags_paging_cursor(tmp_path: Path) -> None:
    store = FlagStore(str(tmp_path / "f.sqlite"))
    for i in range(7):
        store.add(dataset="d", version="v", key=f"k{i}")
    first = store.list(limit=3)
    second = store.list(limit=3, before=first[-1].id)
    assert [f.key for f in first + second] == ["k6", "k5", "k4", "k3", "k2", "k1"]
    assert [f.key for f in store.iter_all(chunk=2)] == [f"k{i}" for i in range(6, -1, -1)]


def test_key_export_roundtrips_hostile_keys(tmp_path: Path) -> None:
    store = FlagStore(str(tmp_path / "f.sqlite"))
    hostile = ["plain", "two\nlines", " padded ", '"quoted', "", "tab\there", "#hash"]
    for key in hostile:
        store.add(dataset="d", version="v", key=key)
    from loaders.catalog.exclude import write_key_file

    path = tmp_path / "keys.txt"
    path.write_text(write_key_file(store.keys(FlagFilter(dataset="d"))))
    assert read_key_file(str(path)) == set(hostile)


def _write_flags(path: str, worker: int, count: int) -> None:
    store = FlagStore(path)
    for i in range(count):
        store.add(dataset="d", version="v", key=f"w{worker}-{i}", note=f"from {worker}", tags=[f"w{worker}"])


def test_twenty_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "flags.sqlite")
    per = 15
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_write_flags, args=(path, w, per)) for w in range(10)]
    threads = [threading.Thread(target=_write_flags, args=(path, w, per)) for w in range(10, 20)]
    for worker in processes + threads:
        worker.start()
    for thread in threads:
        thread.join()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    store = FlagStore(path)
    flags = list(store.iter_all())
    assert len(flags) == 20 * per
    assert {f.key for f in flags} == {f"w{w}-{i}" for w in range(20) for i in range(per)}
    assert len({f.id for f in flags}) == 20 * per
    assert all(f.tags == [f"w{f.key[1:].split('-')[0]}"] for f in flags)


def test_cli_exports_what_the_server_serves(make_client: Callable[..., TestClient], inspector_catalog: Catalog, tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    flags_path = tmp_path / "cli-flags.sqlite"
    client = make_client(flags_path=str(flags_path))
    token = form_token(client)
    for key, tags in (("doc-1", "spam"), ("doc-2", "dup")):
        assert client.post(urls.flags(), data={**form(inspector_catalog, key, tags=tags), "csrf_token": token}).status_code == 303
    batchscope = shutil.which("batchscope") or str(Path(sys.executable).parent / "batchscope")
    env = {**os.environ, "BATCHSCOPE_FLAGS_PATH": str(flags_path)}

    def run(*args: str) -> str:
        done = subprocess.run(
            [batchscope, "flags", *args, "--root", inspector_catalog.root], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert run("export", "--keys", "--tag", "spam") == client.get(urls.flags_keys(tag="spam")).text == "doc-1\n"
    assert run("export", "--dataset", "docs") == client.get(urls.flags_jsonl(dataset="docs")).text


def test_cli_list_shows_hostile_flag_text_revealed_and_never_as_markup(inspector_catalog: Catalog, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from app.flags import FlagStore

    flags_path = tmp_path / "hostile.sqlite"
    version = inspector_catalog.resolve("docs@v1")
    FlagStore(str(flags_path)).add(dataset="docs", version=version.id, key="doc-1\u202e", note="[bold red]loud[/] \x1b[31mred", tags=["t"])
    done = subprocess.run(
        [str(Path(sys.executable).parent / "batchscope"), "flags", "list", "--root", inspector_catalog.root],
        env={**os.environ, "BATCHSCOPE_FLAGS_PATH": str(flags_path), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "[bold red]loud[/]" in done.stdout and "doc-1⟨U+202E⟩" in done.stdout  # shown as written, the override revealed
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout and "␛[31mred" in done.stdout

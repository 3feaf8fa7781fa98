"""Stored-bytes guarantees through a real ``batchscope serve``: a hostile footer under a memory cap, duplicate keys'
permalinks, a broken catalog file and a broken flag database, each answered clearly while every other page renders."""

from __future__ import annotations

import json
import resource
from pathlib import Path
from typing import Iterator

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bs4 import BeautifulSoup

from app import urls
from loaders import Catalog, ReadPlan, Source
from tests.corpus import media_faults as media
from tests.corpus import parquet_faults as faults
from tests.corpus.legacy import register_unchecked
from tests.corpus.server import Server, served

#: The server's address space: ~1.6 GB is mapped at start; 10^12 rows of anything would need terabytes.
MEMORY_CAP = 4 << 30
KEYS = ["a", "b", "a", "a~1", "a", "c"]


def _write(path: Path, table: pa.Table, row_group: int = 2) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group)
    return str(path)


@pytest.fixture(scope="module")
def served_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Catalog, Server, httpx.Client, Path]]:
    """Good, hostile-footer (registered by an older version), duplicate-key and broken-manifest datasets, served
    under a memory cap with the flag database path taken by a directory."""
    root = tmp_path_factory.mktemp("integrity")
    catalog = Catalog(root / "catalog")
    catalog.register(
        "good", [_write(root / "good" / "part-0.parquet", pa.table({"id": ["x", "y"], "text": ["ex", "why"]}))], key="id", tag="v1"
    )
    bomb = Path(_write(root / "bomb" / "part-0.parquet", pa.table({"id": ["a", "b"], "text": ["alpha", "beta"]}), row_group=10))
    faults.rewrite_row_counts(bomb, file_rows=10**12, group_rows={0: 10**12}, columns_too=True)
    assert bomb.stat().st_size < 2600
    register_unchecked(catalog, "bomb", [str(bomb)])
    table = pa.table({"id": KEYS, "text": [f"record {i}" for i in range(len(KEYS))]})
    catalog.register("dups", [_write(root / "dups" / "part-0.parquet", table)], key="id", tag="v1", allow_duplicate_keys=True)
    broken = catalog.register("broken", [_write(root / "broken" / "part-0.parquet", pa.table({"id": ["z"]}))], key="id")
    manifest = Path(catalog.root) / "datasets" / "broken" / "versions" / f"{broken.id}.json"
    manifest.write_text(manifest.read_text()[:-20])
    catalog.create_run("broken-run", ReadPlan([Source("good@v1")], seed=0, global_batch_size=1, steps=1))
    run_manifest = Path(catalog.root) / "runs" / "broken-run" / "run.json"
    run_manifest.write_text(run_manifest.read_text()[:-20])
    (root / "pics" / "images").mkdir(parents=True)
    (root / "pics" / "images" / "a.png").write_bytes(media.small_png(side=16))
    kind = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    pics = pa.table({"id": ["a"], "image": pa.array([{"bytes": None, "path": "images/a.png"}], kind)})
    catalog.register("pics", [_write(root / "pics" / "part-0.parquet", pics)], key="id")
    (root / "flags-taken").mkdir()
    env = {"BATCHSCOPE_FLAGS_PATH": str(root / "flags-taken"), "MALLOC_ARENA_MAX": "2"}  # few malloc arenas: a cap that fits any machine
    with served(catalog.root, root / "logs", env=env, limits={resource.RLIMIT_AS: MEMORY_CAP}) as server:
        with httpx.Client(base_url=server.url, timeout=120, follow_redirects=True) as http:
            yield catalog, server, http, manifest


def _error(response: httpx.Response) -> str:
    body = response.json()
    assert body == {"ok": False, "error": body["error"], "status": response.status_code}
    return body["error"]


def test_a_trillion_row_footer_is_an_error_without_allocating_and_the_server_keeps_answering(served_catalog) -> None:
    catalog, server, http, _ = served_catalog
    version = catalog.resolve("bomb")
    for url in (urls.version("bomb", version), urls.sample("bomb", version, "a"), urls.media("bomb", version, "a", "text")):
        response = http.get(urls.api(url) if not url.startswith("/media/") else url, headers={"Accept": "application/json"})
        assert response.status_code == 500, response.text[:300]
        assert "decompression bomb" in response.text and "part-0.parquet" in response.text
    page = http.get(urls.version("bomb", version))
    assert page.status_code == 500 and BeautifulSoup(page.text, "html.parser").select_one(".message") is not None
    assert server.process.poll() is None
    assert http.get(urls.api(urls.sample("good", catalog.resolve("good"), "y"))).json()["fields"]["text"] == "why"
    assert "Traceback" not in server.logs() and "MemoryError" not in server.logs()


def test_every_duplicate_key_link_shows_its_own_record(served_catalog) -> None:
    catalog, _, http, _ = served_catalog
    listing = http.get(urls.api(urls.version("dups", catalog.resolve("dups")))).json()["listing"]["rows"]
    assert [row["key"] for row in listing] == ["a", "b", "a~2", "a~1", "a~3", "c"]
    assert len({row["url"] for row in listing}) == len(KEYS)
    for row in listing:
        shown = http.get(urls.api(row["url"])).json()
        assert shown["fields"]["text"] == f"record {row['index']}", row


def test_a_broken_manifest_is_one_clear_error_and_the_rest_of_the_catalog_renders(served_catalog) -> None:
    _, server, http, manifest = served_catalog
    version_id = manifest.name[: -len(".json")]
    answer = http.get(urls.api(urls.version("broken", version_id)))
    assert answer.status_code == 500
    message = _error(answer)
    assert message.startswith(f"{manifest}: dataset manifest is not valid JSON")
    listing = http.get(urls.api(urls.dataset("broken"))).json()  # the dataset page lists it with its error
    assert listing["versions"] == [] and listing["broken"] == [{"id": version_id, "error": message}]
    home = http.get(urls.home())
    assert home.status_code == 200
    dom = BeautifulSoup(home.text, "html.parser")
    assert str(manifest) in dom.get_text() and "good" in dom.get_text()
    assert "Traceback" not in server.logs() and "JSONDecodeError" not in server.logs()


def test_a_broken_run_manifest_is_one_clear_error_and_the_home_page_lists_it(served_catalog) -> None:
    catalog, server, http, _ = served_catalog
    manifest = Path(catalog.root) / "runs" / "broken-run" / "run.json"
    for url in (urls.run("broken-run"), urls.rank("broken-run", 0, 0)):
        answer = http.get(urls.api(url))
        assert answer.status_code == 500
        assert _error(answer).startswith(f"{manifest}: run manifest is not valid JSON")
    home = http.get(urls.home())
    assert home.status_code == 200 and f"{manifest}: run manifest is not valid JSON" in BeautifulSoup(home.text, "html.parser").get_text()
    assert "Traceback" not in server.logs() and "JSONDecodeError" not in server.logs()


def test_a_broken_flag_database_degrades_the_flag_panels_to_an_inline_error(served_catalog) -> None:
    catalog, _, http, _ = served_catalog
    home = BeautifulSoup(http.get(urls.home()).text, "html.parser")
    panel = home.select_one("#recent-flags .error-inline")
    assert panel is not None and "flags database" in panel.get_text() and "flags-taken" in panel.get_text()
    response = http.get(urls.sample("good", catalog.resolve("good"), "x"))
    assert response.status_code == 200
    form_error = BeautifulSoup(response.text, "html.parser").select_one("form .error-inline, .flag-form .error-inline, .error-inline")
    assert form_error is not None and "flags database" in form_error.get_text()
    flags = http.get(urls.api(urls.flags()))
    assert flags.status_code == 503 and "flags database" in _error(flags)
    assert json.loads(http.get(urls.api(urls.sample("good", catalog.resolve("good"), "x"))).text)["fields"]["text"] == "ex"


def test_media_rewritten_after_registration_is_refused_and_never_cached_as_immutable(served_catalog) -> None:
    catalog, _, http, _ = served_catalog
    url = urls.media("pics", catalog.resolve("pics"), "a", "image")
    first = http.get(url)
    assert first.status_code == 200 and first.content == media.small_png(side=16)
    assert "immutable" in first.headers["cache-control"]
    stored = Path(catalog.resolve("pics").shards[0].uri).parent / "images" / "a.png"
    stored.write_bytes(media.small_png(side=20))
    again = http.get(url)
    message = BeautifulSoup(again.text, "html.parser").select_one(".message").get_text()
    assert again.status_code == 500 and "changed after registration" in message and "images/a.png" in message
    assert "immutable" not in again.headers.get("cache-control", "")
    assert http.get(url, headers={"If-None-Match": first.headers["etag"]}).status_code == 500  # not a 304 for new bytes

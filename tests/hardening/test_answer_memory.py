"""Memory per request includes the answer: a sample whose text cell holds tens of megabytes is answered (page and
JSON twin) with the cell's beginning and a link to the whole value, which is served with ``Range`` from the decoded
row group; several such requests at once, against a real ``batchscope serve`` whose address space is capped
(``prlimit --as``), each grow the server by less than ``request_memory_bytes`` and together by no more than the
large-decode slots allow; a cell whose decoding needs more is refused with 413; the server keeps answering."""

from __future__ import annotations

import shutil
import threading
from typing import Iterator

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app import urls
from app.pages.row_sizes import RECORDS_FACTOR
from loaders import Catalog
from tests.corpus.server import Server, served
from tests.hardening.test_memory import status_kb

CELL = 48 << 20  # characters (and bytes) of each huge text cell
BUDGET = 256 << 20  # RECORDS_FACTOR x CELL fits; a cell twice as large does not
SLOTS = 2
CONCURRENT = 4
FIELD_BYTES = 1 << 20
ADDRESS_SPACE = 3 << 30
SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("ids", pa.list_(pa.int32()))])


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """Rows ``h0``..``h3`` with a ``CELL``-character text each, ``tokens`` with 300,000 ids, ``toolarge`` with a text
    needing more than the budget, and ``small``; one row group each (zstd: the file is a few hundred KB)."""
    root = tmp_path_factory.mktemp("answers")
    path = root / "huge.parquet"
    with pq.ParquetWriter(path, SCHEMA, compression="zstd", use_dictionary=False, write_statistics=False) as writer:
        rows = [(f"h{i}", chr(97 + i) * CELL, [i]) for i in range(CONCURRENT)]
        rows += [("tokens", "t", list(range(300_000))), ("toolarge", "z" * (CELL * 3 // 2), []), ("small", "tiny", [1, 2])]
        for key, text, ids in rows:
            writer.write_table(pa.table({"id": [key], "text": [text], "ids": [ids]}, schema=SCHEMA))
    catalog = Catalog(root / "catalog")
    catalog.register("huge", [str(path)], key="id", tag="v1")
    return catalog


@pytest.fixture(scope="module")
def server(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.fail("prlimit (util-linux) is needed to cap the server's memory")
    logs = tmp_path_factory.mktemp("answers-logs")
    env = {
        "BATCHSCOPE_WORKERS": "1",
        "BATCHSCOPE_REQUEST_MEMORY_BYTES": str(BUDGET),
        "BATCHSCOPE_DECODE_CONCURRENCY": str(SLOTS),
        "BATCHSCOPE_FIELD_BYTES": str(FIELD_BYTES),
        "BATCHSCOPE_REQUEST_THREADS": str(CONCURRENT),
        # decoded row groups are not kept between requests here, so what is measured is each request's own memory
        "BATCHSCOPE_ROW_GROUP_CACHE_BYTES": str(16 << 20),
        "BATCHSCOPE_FLAGS_PATH": str(logs / "f.sqlite"),
        "MALLOC_ARENA_MAX": "2",
    }
    with served(catalog.root, logs, env=env, wrapper=[prlimit, f"--as={ADDRESS_SPACE}"]) as running:
        yield running


def _sample(catalog: Catalog, key: str) -> str:
    return urls.api(urls.sample("huge", catalog.resolve("huge@v1").id, key))


def test_one_huge_cell_is_cut_in_the_answer_and_grows_the_server_by_less_than_the_budget(server: Server, catalog: Catalog) -> None:
    assert RECORDS_FACTOR * CELL <= BUDGET < RECORDS_FACTOR * CELL * 3 // 2
    version = catalog.resolve("huge@v1")
    with httpx.Client(base_url=server.url, timeout=300) as client:
        assert client.get(_sample(catalog, "small")).status_code == 200
        before = status_kb(server, "VmRSS") * 1024
        answer = client.get(_sample(catalog, "h0"))
        grown = status_kb(server, "VmHWM") * 1024 - before
        assert answer.status_code == 200 and len(answer.content) < 2 * FIELD_BYTES, (answer.status_code, len(answer.content))
        page = answer.json()
        assert page["fields"]["text"] == "a" * FIELD_BYTES
        cut = page["cut"]["text"]
        assert (cut["total"], cut["shown"], cut["unit"]) == (CELL, FIELD_BYTES, "characters")
        assert grown <= BUDGET, (grown, BUDGET)
        whole = cut["url"]
        assert whole == urls.media("huge", version, "h0", "text")
        part = client.get(whole, headers={"Range": f"bytes={CELL - 10}-"})
        assert (
            part.status_code == 206
            and part.content == b"a" * 10
            and part.headers["content-range"] == f"bytes {CELL - 10}-{CELL - 1}/{CELL}"
        )
        head = client.head(whole)
        assert head.status_code == 200 and head.headers["content-length"] == str(CELL) and head.content == b""
        tokens = client.get(_sample(catalog, "tokens")).json()
        assert len(tokens["fields"]["ids"]) == FIELD_BYTES // 8 and tokens["cut"]["ids"]["total"] == 300_000
        assert client.get(tokens["cut"]["ids"]["url"]).json() == list(range(300_000))
        html = client.get(urls.sample("huge", version, "h0"))
        assert html.status_code == 200 and len(html.content) < 400_000 and whole in html.text


def test_concurrent_huge_cells_stay_within_the_slots_and_too_large_is_413(server: Server, catalog: Catalog) -> None:
    with httpx.Client(base_url=server.url, timeout=300) as client:
        assert client.get(_sample(catalog, "small")).status_code == 200
        before = status_kb(server, "VmRSS") * 1024
        results: dict[str, httpx.Response | BaseException] = {}

        def fetch(key: str) -> None:
            try:
                with httpx.Client(base_url=server.url, timeout=300) as own:
                    results[key] = own.get(_sample(catalog, key))
            except BaseException as exc:  # noqa: BLE001 - reported below
                results[key] = exc

        threads = [threading.Thread(target=fetch, args=(f"h{i}",)) for i in range(CONCURRENT)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        for key, response in results.items():
            assert isinstance(response, httpx.Response) and response.status_code == 200, (key, response, server.logs()[-2000:])
            assert len(response.content) < 2 * FIELD_BYTES and response.json()["cut"]["text"]["total"] == CELL
        assert len(results) == CONCURRENT
        grown = status_kb(server, "VmHWM") * 1024 - before
        assert grown <= SLOTS * BUDGET, (grown, SLOTS * BUDGET)  # two decodes at a time, four answers small
        refused = client.get(_sample(catalog, "toolarge"))
        assert refused.status_code == 413 and "request_memory_bytes" in refused.json()["error"]
        assert client.get(urls.api(urls.home())).status_code == 200
        assert server.process.poll() is None

"""Decoding under a memory budget, against a real ``batchscope serve`` whose address space is capped (``prlimit --as``):
8 concurrent thumbnails of an 88-megapixel image, each asking a different size, are all answered while the server's
peak memory stays within its large-decode slots; an image whose pixels need more than a request may use is refused
with 413 before it is decoded; the server keeps answering throughout."""

from __future__ import annotations

import io
import shutil
import threading
from pathlib import Path
from typing import Iterator

import httpx
import pyarrow as pa
import pytest
from bs4 import BeautifulSoup
from PIL import Image, ImageDraw

from app import urls
from app.decode_budget import image_decode_bytes
from app.templating import human_bytes
from loaders import Catalog
from tests.conftest import write_parquet
from tests.corpus.server import Server, served

#: 88 megapixels, just under Pillow's decompression-bomb limit (89.5 MP).
WIDTH, HEIGHT = 10_800, 8_150
BUDGET = 400 << 20
SLOTS = 2
#: Address space the server may map: its own ~1.6 GB (Arrow's allocator reserves much of it up front), room for two
#: large decodes (0.35 GB each), not for eight.
ADDRESS_SPACE = 3 << 30
#: Thumbnail sizes asked for at once: each distinct, all made at one of the fixed sizes.
SIZES = (100, 200, 300, 400, 600, 900, 1500, 3000)


def flat_png(mode: str) -> bytes:
    """A mostly flat ``WIDTH`` x ``HEIGHT`` PNG (compresses to a few hundred KB, decodes to hundreds of MB)."""
    img = Image.new(mode, (WIDTH, HEIGHT), (40, 90, 160) if mode == "RGB" else 20_000)
    ImageDraw.Draw(img).rectangle((100, 100, 900, 700), fill=(250, 200, 10) if mode == "RGB" else 60_000)
    buffer = io.BytesIO()
    img.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    root = tmp_path_factory.mktemp("memory")
    rows = {"huge": flat_png("RGB"), "deep": flat_png("I;16"), "small": _small_png()}
    table = pa.table({"id": list(rows), "image": pa.array(list(rows.values()), pa.binary())})
    catalog = Catalog(root / "catalog")
    catalog.register("big", write_parquet(table, root / "src", row_group=1), key="id", tag="v1", kinds={"image": "image"})
    return catalog


def _small_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), (1, 2, 3)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def server(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.fail("prlimit (util-linux) is needed to cap the server's memory")
    env = {
        "BATCHSCOPE_WORKERS": "1",
        "BATCHSCOPE_REQUEST_MEMORY_BYTES": str(BUDGET),
        "BATCHSCOPE_DECODE_CONCURRENCY": str(SLOTS),
        "MALLOC_ARENA_MAX": "2",  # glibc reserves 64 MB of address space per thread arena otherwise, which RLIMIT_AS counts
    }
    logs = tmp_path_factory.mktemp("memory-logs")
    with served(
        catalog.root, logs, env={**env, "BATCHSCOPE_FLAGS_PATH": str(logs / "f.sqlite")}, wrapper=[prlimit, f"--as={ADDRESS_SPACE}"]
    ) as running:
        yield running


def status_kb(server: Server, field: str) -> int:
    """A memory figure of the server process (``VmRSS``, ``VmHWM``...) in kB, from /proc."""
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{server.process.pid}/status")


def test_concurrent_thumbnails_of_a_huge_image_stay_within_the_decode_slots(server: Server, catalog: Catalog) -> None:
    version = catalog.resolve("big@v1")
    with httpx.Client(base_url=server.url, timeout=300) as client:
        assert client.get(urls.thumbnail("big", version, "small", "image")).status_code == 200
        before = status_kb(server, "VmRSS") * 1024
        results: dict[int, httpx.Response | BaseException] = {}

        def fetch(size: int) -> None:
            try:
                with httpx.Client(base_url=server.url, timeout=300) as own:
                    results[size] = own.get(urls.thumbnail("big", version, "huge", "image", size=size))
            except BaseException as exc:  # noqa: BLE001 - reported below
                results[size] = exc

        threads = [threading.Thread(target=fetch, args=(size,)) for size in SIZES]
        for thread in threads:
            thread.start()
        assert client.get(urls.api(urls.home())).status_code == 200  # answering while the decodes run
        for thread in threads:
            thread.join(300)
        for size, response in results.items():
            assert isinstance(response, httpx.Response) and response.status_code == 200, (size, response, server.logs()[-2000:])
            made = Image.open(io.BytesIO(response.content))
            assert max(made.size) in (128, 256, 512, 1024, 2048) and max(made.size) >= min(size, 2048), (size, made.size)
        assert len(results) == len(SIZES)
        assert server.process.poll() is None
        peak = status_kb(server, "VmHWM") * 1024
        one_decode = image_decode_bytes(WIDTH, HEIGHT, "RGB")
        assert peak - before <= SLOTS * one_decode * 1.5, (peak, before, one_decode)  # two decodes at a time, not eight
        assert client.get(urls.api(urls.home())).status_code == 200


def test_running_out_of_memory_is_a_503_and_the_server_keeps_answering(catalog: Catalog, tmp_path: Path) -> None:
    """With as many decode slots as requests, eight 88-megapixel decodes at once do not fit the capped address space:
    the requests that run out of memory are answered 503 (never 500), and the server goes on answering."""
    prlimit = shutil.which("prlimit")
    assert prlimit is not None
    env = {
        "BATCHSCOPE_WORKERS": "1",
        "BATCHSCOPE_REQUEST_MEMORY_BYTES": str(BUDGET),
        "BATCHSCOPE_DECODE_CONCURRENCY": str(len(SIZES)),
        "BATCHSCOPE_FLAGS_PATH": str(tmp_path / "f.sqlite"),
        "MALLOC_ARENA_MAX": "2",
    }
    version = catalog.resolve("big@v1")
    with served(catalog.root, tmp_path / "logs", env=env, wrapper=[prlimit, f"--as={ADDRESS_SPACE}"]) as server:
        statuses: dict[int, int] = {}

        def fetch(size: int) -> None:
            with httpx.Client(base_url=server.url, timeout=300) as own:
                statuses[size] = own.get(urls.thumbnail("big", version, "huge", "image", size=size)).status_code

        threads = [threading.Thread(target=fetch, args=(size,)) for size in SIZES]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert len(statuses) == len(SIZES) and set(statuses.values()) <= {200, 503}, statuses
        with httpx.Client(base_url=server.url, timeout=300) as client:
            assert client.get(urls.api(urls.home())).status_code == 200
            assert client.get(urls.thumbnail("big", version, "small", "image")).status_code == 200
        assert server.process.poll() is None


def test_an_image_over_the_budget_is_refused_before_it_is_decoded(server: Server, catalog: Catalog) -> None:
    version = catalog.resolve("big@v1")
    with httpx.Client(base_url=server.url, timeout=300) as client:
        for url, needed in (
            # 16-bit: 2 bytes a pixel, plus the 8-bit copy shown
            (urls.thumbnail("big", version, "deep", "image"), image_decode_bytes(WIDTH, HEIGHT, "I;16")),
            # full size, plus the copy the box is drawn on
            (
                urls.boxed("big", version, "huge", "image", (10, 10, 500, 500)),
                image_decode_bytes(WIDTH, HEIGHT, "RGB") + WIDTH * HEIGHT * 4,
            ),
        ):
            assert needed > BUDGET
            refused = client.get(url)
            assert refused.status_code == 413, (url, refused.text[:300])
            assert f"needs about {human_bytes(needed)} to decode" in refused.text and "request_memory_bytes" in refused.text
            assert "column image" in refused.text  # names where the image is
        assert client.get(urls.thumbnail("big", version, "small", "image", size=64)).status_code == 200
        assert server.process.poll() is None


# -- pages of rows ------------------------------------------------------------------------------------
WIDE_ROWS, WIDE_CHARS = 40, 1_000_000


def test_a_page_whose_row_groups_need_more_than_the_budget_is_refused(tmp_path: Path) -> None:
    """Forty 1 MB texts in one row group (a few KB on disk): any page or sample of it decodes all 40 MB, so under a
    16 MiB budget it is refused with 413 before anything is read, while small datasets are served as usual."""
    catalog = Catalog(tmp_path / "catalog")
    wide = pa.table({"id": [f"w{i}" for i in range(WIDE_ROWS)], "text": [chr(97 + i % 26) * WIDE_CHARS for i in range(WIDE_ROWS)]})
    catalog.register("wide", write_parquet(wide, tmp_path / "wide", row_group=WIDE_ROWS), key="id", tag="v1")
    narrow = pa.table({"id": ["n0", "n1"], "text": ["small", "rows"]})
    catalog.register("narrow", write_parquet(narrow, tmp_path / "narrow", row_group=2), key="id", tag="v1")
    env = {"BATCHSCOPE_WORKERS": "1", "BATCHSCOPE_REQUEST_MEMORY_BYTES": str(16 << 20), "BATCHSCOPE_FLAGS_PATH": str(tmp_path / "f.sqlite")}
    wide_id, narrow_id = catalog.resolve("wide@v1").id, catalog.resolve("narrow@v1").id
    catalog.resolve("wide@v1").find("w0")  # the key index exists (building it reads the key column of every row group)
    with served(catalog.root, tmp_path / "logs", env=env) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        for url in (
            urls.version("wide", wide_id),
            urls.api(urls.version("wide", wide_id, start=20)),
            urls.version("wide", wide_id, q="zzz"),
            urls.sample("wide", wide_id, "w3"),
        ):
            refused = client.get(url)
            assert refused.status_code == 413, (url, refused.status_code)
            message = (
                BeautifulSoup(refused.text, "html.parser").select_one(".message").get_text()
                if "html" in refused.headers["content-type"]
                else refused.json()["error"]
            )
            assert "needs about" in message and "over the 16.0 MB one request may use" in message and "wide@" in message, message
        assert client.get(urls.version("narrow", narrow_id)).status_code == 200
        assert client.get(urls.sample("narrow", narrow_id, "n1")).status_code == 200
        assert status_kb(server, "VmHWM") < 400 * 1024  # nothing of the 40 MB row group was decoded
        assert server.process.poll() is None

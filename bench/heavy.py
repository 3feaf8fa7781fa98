"""The heavy client of the load benchmark: the most expensive pages of the demo workspace, found by measuring them, and
one client looping over them beside the ordinary ones.

Candidates (each a cycle of URLs, so caches do not make them cheap): the
sample page (JSON twin) of rows whose text cell holds ``HUGE_CHARS``
characters (``huge-cells``, added to the workspace: more of them than the
row-group cache holds, asked for in turn), and the step/rank pages of the
demo's runs compared ``?against=`` the second version of their sources. Each is
timed cold on an idle server; the slowest is the heavy page. Its peak memory
per request is measured alone on a one-process server (``VmHWM`` growth).

>>> cycle_urls(["/a", "/b"], 5)
['/a', '/b', '/a', '/b', '/a']
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx

from .load import REQUEST_TIMEOUT, Sample, _connect, request_once

HUGE_DATASET = "huge-cells"  # left out of the ordinary clients' URLs (``bench.load.NOT_ORDINARY``)
#: Characters of each huge text cell, and how many rows hold one (together more than the default row-group cache).
HUGE_CHARS = 80 << 20
HUGE_ROWS = 16


def cycle_urls(urls: list[str], n: int) -> list[str]:
    """The first ``n`` URLs of ``urls`` repeated in order."""
    return list(itertools.islice(itertools.cycle(urls), n))


def ensure_huge_dataset(root: str) -> None:
    """Register ``huge-cells`` in the catalog at ``root`` (once): ``HUGE_ROWS`` rows of ``HUGE_CHARS`` characters, one
    row group each, zstd (a few MB on disk)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from loaders import Catalog

    catalog = Catalog(root)
    if HUGE_DATASET in catalog.datasets():
        return
    directory = Path(root) / "data" / HUGE_DATASET
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "cells.parquet"
    schema = pa.schema([("id", pa.string()), ("text", pa.string())])
    with pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=False, write_statistics=False) as writer:
        for row in range(HUGE_ROWS):
            writer.write_table(pa.table({"id": [f"cell-{row}"], "text": [chr(97 + row % 26) * HUGE_CHARS]}, schema=schema))
    catalog.register(HUGE_DATASET, [str(path)], key="id", tag="v1")


def candidates(root: str) -> dict[str, list[str]]:
    """The heavy page candidates over the workspace at ``root``: name → URLs to cycle through."""
    from app import urls
    from loaders import Catalog

    catalog = Catalog(root)
    version = catalog.resolve(HUGE_DATASET)
    found = {"huge-cell sample JSON": [urls.api(urls.sample(HUGE_DATASET, version, f"cell-{i}")) for i in range(HUGE_ROWS)]}
    for name in catalog.runs():
        run = catalog.run(name)
        pinned = getattr(run, "sources", None)  # native runs pin their sources; other kinds are not compared
        if not pinned:
            continue
        source = pinned[0]
        others = [v.id for v in catalog.versions(source.dataset) if v.id != source.version]
        if not others:
            continue
        against = urllib.parse.quote(f"{source.dataset}@{others[-1]}", safe="")
        steps = range(min(run.total_steps, 24))
        found[f"{name} rank page ?against= another {source.dataset}"] = [f"{urls.rank(name, step, 0)}?against={against}" for step in steps]
    return found


def time_cold(base_url: str, urls: list[str], *, times: int = 3) -> float:
    """Median seconds of ``times`` requests to distinct URLs of ``urls`` (each new to the server)."""
    seconds = []
    with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT * 5) as client:
        for url in urls[:times]:
            start = time.perf_counter()
            response = client.get(url)
            seconds.append(time.perf_counter() - start)
            if response.status_code != 200:
                raise RuntimeError(f"heavy candidate {url} answered {response.status_code}: {response.text[:300]}")
    return statistics.median(seconds)


def status_kb(pid: int, field: str) -> int:
    """A memory figure of process ``pid`` (``VmRSS``, ``VmHWM``) in kB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def peak_growth(base_url: str, pid: int, url: str, warm: str) -> dict[str, Any]:
    """Peak memory growth (bytes) of the one-process server ``pid`` while answering ``url`` alone (after ``warm``)."""
    with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT * 5) as client:
        client.get(warm)
        before = status_kb(pid, "VmRSS") * 1024
        response = client.get(url)
    return {
        "url": url,
        "status": response.status_code,
        "answer_bytes": len(response.content),
        "peak_growth": status_kb(pid, "VmHWM") * 1024 - before,
    }


class HeavyClient:
    """One client looping over ``urls`` in order on a keep-alive connection until stopped; its requests' samples."""

    def __init__(self, base_url: str, urls: list[str]) -> None:
        self.base_url, self.urls = base_url, urls
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "HeavyClient":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(REQUEST_TIMEOUT * 5)

    def _loop(self) -> None:
        connection = _connect(self.base_url)
        try:
            for url in itertools.cycle(self.urls):
                if self._stop.is_set():
                    return
                sample, connection = request_once(connection, self.base_url, "heavy", url)
                self.samples.append(sample)
        finally:
            connection.close()

"""A bounded HTTP load generator for the inspector: client threads on 127.0.0.1 mixing route kinds, latency per kind.

Each route kind (step and rank pages, thumbnails, video frames, dataset,
version and sample pages) is a list of URLs over a real catalog; every client
thread picks a kind by weight and one of its URLs at random, GETs it, and
records the latency and the status. Two URL sets: the *hot* set (a few dozen
URLs per kind, as a team looking at the same links asks for) and the
*uniform* set (every step, rank, key, listing page, thumbnail and frame of the
catalog, so nearly every request is a cold page). A kind whose URLs the
server does not route (404) is skipped with a note, so the mix works while
pages are still being built.

>>> percentile([1.0, 2.0, 3.0, 4.0], 50)
2.5
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import httpx

#: Default weights of the route kinds in the mix (relative; a kind with weight 0 is not requested).
DEFAULT_MIX: dict[str, float] = {"rank": 3, "step": 2, "thumbnail": 3, "frame": 1, "dataset": 1, "version": 1, "sample": 1}
URLS_PER_KIND = 40
REQUEST_TIMEOUT = 60.0


@dataclass(frozen=True)
class RouteKind:
    """One kind of page in the mix: its name, its URLs and its weight."""

    name: str
    urls: tuple[str, ...]
    weight: float


@dataclass
class Sample:
    """One request: its kind, latency in seconds, status (0 when it failed without one) and error text."""

    kind: str
    seconds: float
    status: int
    error: str = ""


@dataclass
class Plan:
    """The kinds to request and what was left out, with why."""

    kinds: list[RouteKind]
    notes: list[str] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation between closest ranks)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = int(position), min(int(position) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# -- which URLs ---------------------------------------------------------------------------------------
#: Datasets the mix never asks for (the heavy client's pages, ``bench.heavy``).
NOT_ORDINARY = frozenset({"huge-cells"})


def candidate_urls(root: str, *, per_kind: int = URLS_PER_KIND, seed: int = 0) -> dict[str, list[str]]:
    """URLs of every route kind over the catalog at ``root`` (thumbnails are found later, on image listing pages)."""
    from app import urls
    from loaders import Catalog

    rng = random.Random(seed)
    catalog = Catalog(root)
    found: dict[str, list[str]] = {"dataset": [], "version": [], "sample": [], "step": [], "rank": [], "image-pages": []}
    for name in catalog.datasets():
        if name in NOT_ORDINARY:
            continue
        found["dataset"].append(urls.dataset(name))
        version = catalog.resolve(name)
        for start in sorted({0, version.rows // 2, max(0, version.rows - 50)}):
            found["version"].append(urls.version(name, version, start=start or None))
            if "image" in version.kinds.values():
                found["image-pages"].append(found["version"][-1])
        for index in rng.sample(range(version.rows), min(version.rows, 8)):
            key = version.key_of(version.record(index))
            found["sample"].append(urls.sample(name, version, key))
    for name in catalog.runs():
        run = catalog.run(name)
        for step in rng.sample(range(run.total_steps), min(run.total_steps, per_kind // 2)):
            found["step"].append(urls.step(name, step))
            world = run.world_size_at(step)
            found["rank"].append(urls.rank(name, step, rng.randrange(world)))
    return {
        kind: values[:per_kind] if kind != "sample" else rng.sample(values, min(len(values), per_kind)) for kind, values in found.items()
    }


def uniform_urls(root: str, *, page_size: int = 50) -> dict[str, list[str]]:
    """Every URL of each route kind over the catalog at ``root``: all steps and ranks of every run, every key of every
    dataset's latest version (sample pages; thumbnails of image and video fields), every listing page, every video frame."""
    from app import urls
    from loaders import Catalog
    from loaders.media import probe, video_source

    catalog = Catalog(root)
    found: dict[str, list[str]] = {"dataset": [], "version": [], "sample": [], "step": [], "rank": [], "thumbnail": [], "frame": []}
    for name in catalog.datasets():
        if name in NOT_ORDINARY:
            continue
        found["dataset"].append(urls.dataset(name))
        version = catalog.resolve(name)
        found["version"].extend(urls.version(name, version, start=start or None) for start in range(0, version.rows, page_size))
        media = [column for column, kind in version.kinds.items() if kind in ("image", "video")]
        for index in range(version.rows):
            record = version.record(index)
            key = version.key_of(record)
            found["sample"].append(urls.sample(name, version, key))
            for column in media:
                found["thumbnail"].append(urls.thumbnail(name, version, key, column))
                if version.kinds[column] == "video":
                    shard, row = version.locate(index)
                    where = version.where(shard, row)
                    clip = probe(video_source(record[column], shard_uri=version.shards[shard].uri, where=where), where=where)
                    found["frame"].extend(urls.frame(name, version, key, column, frame) for frame in range(clip.frame_count))
    for name in catalog.runs():
        run = catalog.run(name)
        for step in range(run.total_steps):
            found["step"].append(urls.step(name, step))
            found["rank"].extend(urls.rank(name, step, rank) for rank in range(run.world_size_at(step)))
    return found


def thumbnail_urls(client: httpx.Client, pages: list[str], *, limit: int = URLS_PER_KIND) -> list[str]:
    """The thumbnails that listing pages of image datasets show (``<img src>`` asking for a thumbnail)."""
    found: list[str] = []
    for page in pages:
        response = client.get(page)
        if response.status_code != 200:
            continue
        for src in re.findall(r'<img[^>]+src="([^"]+)"', response.text):
            src = src.replace("&amp;", "&")
            if "thumb" in src and src.startswith("/") and src not in found:
                found.append(src)
        if len(found) >= limit:
            break
    return found[:limit]


def plan_routes(client: httpx.Client, root: str, *, mix: Mapping[str, float] = DEFAULT_MIX, seed: int = 0, uniform: bool = False) -> Plan:
    """The kinds of ``mix`` that have URLs and that the server routes; the others are noted and left out.

    ``uniform``: every URL of the catalog (``uniform_urls``) instead of the hot set.
    """
    everything = uniform_urls(root)
    if uniform:
        candidates = everything
    else:
        candidates = candidate_urls(root, seed=seed)
        candidates["thumbnail"] = thumbnail_urls(client, candidates.pop("image-pages"))
        frames = everything["frame"]
        candidates["frame"] = random.Random(seed).sample(frames, min(len(frames), URLS_PER_KIND))
    plan = Plan(kinds=[])
    for kind, weight in mix.items():
        if weight <= 0:
            continue
        if kind not in candidates:
            plan.notes.append(f"{kind}: unknown route kind (known: {', '.join(sorted(candidates))})")
            continue
        found = candidates[kind]
        if not found:
            plan.notes.append(f"{kind}: skipped, the catalog or its pages offer no such URL")
            continue
        status = client.get(found[0]).status_code
        if status == 404:
            plan.notes.append(f"{kind}: skipped, the server answers 404 for {found[0]} (route not built yet?)")
            continue
        plan.kinds.append(RouteKind(kind, tuple(found), float(weight)))
    return plan


# -- the load -------------------------------------------------------------------------------------------
def _connect(base_url: str) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(base_url)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=REQUEST_TIMEOUT)


def request_once(connection: http.client.HTTPConnection, base_url: str, kind: str, url: str) -> tuple[Sample, http.client.HTTPConnection]:
    """GET ``url`` on ``connection``: the request's sample, and the connection to use next (a new one after a failure)."""
    start = time.perf_counter()
    try:
        connection.request("GET", url)
        response = connection.getresponse()
        response.read()
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        return Sample(kind, time.perf_counter() - start, 0, f"{type(exc).__name__} {url}: {exc}"), _connect(base_url)
    status = response.status
    return Sample(kind, time.perf_counter() - start, status, "" if status < 400 else f"{status} {url}"), connection


def _client_loop(base_url: str, kinds: list[RouteKind], deadline: float, seed: int, out: list[Sample]) -> None:
    """One client: a keep-alive connection (stdlib ``http.client``, a fraction of httpx's CPU per request, so the
    load generator takes little of the cores it shares with the server) asking for the mix until ``deadline``."""
    rng = random.Random(seed)
    weights = [k.weight for k in kinds]
    connection = _connect(base_url)
    try:
        while time.monotonic() < deadline:
            kind = rng.choices(kinds, weights)[0]
            sample, connection = request_once(connection, base_url, kind.name, rng.choice(kind.urls))
            out.append(sample)
    finally:
        connection.close()


def run_load(base_url: str, kinds: list[RouteKind], *, clients: int, seconds: float, seed: int = 0) -> list[Sample]:
    """``clients`` threads each requesting the mix until ``seconds`` have passed; every request's sample."""
    if not kinds:
        raise ValueError("no route kinds to request")
    deadline = time.monotonic() + seconds
    per_thread: list[list[Sample]] = [[] for _ in range(clients)]
    threads = [
        threading.Thread(target=_client_loop, args=(base_url, kinds, deadline, seed + i, per_thread[i]), daemon=True)
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + REQUEST_TIMEOUT + 10)
    return [sample for samples in per_thread for sample in samples]


def process_tree_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) used so far by process ``pid`` and every live descendant, from ``/proc``; None
    where there is no ``/proc`` (not Linux) or ``pid`` is gone.

    >>> process_tree_cpu(os.getpid()) is None or process_tree_cpu(os.getpid()) > 0
    True
    """
    proc = Path("/proc")
    if not (proc / str(pid)).is_dir():
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, cpu seconds)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ..., utime (12), stime (13)
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    if pid not in stats:
        return None
    children: dict[int, list[int]] = {}
    for child, (parent, _) in stats.items():
        children.setdefault(parent, []).append(child)
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += stats[current][1]
        todo.extend(children.get(current, ()))
    return total


@dataclass
class Phase:
    """One timed load: every request's sample, and the CPU the server (its process tree) and this process used."""

    samples: list[Sample]
    seconds: float
    server_cpu_seconds: float | None
    client_cpu_seconds: float

    @classmethod
    def combined(cls, phases: list["Phase"]) -> "Phase":
        """Several phases as one: their samples, seconds and CPU added up (CPU unknown if unknown in any)."""
        servers = [p.server_cpu_seconds for p in phases]
        return cls(
            samples=[sample for p in phases for sample in p.samples],
            seconds=sum(p.seconds for p in phases),
            server_cpu_seconds=None if any(s is None for s in servers) else sum(s for s in servers if s is not None),
            client_cpu_seconds=sum(p.client_cpu_seconds for p in phases),
        )

    def cpu(self) -> dict[str, float | None]:
        """Cores the server kept busy, and server and client CPU milliseconds per request."""
        requests = max(1, len(self.samples))
        server = self.server_cpu_seconds
        return {
            "server_cores_busy": None if server is None else round(server / self.seconds, 2),
            "server_cpu_ms_per_request": None if server is None else round(server / requests * 1e3, 2),
            "client_cpu_ms_per_request": round(self.client_cpu_seconds / requests * 1e3, 2),
        }


def timed_load(base_url: str, kinds: list[RouteKind], *, clients: int, seconds: float, seed: int, server_pid: int | None) -> Phase:
    """``run_load``, with the CPU the server process tree (``server_pid``) and this process used meanwhile."""
    server_before = process_tree_cpu(server_pid) if server_pid else None
    client_before, start = time.process_time(), time.monotonic()
    samples = run_load(base_url, kinds, clients=clients, seconds=seconds, seed=seed)
    elapsed = time.monotonic() - start
    client = time.process_time() - client_before
    server_after = process_tree_cpu(server_pid) if server_pid else None
    server = None if server_before is None or server_after is None else server_after - server_before
    return Phase(samples, elapsed, server, client)


def summarize(samples: list[Sample], seconds: float) -> dict[str, Any]:
    """Per route kind and overall: requests, requests per second, p50/p99/max latency (ms), errors and a few examples."""

    def stats(group: list[Sample]) -> dict[str, Any]:
        times = [s.seconds * 1e3 for s in group]
        errors = [s for s in group if s.error]
        return {
            "requests": len(group),
            "per_second": round(len(group) / seconds, 2),
            "p50_ms": round(percentile(times, 50), 2) if times else None,
            "p99_ms": round(percentile(times, 99), 2) if times else None,
            "max_ms": round(max(times), 2) if times else None,
            "errors": len(errors),
            "error_examples": sorted({e.error for e in errors})[:5],
        }

    kinds = sorted({s.kind for s in samples})
    return {"overall": stats(samples), "by_kind": {kind: stats([s for s in samples if s.kind == kind]) for kind in kinds}}


# -- the server -----------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Served:
    """A running ``batchscope serve``: its base URL and process id (the parent of its worker processes)."""

    base_url: str
    pid: int


@contextlib.contextmanager
def serving(root: str | Path, logs: Path, *, timeout: float = 120.0, workers: int = 1, threads: int = 0) -> Iterator[Served]:
    """``batchscope serve`` (``workers`` processes, ``threads`` request threads each; 0: the server's default) over
    ``root`` on 127.0.0.1 until the block ends; yields its base URL and process id."""
    script = shutil.which("batchscope", path=str(Path(sys.executable).parent)) or "batchscope"
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHSCOPE_")}
    env["BATCHSCOPE_FLAGS_PATH"] = str(logs / "flags.sqlite")
    env["BATCHSCOPE_WORKERS"] = str(workers)
    if threads:
        env["BATCHSCOPE_REQUEST_THREADS"] = str(threads)
    with open(logs / "serve.log", "wb") as log:
        process = subprocess.Popen(
            [script, "serve", "--root", str(root), "--host", "127.0.0.1", "--port", str(port)], stdout=log, stderr=log, env=env
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the inspector exited with {process.returncode}: {(logs / 'serve.log').read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the inspector did not listen on port {port} within {timeout} s")
            time.sleep(0.1)
        yield Served(f"http://127.0.0.1:{port}", process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

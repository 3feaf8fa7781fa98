"""Load benchmark: 32 concurrent clients on a real ``batchscope serve`` over the demo workspace, against 1 client.

The mix (``bench.load.DEFAULT_MIX``) is step and rank pages, thumbnails, video
frames, and dataset, version and sample pages; kinds the server does not
route yet are skipped with a note. Two URL sets are timed: the hot set (a
few dozen URLs per kind) and the uniform set (every step, rank, key, listing
page, thumbnail and frame of the demo). Each set is first requested untimed by
32 clients for half a phase, so every worker process is warm; then 1 client
and 32 clients are timed for 60 s each (10 s in quick mode) on 127.0.0.1,
alternating in slices so that drift over minutes (caches filling, other jobs
on the machine) weighs on both alike; a slice's rate counts the requests it
finished over its whole wall time, the wait for the last ones included. The clients share
the machine's cores with the server, as they would in a team sharing one box;
each phase records the CPU the server and the clients used, so a reader can
tell a server that leaves cores idle from a machine with none left. Goals: no
errors, p99 <= 1 s with 32 clients, and 32 clients served at least twice as
many requests per second as 1 client, for both URL sets.

A third case puts one *heavy* client beside the ordinary ones: it loops over
the most expensive page of the workspace (``bench.heavy``: measured among huge
text cells and ``?against=`` comparisons), while the ordinary clients draw
from the uniform set; slices with and without it alternate. Goals: the
ordinary clients keep p99 <= 1 s and at least 0.8 times their throughput
without the heavy client, and one heavy request alone grows a one-process
server by no more than ``request_memory_bytes``.

The mix can be changed without code: ``BENCH_LOAD_MIX="rank=1,thumbnail=1"``
(kinds: rank, step, thumbnail, frame, dataset, version, sample).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from . import harness
from .heavy import HeavyClient, candidates, cycle_urls, ensure_huge_dataset, peak_growth, time_cold
from .load import DEFAULT_MIX, Phase, Served, plan_routes, run_load, serving, summarize, timed_load

NAME = "load"
CLIENTS = 32
FULL_SECONDS = 60.0
QUICK_SECONDS = 10.0
#: Slices each timed load is cut into, alternating with the other (full, quick).
FULL_ROUNDS, QUICK_ROUNDS = 6, 2
P99_GOAL_MS = 1000.0
THROUGHPUT_GOAL = 2.0
#: The ordinary clients' throughput beside the heavy client, at least this share of theirs without it.
HEAVY_THROUGHPUT_GOAL = 0.8


def parse_mix(text: str) -> dict[str, float]:
    """``"rank=3,thumbnail=1"`` → ``{"rank": 3.0, "thumbnail": 1.0}``.

    >>> parse_mix("rank=3, step=0.5")
    {'rank': 3.0, 'step': 0.5}
    """
    mix = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, sep, weight = item.partition("=")
        if not sep:
            raise ValueError(f"BENCH_LOAD_MIX item {item!r} is not KIND=WEIGHT")
        mix[kind.strip()] = float(weight)
    return mix


def _case(
    served: Served, client: httpx.Client, root: Path, *, uniform: bool, mix: dict[str, float], clients: int, seconds: float, rounds: int
) -> dict[str, Any]:
    """One URL set (hot or uniform): warm every worker, then 1 client and ``clients`` clients for ``seconds`` each,
    interleaved in ``rounds`` slices.

    The warm-up (``clients`` clients for half of ``seconds``, untimed) reaches every worker process, so no timed
    phase pays another's first imports and first reads (one client alone reaches a single worker: its connection
    stays there). The two loads then alternate in slices, in the order 1, N, N, 1, 1, N, ..., so caches still
    filling and other jobs on the machine, which drift over minutes, weigh on both alike.
    """
    plan = plan_routes(client, str(root), mix=mix, uniform=uniform)
    for kind in plan.kinds:  # first request of each URL kind
        client.get(kind.urls[0])
    run_load(served.base_url, plan.kinds, clients=clients, seconds=seconds / 2, seed=0)
    slices: dict[int, list[Phase]] = {1: [], clients: []}
    for round_ in range(rounds):
        for n in (1, clients) if round_ % 2 == 0 else (clients, 1):
            seed = 1000 * n + round_
            slices[n].append(timed_load(served.base_url, plan.kinds, clients=n, seconds=seconds / rounds, seed=seed, server_pid=served.pid))
    one, loaded = (Phase.combined(slices[n]) for n in (1, clients))
    return {
        "case": "uniform" if uniform else "hot",
        "urls": {k.name: len(k.urls) for k in plan.kinds},
        "notes": plan.notes,
        "mix": ", ".join(f"{k.name}={k.weight:g} ({len(k.urls)} URLs)" for k in plan.kinds),
        "one_client": summarize(one.samples, one.seconds) | {"cpu": one.cpu(), "per_second_by_slice": _rates(slices[1])},
        "loaded": summarize(loaded.samples, loaded.seconds) | {"cpu": loaded.cpu(), "per_second_by_slice": _rates(slices[clients])},
    }


def _heavy_case(served: Served, client: httpx.Client, root: Path, *, clients: int, seconds: float, rounds: int) -> dict[str, Any]:
    """The uniform set for ``clients`` ordinary clients, in slices alone and beside one heavy client looping over the
    slowest candidate page (each candidate timed cold first)."""
    pages = candidates(str(root))
    cold = {name: round(time_cold(served.base_url, urls) * 1e3, 1) for name, urls in pages.items()}
    heaviest = max(cold, key=lambda name: cold[name])
    plan = plan_routes(client, str(root), mix=DEFAULT_MIX, uniform=True)
    run_load(served.base_url, plan.kinds, clients=clients, seconds=seconds / 2, seed=0)
    alone: list[Phase] = []
    beside: list[Phase] = []
    heavy_samples = []
    for round_ in range(rounds):
        for with_heavy in (False, True) if round_ % 2 == 0 else (True, False):
            seed = 7000 + 10 * round_ + with_heavy
            if not with_heavy:
                alone.append(
                    timed_load(served.base_url, plan.kinds, clients=clients, seconds=seconds / rounds, seed=seed, server_pid=served.pid)
                )
                continue
            with HeavyClient(served.base_url, cycle_urls(pages[heaviest], 10_000)) as heavy:
                beside.append(
                    timed_load(served.base_url, plan.kinds, clients=clients, seconds=seconds / rounds, seed=seed, server_pid=served.pid)
                )
            heavy_samples.extend(heavy.samples)
    one, loaded = Phase.combined(alone), Phase.combined(beside)
    return {
        "case": "heavy",
        "cold_ms_by_candidate": cold,
        "heavy_page": heaviest,
        "ordinary_alone": summarize(one.samples, one.seconds) | {"cpu": one.cpu()},
        "ordinary_beside_heavy": summarize(loaded.samples, loaded.seconds) | {"cpu": loaded.cpu()},
        "heavy_client": summarize(heavy_samples, loaded.seconds)["overall"],
        "urls": pages[heaviest][:3],
    }


def _peak_per_request(root: Path, logs: Path, urls: list[str]) -> dict[str, Any]:
    """The heavy page once, alone, on a fresh one-process server (warmed with the home page): its peak memory growth."""
    from app import urls as app_urls
    from app.settings import Settings

    with serving(root, logs, workers=1) as served:
        found = peak_growth(served.base_url, served.pid, urls[-1], app_urls.api(app_urls.home()))
    return found | {"budget": Settings().request_memory_bytes}


def _rates(phases: list[Phase]) -> list[float]:
    return [round(len(p.samples) / p.seconds, 1) for p in phases]


def _ratios(case: dict[str, Any], clients: int) -> dict[str, Any]:
    name, one, loaded = case["case"], case["one_client"], case["loaded"]
    ratios = {
        f"{name}_p99_{clients}_over_1": harness.ratio(loaded["overall"]["p99_ms"], one["overall"]["p99_ms"]),
        f"{name}_p50_{clients}_over_1": harness.ratio(loaded["overall"]["p50_ms"], one["overall"]["p50_ms"]),
        f"{name}_throughput_{clients}_over_1": harness.ratio(loaded["overall"]["per_second"], one["overall"]["per_second"]),
        f"{name}_server_cores_busy_{clients}_over_1": harness.ratio(loaded["cpu"]["server_cores_busy"], one["cpu"]["server_cores_busy"]),
        f"{name}_server_cpu_per_request_{clients}_over_1": harness.ratio(
            loaded["cpu"]["server_cpu_ms_per_request"], one["cpu"]["server_cpu_ms_per_request"]
        ),
    }
    cpu = loaded["cpu"]
    if cpu["server_cpu_ms_per_request"] is not None and one["overall"]["per_second"]:
        # The most that ``clients`` clients could gain: every core busy at the loaded CPU cost of a request.
        per_request = (cpu["server_cpu_ms_per_request"] + cpu["client_cpu_ms_per_request"]) / 1e3
        ratios[f"{name}_throughput_ceiling_{clients}_over_1"] = harness.ratio(
            (os.cpu_count() or 1) / per_request, one["overall"]["per_second"]
        )
    for kind, stats in loaded["by_kind"].items():
        ratios[f"{name}_p99_{kind}_{clients}_over_1"] = harness.ratio(stats["p99_ms"], one["by_kind"].get(kind, {}).get("p99_ms"))
    return ratios


def run(workdir: Path, *, quick: bool, mix: dict[str, float] | None = None, clients: int = CLIENTS) -> dict[str, Any]:
    """Serve the demo workspace, then time the hot and the uniform URL sets, each with 1 client and ``clients`` clients.

    ``mix`` weights the route kinds (default ``$BENCH_LOAD_MIX``, else ``bench.load.DEFAULT_MIX``); the server runs
    with its default worker count unless ``$BENCH_LOAD_WORKERS`` says otherwise.
    """
    from app.settings import Settings
    from batchscope_demo import ensure_demo

    if mix is None and os.environ.get("BENCH_LOAD_MIX"):
        mix = parse_mix(os.environ["BENCH_LOAD_MIX"])
    seconds = QUICK_SECONDS if quick else FULL_SECONDS
    root = Path(workdir) / "load-demo"
    ensure_demo(str(root), log=lambda line: None)
    workers = int(os.environ.get("BENCH_LOAD_WORKERS", "0"))
    threads = int(os.environ.get("BENCH_LOAD_THREADS", "0"))
    processes = Settings(workers=workers).processes
    request_threads = threads or Settings().request_threads
    with serving(root, Path(workdir) / "load-logs", workers=workers, threads=threads) as served:
        with httpx.Client(base_url=served.base_url, timeout=120) as client:
            cases = [
                _case(
                    served,
                    client,
                    root,
                    uniform=u,
                    mix=mix or DEFAULT_MIX,
                    clients=clients,
                    seconds=seconds,
                    rounds=QUICK_ROUNDS if quick else FULL_ROUNDS,
                )
                for u in (False, True)
            ]
    hot, uniform = cases
    ensure_huge_dataset(str(root))
    with serving(root, Path(workdir) / "load-logs", workers=workers, threads=threads) as served:
        with httpx.Client(base_url=served.base_url, timeout=120) as client:
            heavy = _heavy_case(served, client, root, clients=clients, seconds=seconds, rounds=QUICK_ROUNDS if quick else FULL_ROUNDS)
    peak = _peak_per_request(root, Path(workdir) / "load-peak-logs", heavy["urls"])
    errors = sum(c[k]["overall"]["errors"] for c in cases for k in ("one_client", "loaded"))
    errors += sum(heavy[k]["overall"]["errors"] for k in ("ordinary_alone", "ordinary_beside_heavy"))
    ratios: dict[str, Any] = {}
    for case in cases:
        ratios.update(_ratios(case, clients))
    ratios[f"uniform_over_hot_p99_{clients}"] = harness.ratio(uniform["loaded"]["overall"]["p99_ms"], hot["loaded"]["overall"]["p99_ms"])
    ratios[f"uniform_over_hot_throughput_{clients}"] = harness.ratio(
        uniform["loaded"]["overall"]["per_second"], hot["loaded"]["overall"]["per_second"]
    )
    ratios["uniform_throughput_ratio_over_ceiling"] = harness.ratio(
        ratios.get(f"uniform_throughput_{clients}_over_1"), ratios.get(f"uniform_throughput_ceiling_{clients}_over_1")
    )
    alone, beside = heavy["ordinary_alone"]["overall"], heavy["ordinary_beside_heavy"]["overall"]
    ratios["heavy_ordinary_throughput_beside_over_alone"] = harness.ratio(beside["per_second"], alone["per_second"])
    ratios["heavy_ordinary_p99_beside_over_alone"] = harness.ratio(beside["p99_ms"], alone["p99_ms"])
    ratios["heavy_peak_growth_over_budget"] = harness.ratio(peak["peak_growth"], peak["budget"])
    goals = {"errors": harness.goal(f"0 errors (1 and {clients} clients, every URL set)", errors, errors == 0)}
    goals["heavy_ordinary_p99_ms"] = harness.goal(
        f"<= {P99_GOAL_MS:g} ms p99 for {clients} ordinary clients beside one heavy client",
        beside["p99_ms"],
        beside["p99_ms"] is not None and beside["p99_ms"] <= P99_GOAL_MS,
    )
    kept = ratios["heavy_ordinary_throughput_beside_over_alone"]
    goals["heavy_ordinary_throughput_ratio"] = harness.goal(
        f">= {HEAVY_THROUGHPUT_GOAL:g}x the ordinary clients' throughput without the heavy client",
        kept,
        kept is not None and kept >= HEAVY_THROUGHPUT_GOAL,
    )
    goals["heavy_peak_growth_within_budget"] = harness.goal(
        "peak memory growth of one heavy request <= request_memory_bytes",
        peak["peak_growth"],
        peak["status"] == 200 and peak["peak_growth"] <= peak["budget"],
    )
    for case in cases:
        p99 = case["loaded"]["overall"]["p99_ms"]
        gain = ratios[f"{case['case']}_throughput_{clients}_over_1"]
        goals[f"{case['case']}_p99_ms"] = harness.goal(
            f"<= {P99_GOAL_MS:g} ms p99 with {clients} clients ({case['case']} URLs)", p99, p99 is not None and p99 <= P99_GOAL_MS
        )
        goals[f"{case['case']}_throughput_ratio"] = harness.goal(
            f">= {THROUGHPUT_GOAL:g}x the 1-client throughput with {clients} clients ({case['case']} URLs)",
            gain,
            gain is not None and gain >= THROUGHPUT_GOAL,
        )
    return harness.document(
        NAME,
        quick=quick,
        baseline={
            "system": "the same URL set and mix with 1 client",
            "clients": 1,
            "seconds": seconds,
            **{c["case"]: c["one_client"] for c in cases},
        },
        results=[
            {
                "case": c["case"],
                "clients": clients,
                "seconds": seconds,
                "server_workers": processes,
                "request_threads": request_threads,
                "urls": c["urls"],
                **c["loaded"],
            }
            for c in cases
        ]
        + [{**heavy, "clients": clients, "seconds": seconds, "peak_per_request": peak}],
        ratios=ratios,
        goals=goals,
        notes=[
            *(f"{c['case']} mix (weights): {c['mix']}" for c in cases),
            *(note for c in cases for note in c["notes"]),
            "hot: a few dozen URLs per kind (kept pages and made media are served again); uniform: every step, rank, key, "
            "listing page, thumbnail and video frame of the demo, drawn uniformly, so nearly every request is a cold page",
            f"demo workspace served by `batchscope serve` with {processes} worker processes (BENCH_LOAD_WORKERS, default 0: "
            f"the server's default, one per core) of {request_threads} request threads each (BENCH_LOAD_THREADS, default 0: "
            f"the server's default) on 127.0.0.1; {clients} client threads (stdlib http.client, one keep-alive connection "
            "each) on the same machine",
            f"each case: the first URL of each kind, then {clients} clients for {seconds / 2:g} s untimed (every worker "
            f"process warm), then 1 client and {clients} clients for {seconds:g} s each, alternating in "
            f"{QUICK_ROUNDS if quick else FULL_ROUNDS} slices (1, {clients}, {clients}, 1, ...) so drift weighs on both; "
            "per_second_by_slice shows the spread; latencies are per request, client side",
            f"heavy: the uniform set for {clients} ordinary clients, alone and beside one client looping over the slowest "
            "of the candidate pages (cold_ms_by_candidate: each timed cold on the idle server), in alternating slices; "
            "peak_per_request: that page once, alone, on a fresh one-process server (VmHWM growth, bytes)",
            "cpu: cores the server's process tree kept busy (from /proc) and server and client CPU ms per request; "
            f"throughput_ceiling_{clients}_over_1 is the gain if every core were busy at the loaded CPU cost per request "
            "(the most the clients could get on this machine)",
        ],
    )

"""Load benchmark: 32 concurrent clients on a real ``batchscope serve`` over the demo workspace, against 1 client.

The mix (``bench.load.DEFAULT_MIX``) is step and rank pages, thumbnails, and
dataset, version and sample pages; kinds the server does not route yet are
skipped with a note. Each URL kind is warmed once before timing (imports, key
indexes, the first thumbnail). Both runs last 60 s (10 s in quick mode) on
127.0.0.1; the clients share the machine's cores with the server, as they
would in a team sharing one box. Goals: no errors, p99 <= 1 s with 32 clients.

The mix can be changed without code: ``BENCH_LOAD_MIX="rank=1,thumbnail=1"``
(kinds: rank, step, thumbnail, dataset, version, sample).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from . import harness
from .load import DEFAULT_MIX, inspector, plan_routes, run_load, summarize

NAME = "load"
CLIENTS = 32
FULL_SECONDS = 60.0
QUICK_SECONDS = 10.0
P99_GOAL_MS = 1000.0


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


def run(workdir: Path, *, quick: bool, mix: dict[str, float] | None = None, clients: int = CLIENTS) -> dict[str, Any]:
    """Serve the demo workspace, warm it, then time 1 client and ``clients`` clients for the same duration each.

    ``mix`` weights the route kinds (default ``$BENCH_LOAD_MIX``, else ``bench.load.DEFAULT_MIX``).
    """
    from loaders.demo import ensure_demo

    if mix is None and os.environ.get("BENCH_LOAD_MIX"):
        mix = parse_mix(os.environ["BENCH_LOAD_MIX"])
    seconds = QUICK_SECONDS if quick else FULL_SECONDS
    root = Path(workdir) / "load-demo"
    ensure_demo(str(root), log=lambda line: None)
    workers = int(os.environ.get("BENCH_LOAD_WORKERS", "1"))
    with inspector(root, Path(workdir) / "load-logs", workers=workers) as base_url:
        with httpx.Client(base_url=base_url, timeout=120) as client:
            plan = plan_routes(client, str(root), mix=mix or DEFAULT_MIX)
            for kind in plan.kinds:  # warm: first request of each URL kind
                client.get(kind.urls[0])
        baseline = summarize(run_load(base_url, plan.kinds, clients=1, seconds=seconds, seed=1), seconds)
        loaded = summarize(run_load(base_url, plan.kinds, clients=clients, seconds=seconds, seed=2), seconds)
    p99 = loaded["overall"]["p99_ms"]
    errors = loaded["overall"]["errors"] + baseline["overall"]["errors"]
    ratios = {
        f"p99_{clients}_over_1": harness.ratio(p99, baseline["overall"]["p99_ms"]),
        f"p50_{clients}_over_1": harness.ratio(loaded["overall"]["p50_ms"], baseline["overall"]["p50_ms"]),
        f"throughput_{clients}_over_1": harness.ratio(loaded["overall"]["per_second"], baseline["overall"]["per_second"]),
    }
    for kind, stats in loaded["by_kind"].items():
        ratios[f"p99_{kind}_{clients}_over_1"] = harness.ratio(stats["p99_ms"], baseline["by_kind"].get(kind, {}).get("p99_ms"))
    return harness.document(
        NAME,
        quick=quick,
        baseline={"system": "the same mix with 1 client", "clients": 1, "seconds": seconds, **baseline},
        results=[{"clients": clients, "seconds": seconds, "server_workers": workers, **loaded}],
        ratios=ratios,
        goals={
            "errors": harness.goal(f"0 errors (1 and {clients} clients)", errors, errors == 0),
            "p99_ms": harness.goal(f"<= {P99_GOAL_MS:g} ms p99 with {clients} clients", p99, p99 is not None and p99 <= P99_GOAL_MS),
        },
        notes=[
            "mix (weights): " + ", ".join(f"{k.name}={k.weight:g} ({len(k.urls)} URLs)" for k in plan.kinds),
            *plan.notes,
            f"demo workspace served by `batchscope serve` with workers={workers} (BENCH_LOAD_WORKERS, default 1 like the server) "
            f"on 127.0.0.1; {clients} client threads (httpx) on the same machine",
            "each URL kind was requested once before timing; latencies are per request, client side",
        ],
    )

"""Run the benchmarks: every ``bench/bench_*.py`` module's ``run(workdir, *, quick)``, one JSON each, plus SUMMARY.md.

    python -m bench                  # all benchmarks, full size
    python -m bench --quick          # small sizes, for a quick look
    python -m bench --only lookup    # one benchmark (repeatable)

Results go to ``bench/results/<name>.json`` (``<name>`` is the module name
without ``bench_``) and ``bench/results/SUMMARY.md`` is rebuilt from every
JSON there. Generated data lives in ``bench/work/`` (git-ignored). A module
that raises is recorded as failed, the others still run, and the exit code is 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PREFIX = "bench_"


def discover() -> list[str]:
    """Short names of the benchmark modules, sorted: ``bench/bench_lookup.py`` → ``lookup``."""
    return sorted(p.stem[len(PREFIX) :] for p in HERE.glob(f"{PREFIX}*.py"))


def select(available: Sequence[str], only: Sequence[str] | None) -> list[str]:
    """The benchmarks to run; ``only`` entries may carry the ``bench_`` prefix. Unknown names are an error."""
    if not only:
        return list(available)
    wanted = [name[len(PREFIX) :] if name.startswith(PREFIX) else name for name in only]
    unknown = [name for name in wanted if name not in available]
    if unknown:
        raise SystemExit(f"unknown benchmark {', '.join(unknown)}; available: {', '.join(available)}")
    return [name for name in available if name in wanted]


def run_one(name: str, *, workdir: Path, quick: bool) -> dict[str, Any]:
    """Import ``bench.bench_<name>`` and call its ``run``; a failure becomes a result with the traceback."""
    start = time.perf_counter()
    try:
        module = importlib.import_module(f"bench.{PREFIX}{name}")
        result = dict(module.run(workdir, quick=quick))
        result.setdefault("status", "ok")
    except Exception as exc:  # noqa: BLE001 - one broken benchmark must not stop the others
        result = {
            "benchmark": name,
            "quick": quick,
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    result["elapsed_s"] = round(time.perf_counter() - start, 1)
    return result


def _plain(value: Any) -> Any:
    """JSON fallback for numpy scalars and anything else."""
    return value.item() if hasattr(value, "item") else str(value)


def write_result(results: Path, name: str, result: dict[str, Any]) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    path.write_text(json.dumps(result, indent=1, default=_plain) + "\n")
    return path


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).replace("|", "\\|")


def _find_ratios(value: Any, path: str = "") -> dict[str, Any]:
    """Fallback for results without a ``ratios`` dict: every nested number whose key mentions ``ratio``."""
    found: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if "ratio" in str(key) and isinstance(item, (int, float)) and not isinstance(item, bool):
                found[where] = item
            else:
                found.update(_find_ratios(item, where))
    return found


def summarize(result: dict[str, Any]) -> str:
    """One benchmark's section of SUMMARY.md: its ratios and goals as tables."""
    name = result.get("benchmark", "?")
    lines = [f"## {name}", ""]
    machine = result.get("machine") or {}
    mode = "quick" if result.get("quick") else result.get("mode") or "full"
    meta = [
        str(mode),
        f"{machine.get('cpu_count') or result.get('cores') or '?'} CPUs",
        f"load {machine.get('load_average')}" if machine.get("load_average") else None,
        f"{result['elapsed_s']} s" if "elapsed_s" in result else None,
    ]
    lines += [", ".join(m for m in meta if m), ""]
    if result.get("status") == "failed":
        lines += [f"**failed**: `{result.get('error', '')}`", ""]
        return "\n".join(lines)
    baseline = result.get("baseline")
    system = baseline.get("system") if isinstance(baseline, dict) else baseline
    if system:
        lines += [f"Baseline: {system}.", ""]
    goals = result.get("goals") if isinstance(result.get("goals"), dict) else {}
    if goals:
        lines += ["| goal | target | measured | met |", "|---|---|---|---|"]
        for key, g in goals.items():
            g = g if isinstance(g, dict) else {"measured": g}
            lines.append(f"| {key} | {_cell(g.get('target'))} | {_cell(g.get('measured'))} | {_cell(g.get('met'))} |")
        lines.append("")
    ratios = result.get("ratios") if isinstance(result.get("ratios"), dict) else _find_ratios(result)
    if ratios:
        lines += ["| ratio | value |", "|---|---|"]
        lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in ratios.items()]
        lines.append("")
    return "\n".join(lines)


def write_summary(results: Path) -> Path:
    """Rebuild ``SUMMARY.md`` from every ``*.json`` in ``results``."""
    sections = []
    for path in sorted(results.glob("*.json")):
        try:
            sections.append(summarize(json.loads(path.read_text())))
        except (ValueError, AttributeError) as exc:
            sections.append(f"## {path.stem}\n\n**unreadable result** `{path.name}`: {exc}\n")
    text = "# Benchmark summary\n\nRatios are measured in the same run; see docs/benchmarks.md for what each one means.\n\n"
    path = results / "SUMMARY.md"
    results.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n".join(sections))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Run batchscope's benchmarks.")
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds, not minutes)")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this benchmark (repeatable): " + ", ".join(discover()))
    parser.add_argument("--results", type=Path, default=HERE / "results", help="where the JSON and SUMMARY.md go")
    parser.add_argument("--workdir", type=Path, default=HERE / "work", help="where generated data goes")
    args = parser.parse_args(argv)
    failed = 0
    for name in select(discover(), args.only):
        print(f"[bench] {name}: running{' (quick)' if args.quick else ''}...", flush=True)
        result = run_one(name, workdir=args.workdir, quick=args.quick)
        path = write_result(args.results, name, result)
        if result.get("status") == "failed":
            failed += 1
            print(f"[bench] {name}: FAILED after {result['elapsed_s']} s: {result['error']}", flush=True)
        else:
            print(f"[bench] {name}: done in {result['elapsed_s']} s -> {path}", flush=True)
    summary = write_summary(args.results)
    print(summary.read_text())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""CLI: ``batchscope lint RUN``: run the checks over every sample a run read, for a terminal or CI (exit 1 on findings)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer
from rich.markup import escape

from loaders.checks import EXIT_CANNOT_LINT, SEVERITIES, Finding, LintOptions, lint
from loaders.checks.lint import run_steps

from .common import RootOption, console, friendly_errors, open_catalog, parse_steps, print_error

_STYLE = {"error": "bold red", "warning": "yellow", "info": "blue"}


def install(app: typer.Typer) -> None:
    app.command("lint")(lint_run)


def lint_run(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    steps: Annotated[Optional[str], typer.Option("--steps", help="Steps A:B (B exclusive; default: all).")] = None,
    check: Annotated[Optional[list[str]], typer.Option("--check", help="Only this check (repeatable, or comma-separated).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help='Print {"findings": [...], "summary": {...}}.')] = False,
    fail_on: Annotated[
        str, typer.Option("--fail-on", help="Exit 1 when a finding is at or above this severity: info, warning, error.")
    ] = "warning",
    threshold: Annotated[
        Optional[list[str]], typer.Option("--threshold", help="Set a threshold: CHECK.PARAM=VALUE (repeatable; docs/lint.md lists them).")
    ] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", min=1, help="Processes (default: every core for large runs).")] = None,
    root: RootOption = None,
) -> None:
    """Check every sample the run read at every step and rank (tokens, chat masks, duplicates, media, RL values, padding,
    mixture, loss spikes) and print one line per finding with its sample's URL.

    Exit 0: no finding at or above --fail-on; 1: some; 2: the lint could not run (an unknown check or threshold, steps
    outside the run, or data that changed since it was registered: nothing else is linted).
    """
    from app import urls
    from app.settings import Settings

    if fail_on not in SEVERITIES:
        print_error(f"--fail-on {fail_on!r} is not one of {', '.join(SEVERITIES)}")
        sys.exit(EXIT_CANNOT_LINT)
    with friendly_errors(exit_code=EXIT_CANNOT_LINT):
        catalog = open_catalog(root)
        run = catalog.run(run_name)
        options = LintOptions.parse(checks=check, thresholds=threshold)
        window = parse_steps(steps, run_steps(run)) if steps else None
        result = lint(run, catalog=catalog, steps=window, options=options, workers=workers)

    def url(finding: Finding) -> str:
        return urls.finding(run.name, finding.step, finding.rank, finding.position)

    if as_json:
        typer.echo(json.dumps(result.to_json(url, fail_on=fail_on), ensure_ascii=False))
        sys.exit(result.exit_code(fail_on))
    base = Settings.from_env().url.rstrip("/")
    for f in result.findings:
        where = (
            f"step {f.step}"
            + (f" rank {f.rank}" if f.rank is not None else "")
            + (f" sample {f.position}" if f.position is not None else "")
        )
        key = f"  {escape(f.key)}" if f.key is not None else ""
        console.print(
            f"[{_STYLE[f.severity]}]{f.severity:<7}[/] {f.check:<19} {where}{key}: {escape(f.detail)}  {base + url(f)}",
            highlight=False,
            soft_wrap=True,
        )
    counts = ", ".join(f"{name} {n}" for name, n in result.counts().items() if n)
    severities = result.by_severity()
    code = result.exit_code(fail_on)
    console.print(
        f"{run.name}: {len(result.findings)} finding(s) ({severities['error']} error, {severities['warning']} warning, "
        f"{severities['info']} info) in {result.samples:,} samples of steps {result.steps.start}-{result.steps.stop - 1}"
        f"{': ' + counts if counts else ''}; exit {code} ({'findings' if code else 'none'} at or above {fail_on})",
        highlight=False,
        soft_wrap=True,
    )
    for name, why in result.not_run().items():
        console.print(f"not run: {name}: {why}", style="dim", highlight=False)
    sys.exit(code)

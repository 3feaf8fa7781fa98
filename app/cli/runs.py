"""CLI: list runs and verify a run's ledger against a recomputation of the read path (exit codes in ``verify``)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from loaders import BatchscopeError, Run
from loaders.training.ledger import ledger_file_name
from loaders.training.verification import (
    EXIT_CANNOT_CHECK,
    EXIT_MISMATCH,
    EXIT_UNTRAINED,
    EXIT_VERIFIED,
    RunVerification,
    step_ranges,
    verify_run,
)

from .common import RootOption, console, err_console, friendly_errors, open_catalog


def install(app: typer.Typer) -> None:
    app.command("runs")(runs)
    app.command("verify")(verify)


def runs(root: RootOption = None) -> None:
    """List runs with their sources, steps and world sizes."""
    with friendly_errors():
        catalog = open_catalog(root)
        table = Table("run", "steps", "batch", "sources", "world sizes")
        for name in catalog.runs():
            run = catalog.run(name)
            sources = ", ".join(f"{s.dataset}@{s.version[:12]}" for s in run.sources)
            sizes = " → ".join(f"{span.world_size} (from {span.start_step})" for span in run.world_size_history())
            table.add_row(name, str(run.total_steps), str(run.global_batch_size), sources, sizes)
        console.print(table)


def _parse_steps(text: str | None, total: int) -> range:
    if not text:
        return range(total)
    start, sep, stop = text.partition(":")
    try:
        if not sep:
            return range(int(start), int(start) + 1)
        return range(int(start or 0), int(stop) if stop else total)
    except ValueError:
        raise typer.BadParameter(f"--steps expects A:B, A: or A, got {text!r}") from None


def verify(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    steps: Annotated[Optional[str], typer.Option("--steps", help="Steps A:B (B exclusive; default: all).")] = None,
    root: RootOption = None,
) -> None:
    """Recompute every (step, rank) and compare with the ledger.

    Exit 0: every (step, rank) checked was verified and trained; 1: a ledger record differs from what the plan reads
    (digest, global indices, keys or sample digests); 2: cannot check (records missing, unreadable ledger lines, or
    the read path failed); 3: the data matches, but some steps were fetched and never marked trained.
    """
    with friendly_errors(exit_code=EXIT_CANNOT_CHECK):
        catalog = open_catalog(root)
        run = catalog.run(run_name)
        window = _parse_steps(steps, run.total_steps)
        for step in window:
            run.check_step(step)
        report = verify_run(run, window)
    _print_report(run, report)
    _keep_record(catalog.root, run, report)
    sys.exit(report.exit_code)


def _keep_record(root: str, run: Run, report: RunVerification) -> None:
    """Keep the result beside the ledger, for the run and home pages' status; a catalog that cannot take it is noted."""
    from loaders.training.verify_record import record_verification

    try:
        record_verification(root, run, report, meaning=EXIT_MEANINGS[report.exit_code])
    except (BatchscopeError, OSError) as exc:
        err_console.print(f"note: the result could not be kept for the inspector's pages ({exc})", highlight=False, soft_wrap=True)


def _print_report(run: Run, report: RunVerification) -> None:
    """One line per failure (runs of steps grouped), then the summary line."""
    for check in report.with_status("mismatch"):
        err_console.print(
            f"[red]✗ step {check.step} rank {check.rank}[/]: {escape('; '.join(check.reasons))}; "
            f"differing samples (global indices): {check.differing}",
            highlight=False,
            soft_wrap=True,
        )
    for rank, world_size, steps in step_ranges(report.with_status("no-ledger")):
        why = (
            "its records of them are missing"
            if run.ledger.has_file(rank, world_size)
            else f"no ledger file {ledger_file_name(rank, world_size)}"
        )
        err_console.print(
            f"[red]✗ rank {rank} of {world_size}[/]: no ledger record for {_steps(steps)} ({why})", highlight=False, soft_wrap=True
        )
    for problem in report.problems:
        mark, note = ("[red]✗", "") if problem.fatal else ("[yellow]![/][yellow]", " (not a failure: its records were lost)")
        err_console.print(f"{mark} ledger {escape(str(problem))}[/]{note}", highlight=False, soft_wrap=True)
    for rank, world_size, steps in step_ranges(report.with_status("untrained")):
        err_console.print(
            f"[yellow]! rank {rank} of {world_size}[/]: {_steps(steps)} fetched but never marked trained", highlight=False, soft_wrap=True
        )
    window = report.steps
    console.print(
        f"{run.name}: {report.count('verified')} verified, {report.count('mismatch')} mismatched, "
        f"{report.count('no-ledger')} without a ledger entry, {report.count('untrained')} fetched "
        f"but not trained, {sum(p.fatal for p in report.problems)} unreadable ledger line(s) "
        f"(steps {window.start}-{window.stop - 1}; exit {report.exit_code}: {EXIT_MEANINGS[report.exit_code]})",
        highlight=False,
        soft_wrap=True,
    )


EXIT_MEANINGS = {
    EXIT_VERIFIED: "verified",
    EXIT_MISMATCH: "mismatch",
    EXIT_CANNOT_CHECK: "cannot check",
    EXIT_UNTRAINED: "fetched but not trained",
}


def _steps(steps: range) -> str:
    return f"step {steps.start}" if len(steps) == 1 else f"steps {steps.start}-{steps.stop - 1}"

"""CLI: list runs and verify a run's ledger against a recomputation of the read path (exit codes in ``verify``)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from loaders import Run
from loaders.run.kinds import claims
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
    """List runs with their sources, steps and world sizes (a run other than native says its kind)."""
    with friendly_errors():
        catalog = open_catalog(root)
        table = Table("run", "steps", "batch", "sources", "world sizes")
        for name in catalog.runs():
            run = catalog.run(name)
            sources = ", ".join(f"{s.dataset}@{s.version[:12]}" for s in run.sources) or "samples kept for themselves"
            if run.kind != "native":
                sources = f"{claims(run.kind).label}: {sources}"
            sizes = " → ".join(f"{span.world_size} (from {span.start_step})" for span in run.world_size_history())
            steps = str(run.total_steps) if run.total_steps is not None else f"{run.known_steps} so far"
            table.add_row(name, steps, str(run.global_batch_size), sources, sizes)
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

    A replayed run's batches are compared with the indices it logged (attach --batches); a recorded run's are checked
    to still resolve to the rows it wrote down. Exit 0: every (step, rank) checked was verified and trained (for those
    kinds: replayed and matching, or recorded and resolving); 1: a ledger record differs from what the plan reads
    (digest, global indices, keys or sample digests); 2: cannot check (records missing, unreadable ledger lines, or
    the read path failed); 3: the data matches, but some steps were fetched and never marked trained.
    """
    with friendly_errors(exit_code=EXIT_CANNOT_CHECK):
        run = open_catalog(root).run(run_name)
        window = _parse_steps(steps, run.known_steps)
        for step in window:
            run.check_step(step)
        report = verify_run(run, window)
    _print_report(run, report)
    sys.exit(report.exit_code)


def _print_report(run: Run, report: RunVerification) -> None:
    """One line per failure (runs of steps grouped), then the summary line, in the words the run's kind may use
    (:data:`loaders.run.kinds.CLAIMS`)."""
    kind = claims(run.kind)
    for check in report.with_status("mismatch"):
        err_console.print(
            f"[red]✗ step {check.step} rank {check.rank}[/]: {escape('; '.join(check.reasons))}; "
            f"differing samples (global indices): {check.differing}",
            highlight=False,
            soft_wrap=True,
        )
    missing = list(step_ranges(report.with_status("no-ledger")))
    for rank, world_size, steps in missing:
        if kind.ledger_of_batches:
            why = (
                "its records of them are missing"
                if run.ledger.has_file(rank, world_size)
                else f"no ledger file {ledger_file_name(rank, world_size)}"
            )
            said = f"no ledger record for {_steps(steps)} ({why})"
        else:
            said = f"the run logged no batch for {_steps(steps)}"
        err_console.print(f"[red]✗ rank {rank} of {world_size}[/]: {said}", highlight=False, soft_wrap=True)
    if missing and not kind.ledger_of_batches and not report.count(kind.label):
        err_console.print(f"{kind.label} run {run.name} logged no batches to compare: attach it with --batches FILE", highlight=False)
    for problem in report.problems:
        mark, note = ("[red]✗", "") if problem.fatal else ("[yellow]![/][yellow]", " (not a failure: its records were lost)")
        err_console.print(f"{mark} ledger {escape(str(problem))}[/]{note}", highlight=False, soft_wrap=True)
    for rank, world_size, steps in step_ranges(report.with_status("untrained")):
        err_console.print(
            f"[yellow]! rank {rank} of {world_size}[/]: {_steps(steps)} fetched but never marked trained", highlight=False, soft_wrap=True
        )
    window = report.steps
    counts = [f"{report.count(status)} {words}" for status, words in kind.counts]
    if kind.ledger_of_batches:
        counts.append(f"{sum(p.fatal for p in report.problems)} unreadable ledger line(s)")
    meaning = kind.label if report.exit_code == EXIT_VERIFIED else EXIT_MEANINGS[report.exit_code]
    console.print(
        f"{run.name}: {', '.join(counts)} (steps {window.start}-{window.stop - 1}; exit {report.exit_code}: {meaning})",
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

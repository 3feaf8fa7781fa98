"""CLI: list runs and verify a run's ledger against a recomputation of the read path (exit codes in ``verify``)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from loaders import BatchscopeError, Run
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

from .common import RootOption, console, err_console, friendly_errors, open_catalog, parse_steps


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


def verify(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    steps: Annotated[Optional[str], typer.Option("--steps", help="Only steps A:B (B exclusive; default: the whole run).")] = None,
    root: RootOption = None,
) -> None:
    """Recompute every (step, rank) the ledger says was trained and compare it with the ledger.

    The trained range is steps 0 through the last step any rank marked trained; steps after it are reported as
    prefetched (fetched, never trained) or not reached, without failing. Exit 0: every trained batch matches its
    record; 1: a record differs from what the plan reads (digest, global indices, keys or sample digests); 2: in the
    trained range something cannot be checked (records missing, unreadable ledger lines, the read path failed), or
    nothing was trained; 3: a gap, a step fetched and never marked trained though later steps were. A replayed run's
    batches are compared with the indices it logged (attach --batches), through the last step it logged; a recorded
    run's are checked to still resolve to the rows it wrote down.
    """
    with friendly_errors(exit_code=EXIT_CANNOT_CHECK):
        catalog = open_catalog(root)
        run = catalog.run(run_name)
        window = parse_steps(steps, run.known_steps) if steps else None
        for step in window or ():
            run.check_step(step)
        report = verify_run(run, window)
    _print_report(run, report)
    _keep_record(catalog.root, run, report)
    sys.exit(report.exit_code)


def _keep_record(root: str, run: Run, report: RunVerification) -> None:
    """Keep the result beside the ledger, for the run and home pages' status; a catalog that cannot take it is noted."""
    from loaders.training.verify_record import record_verification

    try:
        meaning = claims(run.kind).label if report.exit_code == EXIT_VERIFIED else EXIT_MEANINGS[report.exit_code]
        record_verification(root, run, report, meaning=meaning)
    except (BatchscopeError, OSError) as exc:
        err_console.print(f"note: the result could not be kept for the inspector's pages ({exc})", highlight=False, soft_wrap=True)


def _print_report(run: Run, report: RunVerification) -> None:
    """One line per failure (runs of steps grouped), the prefetched steps, then the summary line."""
    if run.kind != "native":
        _print_kind_report(run, report)
        return
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
            f"[red]✗ rank {rank} of {world_size}[/]: no ledger record for {_steps(steps)} ({why}), though the run trained "
            f"through step {report.trained_through}",
            highlight=False,
            soft_wrap=True,
        )
    for problem in report.problems:
        mark, note = ("[red]✗", "") if problem.fatal else ("[yellow]![/][yellow]", " (not a failure: its records were lost)")
        err_console.print(f"{mark} ledger {escape(str(problem))}[/]{note}", highlight=False, soft_wrap=True)
    for rank, world_size, steps in step_ranges(report.with_status("untrained")):
        err_console.print(
            f"[red]✗ rank {rank} of {world_size}[/]: {_steps(steps)} fetched but never marked trained, though the run "
            f"trained through step {report.trained_through}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.trained_steps:
        err_console.print(f"[red]✗ {_nothing_trained(run, report)}[/]", highlight=False, soft_wrap=True)
    for rank, world_size, steps in step_ranges(report.with_status("prefetched")):
        console.print(
            f"· rank {rank} of {world_size}: {_steps(steps)} prefetched (fetched after the last trained step, never trained)",
            highlight=False,
            soft_wrap=True,
        )
    window, last = report.steps, report.trained_through
    trained = "no step trained" if last is None else f"trained through step {last}"
    console.print(
        f"{run.name}: {report.count('verified')} verified, {report.count('mismatch')} mismatched, "
        f"{report.count('no-ledger')} without a ledger entry, {report.count('untrained')} fetched "
        f"but not trained, {sum(p.fatal for p in report.problems)} unreadable ledger line(s); "
        f"{report.count('prefetched')} prefetched, {report.count('not-reached')} not reached "
        f"({trained}; steps {window.start}-{window.stop - 1}; exit {report.exit_code}: {EXIT_MEANINGS[report.exit_code]})",
        highlight=False,
        soft_wrap=True,
    )


def _print_kind_report(run: Run, report: RunVerification) -> None:
    """A replayed or recorded run's report, in the words its kind may use (:data:`loaders.run.kinds.CLAIMS`): its
    batches are compared with what the run logged or recorded, not with a ledger of recomputable batches."""
    kind = claims(run.kind)
    for check in report.with_status("mismatch"):
        err_console.print(
            f"[red]✗ step {check.step} rank {check.rank}[/]: {escape('; '.join(check.reasons))}", highlight=False, soft_wrap=True
        )
    missing = list(step_ranges(report.with_status("no-ledger")))
    for rank, world_size, steps in missing:
        err_console.print(
            f"[red]✗ rank {rank} of {world_size}[/]: the run logged no batch for {_steps(steps)}", highlight=False, soft_wrap=True
        )
    if not report.count(kind.label) and not report.count("mismatch"):
        advice = ": attach it with --batches FILE" if run.kind == "replayed" else ""
        err_console.print(f"{kind.label} run {run.name} logged no batches to compare{advice}", highlight=False)
    window = report.steps
    counts = [f"{report.count(status)} {words}" for status, words in kind.counts]
    meaning = kind.label if report.exit_code == EXIT_VERIFIED else EXIT_MEANINGS[report.exit_code]
    console.print(
        f"{run.name}: {', '.join(counts)} (steps {window.start}-{window.stop - 1}; exit {report.exit_code}: {meaning})",
        highlight=False,
        soft_wrap=True,
    )


def _nothing_trained(run: Run, report: RunVerification) -> str:
    """Why nothing in the window could be checked: no step trained at all (naming ledger files that are missing),
    or none in the window."""
    if report.trained_through is not None:
        return f"nothing to check: no step of {_steps(report.steps)} was trained (the run trained through step {report.trained_through})"
    missing = [
        ledger_file_name(rank, span.world_size)
        for span in run.world_size_history()
        for rank in range(span.world_size)
        if not run.ledger.has_file(rank, span.world_size)
    ]
    files = f" (no ledger file {', '.join(dict.fromkeys(missing))})" if missing else ""
    return f"nothing to check: the ledger of run {run.name} marks no step trained{files}"


EXIT_MEANINGS = {
    EXIT_VERIFIED: "verified",
    EXIT_MISMATCH: "mismatch",
    EXIT_CANNOT_CHECK: "cannot check",
    EXIT_UNTRAINED: "fetched but not trained while later steps were",
}


def _steps(steps: range) -> str:
    return f"step {steps.start}" if len(steps) == 1 else f"steps {steps.start}-{steps.stop - 1}"

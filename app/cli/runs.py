"""CLI: list runs and verify a run's ledger against a recomputation of the read path."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from rich.table import Table

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
    """Recompute every (step, rank) and compare with the ledger; exit 1 naming the samples that differ."""
    with friendly_errors(exit_code=2):
        run = open_catalog(root).run(run_name)
        window = _parse_steps(steps, run.total_steps)
        verified = missing = 0
        mismatches = []
        for step in window:
            run.check_step(step)
            for rank in range(run.world_size_at(step)):
                result = run.verify(step, rank)
                if result.status == "verified":
                    verified += 1
                elif result.status == "no-ledger":
                    missing += 1
                else:
                    mismatches.append(result)
                    err_console.print(
                        f"[red]✗ step {step} rank {rank}[/]: ledger digest {result.ledger_digest} != recomputed "
                        f"{result.computed_digest}; differing samples (global indices): {result.differing}",
                        highlight=False,
                    )
        console.print(
            f"{run.name}: {verified} verified, {len(mismatches)} mismatched, {missing} without a ledger entry "
            f"(steps {window.start}-{window.stop - 1})",
            highlight=False,
        )
        if mismatches:
            sys.exit(1)

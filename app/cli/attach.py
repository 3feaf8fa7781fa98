"""CLI: ``batchscope attach FRAMEWORK RUN ...`` — a run that read through another framework, replayed with its code.

The flags after ``RUN`` are the framework's own (``batchscope attach hf RUN --help`` lists them); ``--root``,
``--metrics``, ``--metrics-step-base`` and ``--batches`` are read here. Any error is one line on stderr and exit 2,
and leaves nothing attached.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from rich.markup import escape

from loaders.replay.attach import Imports, attach
from loaders.replay.framework import FRAMEWORKS

from .common import RootOption, console, friendly_errors, open_catalog

#: Exit code of a refused attach (bad flag, changed file, contradicting fingerprint, missing extra).
EXIT_REFUSED = 2


def install(app: typer.Typer) -> None:
    app.command(
        "attach",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    )(attach_command)


def attach_command(
    ctx: typer.Context,
    framework: Annotated[Optional[str], typer.Argument(metavar="FRAMEWORK", help=f"One of: {', '.join(sorted(FRAMEWORKS))}.")] = None,
    run: Annotated[Optional[str], typer.Argument(metavar="RUN", help="Name of the new run.")] = None,
    metrics: Annotated[
        Optional[list[str]],
        typer.Option("--metrics", help="The run's loss curve: TensorBoard event file or folder, JSON lines, CSV, trainer_state.json."),
    ] = None,
    metrics_step_base: Annotated[
        Optional[int],
        typer.Option("--metrics-step-base", help="The step number the metrics give the first step (default: the framework's)."),
    ] = None,
    batches: Annotated[
        Optional[str], typer.Option("--batches", help='JSON lines {"step", "rank", "indices"} the run logged: what verify compares.')
    ] = None,
    root: RootOption = None,
) -> None:
    """Attach a run that read through FRAMEWORK's deterministic read path: its batches are recomputed by calling that
    framework's own code over the run's files (pinned by checksum, read in place). The flags after RUN are the
    framework's own: `batchscope attach FRAMEWORK RUN --help` lists them."""
    if framework is None or framework in ("--help", "-h"):
        console.print(ctx.get_help(), highlight=False)
        return
    if run is None or run in ("--help", "-h") or {"--help", "-h"} & set(ctx.args):
        with friendly_errors(exit_code=EXIT_REFUSED):
            from loaders.replay.framework import framework as named

            named(framework).parse(["--help"])  # prints the framework's flags and exits 0
    with friendly_errors(exit_code=EXIT_REFUSED):
        catalog = open_catalog(root)
        imports = Imports(metrics=tuple(metrics or ()), step_base=metrics_step_base, batches=batches)
        replayed = attach(catalog, framework, run, list(ctx.args), imports=imports)
    sources = ", ".join(f"{s.ref} ({s.shard_format}, {s.rows:,} rows, read in place)" for s in replayed.sources)
    console.print(
        f"attached replayed run [bold]{escape(replayed.name)}[/]: {escape(replayed.framework.title)}, "
        f"{replayed.total_steps:,} steps × {replayed.world_size} ranks (global batch {replayed.global_batch_size:,})",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"  documents: {escape(sources)}; {len(replayed.pins)} other file(s) pinned", highlight=False, soft_wrap=True)
    if metrics:
        console.print(f"  metrics: {len(replayed.ledger.metric_names())} curve(s) imported", highlight=False)
    if batches:
        console.print(f"  logged batches: {len(replayed.logged):,} (step, rank)s to compare (batchscope verify)", highlight=False)
    sys.stdout.flush()

"""CLI: ``batchscope where NAME@VERSION KEY``: every run that read a sample, per epoch, by inverting the read order."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.markup import escape

from .common import RootOption, console, friendly_errors, open_catalog, print_url
from .links import base_url


def install(app: typer.Typer) -> None:
    app.command("where")(where)


def where(
    ref: Annotated[str, typer.Argument(metavar="NAME@VERSION", help="Dataset and version (id, id prefix or tag).")],
    key: Annotated[str, typer.Argument(metavar="KEY", help="The sample's key.")],
    run: Annotated[Optional[str], typer.Option("--run", help="Only this run.")] = None,
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Epochs listed per run.")] = 8,
    from_epoch: Annotated[int, typer.Option("--from-epoch", min=0, help="First epoch listed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (what the sample page's /api twin lists under 'where').")] = False,
    root: RootOption = None,
) -> None:
    """Where every run (or --run) read a sample: run, epoch, step, rank and sample, with the rank page's URL.

    Computed by inverting each run's read order: no ledger or step is scanned.
    """
    from app.jsonable import jsonable
    from app.pages.where import where_read_panel

    with friendly_errors():
        catalog = open_catalog(root)
        version = catalog.resolve(ref)
        record = version.index_of(*version.find(key))
        panel = where_read_panel(catalog, catalog.run, version, key, record, run=run, first_epoch=from_epoch, epochs=epochs)
        if as_json:
            typer.echo(json.dumps(jsonable(panel), ensure_ascii=False))
            return
        base = base_url(catalog.root)
        if not panel:
            console.print(f"no run reads {escape(version.ref)}")
        for entry in panel:
            if entry.error:
                console.print(f"[bold]{escape(entry.run)}[/]: [red]{escape(entry.error)}[/]")
                continue
            console.print(f"[bold]{escape(entry.run)}[/]: {escape(entry.summary)}", highlight=False)
            if not entry.reads:
                console.print("  no reads in the epochs listed", style="dim")
            for read in entry.reads:  # one line each, the URL whole so it can be copied
                print_url(
                    f"  epoch {read.epoch}  step {read.step}  rank {read.rank} of {read.world_size}  sample {read.sample}  {base + read.url}"
                )
            for note in entry.notes:
                console.print(escape(note), style="dim")
            if entry.next_epoch is not None:
                console.print(f"more: --from-epoch {entry.next_epoch}", style="dim")

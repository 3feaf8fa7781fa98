"""CLI: ``batchscope step`` — the step page in the terminal: every rank's share, then every sample of every rank ranked.

The same data as ``/runs/{run}/steps/{step}`` and its JSON twin (``--json``), laid out in 80 columns: a line
per rank (samples, logged loss, ledger verdict), then one row per sample, worst first by default, with the
command and the URL that open the first one.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Optional

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from loaders.rl.facts import number_text

from ..reveal import visible
from .common import RootOption, console, friendly_errors, open_catalog, print_url
from .links import base_url
from .show import SortOption, check_sort_option


def install(app: typer.Typer) -> None:
    app.command("step")(step_command)


def _loss(value: float | None) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) else "–"


def samples_table(page: Any, *, limit: int | None) -> Table:
    """Every sample of the step as the page ranks it, in at most 80 columns (keys cut with …)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True, expand=False)

    def number(header: str, width: int) -> None:
        table.add_column(header, justify="right", no_wrap=True, min_width=max(width, len(header)))

    number("rank", 4)
    number("#", 3)
    number("loss", 7)
    if page.rewards:
        number("reward", 6)
        number("adv.", 6)
    number("tokens", 6)
    number("trained", 7)
    number("masked", 6)
    if not page.rewards:
        number("pad", 4)
    table.add_column("source", overflow="ellipsis", no_wrap=True, max_width=12)
    table.add_column("first key", overflow="ellipsis", no_wrap=True, max_width=14)
    for sample in page.samples[:limit]:
        masked = max(0, sample.tokens - sample.trained_tokens - sample.padding)
        row = [str(sample.rank), str(sample.position), _loss(sample.loss)]
        if page.rewards:
            row += [number_text(sample.reward), number_text(sample.advantage)]
        row += [f"{sample.tokens:,}", f"{sample.trained_tokens:,}", f"{masked:,}"]
        if not page.rewards:
            row.append(f"{sample.padding:,}")
        row += [escape(sample.source), escape(visible(sample.keys[0])) if sample.keys else "–"]
        table.add_row(*row)
    return table


def step_command(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    step: Annotated[int, typer.Option("--step", "-s", help="Training step.")],
    sort: SortOption = None,
    limit: Annotated[Optional[int], typer.Option("--limit", "-n", min=1, help="Only the first N samples of the ranking.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly the API's JSON for this page.")] = False,
    root: RootOption = None,
) -> None:
    """Rank every sample of every rank of STEP by its logged loss (or --sort), with each rank's share and verdict.

    The browser's step page in text: from a loss spike to the worst sample, then `batchscope show` opens it.
    """
    from app import urls
    from app.jsonable import jsonable
    from app.pages.forensics import SORTS
    from app.pages.step import step_page
    from app.run_cache import RunCache

    sort = check_sort_option(sort)
    with friendly_errors():
        catalog = open_catalog(root)
        page = step_page(catalog, RunCache(), run_name, step, sort=sort)
        if as_json:
            sys.stdout.write(json.dumps(jsonable(page), ensure_ascii=False) + "\n")
            return
        base = base_url(catalog.root)
        padding = f" · {page.padding:,} padding" if page.padding else ""
        console.print(
            f"[bold]{escape(page.run)}[/] · step {page.step} · world size {page.world_size} · {page.tokens:,} tokens{padding}",
            highlight=False,
        )
        print_url(base + urls.step(page.run, page.step))
        if page.padding_warning:
            console.print(page.padding_warning, style="yellow", highlight=False)
        for share in page.ranks:
            style = "green" if share.verified else "bold red" if share.verified is False else "dim"
            console.print(
                f"rank {share.rank}: {share.samples} samples · loss {_loss(share.loss)} · [{style}]{escape(share.verification)}[/]",
                highlight=False,
            )
        shown = len(page.samples) if limit is None else min(limit, len(page.samples))
        console.print(f"\n{shown} of {len(page.samples)} samples of every rank, by {SORTS[page.sort]}:", highlight=False)
        console.print(samples_table(page, limit=limit))
        if page.samples:
            first = page.samples[0]
            console.print(
                f"first: batchscope show {escape(page.run)} --step {page.step} --rank {first.rank} --sample {first.position}",
                highlight=False,
                soft_wrap=True,
            )
            print_url(base + first.url)

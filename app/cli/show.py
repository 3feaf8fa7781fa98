"""CLI: ``batchscope show`` — the step/rank page in the terminal (same data as the web page and its JSON)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Optional

import typer
from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from .common import RootOption, console, friendly_errors, open_catalog

_SHADES = ("cyan", "magenta")


def install(app: typer.Typer) -> None:
    app.command("show")(show)


def _token_text(ids: list[int], mask: list[int] | None, spans: list[dict[str, Any]], tokenizer: Any) -> Text:
    """Token boundaries as alternating colours, masked tokens dimmed, document starts marked ``▌key``."""
    starts = {int(s["start"]): s for s in spans}
    text = Text()
    for i, token in enumerate(ids):
        if i in starts and (i > 0 or starts[i].get("offset", 0) == 0):
            text.append(f"▌{starts[i].get('key', '')} ", style="bold yellow")
        piece = tokenizer.decode([token], skip_special_tokens=False) if tokenizer is not None else f"{token} "
        piece = piece.replace("\n", "↵")
        style = _SHADES[i % 2]
        if mask is not None and i < len(mask) and not mask[i]:
            style = "dim " + style
        text.append(piece or f"<{token}>", style=style)
    return text


def _field_text(value: Any, limit: int = 600) -> str:
    rendered = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return rendered if len(rendered) <= limit else rendered[:limit] + f"… ({len(rendered):,} characters)"


def show(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    step: Annotated[int, typer.Option("--step", "-s", help="Training step.")],
    rank: Annotated[int, typer.Option("--rank", help="Rank (below the world size in force at that step).")] = 0,
    sample: Annotated[Optional[int], typer.Option("--sample", help="Only the sample at this position.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly the API's JSON for this page.")] = False,
    root: RootOption = None,
) -> None:
    """Show exactly what RANK consumed at STEP: tokens coloured by boundary, masked tokens dimmed, documents marked."""
    from app.flags import FlagStore
    from app.jsonable import jsonable
    from app.pages.steps import rank_page
    from app.renderers.inputs import run_tokenizer
    from app.run_cache import RunCache

    with friendly_errors():
        catalog = open_catalog(root)
        runs = RunCache()
        page = rank_page(catalog, runs, FlagStore.for_catalog(catalog.root, ""), run_name, step, rank)
        if as_json:
            sys.stdout.write(json.dumps(jsonable(page), ensure_ascii=False) + "\n")
            return
        run = runs.run(catalog, run_name)
        batch = runs.batch(run, step, rank)
        badge = {True: "[green]✓ verified[/]", False: "[red]✗ differs from the ledger[/]", None: "[dim]no ledger[/]"}[page.verified]
        console.print(
            f"[bold]{page.run}[/] step {page.step} rank {page.rank} · world size {page.world_size} · {badge} · digest {page.digest[:12]}",
            highlight=False,
        )
        for entry, item in zip(page.samples, batch.samples):
            if sample is not None and entry.position != sample:
                continue
            title = (
                f"#{entry.position} · index {entry.index} · {entry.source} · {entry.dataset}@{entry.version[:12]} "
                f"shard {entry.shard} row {entry.row} · key {entry.key}"
                + (f" · loss {entry.loss:.4f}" if isinstance(entry.loss, (int, float)) else "")
            )
            parts: list[Any] = []
            inputs = item.inputs
            if "input_ids" in inputs:
                tokenizer = run_tokenizer(run, item.documents[0].source)
                spans = inputs.get("doc_spans") or []
                parts.append(_token_text(list(inputs["input_ids"]), inputs.get("loss_mask"), spans, tokenizer))
                if len(item.documents) > 1:
                    parts.append(Text(f"{len(item.documents)} documents: " + ", ".join(d.key for d in item.documents), style="yellow"))
            else:
                for name, value in entry.inputs.items():
                    parts.append(Text(f"{name}: {_field_text(value)}"))
            console.print(Panel(Group(*parts), title=Text(title), title_align="left"))
        if sample is not None and not any(e.position == sample for e in page.samples):
            console.print(f"[red]error:[/] no sample {sample} at step {step} rank {rank} (samples 0 to {len(page.samples) - 1})")
            raise SystemExit(1)

"""CLI: ``batchscope show`` — the step/rank page in the terminal (same data as the web page and its JSON)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from loaders.catalog.kinds import BYTES_KINDS

from ..reveal import visible, visible_text
from .common import RootOption, console, friendly_errors, open_catalog
from .terminal import media_line, model_media_line, rollout_lines, token_text

#: Model inputs folded into the token view or into a media line rather than printed on their own.
_FOLDED = (
    "input_ids",
    "loss_mask",
    "position_ids",
    "doc_spans",
    "padding",
    "role_spans",
    "frame_indices",
    "frame_times",
    "crop_box",
    "source_size",
)


def install(app: typer.Typer) -> None:
    app.command("show")(show)


def _field_text(value: Any, limit: int = 600) -> str:
    rendered = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    shown = rendered if len(rendered) <= limit else rendered[:limit] + f"… ({len(rendered):,} characters)"
    return visible_text(shown)


def show(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    step: Annotated[int, typer.Option("--step", "-s", help="Training step.")],
    rank: Annotated[int, typer.Option("--rank", help="Rank (below the world size in force at that step).")] = 0,
    sample: Annotated[Optional[int], typer.Option("--sample", help="Only the sample at this position.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly the API's JSON for this page.")] = False,
    root: RootOption = None,
) -> None:
    """Show exactly what RANK consumed at STEP: tokens coloured by boundary, masked tokens dimmed, documents marked.

    Media are one line each (kind, size, dimensions, frame indices and the URL that shows them, on the server
    $BATCHSCOPE_HOST/$BATCHSCOPE_PORT name); rollouts are turns under their reward and advantage. Piped, tokens are
    separated by | and masked runs wrapped in ‹…›.
    """
    from app.flags import FlagStore
    from app.jsonable import jsonable
    from app.pages.steps import rank_page
    from app.run_cache import RunCache
    from app.settings import Settings

    with friendly_errors():
        catalog = open_catalog(root)
        runs = RunCache()
        page = rank_page(catalog, runs, FlagStore.for_catalog(catalog.root, ""), run_name, step, rank)
        if as_json:
            sys.stdout.write(json.dumps(jsonable(page), ensure_ascii=False) + "\n")
            return
        run = runs.run(catalog, run_name)
        batch = runs.batch(run, step, rank)
        base = Settings.from_env().url.rstrip("/")
        style = {True: "green", False: "red", None: "dim"}[page.verified]
        badge = f"[{style}]{escape(page.verification.label)}[/]"
        console.print(
            f"[bold]{page.run}[/] step {page.step} rank {page.rank} · world size {page.world_size} · {badge} · digest {page.digest[:12]}",
            highlight=False,
        )
        for entry, item in zip(page.samples, batch.samples):
            if sample is not None and entry.position != sample:
                continue
            title = (
                f"#{entry.position} · index {entry.index} · {entry.source} · {entry.dataset}@{entry.version[:12]} "
                f"shard {entry.shard} row {entry.row} · key {visible(entry.key)}"
                + (f" · loss {entry.loss:.4f}" if isinstance(entry.loss, (int, float)) else "")
                + (f" · {entry.padding_warning}" if entry.padding_warning else "")
            )
            parts = _sample_parts(run, page, entry, item, base=base, plain=not console.is_terminal)
            console.print(Panel(Group(*parts), title=Text(title), title_align="left"))
        if sample is not None and not any(e.position == sample for e in page.samples):
            console.print(f"[red]error:[/] no sample {sample} at step {step} rank {rank} (samples 0 to {len(page.samples) - 1})")
            raise SystemExit(1)


def _sample_parts(run: Any, page: Any, entry: Any, sample: Any, *, base: str, plain: bool) -> list[Any]:
    """The lines of one sample: its token view, then every other model input (media summarized, rollouts as turns)."""
    from app import urls
    from app.pages.forensics import sample_documents
    from app.renderers.inputs import run_tokenizer

    parts: list[Any] = []
    inputs = sample.inputs
    documents = sample_documents(sample)
    if "input_ids" in inputs:
        tokenizer = run_tokenizer(run, sample.documents[0].source)
        padding = inputs.get("padding") if isinstance(inputs.get("padding"), int) else 0
        spans = inputs.get("doc_spans") or []
        mask = inputs.get("loss_mask")
        labels = inputs.get("labels")
        if mask is None and isinstance(labels, list) and len(labels) == len(inputs["input_ids"]):
            mask = [label != -100 for label in labels]  # labels of -100 are not trained (Hugging Face's convention)
        parts.append(token_text(list(inputs["input_ids"]), mask, spans, tokenizer, padding=padding, plain=plain))
        if not documents:
            parts.append(Text("no document: every token is padding", style="yellow"))
        elif len(documents) > 1:
            parts.append(Text(f"{len(documents)} documents: " + ", ".join(visible(d.key) for d in documents), style="yellow"))
    kinds = run.version(sample.documents[0].source).kinds
    for name, value in inputs.items():
        if name in _FOLDED:
            continue
        kind = kinds.get(name)
        if name == "frames" or (isinstance(value, np.ndarray) and value.ndim >= 2):
            url = base + urls.input_media(page.run, page.step, page.rank, entry.position, name)
            parts.append(Text(model_media_line(name, value, inputs, url)))
        elif kind in BYTES_KINDS or isinstance(value, (bytes, bytearray, memoryview)):
            url = base + urls.media(entry.dataset, entry.version, entry.key, name)
            parts.append(Text(media_line(name, value, kind or "binary", url)))
        elif kind == "rollout":
            parts.extend(rollout_lines(value))
        else:
            parts.append(Text(f"{visible(name)}: {_field_text(value)}"))
    return parts

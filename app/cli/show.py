"""CLI: ``batchscope show`` — the step/rank page in the terminal (same data as the web page and its JSON)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Optional

import numpy as np
import typer
from rich.markup import escape
from rich.text import Text

from loaders.catalog.kinds import BYTES_KINDS
from loaders.rl.facts import number_text

from ..reveal import visible, visible_text
from .common import RootOption, console, friendly_errors, open_catalog, print_error, print_url
from .links import base_url
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


def check_sort_option(sort: str | None) -> str | None:
    """``--sort`` as given, when it is one of the orders the pages know (else one line on stderr, exit 2)."""
    from app.pages.forensics import SORTS

    if sort is not None and sort not in SORTS:
        print_error(f"--sort takes one of {', '.join(SORTS)}, not {sort!r}")
        raise SystemExit(2)
    return sort


SortOption = Annotated[
    Optional[str],
    typer.Option(
        "--sort",
        help="Order of the samples: loss (highest first), length (most real tokens first), source, position, "
        "or for rollouts reward or advantage (highest first).",
        show_default=False,
    ),
]


def counts_text(tokens: int, trained: int, padding: int) -> str:
    """A sample's token counts as one short phrase: trained, masked (real tokens not trained) and padding.

    >>> counts_text(256, 200, 16)
    '256 tokens: 200 trained, 40 masked, 16 padding'
    >>> counts_text(0, 0, 0)
    'no tokens'
    """
    if not tokens:
        return "no tokens"
    masked = max(0, tokens - trained - padding)
    return f"{tokens:,} tokens: {trained:,} trained, {masked:,} masked" + (f", {padding:,} padding" if padding else "")


def show(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    step: Annotated[int, typer.Option("--step", "-s", help="Training step.")],
    rank: Annotated[int, typer.Option("--rank", help="Rank (below the world size in force at that step).")] = 0,
    sample: Annotated[Optional[int], typer.Option("--sample", help="Only the sample at this position.")] = None,
    sort: SortOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print exactly the API's JSON for this page.")] = False,
    root: RootOption = None,
) -> None:
    """Show exactly what RANK consumed at STEP: each sample's loss and token counts, then its tokens coloured by
    boundary, masked tokens dimmed, documents marked.

    Media are one line each (kind, size, dimensions, frame indices and the URL that shows them); rollouts are turns
    under their reward and advantage. URLs are printed whole, on the server `batchscope serve` recorded in the
    catalog (or $BATCHSCOPE_BASE_URL, else $BATCHSCOPE_HOST:$BATCHSCOPE_PORT). Piped, tokens are separated by ¦ and
    masked runs wrapped in ‹…›.
    """
    from app import urls
    from app.flags import FlagStore
    from app.jsonable import jsonable
    from app.pages.forensics import SORTS
    from app.pages.steps import rank_page
    from app.run_cache import RunCache

    sort = check_sort_option(sort)
    with friendly_errors():
        catalog = open_catalog(root)
        runs = RunCache()
        page = rank_page(catalog, runs, FlagStore.for_catalog(catalog.root, ""), run_name, step, rank, sort=sort)
        if as_json:
            sys.stdout.write(json.dumps(jsonable(page), ensure_ascii=False) + "\n")
            return
        run = runs.run(catalog, run_name)
        batch = runs.batch(run, step, rank)
        base = base_url(catalog.root)
        style = {True: "green", False: "bold red", None: "dim"}[page.verified]
        badge = f"[{style}]{escape(page.verification.label)}[/]"
        console.print(
            f"[bold]{escape(page.run)}[/] · step {page.step} · rank {page.rank} of {page.world_size} · {badge} · digest {page.digest[:12]}",
            highlight=False,
        )
        print_url(base + urls.rank(page.run, page.step, page.rank))
        if sample is not None and not any(e.position == sample for e in page.samples):
            print_error(f"no sample {sample} at step {step} rank {rank} (samples 0 to {len(page.samples) - 1})")
            raise SystemExit(1)
        console.print(f"{len(page.samples)} samples, by {SORTS[page.sort]}", style="dim", highlight=False)
        for entry in page.samples:
            if sample is not None and entry.position != sample:
                continue
            console.print()
            for line in sample_header(entry):
                console.print(line, highlight=False)
            print_url(base + entry.step_url)
            for part in _sample_parts(run, page, entry, batch.samples[entry.position], base=base, plain=not console.is_terminal):
                if isinstance(part, Url):
                    print_url(part)
                else:
                    console.print(part, highlight=False)


def sample_header(entry: Any) -> list[Text]:
    """The lines above a sample, each short enough for 80 columns: position and logged loss (a rollout's reward and
    advantage), its token counts, then where it comes from."""
    first = f"#{entry.position} · " + (f"loss {entry.loss:.4f}" if isinstance(entry.loss, (int, float)) else "loss not logged")
    counts = counts_text(entry.tokens, entry.trained_tokens, entry.padding)
    if entry.reward is not None or entry.advantage is not None:
        lines = [Text(f"{first} · reward {number_text(entry.reward)} · advantage {number_text(entry.advantage)}", style="bold")]
        lines.append(Text(f"  {counts}"))
    else:
        lines = [Text(f"{first} · {counts}", style="bold")]
    if entry.all_padding:
        where = "padding: no document"
    else:
        where = f"{entry.dataset}@{entry.version[:12]} shard {entry.shard} row {entry.row} · key {visible(entry.key)}"
    lines.append(Text(f"  {where} · index {entry.index}", style="dim"))
    if entry.padding_warning:
        lines.append(Text(f"  {entry.padding_warning}", style="yellow"))
    return lines


class Url(str):
    """A URL among a sample's lines: printed on a line of its own, whole."""


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
        if name == "frames":  # the sampled frames as a filmstrip page (one PNG each is at .../inputs/frames/{j})
            url = urls.input_view(page.run, page.step, page.rank, entry.position, name)
            parts += [Text(model_media_line(name, value, inputs)), Url(base + url)]
        elif isinstance(value, np.ndarray) and value.ndim >= 2:
            url = urls.input_media(page.run, page.step, page.rank, entry.position, name)
            parts += [Text(model_media_line(name, value, inputs)), Url(base + url)]
        elif kind in BYTES_KINDS or isinstance(value, (bytes, bytearray, memoryview)):
            url = urls.media(entry.dataset, entry.version, entry.key, name)
            parts += [Text(media_line(name, value, kind or "binary")), Url(base + url)]
        elif kind == "rollout":
            parts.extend(rollout_lines(value))
        else:
            parts.append(Text(f"{visible(name)}: {_field_text(value)}"))
    return parts

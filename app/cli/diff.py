"""CLI: ``batchscope diff NAME@A NAME@B`` — what changed between two dataset versions; exits 0 same, 1 different, 2 trouble."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.text import Text

from loaders.diff import DEFAULT_SIMILARITY, FieldDiff, RowChange, TextOp, VersionDiff, diff_versions

from ..reveal import visible, visible_text
from .common import EngineOption, RootOption, console, err_console, friendly_errors, open_catalog
from .terminal import change

_MARKS = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow"), "edited": ("≈", "magenta")}
_CONTEXT = 60
_OPS_SHOWN = 6


def install(app: typer.Typer) -> None:
    app.command("diff")(diff)


def diff(
    a: Annotated[str, typer.Argument(metavar="NAME@A", help="The old version: name@tag or name@id-prefix.")],
    b: Annotated[str, typer.Argument(metavar="NAME@B", help="The new version: name@tag or name@id-prefix.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON instead of text.")] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="How many row changes to show.")] = 20,
    similarity: Annotated[
        float,
        typer.Option("--similarity", min=0.0, max=1.0, help="Keyless datasets: text similarity for pairing rows as edited."),
    ] = DEFAULT_SIMILARITY,
    engine: EngineOption = None,
    root: RootOption = None,
) -> None:
    """Show what changed between two versions. Exit status: 0 identical, 1 different, 2 error (like diff)."""
    code = 2
    try:
        with friendly_errors(exit_code=2):
            from loaders.engine import chosen_name

            chosen_name(engine)  # an unknown engine is refused before anything is read
            catalog = open_catalog(root)
            result = diff_versions(catalog.resolve(a), catalog.resolve(b), similarity=similarity, engine=engine)
            if as_json:
                sys.stdout.write(json.dumps(result.to_json(limit=limit), indent=1, ensure_ascii=False) + "\n")
            else:
                render(result, limit=limit)
            code = 0 if result.identical else 1
    except Exception as exc:  # anything unexpected still means "trouble" (2), never "different" (1)
        err_console.print(Text(f"error: {type(exc).__name__}: {exc}", style="bold red"), soft_wrap=True)
        code = 2
    raise typer.Exit(code)


def render(result: VersionDiff, *, limit: int) -> None:
    """Print the summary and the first ``limit`` row changes."""
    matched = f"key {result.schema.key}" if result.schema.key else "content hash (no key column)"
    console.print(
        Text.assemble(("diff ", "bold"), (result.a.ref, "bold red"), " → ", (result.b.ref, "bold green"), f"  (rows matched by {matched})")
    )
    for warning in result.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    _schema(result)
    shards = result.shards
    console.print(
        f"shards: {len(shards.added)} added, {len(shards.removed)} removed, {len(shards.unchanged)} unchanged "
        f"({shards.unchanged_rows:,} rows skipped without reading)",
        highlight=False,
    )
    counts = result.counts
    console.print(
        Text.assemble(
            "rows: ",
            (f"+{counts.added:,} added", "green"),
            "  ",
            (f"-{counts.removed:,} removed", "red"),
            "  ",
            (f"~{counts.changed:,} changed", "yellow"),
            "  ",
            (f"≈{counts.edited:,} edited", "magenta"),
            "  ",
            f"={counts.unchanged:,} unchanged",
        )
    )
    if result.columns:
        console.print("changed columns: " + ", ".join(f"{c} ({n:,})" for c, n in result.columns.items()), highlight=False)
    if result.identical:
        console.print(Text("identical", style="bold green"))
        return
    shown = 0
    if limit:
        rows = result.rows(limit=limit)
        for row in rows:
            _row(row)
        shown = len(rows)
    rest = counts.different - shown
    if rest > 0:
        console.print(Text(f"… {rest:,} more row change(s); raise --limit or use --json for the cursor", style="dim"))


def _schema(result: VersionDiff) -> None:
    schema = result.schema
    for column in schema.added:
        console.print(Text(f"column + {column.column}: {column.b_type} ({column.b_kind})", style="green"))
    for column in schema.removed:
        console.print(Text(f"column - {column.column}: {column.a_type} ({column.a_kind})", style="red"))
    for column in schema.retyped:
        console.print(Text(f"column ~ {column.column}: {column.a_type} → {column.b_type} (values not compared)", style="yellow"))
    for column in schema.kinds:
        console.print(Text(f"kind ~ {column.column}: {column.a_kind} → {column.b_kind}", style="yellow"))
    if schema.a_tokenizer != schema.b_tokenizer:
        console.print(Text(f"tokenizer ~ {schema.a_tokenizer} → {schema.b_tokenizer}", style="yellow"))
    if schema.a_key != schema.b_key:
        console.print(Text(f"key ~ {schema.a_key} → {schema.b_key}", style="yellow"))


def _where(address: tuple[int, int] | None) -> str:
    return "-" if address is None else f"shard {address[0]} row {address[1]}"


def _row(row: RowChange) -> None:
    mark, style = _MARKS[row.change]
    line = Text.assemble((f"{mark} {visible(row.key)}", f"bold {style}"), (f"  {row.change}", style))
    if row.change == "added":
        line.append(f"  ({_where(row.b_address)})", style="dim")
    elif row.change == "removed":
        line.append(f"  ({_where(row.a_address)})", style="dim")
    else:
        line.append(f"  ({_where(row.a_address)} → {_where(row.b_address)})", style="dim")
    if row.similarity is not None:
        line.append(f"  similarity {row.similarity:.2f}", style="dim")
    console.print(line, soft_wrap=True)
    if row.preview:
        console.print(Text("    " + visible(row.preview)), soft_wrap=True)
    for field in row.fields:
        console.print(_field(field), soft_wrap=True)


def _field(field: FieldDiff) -> Text:
    """One changed field. Piped (not a terminal), changes read ``[-old-]{+new+}``; token ids stay space-separated."""
    plain = not console.is_terminal
    text = Text(f"    {visible(field.column)}: ", style="bold")
    if field.words:
        text.append_text(_words(field.words, plain=plain))
    elif field.ops:
        blocks = [op for op in field.ops if op.op != "equal"]
        for op in blocks[:_OPS_SHOWN]:
            text.append(f"@{op.a_start}:{op.a_end} " if plain else f"[{op.a_start}:{op.a_end}] ", style="dim")
            old, new = " ".join(map(str, op.a)), " ".join(map(str, op.b))
            change(text, old if old or plain else "∅", new if new or plain else "∅", plain=plain, arrow=True)
            text.append("  ")
        if len(blocks) > _OPS_SHOWN:
            text.append(f"(+{len(blocks) - _OPS_SHOWN} more blocks)", style="dim")
    elif field.paths:
        for path in field.paths[:_OPS_SHOWN]:
            text.append(f"\n      {visible(path.path)} ", style="dim")
            if path.words:
                text.append_text(_words(path.words, plain=plain))
            else:
                change(text, _short(path.before), _short(path.after), plain=plain, arrow=True)
        if len(field.paths) > _OPS_SHOWN or field.truncated:
            text.append("\n      …", style="dim")
    else:
        change(text, _short(field.before), _short(field.after), plain=plain, arrow=True)
    return text


def _words(ops: tuple[TextOp, ...], *, plain: bool) -> Text:
    """A word diff: unchanged text (elided in the middle when long), deletions and insertions marked."""
    text = Text()
    for op in ops:
        if op.op == "equal":
            text.append(visible_text(_elide(op.a)))
        else:
            change(text, op.a if op.op != "insert" else "", op.b if op.op != "delete" else "", plain=plain)
    return text


def _elide(segment: str) -> str:
    return segment if len(segment) <= 2 * _CONTEXT else f"{segment[:_CONTEXT]}…{segment[-_CONTEXT:]}"


def _short(value: Any) -> str:
    if value is None:
        return "∅"
    if isinstance(value, dict) and ("sha256" in value):
        size = value.get("size", value.get("bytes"))
        return f"{size:,} bytes sha256 {value['sha256']}"
    shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return shown if len(shown) <= 2 * _CONTEXT else shown[: 2 * _CONTEXT] + "…"

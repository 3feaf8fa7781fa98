"""CLI: list, edit, delete and export the inspector's flags without a server (``batchscope flags list|edit|delete|export``)."""

from __future__ import annotations

import json
import os
from typing import Annotated, Optional

import typer
from rich.table import Table
from rich.text import Text

from ..reveal import visible, visible_text
from .common import RootOption, console, friendly_errors, open_catalog, print_error

flags_app = typer.Typer(
    help="Flagged samples: list, edit and delete them, export them as JSON lines or as a key file for --exclude.",
    no_args_is_help=True,
)

DatasetOption = Annotated[Optional[str], typer.Option("--dataset", "-d", help="Only flags of this dataset.")]
TagOption = Annotated[Optional[str], typer.Option("--tag", "-t", help="Only flags with this tag.")]


def install(app: typer.Typer) -> None:
    app.add_typer(flags_app, name="flags")


def _store(root: str | None):  # -> FlagStore
    from app.flags import FlagStore

    catalog = open_catalog(root)
    return FlagStore.for_catalog(catalog.root, os.environ.get("BATCHSCOPE_FLAGS_PATH", ""))


@flags_app.command("list")
def list_flags(dataset: DatasetOption = None, tag: TagOption = None, limit: int = 50, root: RootOption = None) -> None:
    """Show the newest flags."""
    from app.flags import FlagFilter

    with friendly_errors():
        table = Table("id", "dataset@version", "key", "note", "tags", "created")
        for flag in _store(root).list(FlagFilter(dataset=dataset, tag=tag), limit=limit):
            shown = (visible(flag.key), visible_text(flag.note), visible(", ".join(flag.tags)))  # hostile text: revealed,
            table.add_row(str(flag.id), f"{flag.dataset}@{flag.version[:12]}", *map(Text, shown), flag.created)  # never markup
        console.print(table)


@flags_app.command("export")
def export(
    dataset: DatasetOption = None,
    tag: TagOption = None,
    version: Annotated[Optional[str], typer.Option("--version", help="Only flags of this version id.")] = None,
    keys: Annotated[bool, typer.Option("--keys", help="Print a key file (for register --exclude) instead of JSON lines.")] = False,
    root: RootOption = None,
) -> None:
    """Print flags as JSON lines (what /flags.jsonl serves), or with --keys the flagged keys one a line."""
    from app.flags import FlagFilter
    from app.jsonable import jsonable
    from loaders.catalog.exclude import write_key_file

    with friendly_errors():
        store = _store(root)
        where = FlagFilter(dataset=dataset, tag=tag, version=version)
        if keys:
            typer.echo(write_key_file(store.keys(where)), nl=False)
            return
        for flag in store.iter_all(where):
            typer.echo(json.dumps(jsonable(flag), ensure_ascii=False))


@flags_app.command("edit")
def edit(
    flag_id: Annotated[int, typer.Argument(metavar="ID", help="The flag's id (batchscope flags list shows them).")],
    note: Annotated[Optional[str], typer.Option("--note", help="The new note.")] = None,
    tags: Annotated[Optional[str], typer.Option("--tags", help="The new tags, comma-separated (replace the old ones).")] = None,
    root: RootOption = None,
) -> None:
    """Change a flag's note and/or tags (what is not given is kept)."""
    with friendly_errors(exit_code=2):
        if note is None and tags is None:
            print_error("give --note, --tags or both")
            raise SystemExit(2)
        flag = _store(root).update(flag_id, note=note, tags=tags)
        console.print(Text(f"flag #{flag.id}: {visible_text(flag.note)} [{visible(', '.join(flag.tags))}]"))


@flags_app.command("delete")
def delete(
    flag_id: Annotated[int, typer.Argument(metavar="ID", help="The flag's id (batchscope flags list shows them).")],
    root: RootOption = None,
) -> None:
    """Delete a flag."""
    with friendly_errors(exit_code=2):
        flag = _store(root).delete(flag_id)
        console.print(Text(f"deleted flag #{flag.id} of {flag.dataset}@{flag.version[:12]} {visible(flag.key)}"))

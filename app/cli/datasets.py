"""CLI: register files as dataset versions, list datasets and versions, move tags."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from loaders import BatchscopeError
from loaders.catalog.lineage import checked_parent

from .common import EngineOption, RootOption, console, friendly_errors, open_catalog
from .progress import progress_bar


def install(app: typer.Typer) -> None:
    app.command("register")(register)
    app.command("datasets")(datasets)
    app.command("versions")(versions)
    app.command("tag")(tag)


def _parse_kinds(items: list[str]) -> dict[str, str]:
    kinds = {}
    for item in items:
        column, sep, kind = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--kind expects COLUMN=KIND, got {item!r}")
        kinds[column] = kind
    return kinds


def register(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    files: Annotated[list[str], typer.Argument(help="Parquet files, directories or glob patterns.")],
    key: Annotated[Optional[str], typer.Option("--key", help="Column whose value identifies a row.")] = None,
    tag: Annotated[Optional[str], typer.Option("--tag", help="Tag to move to the new version.")] = None,
    kind: Annotated[list[str], typer.Option("--kind", help="Override a field kind: COLUMN=KIND (repeatable).")] = [],
    tokenizer: Annotated[Optional[str], typer.Option("--tokenizer", help="Catalog tokenizer for token columns.")] = None,
    allow_duplicate_keys: Annotated[
        bool, typer.Option("--allow-duplicate-keys", help="Register a --key column with repeated values: later rows get KEY~1, KEY~2...")
    ] = False,
    exclude: Annotated[
        Optional[str], typer.Option("--exclude", help="File of keys (one per line) to drop; writes filtered copies.")
    ] = None,
    engine: EngineOption = None,
    root: RootOption = None,
) -> None:
    """Register Parquet files as a new version of NAME and print its version id.

    Every file is read once, in parallel (a progress bar with rate and time left on stderr); an interrupted
    registration run again resumes without reading its finished files again.
    """
    with friendly_errors():
        from loaders.engine import chosen_name

        chosen_name(engine)  # an unknown engine is refused before anything is read
        catalog = open_catalog(root)
        paths: list[str] = list(files)
        if exclude:
            from loaders.catalog.exclude import write_excluding

            paths = write_excluding(catalog, name, paths, exclude, key=key)
        with progress_bar(f"register {name}", "bytes") as update:
            version = catalog.register(
                name,
                paths,
                key=key,
                tag=tag,
                kinds=_parse_kinds(kind) or None,
                tokenizer=tokenizer,
                allow_duplicate_keys=allow_duplicate_keys,
                engine=engine,
                progress=update,
            )
        print(version.id)


def datasets(root: RootOption = None) -> None:
    """List registered datasets with their latest version, rows and tags."""
    with friendly_errors():
        catalog = open_catalog(root)
        table = Table("dataset", "latest", "rows", "shards", "tags")
        for name in catalog.datasets():
            try:
                latest = catalog.resolve(name)
                tags = catalog.tags(name)
            except BatchscopeError as exc:  # one broken dataset is listed with its error; the others still show
                table.add_row(name, "-", "-", "-", f"error: {exc.message}")
                continue
            table.add_row(name, latest.short_id, f"{latest.rows:,}", str(len(latest.shards)), ", ".join(sorted(tags)))
        console.print(table)


def versions(name: Annotated[str, typer.Argument(help="Dataset name.")], root: RootOption = None) -> None:
    """List the versions of NAME, oldest first, with parents and tags."""
    with friendly_errors():
        catalog = open_catalog(root)
        tags_by_id: dict[str, list[str]] = {}
        for tag_name, version_id in catalog.tags(name).items():
            tags_by_id.setdefault(version_id, []).append(tag_name)
        table = Table("created (unverified)", "rows", "shards", "parent (unverified)", "tags")
        table.add_column("version", no_wrap=True)
        listed = catalog.versions(name)
        parents = {version.id: version.manifest.parent for version in listed}
        for version in listed:
            parent, refused = checked_parent(version.id, parents)
            table.add_row(
                version.manifest.created[:19].replace("T", " "),
                f"{version.rows:,}",
                str(len(version.shards)),
                (parent or "")[:12] if refused is None else "refused (cycle or unknown)",
                ", ".join(sorted(tags_by_id.get(version.id, []))),
                version.id,
            )
        console.print(table)


def tag(
    ref: Annotated[str, typer.Argument(help="NAME@VERSION-or-TAG to point at.")],
    tag_name: Annotated[str, typer.Argument(metavar="TAG", help="Tag to move.")],
    root: RootOption = None,
) -> None:
    """Point TAG at a version of a dataset."""
    with friendly_errors():
        version = open_catalog(root).tag(ref, tag_name)
        print(version.id)

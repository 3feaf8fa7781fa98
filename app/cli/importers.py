"""CLI: ``batchscope import {jsonl,parquet,huggingface,mds,images,webdataset}`` bring other formats into the catalog."""

from __future__ import annotations

from typing import Annotated, Callable, Optional

import typer

from .common import EngineOption, RootOption, friendly_errors, open_catalog
from .progress import progress_bar

KeyOption = Annotated[Optional[str], typer.Option("--key", help="Column whose value identifies a row (must be unique).")]
TagOption = Annotated[Optional[str], typer.Option("--tag", help="Tag to move to the new version.")]
RowsPerShardOption = Annotated[
    Optional[int], typer.Option("--rows-per-shard", min=1, help="Rows per Parquet shard (default: about 256 MB of data).")
]
RowGroupOption = Annotated[
    Optional[int],
    typer.Option("--row-group-size", min=1, help="Rows per row group (default: at most 1,000 rows and about 2 MB)."),
]
KindOption = Annotated[list[str], typer.Option("--kind", help="Override a field kind: COLUMN=KIND (repeatable).")]
CopyMediaOption = Annotated[
    bool,
    typer.Option("--copy-media", help="Copy the files of media stored only by path into the shards (else such rows are refused)."),
]
MediaRootOption = Annotated[
    Optional[str],
    typer.Option("--media-root", help="Folder the media paths must lie in (default: the source folder); others are refused."),
]


def install(app: typer.Typer) -> None:
    group = typer.Typer(
        help="Import JSONL, Parquet from other tools, Hugging Face folders, Mosaic MDS, image folders or WebDataset tars.",
        no_args_is_help=True,
    )
    group.command("jsonl")(jsonl)
    group.command("parquet")(parquet)
    group.command("huggingface")(huggingface)
    group.command("mds")(mds)
    group.command("images")(images)
    group.command("webdataset")(webdataset)
    app.add_typer(group, name="import")


def _kinds(items: list[str]) -> dict[str, str] | None:
    kinds = {}
    for item in items:
        column, sep, kind = item.partition("=")
        if not sep or not column or not kind:
            raise typer.BadParameter(f"--kind expects COLUMN=KIND, got {item!r}")
        kinds[column] = kind
    return kinds or None


def _run(label: str, unit: str, action: Callable[[Callable[[int, Optional[int]], None]], object]) -> None:
    """Run an import with a progress bar; print the version id (``NAME VERSION`` lines when it made several datasets)."""
    with friendly_errors():
        with progress_bar(label, unit) as update:
            result = action(update)
        if isinstance(result, dict):
            for dataset, version in result.items():
                print(dataset, version.id)
        else:
            print(result.id)  # type: ignore[attr-defined]


def _import(
    unit: str,
    importer: Callable[..., object],
    name: str,
    source: object,
    *,
    root: Optional[str],
    kind: list[str],
    engine: Optional[str],
    **options: object,
) -> None:
    """Run ``importer(catalog, name, source, kinds=..., progress=..., engine=..., **options)`` with a progress bar counting ``unit``."""
    kinds = _kinds(kind)
    with friendly_errors():
        from loaders.engine import chosen_name

        chosen_name(engine)  # an unknown engine is refused before anything is read
    _run(
        f"import {name}",
        unit,
        lambda progress: importer(open_catalog(root), name, source, kinds=kinds, progress=progress, engine=engine, **options),
    )


def jsonl(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    files: Annotated[list[str], typer.Argument(help="JSONL files (.jsonl, .gz, .bz2, .xz, .zst), directories or globs.")],
    key: KeyOption = None,
    tag: TagOption = None,
    json_column: Annotated[
        list[str], typer.Option("--json-column", help="Store this column as JSON text (for mixed value types; repeatable).")
    ] = [],
    kind: KindOption = [],
    rows_per_shard: RowsPerShardOption = None,
    row_group_size: RowGroupOption = None,
    engine: EngineOption = None,
    root: RootOption = None,
) -> None:
    """Import JSON Lines files as a new version of NAME and print its version id."""
    from loaders.importers import import_jsonl

    _import(
        "bytes", import_jsonl, name, files, root=root, engine=engine, kind=kind, key=key, tag=tag, json_columns=json_column,
        rows_per_shard=rows_per_shard, row_group_size=row_group_size,
    )  # fmt: skip


def parquet(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    paths: Annotated[list[str], typer.Argument(help="Parquet files or folders (Hugging Face, pandas, Spark output).")],
    key: KeyOption = None,
    tag: TagOption = None,
    kind: KindOption = [],
    copy_media: CopyMediaOption = False,
    media_root: MediaRootOption = None,
    rows_per_shard: RowsPerShardOption = None,
    row_group_size: RowGroupOption = None,
    engine: EngineOption = None,
    root: RootOption = None,
) -> None:
    """Rewrite Parquet written by other tools as a new version of NAME and print its version id."""
    from loaders.importers import import_parquet

    _import(
        "rows", import_parquet, name, paths, root=root, engine=engine, kind=kind, key=key, tag=tag, copy_media=copy_media, media_root=media_root,
        rows_per_shard=rows_per_shard, row_group_size=row_group_size,
    )  # fmt: skip


def huggingface(
    name: Annotated[str, typer.Argument(help="Dataset name; each split is imported as NAME.SPLIT (NAME.CONFIG.SPLIT).")],
    source: Annotated[str, typer.Argument(help="A save_to_disk folder (Dataset or DatasetDict) or a Hub-style folder.")],
    split: Annotated[list[str], typer.Option("--split", help="Import only this split (train, config.train; repeatable).")] = [],
    key: KeyOption = None,
    tag: TagOption = None,
    kind: KindOption = [],
    copy_media: CopyMediaOption = False,
    media_root: MediaRootOption = None,
    rows_per_shard: RowsPerShardOption = None,
    row_group_size: RowGroupOption = None,
    engine: EngineOption = None,
    root: RootOption = None,
) -> None:
    """Import every split of a Hugging Face dataset folder as its own dataset; print NAME.SPLIT and the version id of each."""
    from loaders.importers import import_huggingface

    _import(
        "rows", import_huggingface, name, source, root=root, engine=engine, kind=kind, splits=split or None, key=key, tag=tag, copy_media=copy_media, media_root=media_root,
        rows_per_shard=rows_per_shard, row_group_size=row_group_size,
    )  # fmt: skip


def mds(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    source: Annotated[str, typer.Argument(help="A Mosaic MDS folder (its index.json and shard files).")],
    key: KeyOption = None,
    tag: TagOption = None,
    kind: KindOption = [],
    rows_per_shard: RowsPerShardOption = None,
    row_group_size: RowGroupOption = None,
    engine: EngineOption = None,
    root: RootOption = None,
) -> None:
    """Import Mosaic MDS shards (encoded images kept as stored) as a new version of NAME and print its version id."""
    from loaders.importers import import_mds

    _import(
        "rows", import_mds, name, source, root=root, engine=engine, kind=kind, key=key, tag=tag,
        rows_per_shard=rows_per_shard, row_group_size=row_group_size,
    )  # fmt: skip


def images(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    folder: Annotated[str, typer.Argument(help="Folder with one subfolder per class (root/cat/1.jpg → label cat).")],
    tag: TagOption = None,
    no_verify: Annotated[bool, typer.Option("--no-verify", help="Skip decoding every image once.")] = False,
    rows_per_shard: RowsPerShardOption = None,
    row_group_size: RowGroupOption = None,
    engine: EngineOption = None,
    root: RootOption = None,
) -> None:
    """Import an image folder as a new version of NAME (key: the relative path) and print its version id."""
    from loaders.importers import import_images

    _import(
        "files", import_images, name, folder, root=root, engine=engine, kind=[], tag=tag, verify=not no_verify,
        rows_per_shard=rows_per_shard, row_group_size=row_group_size,
    )  # fmt: skip


def webdataset(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    shards: Annotated[list[str], typer.Argument(help="WebDataset .tar / .tar.gz shards, directories or globs.")],
    tag: TagOption = None,
    kind: KindOption = [],
    rows_per_shard: RowsPerShardOption = None,
    row_group_size: RowGroupOption = None,
    engine: EngineOption = None,
    root: RootOption = None,
) -> None:
    """Import WebDataset tar shards as a new version of NAME (key: the sample key) and print its version id."""
    from loaders.importers import import_webdataset

    _import(
        "bytes", import_webdataset, name, shards, root=root, engine=engine, kind=kind, tag=tag,
        rows_per_shard=rows_per_shard, row_group_size=row_group_size,
    )  # fmt: skip

"""Import Parquet written by other tools (Hugging Face ``datasets``, pandas, Spark) into our row-group layout.

- Hugging Face: the ``huggingface`` schema metadata (its feature types) is kept,
  so ``Image``/``Video`` features are inferred as image/video kinds.
- pandas: ``__index_level_N__`` index columns and the ``pandas`` metadata are dropped.
- Spark: ``_SUCCESS``, ``_committed_*``, ``.crc`` and other hidden files are
  ignored; Hive-style ``column=value`` directories become string columns.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from typing import TYPE_CHECKING, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..engine import ordered, resolve_engine
from ..errors import RegistrationError
from ..storage.shard_scan import scan_shard
from .hf_layout import shard_split
from .writer import MAX_ROW_GROUP_ROWS, Progress, input_files, write_files

if TYPE_CHECKING:
    from ..engine import Engine

SUFFIXES = (".parquet", ".parq", ".pq")
_INDEX_COLUMN = re.compile(r"^__index_level_\d+__$")
#: Writer metadata that describes the source file's layout, not the data: dropped.
_DROPPED_METADATA = (b"pandas", b"ARROW:schema", b"org.apache.spark.")
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def _partitions(path: str, roots: list[str]) -> list[tuple[str, str | None]]:
    """``column=value`` directories between the input directory and ``path``."""
    for root in roots:
        if path.startswith(root + os.sep):
            parts = os.path.relpath(os.path.dirname(path), root).split(os.sep)
            found = []
            for part in parts:
                column, sep, value = part.partition("=")
                if sep and column:
                    text = urllib.parse.unquote(value)
                    found.append((column, None if text == _HIVE_NULL else text))
            return found
    return []


def _data_fields(schema: pa.Schema) -> list[pa.Field]:
    return [field for field in schema if not _INDEX_COLUMN.match(field.name)]


def _metadata(schema: pa.Schema) -> dict[bytes, bytes]:
    return {k: v for k, v in (schema.metadata or {}).items() if not k.startswith(_DROPPED_METADATA)}


def read_schema(path: str) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise RegistrationError(f"{path}: not a readable Parquet file ({exc})") from exc


def _unified_schema(files: list[str], partitions: dict[str, list[tuple[str, str | None]]]) -> pa.Schema:
    first = read_schema(files[0])
    fields = {f.name: f for f in _data_fields(first)}
    order = list(fields)
    for path in files[1:]:
        for field in _data_fields(read_schema(path)):
            if field.name not in fields:
                fields[field.name] = field.with_nullable(True)
                order.append(field.name)
                continue
            try:
                merged = pa.unify_schemas([pa.schema([fields[field.name]]), pa.schema([field])], promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise RegistrationError(
                    f"{path}: column {field.name!r} is {field.type} but {fields[field.name].type} in {files[0]}"
                ) from exc
            fields[field.name] = merged.field(0)
    stored = set(fields)
    for path in files:
        for column, _ in partitions[path]:
            if column in stored:
                raise RegistrationError(f"{path}: partition directory {column}=... repeats a column stored in the files")
            if column not in fields:
                fields[column] = pa.field(column, pa.string())
                order.append(column)
    return pa.schema([fields[name] for name in order], metadata=_metadata(first) or None)


def _conform(table: pa.Table, schema: pa.Schema, partitions: list[tuple[str, str | None]]) -> pa.Table:
    """``table`` with ``schema``'s columns, in its order: missing ones null, partition values filled in."""
    values = dict(partitions)
    columns = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            columns.append(column if column.type == field.type else column.cast(field.type))
        elif field.name in values:
            columns.append(pa.array([values[field.name]] * len(table), field.type))
        else:
            columns.append(pa.nulls(len(table), field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def import_parquet(
    catalog: CatalogStore,
    name: str,
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    tag: str | None = None,
    key: str | None = None,
    rows_per_shard: int | None = None,
    row_group_size: int | None = None,
    kinds: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    copy_media: bool = False,
    media_root: str | None = None,
    engine: "str | Engine | None" = None,
) -> DatasetVersion:
    """Rewrite Parquet files or folders written by other tools as a new version of ``name``.

    Files are read in sorted path order, one batch at a time; columns missing
    from some files are null there; compatible types are widened (int32 and
    int64 → int64), incompatible ones are an error naming both files. A
    folder holding several Hugging Face splits is refused (``import_huggingface``
    imports each on its own). Media stored only by path is refused, or with
    ``copy_media`` copied from below ``media_root`` (default: the folder given).

    >>> import_parquet(catalog, "squad", "exports/squad/", tag="v1")  # doctest: +SKIP
    DatasetVersion(squad@3f2a..., rows=87599, shards=1)
    """
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    roots = [os.path.abspath(os.fspath(item)) for item in items if os.path.isdir(os.fspath(item))]
    files = [f for f in input_files(source, suffixes=SUFFIXES, what="Parquet") if not f.endswith(".crc")]
    partitions = {path: _partitions(path, roots) for path in files}
    schema = _unified_schema(files, partitions)
    # Footers and pages checked before any row is decoded (a lying footer is refused by name), every file at once.
    total = sum(ordered(resolve_engine(engine), checked_rows, files, labels=files))
    refuse_merged_splits(files, roots)
    read = lambda path: (  # noqa: E731
        _conform(pa.Table.from_batches([batch]), schema, partitions[path])
        for batch in pq.ParquetFile(path).iter_batches(batch_size=row_group_size or MAX_ROW_GROUP_ROWS)
    )
    return write_files(
        catalog, name, files, fmt="parquet", schema=schema, read=read, total=total, source=", ".join(files),
        tag=tag, key=key, rows_per_shard=rows_per_shard, row_group_size=row_group_size, kinds=kinds,
        progress=progress, copy_media=copy_media, media_root=media_root or (roots[0] if len(roots) == 1 else None), engine=engine,
    )  # fmt: skip


def checked_rows(path: str) -> int:
    """Task: check one input's footer and page headers (as registration does); its row count."""
    shard, _ = scan_shard(path)
    return shard.rows


def refuse_merged_splits(files: list[str], roots: list[str]) -> None:
    """Refuse a folder holding several Hugging Face splits (``train-*``, ``test-*``): merging them would be silent."""
    splits = sorted({split for path in files if (split := shard_split(os.path.basename(path)))})
    if len(splits) > 1:
        raise RegistrationError(
            f"{', '.join(roots or files)} holds the splits {', '.join(splits)}; import it with `batchscope import huggingface` "
            "(one dataset per split), or name the files of one split"
        )

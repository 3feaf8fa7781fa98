"""Import a Hugging Face dataset folder: ``save_to_disk`` Arrow files or a Hub-style Parquet layout, one dataset per split.

The ``huggingface`` schema metadata (feature types: ``Image``, ``Audio``,
``ClassLabel``...) is kept, so kinds and class names are known. See
``hf_layout`` for how splits and configs are found and named.
"""

from __future__ import annotations

import os
from typing import Any, Iterator, Sequence, Unpack

import pyarrow as pa

from ..catalog.store import CatalogStore, check_name
from ..catalog.version import DatasetVersion
from ..errors import RegistrationError
from .hf_layout import Part, find_parts
from .parquet import import_parquet, read_schema
from .writer import ImportOptions, write_files

#: Writer metadata of an Arrow file that describes its layout, not the data: dropped.
_DROPPED_METADATA = (b"pandas",)


def _batches(source: pa.MemoryMappedFile, path: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The schema and batches of an Arrow IPC file (random-access format) or stream (what ``save_to_disk`` writes)."""
    try:
        reader = pa.ipc.open_file(source)
        return reader.schema, (reader.get_batch(i) for i in range(reader.num_record_batches))
    except pa.ArrowInvalid:
        source.seek(0)
    try:
        stream = pa.ipc.open_stream(source)
    except pa.ArrowInvalid as exc:
        raise RegistrationError(f"{path}: not an Arrow IPC file or stream ({exc})") from exc
    return stream.schema, iter(stream)


def _arrow_tables(path: str) -> Iterator[pa.Table]:
    with pa.memory_map(path) as source:
        _, batches = _batches(source, path)
        for batch in batches:
            yield pa.Table.from_batches([batch])


def _arrow_schema(files: Sequence[str]) -> tuple[pa.Schema, int]:
    """The schema every file shares (with its feature metadata) and the total row count."""
    schema: pa.Schema | None = None
    rows = 0
    for path in files:
        try:
            with pa.memory_map(path) as source:  # memory-mapped: counting rows reads only batch headers
                this, batches = _batches(source, path)
                rows += sum(batch.num_rows for batch in batches)
        except (pa.ArrowException, OSError) as exc:
            raise RegistrationError(f"{path}: not a readable Arrow file ({exc})") from exc
        if schema is None:
            metadata = {k: v for k, v in (this.metadata or {}).items() if not k.startswith(_DROPPED_METADATA)}
            schema = this.with_metadata(metadata or None)
        elif not this.equals(schema, check_metadata=False):
            raise RegistrationError(f"{path}: its columns differ from {files[0]}'s ({this.names} vs {schema.names})")
    assert schema is not None
    return schema, rows


def _import_arrow(catalog: CatalogStore, name: str, files: Sequence[str], **options: Any) -> DatasetVersion:
    schema, total = _arrow_schema(files)
    return write_files(
        catalog, name, list(files), fmt="arrow", schema=schema, read=_arrow_tables, total=total,
        source=", ".join(files), **options,
    )  # fmt: skip


def import_huggingface(
    catalog: CatalogStore,
    name: str,
    source: str | os.PathLike[str],
    *,
    splits: Sequence[str] | None = None,
    copy_media: bool = False,
    media_root: str | None = None,
    **options: Unpack[ImportOptions],
) -> dict[str, DatasetVersion]:
    """Import every split (and config) of the Hugging Face dataset at ``source``, each as its own dataset.

    Every split's files are checked (readable, one schema) before the first is
    imported; a row refused later (media stored by path) stops the import
    there, leaving the splits imported before it.

    ``splits`` picks some (by suffix: ``train``, ``config.train``). Returns
    dataset name → new version. Media stored only by path is refused, or with
    ``copy_media`` copied from below ``media_root`` (default: ``source``).

    >>> sorted(import_huggingface(catalog, "squad", "squad-saved/", tag="v1"))  # doctest: +SKIP
    ['squad.train', 'squad.validation']
    """
    root = os.path.abspath(os.fspath(source))
    parts: list[Part] = find_parts(root)
    if splits is not None:
        unknown = sorted(set(splits) - {p.suffix for p in parts})
        if unknown:
            raise RegistrationError(
                f"{root}: no split {', '.join(map(repr, unknown))}; it holds {', '.join(p.suffix or '(one dataset)' for p in parts)}"
            )
        parts = [p for p in parts if p.suffix in splits]
    for part in parts:  # every split's files readable, with one schema each, before any split is imported
        check_name("dataset", part.dataset(name))
        if part.arrow:
            _arrow_schema(part.files)
        else:
            for path in part.files:
                read_schema(path)
    folder = root if os.path.isdir(root) else os.path.dirname(root)
    settings: dict[str, Any] = {**options, "copy_media": copy_media, "media_root": media_root or folder}
    versions = {}
    for part in parts:
        dataset = part.dataset(name)
        if part.arrow:
            versions[dataset] = _import_arrow(catalog, dataset, part.files, **settings)
        else:
            versions[dataset] = import_parquet(catalog, dataset, list(part.files), **settings)
    return versions

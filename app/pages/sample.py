"""Page data of a sample permalink: one row of one version, every field rendered by its kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from loaders import Catalog, DatasetVersion
from loaders.catalog.kinds import BYTES_KINDS
from loaders.catalog.records import Record
from loaders.errors import BatchscopeError, CorruptData, SampleNotFound, StorageError

from .. import urls
from ..cut import Cut, cut_row
from ..decode_budget import DecodeBudget
from ..flags import Flag, FlagFilter, FlagStore
from ..jsonable import html_only
from ..renderers.registry import FieldContext, View, render_field
from .common import Link
from .datasets import version_tokenizer
from .row_sizes import reading_row_groups
from .where import OpenRun, RunReads, where_read_panel

#: How many of a sample's flags its flag form lists (newest first).
FLAGS_SHOWN = 20


@dataclass
class FieldBlock:
    """One rendered field of a sample (HTML); ``cut`` when only its beginning is shown."""

    column: str
    kind: str
    fragment_url: str
    view: View
    cut: Cut | None = None


@dataclass
class FlagForm:
    """What the flag form posts, and the flags the sample already has."""

    action: str
    dataset: str
    version: str
    key: str
    run: str | None = None
    step: int | None = None
    rank: int | None = None
    index: int | None = None
    position: int | None = None
    flags: list[Flag] = field(default_factory=list)
    message: str = ""
    error: str = ""


@dataclass
class SamplePage:
    dataset: str
    version: str
    ref: str
    key: str
    index: int
    shard: int
    row: int
    url: str
    version_url: str
    fields: dict[str, Any]
    kinds: dict[str, str]
    flags: list[Flag]
    warnings: list[str]
    #: Fields too large to show whole, by column: what ``fields`` holds of them and the URL of the whole value.
    cut: dict[str, Cut] = field(default_factory=dict)
    prev_url: str | None = None
    next_url: str | None = None
    #: Every run that read this sample, per epoch (None when not asked for: a single field's fragment).
    where: list[RunReads] | None = None
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    blocks: list[FieldBlock] = html_only(default_factory=list)
    flag_form: FlagForm | None = html_only(None)
    highlight: str | None = html_only(None)


def _neighbour(version: DatasetVersion, index: int, **query: Any) -> str | None:
    if not 0 <= index < version.rows:
        return None
    try:
        shard, row = version.locate(index)
        key = version._stored_key(shard, row) if version.key else version.key_at(shard, row, version.record(index))
    except BatchscopeError:  # a broken neighbour must not break this sample's page; it just gets no link
        return None
    return urls.sample(version.name, version, key, **query)


def flag_form(flags: FlagStore, version: DatasetVersion, key: str, *, existing: list[Flag] | None = None, **context: Any) -> FlagForm:
    """The flag form of one sample, with the flags it already has (``existing``, when the caller fetched them).

    When the flag database fails (disk full, unwritable) the form carries the error inline; the page still renders.
    """
    error = ""
    if existing is None:
        try:
            existing = flags.list(FlagFilter(dataset=version.name, version=version.id, key=key), limit=FLAGS_SHOWN)
        except StorageError as exc:
            existing, error = [], exc.message
    return FlagForm(action=urls.flags(), dataset=version.name, version=version.id, key=key, flags=existing, error=error, **context)


def render_fields(
    record: Record,
    version: DatasetVersion,
    *,
    key: str,
    shard: int,
    row: int,
    tokenizer: Any,
    only: str | None,
    highlight: str | None,
    collapse_chars: int,
    token_threshold: int,
    cuts: dict[str, Cut] | None = None,
) -> list[FieldBlock]:
    """Every field of ``record`` (or just ``only``, in full) rendered by its kind; ``cuts`` says which values are only
    their beginning (``app.cut``)."""
    columns = [f.name for f in version.schema]
    if only is not None:
        if only not in columns:
            raise SampleNotFound(f"{version.ref} has no column {only!r} (columns: {', '.join(columns)})")
        columns = [only]
    blocks = []
    for column in columns:
        kind = version.kinds.get(column, "json")
        fragment = urls.sample(version.name, version, key, field=column, q=highlight)
        ctx = FieldContext(
            column=column,
            kind=kind,
            record=record,
            kinds=version.kinds,
            tokenizer=tokenizer,
            highlight=highlight,
            full=only is not None,
            fragment_url=fragment,
            media_url=urls.media(version.name, version, key, column) if kind in BYTES_KINDS else None,
            collapse_chars=collapse_chars,
            token_threshold=token_threshold,
            where=version.where(shard, row),
            class_names=version.class_names.get(column, ()),
        )
        blocks.append(FieldBlock(column, kind, fragment, render_field(record.get(column), ctx), (cuts or {}).get(column)))
    return blocks


def sample_page(
    catalog: Catalog,
    flags: FlagStore,
    version: DatasetVersion,
    key: str,
    *,
    only: str | None = None,
    highlight: str | None = None,
    collapse_chars: int = 2000,
    token_threshold: int = 1024,
    budget: DecodeBudget | None = None,
    open_run: OpenRun | None = None,
    where_run: str | None = None,
    where_epoch: int = 0,
    field_bytes: int = 1 << 20,
) -> SamplePage:
    """One sample by key: where it lives, every field (values over ``field_bytes`` cut, linking to the whole), its
    flags, links to its neighbours (413 over ``budget``), and (given ``open_run``) every run that read it, per epoch,
    from ``where_epoch`` on (only ``where_run`` when given)."""
    shard, row = version.find(key)
    with reading_row_groups(version, [(shard, version.row_group_of(shard, row)[0])], budget, f"sample {key!r}"):
        group, offset = version.row_group_of(shard, row)
        table = version.row_group(shard, group).slice(offset, 1)
        try:
            record, cuts = cut_row(table, field_bytes, lambda column: urls.media(version.name, version, key, column))
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:  # what converting a hostile value raises
            raise CorruptData(f"{version.where(shard, row)}: cannot be decoded: {exc}") from exc
        del table
    index = version.index_of(shard, row)
    tokenizer, warning = version_tokenizer(catalog, version)
    blocks = render_fields(
        record,
        version,
        key=key,
        shard=shard,
        row=row,
        tokenizer=tokenizer,
        only=only,
        highlight=highlight,
        collapse_chars=collapse_chars,
        token_threshold=token_threshold,
        cuts=cuts,
    )
    form = flag_form(flags, version, key)
    name = version.name
    where = None
    if open_run is not None and only is None:
        where = where_read_panel(catalog, open_run, version, key, index, run=where_run, first_epoch=where_epoch)
    return SamplePage(
        dataset=name,
        version=version.id,
        ref=version.ref,
        key=key,
        index=index,
        shard=shard,
        row=row,
        url=urls.sample(name, version, key),
        version_url=urls.version(name, version, start=index),
        fields={b.column: record.get(b.column) for b in blocks},
        kinds={b.column: b.kind for b in blocks},
        flags=form.flags,
        warnings=[warning] if warning else [],
        cut={column: cuts[column] for column in cuts if any(b.column == column for b in blocks)},
        prev_url=_neighbour(version, index - 1) if only is None else None,
        next_url=_neighbour(version, index + 1) if only is None else None,
        where=where,
        title=f"{key} · {version.ref}",
        crumbs=[
            Link("datasets", urls.home()),
            Link(name, urls.dataset(name)),
            Link(version.short_id, urls.version(name, version)),
            Link(key, urls.sample(name, version, key)),
        ],
        blocks=blocks,
        flag_form=form,
        highlight=highlight,
    )

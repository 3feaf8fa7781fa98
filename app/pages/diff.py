"""Page data of a version diff: summary, schema and shard changes, paged row changes, and one row's field diffs.

The work is done by ``loaders.diff.diff_versions`` (its key-level match is
cached in the catalog); this module turns it into the page's dataclasses.

>>> diff = diff_versions(catalog.resolve("web-text@v1"), catalog.resolve("web-text@v2"))   # doctest: +SKIP
>>> page = diff_page(diff, change="changed", page_size=20)                                  # doctest: +SKIP
>>> [row.key for row in page.listing.rows][:2]                                             # doctest: +SKIP
['argparse.Namespace', 'ast.AST']
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from loaders import Catalog, DatasetVersion
from loaders.diff import ROW_CHANGES, FieldDiff, RowChange, VersionDiff
from loaders.errors import BatchscopeError, NotFound
from loaders.media import ImageInfo, image_info

from .. import urls
from ..cut import cut_json
from ..errors import BadQuery
from ..jsonable import html_only
from ..media_cache import MediaCache
from ..renderers.diff import (
    FramePair,
    ImageDiffView,
    MediaSide,
    VideoDiffView,
    spread,
    struct_diff_view,
    text_diff_view,
    token_diff_view,
    value_diff_view,
)
from ..renderers.kinds import presentation
from ..renderers.registry import ErrorView, View
from ..templating import count, human_bytes
from .common import Link
from .datasets import version_tokenizer
from .media import MediaField, load_field, video_info

log = logging.getLogger("batchscope.app")


class MalformedDiff(BadQuery):
    """A diff URL whose ``{a}..{b}`` part is not two versions."""


class ChangeNotFound(NotFound):
    """A ``?key=`` that is not among the changed rows of a diff."""


# -- which versions ----------------------------------------------------------------
def parse_spec(spec: str) -> tuple[str, str | None, str]:
    """``"A..B"`` → ``(A, None, B)``; ``"A..other@B"`` → ``(A, "other", B)`` (B of another dataset).

    Names cannot hold ``..``, so the last ``..`` separates the two (a tag may end with ``.``).

    >>> parse_spec("v1..v2"), parse_spec("v1...v2"), parse_spec("3a3d..web-copy@v2")
    (('v1', None, 'v2'), ('v1.', None, 'v2'), ('3a3d', 'web-copy', 'v2'))
    """
    a, sep, b = spec.rpartition("..")
    other, at, selector = b.partition("@")
    if not sep or not a or not b or "@" in a or (at and (not other or not selector)):
        raise MalformedDiff(
            f"diff {spec!r} is not A..B: give two versions of the dataset (tags, id prefixes or ids) such as v1..v2, "
            "or A..other-dataset@B to compare with another dataset"
        )
    return (a, other, selector) if at else (a, None, b)


def resolve_pair(catalog: Catalog, name: str, spec: str) -> tuple[DatasetVersion, DatasetVersion, bool]:
    """Both versions ``spec`` names, and whether ``spec`` is already canonical (full ids, ``other@`` only for another dataset)."""
    a_sel, other, b_sel = parse_spec(spec)
    a = catalog.resolve(f"{name}@{a_sel}")
    b = catalog.resolve(f"{other or name}@{b_sel}")
    canonical = a_sel == a.id and b_sel == b.id and (other is None) == (b.name == name)
    return a, b, canonical


def b_spec(name: str, b: DatasetVersion) -> str:
    """How a diff URL of dataset ``name`` writes its B side: the version id, prefixed by its dataset when that differs."""
    return b.id if b.name == name else f"{b.name}@{b.id}"


def diff_url(diff: VersionDiff, **query: Any) -> str:
    """The canonical URL of ``diff`` (page path of A's dataset), with ``query``."""
    return urls.diff(diff.a.name, diff.a.id, b_spec(diff.a.name, diff.b), **query)


# -- page data ---------------------------------------------------------------------
@dataclass
class SideInfo:
    """One version of the diff."""

    name: str
    id: str
    ref: str
    rows: int
    shards: int
    tokenizer: str | None
    url: str


@dataclass
class SampleSide:
    """Where a changed row lives in one version, and its permalink."""

    version: str
    shard: int
    row: int
    key: str | None
    url: str | None


@dataclass
class RowItem:
    """One added, removed, changed or edited row of the listing."""

    key: str
    change: str
    a: SampleSide | None
    b: SampleSide | None
    similarity: float | None
    preview: str | None
    columns: list[str]
    detail_url: str | None
    fields: list[dict[str, Any]]
    element_id: str = html_only("")


@dataclass
class Facet:
    """A filter link with how many rows it keeps (``None``: not known without reading)."""

    label: str
    url: str
    count: int | None
    active: bool


@dataclass
class RowsBlock:
    """One page of row changes (what the htmx pager swaps): filters, rows, and the cursor of the next page."""

    change: str | None
    column: str | None
    after: str | None
    matching: int | None
    rows: list[RowItem]
    next: str | None
    next_url: str | None
    first_url: str | None
    summary: str
    changes: list[Facet] = html_only(default_factory=list)
    columns: list[Facet] = html_only(default_factory=list)


@dataclass
class RowDetail:
    """A changed row with every differing field, side by side."""

    key: str
    change: str
    a: SampleSide | None
    b: SampleSide | None
    similarity: float | None
    fields: list[dict[str, Any]]
    panes: list[FieldPane] = html_only(default_factory=list)


@dataclass
class SchemaRow:
    """A column added, removed, retyped or given another field kind."""

    change: str
    column: str
    a_type: str | None
    b_type: str | None
    a_kind: str | None
    b_kind: str | None


@dataclass
class DiffPage:
    dataset: str
    a: SideInfo
    b: SideInfo
    #: This view (with ``?key=`` for one row) and the whole diff.
    url: str
    diff_url: str
    same_dataset: bool
    identical: bool
    warnings: list[str]
    key: str | None
    similarity: float | None
    schema: dict[str, Any]
    shards: dict[str, Any]
    counts: dict[str, int]
    columns: dict[str, int]
    duplicates: dict[str, Any]
    listing: RowsBlock | None = None
    detail: list[RowDetail] | None = None
    detail_key: str | None = None
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    schema_rows: list[SchemaRow] = html_only(default_factory=list)
    #: The row counts the summary shows, each with what it counts (``edited`` only for data without a key column).
    count_rows: list[CountRow] = html_only(default_factory=list)


@dataclass(frozen=True)
class CountRow:
    """One count of the diff summary and the sentence its hover text gives."""

    name: str
    count: int
    help: str


def count_rows(counts: dict[str, int], *, key: str | None, similarity: float | None) -> list[CountRow]:
    """The summary's counts: ``edited`` exists only where rows are matched by content (no key column).

    >>> [r.name for r in count_rows({"added": 1, "removed": 0, "changed": 2, "edited": 0, "unchanged": 5}, key="id", similarity=None)]
    ['added', 'removed', 'changed', 'unchanged']
    """
    by = f"key {key}" if key else "content hash"
    helps = {
        "added": f"rows only in B (matched by {by})",
        "removed": f"rows only in A (matched by {by})",
        "changed": "rows with the same key and other values",
        "edited": f"a removed and an added row at least {similarity:g} alike, counted as one edited row" if similarity is not None else "",
        "unchanged": "rows equal in A and B",
    }
    shown = [name for name in helps if name != "edited" or key is None]
    return [CountRow(name, counts.get(name, 0), helps[name]) for name in shown]


def _side(version: DatasetVersion, address: tuple[int, int] | None, key: str | None) -> SampleSide | None:
    if address is None:
        return None
    url = urls.sample(version.name, version, key) if key is not None else None
    return SampleSide(version.id, address[0], address[1], key, url)


def _sides(diff: VersionDiff, row: RowChange) -> tuple[SampleSide | None, SampleSide | None]:
    a_key = row.a_key if row.a_key is not None else row.key
    b_key = row.b_key if row.b_key is not None else row.key
    return _side(diff.a, row.a_address, a_key), _side(diff.b, row.b_address, b_key)


def _schema_rows(diff: VersionDiff) -> list[SchemaRow]:
    schema = diff.schema
    groups = (("added", schema.added), ("removed", schema.removed), ("retyped", schema.retyped), ("kind changed", schema.kinds))
    return [SchemaRow(label, c.column, c.a_type, c.b_type, c.a_kind, c.b_kind) for label, changes in groups for c in changes]


def _facets(diff: VersionDiff, change: str | None, column: str | None) -> tuple[list[Facet], list[Facet]]:
    counts = diff.counts.to_json()
    changes = [Facet("all", diff_url(diff, column=column), diff.counts.different, change is None)]
    changes += [Facet(c, diff_url(diff, change=c, column=column), counts[c], change == c) for c in ROW_CHANGES if counts[c] or change == c]
    columns = [Facet("any column", diff_url(diff, change=change), None, column is None)]
    columns += [
        Facet(c, diff_url(diff, change=change, column=c), diff.columns.get(c, 0), column == c)
        for c in diff.schema.compared
        if diff.columns.get(c) or column == c
    ]
    return changes, columns


def _matching(diff: VersionDiff, change: str | None, column: str | None) -> int | None:
    """How many row changes the filters keep, when the summary says (a column filter keeps changed and edited rows)."""
    counts = diff.counts.to_json()
    if column is None:
        return diff.counts.different if change is None else counts[change]
    if change in ("added", "removed"):
        return 0
    if change is None or counts["changed" if change == "edited" else "edited"] == 0:
        return diff.columns.get(column, 0)
    return None


def rows_block(
    diff: VersionDiff, *, change: str | None = None, column: str | None = None, after: str | None = None, page_size: int = 50
) -> RowsBlock:
    """One page of row changes after the key ``after``, filtered by change type and column."""
    fetched = diff.rows(change=change, column=column, after=after, limit=page_size + 1)
    shown = fetched[:page_size]
    while shown and len(shown) < len(fetched) and fetched[len(shown)].key == shown[-1].key:
        shown = fetched[: len(shown) + 1]  # rows sharing a key (duplicates) stay on one page
    more = len(fetched) > len(shown) or (len(shown) > page_size)
    items = []
    for number, row in enumerate(shown):
        a_side, b_side = _sides(diff, row)
        items.append(
            RowItem(
                key=row.key,
                change=row.change,
                a=a_side,
                b=b_side,
                similarity=row.similarity,
                preview=row.preview,
                columns=[f.column for f in row.fields],
                detail_url=diff_url(diff, key=row.key) if row.fields else None,
                fields=[cut_json(f.to_json()) for f in row.fields],
                element_id=urls.sample_id(number),
            )
        )
    next_key = shown[-1].key if more and shown else None
    matching = _matching(diff, change, column)
    changes, columns = _facets(diff, change, column)
    if not shown:
        summary = "no more changes" if after is not None else "no changes"
    else:
        where = f"after key {after}" if after is not None else "from the first key"
        summary = f"{count(len(shown), 'change')} {where}" + (f", of {matching:,}" if matching is not None else "")
    return RowsBlock(
        change=change,
        column=column,
        after=after,
        matching=matching,
        rows=items,
        next=next_key,
        next_url=diff_url(diff, change=change, column=column, after=next_key) if next_key is not None else None,
        first_url=diff_url(diff, change=change, column=column) if after is not None else None,
        summary=summary,
        changes=changes,
        columns=columns,
    )


def _base(diff: VersionDiff) -> DiffPage:
    """What every view of a diff shows: both versions, warnings, schema, shards and counts."""
    a, b = diff.a, diff.b
    name = a.name
    sides = [SideInfo(v.name, v.id, v.ref, v.rows, len(v.shards), v.tokenizer, urls.version(v.name, v)) for v in (a, b)]
    keyless = diff.schema.key is None
    title = f"{a.ref} → {b.ref}"
    return DiffPage(
        dataset=name,
        a=sides[0],
        b=sides[1],
        url=diff_url(diff),
        diff_url=diff_url(diff),
        same_dataset=diff.same_dataset,
        identical=diff.identical,
        warnings=list(diff.warnings),
        key=diff.schema.key,
        similarity=diff.similarity if keyless else None,
        schema=diff.schema.to_json(),
        shards=diff.shards.to_json(),
        counts=diff.counts.to_json(),
        columns=dict(diff.columns),
        duplicates=diff.duplicates.to_json(),
        title=f"diff {title}",
        crumbs=[
            Link("datasets", urls.home()),
            Link(name, urls.dataset(name)),
            Link(f"diff {a.short_id}..{b.short_id}", diff_url(diff)),
        ],
        schema_rows=_schema_rows(diff),
        count_rows=count_rows(diff.counts.to_json(), key=diff.schema.key, similarity=diff.similarity if keyless else None),
    )


def diff_page(
    diff: VersionDiff, *, change: str | None = None, column: str | None = None, after: str | None = None, page_size: int = 50
) -> DiffPage:
    """The diff page: summary, schema and shard changes, and one page of row changes."""
    page = _base(diff)
    page.listing = rows_block(diff, change=change, column=column, after=after, page_size=page_size)
    return page


# -- one changed row --------------------------------------------------------------------
def rows_of_key(diff: VersionDiff, key: str) -> list[RowChange]:
    """Every row change whose key is ``key`` (more than one when keys repeat), empty when none.

    The change list is in key order, so the changes of ``key`` are the first
    page after the greatest smaller key.
    """
    keys = diff.changes.column("key")
    try:
        target = pa.scalar(key, pa.string()).cast(keys.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return []
    if not pc.any(pc.fill_null(pc.equal(keys, target), False)).as_py():
        return []
    smaller = pc.filter(keys, pc.fill_null(pc.less(keys, target), False))
    cursor = pc.max(smaller).as_py() if len(smaller) else None
    return diff.rows(after=None if cursor is None else str(cursor), limit=1)


@dataclass
class FieldPane:
    """One differing field of a changed row, laid out by its kind."""

    column: str
    kind: str
    change: str
    view: View


def _keys(row: RowChange) -> tuple[str, str]:
    return (row.a_key if row.a_key is not None else row.key, row.b_key if row.b_key is not None else row.key)


def _image_info(cache: MediaCache, media: MediaField) -> ImageInfo:
    return cache.get_or_make(("diff-info", *media.address), lambda: image_info(media.image_bytes(), where=media.where))


def _image_view(cache: MediaCache, diff: VersionDiff, row: RowChange, column: str) -> View:
    a_key, b_key = _keys(row)
    sides, infos, notes = [], [], []
    for version, key in ((diff.a, a_key), (diff.b, b_key)):
        media = load_field(version, key, column)
        try:
            info: ImageInfo | None = _image_info(cache, media)
        except BatchscopeError as exc:
            info, summary = None, "cannot be decoded"
            notes.append(exc.message)
        else:
            summary = f"{info.format} {info.width}×{info.height}, {human_bytes(info.byte_size)}"
        infos.append(info)
        sides.append(
            MediaSide(urls.thumbnail(version.name, version, key, column), urls.media_view(version.name, version, key, column), summary)
        )
    heatmap = None
    if infos[0] is not None and infos[1] is not None:
        if (infos[0].width, infos[0].height) == (infos[1].width, infos[1].height):
            heatmap = urls.diff_heatmap(
                diff.a.name, diff.a.id, b_spec(diff.a.name, diff.b), a_key, column, b_key=b_key if b_key != a_key else None
            )
        else:
            notes.append(f"sizes differ ({sides[0].summary} against {sides[1].summary}): no pixel difference")
    return ImageDiffView(a=sides[0], b=sides[1], heatmap_url=heatmap, note="; ".join(notes))


def _video_view(cache: MediaCache, diff: VersionDiff, row: RowChange, column: str) -> View:
    a_key, b_key = _keys(row)
    a_media, b_media = load_field(diff.a, a_key, column), load_field(diff.b, b_key, column)
    a_info, b_info = video_info(cache, a_media), video_info(cache, b_media)
    sides = [
        MediaSide(
            urls.frame(m.version.name, m.version, m.key, column, 0, size=urls.THUMBNAIL_SIDE),
            urls.media_view(m.version.name, m.version, m.key, column),
            f"{i.codec} {i.width}×{i.height}, {i.fps:g} fps, {count(i.frame_count, 'frame')}",
        )
        for m, i in ((a_media, a_info), (b_media, b_info))
    ]
    frames = min(a_info.frame_count, b_info.frame_count)
    pairs = [
        FramePair(
            index,
            urls.frame(diff.a.name, diff.a, a_key, column, index, size=urls.THUMBNAIL_SIDE),
            urls.frame(diff.b.name, diff.b, b_key, column, index, size=urls.THUMBNAIL_SIDE),
            urls.media_view(diff.a.name, diff.a, a_key, column, frame=index),
            urls.media_view(diff.b.name, diff.b, b_key, column, frame=index),
        )
        for index in spread(frames)
    ]
    note = (
        ""
        if a_info.frame_count == b_info.frame_count
        else f"A has {a_info.frame_count:,} frames and B {b_info.frame_count:,}: frames of both are compared"
    )
    return VideoDiffView(a=sides[0], b=sides[1], frames=pairs, note=note)


def field_panes(catalog: Catalog, cache: MediaCache, diff: VersionDiff, row: RowChange) -> list[FieldPane]:
    """Every differing field of ``row`` laid out by kind; a field that cannot be shown becomes an inline error."""
    tokenizers: list[Any] = []

    def view(field: FieldDiff) -> View:
        shown_as = presentation(field.kind).diff
        if shown_as is ImageDiffView and field.change == "changed":
            return _image_view(cache, diff, row, field.column)
        if shown_as is VideoDiffView and field.change == "changed":
            return _video_view(cache, diff, row, field.column)
        if field.words:
            return text_diff_view(field)
        if field.ops:
            if not tokenizers:
                tokenizers.extend(version_tokenizer(catalog, v)[0] for v in (diff.a, diff.b))
            return token_diff_view(
                field,
                a_tokenizer=tokenizers[0],
                b_tokenizer=tokenizers[1],
                a_tokenizer_name=diff.a.tokenizer,
                b_tokenizer_name=diff.b.tokenizer,
            )
        if field.paths and field.change == "changed":
            return struct_diff_view(field)
        return value_diff_view(field)

    panes = []
    for field in row.fields:
        try:
            shown = view(field)
        except Exception as exc:  # one broken value must not break the page
            where = f"key {row.key!r} of the diff {diff.a.ref} → {diff.b.ref}"
            log.warning("cannot show the difference of %s field %s: %s", where, field.column, exc)
            message = exc.message if isinstance(exc, BatchscopeError) else f"{type(exc).__name__}: {exc}"
            shown = ErrorView(message=f"{where} field {field.column!r}: cannot show the difference: {message}")
        panes.append(FieldPane(field.column, field.kind, field.change, shown))
    return panes


def row_detail(diff: VersionDiff, row: RowChange, panes: list[FieldPane]) -> RowDetail:
    a_side, b_side = _sides(diff, row)
    return RowDetail(row.key, row.change, a_side, b_side, row.similarity, [cut_json(f.to_json()) for f in row.fields], panes)


def diff_row_page(catalog: Catalog, cache: Any, diff: VersionDiff, key: str) -> DiffPage:
    """The field-by-field difference of the changed row(s) with key ``key``."""
    rows = rows_of_key(diff, key)
    if not rows:
        raise ChangeNotFound(
            f"key {key!r} is not among the {diff.counts.different:,} changed rows between {diff.a.ref} and {diff.b.ref} "
            "(it is unchanged, or in neither version)"
        )
    page = _base(diff)
    page.detail_key = key
    page.url = diff_url(diff, key=key)
    page.detail = [row_detail(diff, row, field_panes(catalog, cache, diff, row)) for row in rows]
    page.title = f"{key} · diff {diff.a.ref} → {diff.b.ref}"
    page.crumbs.append(Link(key, diff_url(diff, key=key)))
    return page

"""Page data of a dataset (versions, tags) and of one version (schema, stats, rows by cursor, search)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loaders import Catalog, DatasetVersion
from loaders.catalog.lineage import checked_parent
from loaders.catalog.store import check_name
from loaders.errors import TokenizerNotFound
from loaders.query.listing import sorted_records

from .. import urls
from ..cut import Cut, cut_record
from ..decode_budget import DecodeBudget
from ..errors import BadQuery
from ..jsonable import html_only
from ..queries import Queries
from ..renderers.registry import FieldContext, View, render_cell
from ..templating import count
from .common import Link, Pager
from .rows import RowSlice, check_searchable, page_at, read_indices, search, searchable
from .stats import column_stats


@dataclass
class VersionSummary:
    id: str
    url: str
    created: str
    rows: int
    shards: int
    bytes: int
    parent: str | None
    tags: list[str]
    #: The version's RL views (rollout groups, episodes), when it has rollout or episode columns.
    views: list[Link] = field(default_factory=list)
    #: What the manifest records that its id does not cover (``created``, ``parent``...): shown as unverified.
    unverified: list[str] = field(default_factory=list)
    #: Why the recorded parent is not shown (a chain of parents with a cycle, or a parent the dataset does not have).
    parent_refused: str | None = None


def rl_views(name: str, version: DatasetVersion) -> list[Link]:
    """Links to a version's rollout groups and episodes lists, for the kinds of columns it has."""
    kinds = set(version.kinds.values())
    views = []
    if "rollout" in kinds:
        views.append(Link("rollout groups", urls.rollout_groups(name, version)))
    if "episode" in kinds:
        views.append(Link("episodes", urls.episodes(name, version)))
    return views


@dataclass
class BrokenVersion:
    """A version whose manifest fails its check: listed with the error, never read."""

    id: str
    error: str


@dataclass
class DatasetPage:
    name: str
    url: str
    tags: dict[str, str]
    versions: list[VersionSummary]
    latest: str | None
    broken: list[BrokenVersion]
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def _tags_by_version(catalog: Catalog, name: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for tag, version_id in sorted(catalog.tags(name).items()):
        out.setdefault(version_id, []).append(tag)
    return out


def dataset_page(catalog: Catalog, name: str) -> DatasetPage:
    """A dataset's versions (newest first) and tags."""
    check_name("dataset", name)
    broken: list[tuple[str, str]] = []
    versions = catalog.versions(name, broken=broken)
    tags = catalog.tags(name)
    by_version = _tags_by_version(catalog, name)
    parents = {v.id: v.manifest.parent for v in versions}
    summaries = []
    for v in reversed(versions):
        parent, refused = checked_parent(v.id, parents)
        summaries.append(
            VersionSummary(
                id=v.id,
                url=urls.version(name, v),
                created=v.manifest.created,
                rows=v.rows,
                shards=len(v.shards),
                bytes=v.manifest.size,
                parent=parent,
                tags=by_version.get(v.id, []),
                views=rl_views(name, v),
                unverified=list(v.manifest.unverified),
                parent_refused=refused,
            )
        )
    return DatasetPage(
        name=name,
        url=urls.dataset(name),
        tags=tags,
        versions=summaries,
        latest=tags.get("latest"),
        broken=[BrokenVersion(version_id, message) for version_id, message in broken],
        title=name,
        crumbs=[Link("datasets", urls.home()), Link(name, urls.dataset(name))],
    )


# -- one version -------------------------------------------------------------
@dataclass
class ColumnInfo:
    name: str
    type: str
    kind: str
    nullable: bool
    nulls: int | None
    min: str | None
    max: str | None
    searchable: bool
    #: Class names of a ``class_label`` column (index → name).
    classes: list[str] = field(default_factory=list)


@dataclass
class ShardSummary:
    uri: str
    rows: int
    bytes: int
    row_groups: int
    checksum: str


@dataclass
class RowEntry:
    """One row of a listing: where it is, its key and permalink, its values (JSON) and cells (HTML)."""

    index: int
    key: str
    url: str
    shard: int
    row: int
    record: dict[str, Any]
    #: Values too large to show whole, by column: what ``record`` holds of them and the URL of the whole value.
    cut: dict[str, Cut] = field(default_factory=dict)
    element_id: str = html_only("")
    cells: list[View] = html_only(default_factory=list)


@dataclass
class SearchInfo:
    query: str
    column: str
    scanned_from: int
    scanned_to: int
    stopped_early: bool
    #: The exact number of matching rows in all, when the listing knows it (sorted); else ``count_url`` counts them.
    total: int | None = None
    count_url: str = ""


@dataclass
class SortInfo:
    """The column rows are listed by (``descending`` or not; nulls last, ties in record order)."""

    column: str
    descending: bool


@dataclass
class RowsBlock:
    """The paged (or searched) part of a version page: what an htmx pager swaps."""

    start: int
    end: int
    total: int
    rows: list[RowEntry]
    pager: Pager
    search: SearchInfo | None
    sort: SortInfo | None = None
    columns: list[str] = html_only(default_factory=list)
    #: Per column: the URL that lists the rows sorted by it (descending when already sorted ascending by it).
    sort_urls: list[str] = html_only(default_factory=list)
    search_columns: list[str] = html_only(default_factory=list)
    action: str = html_only("")


@dataclass
class VersionPage:
    dataset: str
    version: str
    ref: str
    url: str
    dataset_url: str
    created: str
    parent: str | None
    parent_url: str | None
    tags: list[str]
    key: str | None
    tokenizer: str | None
    rows: int
    bytes: int
    shards: list[ShardSummary]
    columns: list[ColumnInfo]
    stats_complete: bool
    listing: RowsBlock
    #: The version's SQL page, and its per-column statistics (loaded into the page when scrolled into view).
    sql_url: str = ""
    columns_url: str = ""
    notes: dict[str, Any] = field(default_factory=dict)
    #: The version's RL views (rollout groups, episodes), when it has rollout or episode columns.
    views: list[Link] = field(default_factory=list)
    #: What the manifest records that its id does not cover: ``created`` and ``parent`` always, and for a version
    #: registered before ids covered them its ``notes`` and ``column metadata`` (class names); shown as unverified.
    unverified: list[str] = field(default_factory=list)
    #: Why the recorded parent is not shown (a chain of parents with a cycle, or a parent the dataset does not have).
    parent_refused: str | None = None
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def version_tokenizer(catalog: Catalog, version: DatasetVersion) -> tuple[Any, str | None]:
    """The version's tokenizer, or ``None`` and a warning saying why."""
    if not version.tokenizer:
        return None, None
    try:
        return catalog.tokenizer(version.tokenizer), None
    except TokenizerNotFound as exc:
        return None, exc.message


def _columns(version: DatasetVersion) -> tuple[list[ColumnInfo], bool]:
    stats, complete = column_stats(version)
    can_search = set(searchable(version))
    columns = []
    for f in version.schema:
        s = stats.get(f.name)
        columns.append(
            ColumnInfo(
                name=f.name,
                type=str(f.type),
                kind=version.kinds.get(f.name, "json"),
                nullable=f.nullable,
                nulls=s.nulls if s else None,
                min=s.min if s else None,
                max=s.max if s else None,
                searchable=f.name in can_search,
                classes=version.class_names.get(f.name, []),
            )
        )
    return columns, complete


def _pager(version: DatasetVersion, found: RowSlice, *, q: str | None, column: str | None) -> Pager:
    name, total = version.name, version.rows
    search_params = {"q": q, "column": column} if q else {}
    at_start = found.scanned_from <= 0
    at_end = found.scanned_to >= total
    first = urls.version(name, version, **search_params) if not at_start else None
    prev = urls.version(name, version, end=found.scanned_from, **search_params) if not at_start else None
    next_ = urls.version(name, version, start=found.scanned_to, **search_params) if not at_end else None
    last = urls.version(name, version, end=total, **search_params) if not at_end else None
    if q:
        summary = f"{count(len(found.indices), 'match', 'matches')} for {q!r} in {column} among records {found.scanned_from:,}–{max(found.scanned_from, found.scanned_to - 1):,}"
        if found.stopped_early:
            summary += " (time budget spent; continue with next)"
    elif found.indices:
        summary = f"records {found.scanned_from:,}–{found.scanned_to - 1:,} of {total:,}"
    else:
        summary = f"no records here ({total:,} in all)"
    return Pager(first=first, prev=prev, next=next_, last=last, summary=summary)


def _sorted_slice(
    queries: Queries | None,
    version: DatasetVersion,
    sort: SortInfo,
    *,
    start: int | None,
    end: int | None,
    size: int,
    search: tuple[str, str] | None,
    budget: DecodeBudget | None,
) -> tuple[RowSlice, int]:
    """A page of rows in ``sort`` order (positions in that order as the cursor) and how many rows that order holds."""
    if queries is None:
        raise BadQuery("this listing cannot be sorted (no query engine)")
    if sort.column not in version.schema.names:
        raise BadQuery(f"cannot sort by {sort.column!r}: {version.ref} has the columns {', '.join(version.schema.names)}")
    begin = max(0, end - size) if end is not None else (start or 0)
    size = min(size, end - begin) if end is not None else size
    records, total = sorted_records(
        queries.session, version, sort.column, descending=sort.descending, start=begin, size=size, search=search
    )
    return RowSlice(records, read_indices(version, records, budget=budget), begin, begin + len(records)), total


def _sorted_pager(version: DatasetVersion, found: RowSlice, total: int, params: dict[str, Any]) -> Pager:
    name = version.name
    at_start, at_end = found.scanned_from <= 0, found.scanned_to >= total
    what = "matches" if params.get("q") else "rows"
    order = f"by {params['sort']}{' descending' if params.get('desc') else ''}"
    summary = (
        f"{what} {found.scanned_from + 1:,}–{found.scanned_to:,} of {total:,} {order}"
        if found.indices
        else f"no {what} here ({total:,} in all)"
    )
    return Pager(
        first=urls.version(name, version, **params) if not at_start else None,
        prev=urls.version(name, version, end=found.scanned_from, **params) if not at_start else None,
        next=urls.version(name, version, start=found.scanned_to, **params) if not at_end else None,
        last=urls.version(name, version, end=total, **params) if not at_end else None,
        summary=summary,
    )


def rows_block(
    version: DatasetVersion,
    *,
    start: int | None,
    end: int | None,
    q: str | None,
    column: str | None,
    page_size: int,
    search_seconds: float,
    tokenizer: Any = None,
    budget: DecodeBudget | None = None,
    field_bytes: int = 1 << 20,
    sort: str | None = None,
    desc: bool = False,
    queries: Queries | None = None,
) -> RowsBlock:
    """One page of rows, by cursor or by search (values over ``field_bytes`` cut, linking to the whole); sorted by a
    column (DuckDB) when ``sort`` names one."""
    if start is not None and end is not None:
        raise BadQuery(f"give start ({start}) or end ({end}), not both")
    columns = [f.name for f in version.schema]
    search_columns = searchable(version)
    order = SortInfo(sort, desc) if sort else None
    total = None
    if q:
        column = column or (search_columns[0] if search_columns else None)
        if column is None:
            raise BadQuery(f"{version.ref} has no text column to search")
        check_searchable(version, column)
    if order is not None:
        found, total = _sorted_slice(
            queries, version, order, start=start, end=end, size=page_size, search=(column, q) if q and column else None, budget=budget
        )
    elif q and column:
        found = search(version, column=column, query=q, start=start, end=end, size=page_size, seconds=search_seconds, budget=budget)
    else:
        found = page_at(version, start=start, end=end, size=page_size, budget=budget)
    entries = []
    for index, whole in zip(found.indices, found.records):
        shard, row = version.locate(index)
        key = version.key_at(shard, row, whole)
        record, cuts = cut_record(whole, field_bytes, lambda c, key=key: urls.media(version.name, version, key, c))
        cells = [
            render_cell(
                record.get(c),
                FieldContext(
                    column=c,
                    kind=version.kinds.get(c, "json"),
                    record=record,
                    kinds=version.kinds,
                    tokenizer=tokenizer,
                    highlight=q if q and c == column else None,
                    where=version.where(shard, row),
                    class_names=version.class_names.get(c, ()),
                ),
            )
            for c in columns
        ]
        entries.append(
            RowEntry(
                index=index,
                key=key,
                url=urls.sample(version.name, version, key),
                shard=shard,
                row=row,
                record=record,
                cut=cuts,
                element_id=urls.sample_id(index),
                cells=cells,
            )
        )
    params: dict[str, Any] = {"q": q, "column": column if q else None, "sort": sort, "desc": bool(sort and desc)}
    pager = _sorted_pager(version, found, total or 0, params) if order is not None else _pager(version, found, q=q, column=column)
    info = None
    if q:
        count_url = urls.version_count(version.name, version, q=q, column=column) if total is None else ""
        info = SearchInfo(q, column or "", found.scanned_from, found.scanned_to, found.stopped_early, total, count_url)
    return RowsBlock(
        start=found.scanned_from,
        end=found.scanned_to,
        total=version.rows,
        rows=entries,
        pager=pager,
        search=info,
        sort=order,
        columns=columns,
        search_columns=search_columns,
        action=urls.version(version.name, version),
        sort_urls=[
            urls.version(
                version.name, version, q=q, column=column if q else None, sort=c, desc=bool(order and order.column == c and not desc)
            )
            for c in columns
        ],
    )


def version_page(
    catalog: Catalog,
    version: DatasetVersion,
    *,
    start: int | None = None,
    end: int | None = None,
    q: str | None = None,
    column: str | None = None,
    page_size: int = 50,
    search_seconds: float = 2.0,
    budget: DecodeBudget | None = None,
    field_bytes: int = 1 << 20,
    sort: str | None = None,
    desc: bool = False,
    queries: Queries | None = None,
) -> VersionPage:
    """Schema, stats and one page of rows of ``version`` (refused with 413 when its rows need more memory than ``budget``)."""
    name = version.name
    tags = _tags_by_version(catalog, name).get(version.id, [])
    columns, complete = _columns(version)
    tokenizer, _ = version_tokenizer(catalog, version)
    parent, refused = catalog.parent(version)
    return VersionPage(
        dataset=name,
        version=version.id,
        ref=version.ref,
        url=urls.version(name, version),
        dataset_url=urls.dataset(name),
        created=version.manifest.created,
        parent=parent,
        parent_url=urls.version(name, parent) if parent else None,
        tags=tags,
        key=version.key,
        tokenizer=version.tokenizer,
        views=rl_views(name, version),
        rows=version.rows,
        bytes=version.manifest.size,
        shards=[ShardSummary(s.uri, s.rows, s.size, len(s.row_groups), s.checksum) for s in version.shards],
        columns=columns,
        stats_complete=complete,
        listing=rows_block(
            version,
            start=start,
            end=end,
            q=q,
            column=column,
            page_size=page_size,
            search_seconds=search_seconds,
            tokenizer=tokenizer,
            budget=budget,
            field_bytes=field_bytes,
            sort=sort,
            desc=desc,
            queries=queries,
        ),
        sql_url=urls.version_sql(name, version),
        columns_url=urls.version_columns(name, version),
        notes=dict(version.manifest.notes),
        unverified=list(version.manifest.unverified),
        parent_refused=refused,
        title=version.ref,
        crumbs=[Link("datasets", urls.home()), Link(name, urls.dataset(name)), Link(version.short_id, urls.version(name, version))],
    )

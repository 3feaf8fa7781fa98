"""Page data of the SQL page (global and per version): a query's rows a page at a time, each cell rendered by its field
kind, each row linked to its sample permalink when the result holds the key column of one version with a key.

A result column keeps the kind of the version column it comes from (same name, same type); any other column gets the
kind its name and type imply (:func:`loaders.catalog.kinds.infer_kind`), so token ids, chats and images computed by
a query still render as such.

>>> page = sql_page(queries, catalog, 'SELECT id, text FROM "docs@v1"', start=0, page_size=50)   # doctest: +SKIP
>>> page.columns, page.links[0]                                                                 # doctest: +SKIP
(['id', 'text'], '/datasets/docs/versions/788de32598e4.../samples/doc-0')
"""

from __future__ import annotations

import base64
import csv
import io
import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from loaders import Catalog, DatasetVersion
from loaders.catalog.kinds import BYTES_KINDS, infer_kind
from loaders.catalog.records import record_key
from loaders.query import QueryResult

from .. import urls
from ..jsonable import html_only, jsonable
from ..queries import Queries
from ..renderers.registry import FieldContext, View, render_cell
from ..templating import count
from .common import Link, Pager
from .datasets import version_tokenizer


@dataclass
class TableInfo:
    """A table the query names: how it was written, and the version it resolved to."""

    name: str
    dataset: str
    version: str
    url: str


@dataclass
class ResultRow:
    """One row of the page as laid out: its number in the result, its permalink and its cells."""

    number: int
    url: str | None
    cells: list[View]


@dataclass
class SqlPage:
    """A SQL query and one page of its rows (``rows`` as objects keyed by column; ``links`` their permalinks)."""

    query: str
    columns: list[str]
    types: list[str]
    kinds: list[str]
    rows: list[dict[str, Any]]
    links: list[str | None]
    start: int
    page_size: int
    row_count: int
    truncated: bool
    seconds: float
    limits: str
    tables: list[TableInfo]
    csv_url: str | None
    link_note: str
    error: str | None
    version: str | None
    action: str
    pager: Pager
    shown: list[ResultRow] = html_only(default_factory=list)
    examples: list[TableInfo] = html_only(default_factory=list)
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def default_query(version: DatasetVersion) -> str:
    """What a version's SQL page runs when given no query: its rows."""
    return f'SELECT * FROM "{version.name}@{version.short_id}"'


def _plain(type_: pa.DataType) -> pa.DataType:
    """``type_`` without what DuckDB changes in reading it (dictionaries, large offsets, list field names)."""
    if pa.types.is_dictionary(type_):
        return _plain(type_.value_type)
    if pa.types.is_large_string(type_) or pa.types.is_string_view(type_):
        return pa.string()
    if pa.types.is_large_binary(type_) or pa.types.is_binary_view(type_):
        return pa.binary()
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        return pa.list_(_plain(type_.value_type))
    if pa.types.is_struct(type_):
        return pa.struct([pa.field(type_.field(i).name, _plain(type_.field(i).type)) for i in range(type_.num_fields)])
    return type_


def column_origins(result: QueryResult) -> list[tuple[str, DatasetVersion | None]]:
    """Each result column's kind and the version column it comes from (``None``: computed by the query)."""
    versions = list({v.id: v for v in result.tables.values()}.values())
    out: list[tuple[str, DatasetVersion | None]] = []
    for f in result.table.schema:
        origin = next(
            (v for v in versions if f.name in v.schema.names and _plain(v.schema.field(f.name).type).equals(_plain(f.type))),
            None,
        )
        out.append((origin.kinds.get(f.name, "json"), origin) if origin else (infer_kind(f.name, f.type), None))
    return out


def link_version(result: QueryResult, origins: list[tuple[str, DatasetVersion | None]]) -> tuple[DatasetVersion | None, str]:
    """The version whose permalinks the rows link to, or ``None`` and why not."""
    keyed = {
        origin.id: origin
        for name, (_, origin) in zip(result.columns, origins)
        if origin is not None and origin.key == name and not origin.manifest.key_suffixes
    }
    if len(keyed) == 1:
        return next(iter(keyed.values())), ""
    if len(keyed) > 1:
        return None, "rows do not link to samples: the result holds the key columns of several versions"
    return None, "rows link to their samples when the result holds the key column of one version that has a key"


def _cells(
    catalog: Catalog,
    result: QueryResult,
    origins: list[tuple[str, DatasetVersion | None]],
    linked: DatasetVersion | None,
    start: int,
    stop: int,
) -> tuple[list[ResultRow], list[str | None]]:
    tokenizers: dict[str, Any] = {}

    def tokenizer(version: DatasetVersion | None) -> Any:
        if version is None:
            return None
        if version.id not in tokenizers:
            tokenizers[version.id] = version_tokenizer(catalog, version)[0]
        return tokenizers[version.id]

    kinds = {name: kind for name, (kind, _) in zip(result.columns, origins)}
    shown, links = [], []
    for number, row in enumerate(result.rows(start, stop), start=start):
        key = None
        if linked is not None and row.get(linked.key) is not None:
            key = record_key({linked.key: row[linked.key]}, linked.key)
        url = urls.sample(linked.name, linked, key) if linked is not None and key is not None else None
        cells = []
        for name, (kind, origin) in zip(result.columns, origins):
            media = urls.media(origin.name, origin, key, name) if key is not None and origin is linked and kind in BYTES_KINDS else None
            context = FieldContext(
                column=name,
                kind=kind,
                record=row,
                kinds=kinds,
                tokenizer=tokenizer(origin),
                where=f"query result row {number + 1}",
                class_names=origin.class_names.get(name, ()) if origin is not None else (),
                media_url=media,
            )
            cells.append(render_cell(row.get(name), context))
        shown.append(ResultRow(number + 1, url, cells))
        links.append(url)
    return shown, links


def _pager(action: str, query: str, start: int, size: int, total: int, truncated: bool) -> Pager:
    last_start = max(0, (total - 1) // size * size)
    summary = f"rows {start + 1:,}–{min(start + size, total):,} of {count(total, 'row')}" if total else "no rows"
    if truncated:
        summary += " (cut at the row cap; the query returns more)"
    return Pager(
        first=urls.with_query(action, q=query) if start > 0 else None,
        prev=urls.with_query(action, q=query, start=max(0, start - size) or None) if start > 0 else None,
        next=urls.with_query(action, q=query, start=start + size) if start + size < total else None,
        last=urls.with_query(action, q=query, start=last_start) if start + size < total else None,
        summary=summary,
    )


def _examples(catalog: Catalog) -> list[TableInfo]:
    """A table per dataset (its latest version) to start from on the global page."""
    out = []
    for name in catalog.datasets()[:50]:
        try:
            version = catalog.resolve(name)
        except Exception:  # noqa: BLE001 - a broken dataset is listed on its own page, not here
            continue
        out.append(TableInfo(f"{name}@latest", name, version.id, urls.version(name, version)))
    return out


def _frame(queries: Queries, version: DatasetVersion | None) -> tuple[str, list[Link], str]:
    if version is None:
        return urls.sql(), [Link("home", urls.home()), Link("SQL", urls.sql())], "SQL"
    crumbs = [
        Link("datasets", urls.home()),
        Link(version.name, urls.dataset(version.name)),
        Link(version.short_id, urls.version(version.name, version)),
        Link("SQL", urls.version_sql(version.name, version)),
    ]
    return urls.version_sql(version.name, version), crumbs, f"SQL · {version.ref}"


def sql_page(
    queries: Queries,
    catalog: Catalog,
    q: str | None,
    *,
    start: int = 0,
    page_size: int = 50,
    version: DatasetVersion | None = None,
    error: str | None = None,
) -> SqlPage:
    """The SQL page: ``q``'s rows ``[start, start + page_size)`` (a version's page runs :func:`default_query` when no
    ``q`` is given); with ``error``, the page that says what failed and keeps ``q`` in its form."""
    action, crumbs, title = _frame(queries, version)
    query = q if q is not None else (default_query(version) if version is not None else "")
    base = dict(
        query=query,
        start=start,
        page_size=page_size,
        limits=queries.limits.describe(),
        version=version.ref if version is not None else None,
        action=action,
        examples=_examples(catalog) if version is None else [],
        title=title,
        crumbs=crumbs,
    )
    if error is not None or not query.strip():
        return SqlPage(
            columns=[],
            types=[],
            kinds=[],
            rows=[],
            links=[],
            row_count=0,
            truncated=False,
            seconds=0.0,
            tables=[],
            csv_url=None,
            link_note="",
            error=error,
            pager=Pager(),
            **base,
        )
    result = queries.result(query)
    origins = column_origins(result)
    linked, note = link_version(result, origins)
    start = min(start, max(0, result.row_count - 1))
    base["start"] = start
    shown, links = _cells(catalog, result, origins, linked, start, start + page_size)
    return SqlPage(
        columns=result.columns,
        types=result.types,
        kinds=[kind for kind, _ in origins],
        rows=result.rows(start, start + page_size),
        links=links,
        row_count=result.row_count,
        truncated=result.truncated,
        seconds=round(result.seconds, 4),
        tables=[TableInfo(name, v.name, v.id, urls.version(v.name, v)) for name, v in result.tables.items()],
        csv_url=urls.sql_csv(q=query),
        link_note=note,
        error=None,
        pager=_pager(action, query, start, page_size, result.row_count, result.truncated),
        shown=shown,
        **base,
    )


# -- exports -------------------------------------------------------------------------------------------
def csv_value(value: Any) -> str:
    """How a value is written in CSV: empty for null, base64 for bytes, JSON for lists and structs.

    >>> csv_value(None), csv_value(b"hi"), csv_value([1, {"a": b"x"}]), csv_value(1.5)
    ('', 'aGk=', '[1, {"a": {"size": 1, "sha256": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", "base64": "eA=="}}]', '1.5')
    """
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(jsonable(value), ensure_ascii=False)
    if isinstance(value, float):
        return repr(value)
    return str(jsonable(value))


def result_csv(result: QueryResult) -> str:
    """Every row of ``result`` as CSV, with a header row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(result.columns)
    for row in result.rows():
        writer.writerow([csv_value(row.get(name)) for name in result.columns])
    return out.getvalue()


def result_json(result: QueryResult) -> dict[str, Any]:
    """``{"columns", "rows", "truncated"}`` with JSON values (bytes as size, sha256 and, when small, base64)."""
    return jsonable(result.to_json())


__all__ = ["SqlPage", "column_origins", "csv_value", "default_query", "link_version", "result_csv", "result_json", "sql_page"]

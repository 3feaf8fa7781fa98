"""Routes of queries: SQL over versions (global and per version, CSV export), a version's column statistics and search
count, and a run's find page. A query that cannot run answers 400 with one line; the HTML page keeps the query."""

from __future__ import annotations

from typing import Annotated, Any, Callable

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from loaders.catalog.store import check_name
from loaders.errors import InvalidQuery, SqlRefused

from ..deps import CatalogDep, QueriesDep, RunsDep, SettingsDep
from ..http_semantics import VersionDep
from ..pages.columns import ColumnsPage, CountPage, columns_page, count_page
from ..pages.find import FindPage, find_page
from ..pages.sql import SqlPage, result_csv, sql_page
from ..responses import VARY, respond, wants_json
from ..routing import bytes_answer, page

router = APIRouter(tags=["queries"])

SqlText = Annotated[
    str | None,
    Query(description='One SQL query (SELECT); each registered version is a table named by its ref, such as "web-text@v1".'),
]
Start = Annotated[int, Query(ge=0, le=2**62, description="First row of the result shown (0-based).")]


def _keeping_the_query(request: Request, build: Callable[[str | None], Any], *, template: str, block: str) -> Response:
    """``build(None)``'s page, or — for a query that cannot run — ``build(message)``'s, answered with the error's
    status (the JSON twin answers the error shape)."""
    try:
        return respond(request, build(None), template=template, block=block)
    except (SqlRefused, InvalidQuery) as exc:
        if wants_json(request):
            raise
        return respond(request, build(exc.message), template=template, block=block, status=exc.status)


def _limited(text: str | None, settings: Any) -> str | None:
    """A query as the form keeps it: a text over the length limit is cut to it (it was refused anyway)."""
    limit = settings.query_limits().max_chars
    return text[:limit] if text is not None and len(text) > limit else text


@page(router, "/sql", summary="SQL over every registered version: a query's rows, a page at a time", model=SqlPage)
def sql(request: Request, catalog: CatalogDep, queries: QueriesDep, settings: SettingsDep, q: SqlText = None, start: Start = 0) -> Response:
    def build(error: str | None) -> Any:
        text = _limited(q, settings) if error else q
        return sql_page(queries, catalog, text, start=start, page_size=settings.page_size, error=error)

    return _keeping_the_query(request, build, template="sql.html", block="results")


@router.get(
    "/sql.csv",
    summary="Every row of a SQL query (up to the row cap) as CSV",
    **bytes_answer("text/csv", description="The rows as CSV, a header line first"),
)
def sql_csv(queries: QueriesDep, q: Annotated[str, Query(description="One SQL query (SELECT).")]) -> Response:
    result = queries.result(q)
    headers = {**VARY, "Content-Disposition": 'attachment; filename="query.csv"'}
    if result.truncated:
        headers["X-Batchscope-Truncated"] = f"cut at {result.max_rows} rows"
    return Response(result_csv(result), media_type="text/csv; charset=utf-8", headers=headers)


@page(router, "/datasets/{name}/versions/{version}/sql", summary="The SQL page opened on one version (its rows by default)", model=SqlPage)
def version_sql(
    request: Request,
    version: VersionDep,
    catalog: CatalogDep,
    queries: QueriesDep,
    settings: SettingsDep,
    q: SqlText = None,
    start: Start = 0,
) -> Response:
    def build(error: str | None) -> Any:
        text = _limited(q, settings) if error else q
        return sql_page(queries, catalog, text, start=start, page_size=settings.page_size, version=version, error=error)

    return _keeping_the_query(request, build, template="sql.html", block="results")


@page(
    router,
    "/datasets/{name}/versions/{version}/columns",
    summary="Per-column statistics, histograms and facets of a version",
    model=ColumnsPage,
)
def columns(request: Request, version: VersionDep, queries: QueriesDep) -> Response:
    return respond(request, columns_page(queries, version), template="columns.html", block="columns")


@page(router, "/datasets/{name}/versions/{version}/count", summary="How many rows of a version a search matches, in all", model=CountPage)
def count(
    request: Request,
    version: VersionDep,
    queries: QueriesDep,
    q: Annotated[str, Query(min_length=1, max_length=1000, description="Text to search for (case-insensitive).")],
    column: Annotated[str | None, Query(max_length=1000, description="Text column to search.")] = None,
) -> Response:
    return respond(request, count_page(queries, version, q, column or None), template="count.html", block="count")


@page(router, "/runs/{run}/find", summary="Every read of a row matching a SQL predicate over the run's sources", model=FindPage)
def find(
    request: Request,
    run: str,
    catalog: CatalogDep,
    runs: RunsDep,
    queries: QueriesDep,
    settings: SettingsDep,
    where: Annotated[str | None, Query(description="A SQL boolean expression over the columns of the run's sources.")] = None,
    steps: Annotated[str | None, Query(max_length=50, description="Only steps A:B (A: or :B leave one end open).")] = None,
    start: Start = 0,
) -> Response:
    check_name("run", run)
    opened = runs.run(catalog, run)

    def build(error: str | None) -> Any:
        text = _limited(where, settings) if error else where
        return find_page(queries, catalog, opened, text, steps=steps or None, start=start, page_size=settings.page_size, error=error)

    return _keeping_the_query(request, build, template="find.html", block="results")

"""Page data of a version's columns: per-column statistics, histograms and facets (:mod:`loaders.query.profile`), and
the exact number of rows a search matches (the version page shows "at least N" while it loads).

Each facet links to the version's SQL page selecting the rows that hold its value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loaders import DatasetVersion
from loaders.query.listing import count_matches
from loaders.query.profile import ColumnProfile, Facet, version_profile
from loaders.query.tables import quote

from .. import urls
from ..errors import BadQuery
from ..jsonable import html_only
from ..queries import Queries
from ..templating import count
from .bars import BarChart, bar_chart
from .common import Link
from .rows import check_searchable, searchable


@dataclass
class FacetLink:
    """One value of a low-cardinality column, its count, and the SQL page of the rows holding it."""

    label: str
    count: int
    url: str | None


@dataclass
class ColumnView:
    """One column's statistics as shown: the profile, its histogram drawn, its facets linked."""

    profile: ColumnProfile
    facets: list[FacetLink]
    chart: BarChart | None = html_only(None)


@dataclass
class ColumnsPage:
    """Every column of a version profiled; ``stored`` when the statistics came from the catalog's derived file."""

    dataset: str
    version: str
    ref: str
    rows: int
    seconds: float
    stored: bool
    columns: list[ColumnView]
    version_url: str = html_only("")
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _facet_url(version: DatasetVersion, column: str, facet: Facet) -> str | None:
    if facet.cut:
        return None
    test = "IS NULL" if facet.value is None else f"= {_literal(facet.value)}"
    query = f'SELECT * FROM "{version.name}@{version.short_id}" WHERE {quote(column)} {test}'
    return urls.version_sql(version.name, version, q=query)


def _number(value: float, integral: bool) -> str:
    return f"{int(value):,}" if integral else f"{value:.4g}"


def _range(profile: ColumnProfile, low: float, high: float) -> str:
    """A bin as its first and last value (whole numbers), else its bounds."""
    first, last = _number(low, profile.integral), _number(high, profile.integral)
    return first if first == last else f"{first}–{last}"


def columns_page(queries: Queries, version: DatasetVersion) -> ColumnsPage:
    """Statistics of every column of ``version`` (computed once, then kept)."""
    profile = version_profile(queries.session, version)
    views = []
    for column in profile.columns:
        chart = None
        if column.histogram:
            bars = [(f"{column.measure} {_range(column, b.low, b.high)}", b.count, None) for b in column.histogram]
            first, last = column.histogram[0], column.histogram[-1]
            chart = bar_chart(
                bars,
                title=f"{column.name}: {column.measure}",
                bar_width=10.0,
                first=_number(first.low, column.integral),
                last=_number(last.high, column.integral),
            )
        facets = [FacetLink(f.label, f.count, _facet_url(version, column.name, f)) for f in column.facets]
        views.append(ColumnView(column, facets, chart))
    name = version.name
    return ColumnsPage(
        dataset=name,
        version=version.id,
        ref=version.ref,
        rows=profile.rows,
        seconds=round(profile.seconds, 4),
        stored=profile.stored,
        columns=views,
        version_url=urls.version(name, version),
        title=f"columns · {version.ref}",
        crumbs=[
            Link("datasets", urls.home()),
            Link(name, urls.dataset(name)),
            Link(version.short_id, urls.version(name, version)),
            Link("columns", urls.version_columns(name, version)),
        ],
    )


@dataclass
class CountPage:
    """How many rows of a version match a search, in all (every verified shard read)."""

    query: str
    column: str
    matches: int
    summary: str
    listing_url: str


def count_page(queries: Queries, version: DatasetVersion, q: str, column: str | None) -> CountPage:
    """The exact number of rows whose ``column`` matches ``q`` (the default search column when not given)."""
    columns = searchable(version)
    column = column or (columns[0] if columns else None)
    if column is None:
        raise BadQuery(f"{version.ref} has no text column to search")
    check_searchable(version, column)
    n = count_matches(queries.session, version, column, q)
    return CountPage(q, column, n, f"{count(n, 'match', 'matches')} in all", urls.version(version.name, version, q=q, column=column))

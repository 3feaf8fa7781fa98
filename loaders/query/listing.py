"""What a version page asks of DuckDB: how many rows a search matches in all, and a page of rows sorted by a column.

Search means what the page's own scan means: a case-insensitive substring of a text column; for a ``class_label``
column, the class id itself or any class whose name holds the text (:func:`label_ids`). Rows come back as record
indices, which the page then reads through the read path like any other page of rows.

>>> count_matches(SqlSession(catalog), catalog.resolve("docs@v1"), "text", "alpha")        # doctest: +SKIP
4
>>> sorted_records(SqlSession(catalog), catalog.resolve("docs@v1"), "score", descending=True, start=0, size=3)  # doctest: +SKIP
([11, 10, 9], 12)
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from ..catalog.version import DatasetVersion
from ..errors import InvalidQuery
from .duck import arrow_table
from .session import RECORD, SqlSession, canonical, internal_name
from .tables import quote


def label_ids(names: Sequence[str], query: str) -> list[int]:
    """Class ids a search for ``query`` selects: those whose name holds it (any case), and ``query`` itself when it is an id.

    >>> label_ids(["cat", "dog", "hotdog"], "DOG"), label_ids(["cat"], "7")
    ([1, 2], [7])
    """
    wanted = [i for i, name in enumerate(names) if query.lower() in name.lower()]
    if query.strip().lstrip("-").isdigit():
        wanted.append(int(query))
    return wanted


def match_condition(version: DatasetVersion, column: str, query: str) -> tuple[str, list[Any]]:
    """``(SQL condition, parameters)`` selecting the rows of ``version`` whose ``column`` matches ``query``."""
    if column not in version.schema.names:
        raise InvalidQuery(f"{version.ref} has no column {column!r}")
    if version.kinds.get(column) == "class_label" and pa.types.is_integer(version.schema.field(column).type):
        return f"{quote(column)} IN (SELECT unnest($1::BIGINT[]))", [label_ids(version.class_names.get(column, []), query)]
    return f"contains(lower(CAST({quote(column)} AS VARCHAR)), lower($1))", [query]


def count_matches(session: SqlSession, version: DatasetVersion, column: str, query: str) -> int:
    """How many rows of ``version`` match a search for ``query`` in ``column`` (every verified shard is read)."""
    condition, params = match_condition(version, column, query)
    sql = f"SELECT count(*) AS n FROM {quote(internal_name(version))} WHERE {condition}"
    return int(session.run({canonical(version): version}, lambda cursor: arrow_table(cursor.sql(sql, params=params)).to_pylist()[0]["n"]))


def sorted_records(
    session: SqlSession,
    version: DatasetVersion,
    column: str,
    *,
    descending: bool = False,
    start: int,
    size: int,
    search: tuple[str, str] | None = None,
) -> tuple[list[int], int]:
    """``(record indices, total)``: rows ``[start, start + size)`` of ``version`` ordered by ``column`` (nulls last, ties
    in record order), among the rows matching ``search`` (``(column, text)``) when given; ``total`` rows in that order."""
    if column not in version.schema.names:
        raise InvalidQuery(f"cannot sort by {column!r}: {version.ref} has the columns {', '.join(version.schema.names)}")
    table = quote(internal_name(version))
    condition, params = match_condition(version, *search) if search else ("TRUE", [])
    order = f"{quote(column)} {'DESC' if descending else 'ASC'} NULLS LAST, {RECORD}"
    page = f"SELECT {RECORD} AS record FROM {table} WHERE {condition} ORDER BY {order} LIMIT {int(size)} OFFSET {int(start)}"
    count = f"SELECT count(*) AS n FROM {table} WHERE {condition}"

    def work(cursor: Any) -> tuple[list[int], int]:
        records = [int(r) for r in arrow_table(cursor.sql(page, params=params or None)).column("record").to_pylist()]
        total = version.rows if not search else int(arrow_table(cursor.sql(count, params=params)).to_pylist()[0]["n"])
        return records, total

    return session.run({canonical(version): version}, work)

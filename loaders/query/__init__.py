"""Queries over versions and runs: SQL (DuckDB) over verified shards, which steps read rows matching a predicate,
per-column statistics, sorted and counted listings.

>>> from loaders.query import SqlSession
>>> session = SqlSession(catalog)                                             # doctest: +SKIP
>>> session.query('SELECT count(*) AS n FROM "web-text@v1"').rows()           # doctest: +SKIP
[{'n': 1920}]
"""

from .limits import MAX_SQL_CHARS, QueryLimits
from .session import Prepared, QueryResult, SqlSession

__all__ = ["MAX_SQL_CHARS", "Prepared", "QueryLimits", "QueryResult", "SqlSession"]

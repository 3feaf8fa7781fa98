"""The inspector's SQL engine: one sandboxed session per process and the results of recent queries, kept for paging.

A result is kept under the query's text and the version ids its tables resolved to, so paging through it shows the
same rows, and a tag that moves gives a new result.

>>> queries = Queries(catalog, QueryLimits())                 # doctest: +SKIP
>>> queries.result('SELECT 1 AS one').rows()                  # doctest: +SKIP
[{'one': 1}]
"""

from __future__ import annotations

from loaders import Catalog
from loaders.query import QueryLimits, QueryResult, SqlSession
from loaders.storage.cache import ByteLRU

#: Bytes of recent results kept for paging.
RESULT_BYTES = 256 << 20


class Queries:
    """SQL over a catalog's versions, under the inspector's limits, with recent results kept."""

    def __init__(self, catalog: Catalog, limits: QueryLimits) -> None:
        self.session = SqlSession(catalog, limits)
        self._results: ByteLRU[QueryResult] = ByteLRU(budget=RESULT_BYTES, size_of=lambda r: r.table.nbytes + len(r.sql))

    @property
    def limits(self) -> QueryLimits:
        return self.session.limits

    def result(self, sql: str) -> QueryResult:
        """The result of ``sql`` (kept, so its pages agree; its shards are checked again each time, a ``stat`` each)."""
        prepared = self.session.prepare(sql)
        kept = self._results.get(prepared.key)
        if kept is not None:
            self.session.check(prepared.tables)
            return kept
        result = self.session.execute(prepared)
        self._results.put(prepared.key, result)
        return result

"""SQL over versions: DuckDB, embedded and sandboxed, with every registered version a read-only table named by its ref.

A query is one ``SELECT`` (``WITH``, ``VALUES``, ``DESCRIBE``, ``SUMMARIZE`` and ``SHOW`` are queries too); any other
statement (``COPY``, ``ATTACH``, ``INSTALL``, ``LOAD``, ``PRAGMA``, ``SET``, ``CREATE``, ``INSERT``...) is refused before
it runs. The tables it names (``"web-text@v1"``) are resolved by the catalog, their shards checked against the
manifest (:mod:`loaders.query.verified`), and only then shown to DuckDB, in a database that:

- may open exactly the checked shard files (``allowed_paths`` with ``enable_external_access`` off): no other file, no
  ``COPY``, no ``ATTACH`` of a file, no extension installed or loaded, no Python variables scanned;
- holds at most ``memory_bytes`` (``memory_limit``) and never spills to disk (no ``temp_directory``);
- has its configuration locked (``lock_configuration``), so nothing can loosen it.

A query runs for at most ``seconds`` (then it is interrupted) and returns at most ``max_rows`` rows (the result says
when more were cut). A new table means a new database (allowed paths cannot grow once locked); tables already known
cost nothing but a ``stat`` per shard.

>>> session = SqlSession(catalog)                                             # doctest: +SKIP
>>> result = session.query('SELECT count(*) AS n FROM "web-text@v1"')          # doctest: +SKIP
>>> result.to_json()                                                          # doctest: +SKIP
{'columns': ['n'], 'rows': [{'n': 1920}], 'truncated': False}
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import numpy as np
import pyarrow as pa

from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import ChecksumMismatch, SqlRefused, SqlStopped
from .duck import arrow_table, duckdb_module, first_line
from .limits import QueryLimits
from .tables import quote, refs_in, resolve_refs, table_hint
from .verified import is_local, verified_files
from .watchdog import WATCHDOG

T = TypeVar("T")

#: The column of internal views that holds each row's record index in its version.
RECORD = "__batchscope_record"
#: Versions one database keeps tables of; past it, a new database starts with the ones a query needs.
MAX_VERSIONS = 64


def _statement_name(kind: Any) -> str:
    return str(kind).rpartition(".")[2]


@dataclass(frozen=True)
class Prepared:
    """A checked query: its text and the version each table it names resolved to."""

    sql: str
    tables: dict[str, DatasetVersion]

    @property
    def key(self) -> tuple[Any, ...]:
        """What the query's answer depends on: its text and the ids of its versions (tags move, ids do not)."""
        return (self.sql, tuple(sorted((ref, v.name, v.id) for ref, v in self.tables.items())))


@dataclass(frozen=True)
class QueryResult:
    """What a query returned: column names and DuckDB types, at most ``max_rows`` rows (``truncated`` when more were
    cut), the time it took, and the versions its tables resolved to."""

    sql: str
    columns: list[str]
    types: list[str]
    table: pa.Table
    truncated: bool
    seconds: float
    max_rows: int
    tables: dict[str, DatasetVersion] = field(default_factory=dict)

    @property
    def row_count(self) -> int:
        return self.table.num_rows

    def rows(self, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """Rows ``[start, stop)`` as dicts keyed by column."""
        stop = self.table.num_rows if stop is None else min(stop, self.table.num_rows)
        start = min(max(0, start), stop)
        return self.table.slice(start, stop - start).to_pylist()

    def to_json(self) -> dict[str, Any]:
        """``{"columns", "rows", "truncated"}`` (values as Python objects: bytes stay bytes)."""
        return {"columns": list(self.columns), "rows": self.rows(), "truncated": self.truncated}


class _Database:
    """One sandboxed DuckDB database: a public view per table name and an internal view per version, then locked."""

    def __init__(self, duckdb: Any, limits: QueryLimits, versions: dict[str, DatasetVersion], aliases: dict[str, str]) -> None:
        self.versions = versions  # version id → version
        self.memory_bytes = limits.memory_bytes
        self.aliases = aliases  # table name as written → version id
        files = [path for v in versions.values() if is_local(v) for path in verified_files(v)]
        self.con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
        con = self.con
        con.execute("SET temp_directory = ''")
        con.execute(f"SET memory_limit = '{int(limits.memory_bytes)}B'")
        con.execute(f"SET threads = {int(limits.threads or os.cpu_count() or 1)}")
        con.execute("SET parquet_metadata_cache = true")
        con.execute("SET allowed_paths = [" + ", ".join(literal(path) for path in files) + "]")
        con.execute("SET enable_external_access = false")
        for version in versions.values():
            self._add(version)
        for name, version_id in aliases.items():
            if name != canonical(versions[version_id]):
                con.execute(f"CREATE VIEW {quote(name)} AS SELECT * FROM {quote(canonical(versions[version_id]))}")
        con.execute("SET lock_configuration = true")

    def _add(self, version: DatasetVersion) -> None:
        public, internal = quote(canonical(version)), quote(internal_name(version))
        if is_local(version) and version.shards:
            files = "[" + ", ".join(literal(s.uri) for s in version.shards) + "]"
            starts = [0]
            for shard in version.shards:
                starts.append(starts[-1] + shard.rows)
            self.con.execute(f"CREATE VIEW {public} AS SELECT * FROM read_parquet({files})")
            record = f"CAST({starts}::BIGINT[] AS BIGINT[])[CAST(file_index AS BIGINT) + 1] + CAST(file_row_number AS BIGINT)"
            self.con.execute(f"CREATE VIEW {internal} AS SELECT *, {record} AS {RECORD} FROM read_parquet({files})")
            return
        # Shards on remote storage (or none): rows read through the read path, each row group checked as it is fetched.
        tables, held = [], 0
        for _, _, table in version.iter_tables():
            held += table.nbytes
            if held > self.memory_bytes:
                raise SqlStopped(
                    f"{version.ref} is on remote storage and holds more than the memory limit of {self.memory_bytes:,} bytes; "
                    "register a local copy to query it"
                )
            tables.append(table)
        rows = pa.concat_tables(tables) if tables else version.schema.empty_table()
        rows = rows.append_column(RECORD, pa.array(np.arange(len(rows), dtype=np.int64)))
        self.con.register("__batchscope_load", rows)
        self.con.execute(f"CREATE TABLE {internal} AS SELECT * FROM __batchscope_load")
        self.con.unregister("__batchscope_load")
        self.con.execute(f"CREATE VIEW {public} AS SELECT * EXCLUDE ({RECORD}) FROM {internal}")

    def has(self, tables: dict[str, DatasetVersion]) -> bool:
        return all(self.aliases.get(name) == version.id for name, version in tables.items())


def _within(message: str, expression: str, what: str) -> str:
    """A parser message about ``SELECT (\n{expression}\n)`` told about ``expression`` itself (its own line numbers).

    >>> _within('Parser Error: syntax error at or near ")" (line 3, column 1)', "text LIKE", "predicate")
    'Parser Error: syntax error at the end of the predicate'
    >>> _within('Parser Error: syntax error at or near "=" (line 2, column 3)', "a == 1", "predicate")
    'Parser Error: syntax error at or near "=" (line 1, column 3)'
    """
    found = re.search(r" \(line (\d+), column (\d+)\)$", message)
    if not found:
        return message
    line = int(found.group(1)) - 1
    if line > expression.count("\n") + 1 or line < 1:
        return re.sub(r' at or near ".*" \(line \d+, column \d+\)$', f" at the end of the {what}", message)
    return message[: found.start()] + f" (line {line}, column {found.group(2)})"


def literal(text: str) -> str:
    """``text`` as a SQL string literal.

    >>> literal("it's")
    "'it''s'"
    """
    return "'" + text.replace("'", "''") + "'"


def canonical(version: DatasetVersion) -> str:
    """The table every version has: ``name@<full id>``."""
    return f"{version.name}@{version.id}"


def internal_name(version: DatasetVersion) -> str:
    """The internal view of a version: its columns and the record index of each row (``__batchscope_record``)."""
    return f"__batchscope_rows@{version.name}@{version.id}"


class SqlSession:
    """Queries over the versions of one catalog, under ``limits``; one per process (or per inspector) is enough.

    >>> session = SqlSession(catalog, QueryLimits(seconds=5))      # doctest: +SKIP
    >>> session.query('SELECT text FROM "web-text@v1" WHERE id = \\'json.loads\\'').rows()   # doctest: +SKIP
    [{'text': 'Deserialize s (a str, bytes or bytearray instance ...'}]
    """

    def __init__(self, catalog: CatalogStore, limits: QueryLimits | None = None) -> None:
        self.catalog = catalog
        self.limits = limits or QueryLimits()
        self._lock = threading.Lock()
        self._database: _Database | None = None
        self._parser: Any = None

    # -- checking a query ----------------------------------------------------------------------------
    def check_text(self, sql: str, *, what: str = "query") -> None:
        """Refuse text longer than ``max_chars`` before anything parses it."""
        if len(sql) > self.limits.max_chars:
            raise SqlStopped(f"{what} refused: {len(sql):,} characters is more than the limit of {self.limits.max_chars:,}")
        if not sql.strip():
            raise SqlRefused(f"the {what} is empty")

    def statement_type(self, sql: str) -> str:
        """The type of the one statement ``sql`` holds (``SELECT``, ``COPY``...); SqlRefused when it holds another number."""
        duckdb = duckdb_module()
        with self._lock:
            if self._parser is None:
                self._parser = duckdb.connect(":memory:")
                self._parser.execute("SET enable_external_access = false")
                self._parser.execute("SET lock_configuration = true")
            parser = self._parser.cursor()
        try:
            statements = parser.extract_statements(sql)
        except duckdb.Error as exc:
            raise SqlRefused(first_line(exc)) from None
        finally:
            parser.close()
        if len(statements) != 1:
            raise SqlRefused(f"give one query, not {len(statements)} statements" if statements else "the query is empty")
        return _statement_name(statements[0].type)

    def prepare(self, sql: str) -> Prepared:
        """Check ``sql`` (length, one ``SELECT``) and resolve the tables it names (``SqlRefused`` naming what fails)."""
        self.check_text(sql)
        kind = self.statement_type(sql)
        if kind != "SELECT":
            first = sql.split(None, 1)[0].upper()  # as written: INSTALL is a LOAD statement to DuckDB, PRAGMA a SET
            word = first if first.isalpha() and first != "WITH" else kind
            raise SqlRefused(f"only queries run here: {word} is refused (no writes, settings, files, attached databases or extensions)")
        return Prepared(sql, resolve_refs(self.catalog, refs_in(sql)))

    # -- the database ------------------------------------------------------------------------------------
    @staticmethod
    def check(tables: dict[str, DatasetVersion]) -> None:
        """Check every local shard of ``tables`` unless unchanged since its last check (ChecksumMismatch naming one that fails)."""
        for version in tables.values():
            if is_local(version):
                verified_files(version)

    def database(self, tables: dict[str, DatasetVersion]) -> _Database:
        """A database holding every table of ``tables`` (and, while they fit, the ones earlier queries named); each
        local shard checked unless unchanged since its last check."""
        self.check(tables)
        with self._lock:
            current = self._database
        named = {version.id for version in tables.values()}
        if current is not None and not self._still_verified(current, named):
            with self._lock:  # a file another version holds changed: start a database without it
                if self._database is current:
                    self._database = None
        with self._lock:
            current = self._database
            if current is not None and current.has(tables):
                return current
            versions = dict(current.versions) if current is not None else {}
            aliases = dict(current.aliases) if current is not None else {}
            if len(versions) + len(tables) > MAX_VERSIONS:
                versions, aliases = {}, {}
            for name, version in tables.items():
                versions[version.id] = version
                aliases[name] = version.id
                aliases[canonical(version)] = version.id
            used = set(aliases.values())
            versions = {i: v for i, v in versions.items() if i in used}
            self._database = _Database(duckdb_module(), self.limits, versions, aliases)
            return self._database

    @staticmethod
    def _still_verified(database: _Database, named: set[str]) -> bool:
        """Whether every file ``database`` may open is still what was checked (its other versions too)."""
        for version in database.versions.values():
            if version.id not in named and is_local(version):
                try:
                    verified_files(version)
                except ChecksumMismatch:
                    return False
        return True

    def run(self, tables: dict[str, DatasetVersion], work: Callable[[Any], T]) -> T:
        """``work(cursor)`` on a database holding ``tables``, interrupted after ``seconds``; DuckDB's errors become one line."""
        duckdb = duckdb_module()
        cursor = self.database(tables).con.cursor()
        token = WATCHDOG.watch(cursor.interrupt, self.limits.seconds)
        try:
            return work(cursor)
        except duckdb.Error as exc:
            raise self._error(duckdb, exc) from None
        finally:
            WATCHDOG.done(token)
            cursor.close()

    def _error(self, duckdb: Any, exc: Exception) -> SqlRefused:
        text = first_line(exc)
        if isinstance(exc, duckdb.InterruptException):
            return SqlStopped(f"query stopped after {self.limits.seconds:g} s, its time limit")
        if isinstance(exc, duckdb.OutOfMemoryException):
            return SqlStopped(f"query stopped: it needs more than its memory limit of {self.limits.memory_bytes:,} bytes ({text})")
        if isinstance(exc, duckdb.PermissionException):
            return SqlRefused(f"query refused: only the registered versions can be read ({text})")
        missing = re.search(r"Table with name (.+?) does not exist", text)
        if isinstance(exc, duckdb.CatalogException) and missing:
            examples = self.catalog.datasets()[:1]
            return SqlRefused(f"unknown table {missing.group(1)}: {table_hint([f'{d}@latest' for d in examples])}")
        return SqlRefused(text)

    # -- queries ---------------------------------------------------------------------------------------------
    def execute(self, prepared: Prepared) -> QueryResult:
        """Run a prepared query: at most ``max_rows`` rows, within the time and memory limits."""
        cap = self.limits.max_rows
        start = time.perf_counter()

        def work(cursor: Any) -> tuple[pa.Table, list[str]]:
            relation = cursor.sql(prepared.sql)
            if relation is None:
                return pa.table({}), []
            types = [str(t) for t in relation.types]
            return arrow_table(relation.limit(cap + 1)), types

        table, types = self.run(prepared.tables, work)
        truncated = table.num_rows > cap
        if truncated:
            table = table.slice(0, cap)
        return QueryResult(
            sql=prepared.sql,
            columns=list(table.column_names),
            types=types,
            table=table,
            truncated=truncated,
            seconds=time.perf_counter() - start,
            max_rows=cap,
            tables=dict(prepared.tables),
        )

    def query(self, sql: str) -> QueryResult:
        """Check, resolve and run ``sql``."""
        return self.execute(self.prepare(sql))

    def expression_tables(self, expression: str, *, what: str = "predicate") -> dict[str, DatasetVersion]:
        """Check an expression's text (length, one expression) and resolve the tables its subqueries name."""
        self.check_text(expression, what=what)
        try:
            kind = self.statement_type(f"SELECT (\n{expression}\n)")
        except SqlRefused as exc:
            raise SqlRefused(_within(exc.message, expression, what)) from None
        if kind != "SELECT":
            raise SqlRefused(f"the {what} is not an expression: {expression!r}")
        return resolve_refs(self.catalog, refs_in(expression))

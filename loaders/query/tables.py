"""Which versions a query names: every double-quoted identifier holding ``@`` is a version ref, resolved by the catalog.

A version is a table named by its ref: ``"web-text@v1"`` (a tag), ``"web-text@3f2a9c01"`` (an id or id prefix). Names
are found with DuckDB's tokenizer, so a ref inside a string literal or a comment is not one; nothing is bound or read.

>>> refs_in('SELECT "a@v1".x, \\'"b@v2"\\' FROM "a@v1" JOIN "we""ird@v3" USING (id) -- "c@v4"')
['a@v1', 'we"ird@v3']
"""

from __future__ import annotations

from typing import Any

from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from ..errors import BatchscopeError, SqlRefused
from .duck import duckdb_module


def _quoted_at(sql: str, start: int) -> str | None:
    """The double-quoted identifier that starts at ``start`` (``""`` is one quote), or None."""
    if not sql.startswith('"', start):
        return None
    out, i = [], start + 1
    while i < len(sql):
        if sql[i] == '"':
            if sql.startswith('""', i):
                out.append('"')
                i += 2
                continue
            return "".join(out)
        out.append(sql[i])
        i += 1
    return None


def refs_in(sql: str) -> list[str]:
    """The version refs a query names, in order of first appearance."""
    duckdb = duckdb_module()
    kinds = duckdb.token_type
    found: dict[str, None] = {}
    for start, kind in duckdb.tokenize(sql):
        if kind == kinds.identifier:
            name = _quoted_at(sql, start)
            if name is not None and "@" in name:
                found.setdefault(name, None)
    return list(found)


def quote(name: str) -> str:
    """``name`` as a DuckDB identifier.

    >>> quote('we"ird@v1')
    '"we""ird@v1"'
    """
    return '"' + name.replace('"', '""') + '"'


def resolve_refs(catalog: CatalogStore, refs: list[str]) -> dict[str, DatasetVersion]:
    """Each ref's version; an unknown dataset, tag or version is ``SqlRefused`` naming the table."""
    tables: dict[str, DatasetVersion] = {}
    for ref in refs:
        name, _, selector = ref.partition("@")
        try:
            if not selector:
                raise SqlRefused(f"table {quote(ref)} names no version after '@'")
            tables[ref] = catalog.resolve(ref)
        except SqlRefused:
            raise
        except BatchscopeError as exc:
            raise SqlRefused(f"unknown table {quote(ref)}: {exc.message}") from None
    return tables


def table_hint(examples: list[Any]) -> str:
    """How to name a table, with an example when there is one."""
    example = f', such as "{examples[0]}"' if examples else ""
    return f'tables are versions, named in double quotes as "dataset@tag" or "dataset@version-id"{example}'

"""DuckDB, the query engine, imported only when a query runs: a missing package is one line naming the extra.

>>> arrow_table(duckdb_module().connect().sql("SELECT 1 AS one")).column_names
['one']
"""

from __future__ import annotations

import importlib
from typing import Any

import pyarrow as pa

from ..errors import ExtraMissing

#: The optional extra that installs DuckDB.
EXTRA = "batchscope[duckdb]"


def duckdb_module() -> Any:
    """The ``duckdb`` module, or ``ExtraMissing`` naming the extra that installs it."""
    try:
        return importlib.import_module("duckdb")
    except ImportError as exc:
        raise ExtraMissing(f"SQL over versions needs DuckDB, which is not installed: pip install '{EXTRA}' ({exc})") from None


def arrow_table(relation: Any) -> pa.Table:
    """A DuckDB relation's rows as one Arrow table (DuckDB 1.x ``arrow()``; 2.x ``to_arrow_table()``)."""
    convert = getattr(relation, "to_arrow_table", None)
    table = convert() if convert is not None else relation.arrow()
    if isinstance(table, pa.RecordBatchReader):
        table = table.read_all()
    return table


def first_line(exc: BaseException) -> str:
    """DuckDB's message on one line: the first line, with the position a parser error points at.

    >>> first_line(ValueError("Parser Error: syntax error at or near \\"SELEC\\"\\n\\nLINE 1: SELEC 1\\n        ^"))
    'Parser Error: syntax error at or near "SELEC" (line 1, column 1)'
    """
    lines = str(exc).splitlines()
    head = lines[0].strip() if lines else type(exc).__name__
    for number, line in enumerate(lines):
        if line.startswith("LINE ") and ":" in line and number + 1 < len(lines) and "^" in lines[number + 1]:
            label, _, _ = line.partition(":")
            column = lines[number + 1].index("^") - len(label) - 2 + 1
            head += f" ({label.lower()}, column {max(1, column)})"
            break
    return head

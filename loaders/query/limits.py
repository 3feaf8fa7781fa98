"""The limits every SQL query runs under: time, memory, rows returned, and the length of its text.

>>> QueryLimits().max_rows
10000
>>> QueryLimits(seconds=0)
Traceback (most recent call last):
...
ValueError: query limit seconds=0 is out of range: > 0 and <= 86400
"""

from __future__ import annotations

from dataclasses import dataclass

#: The longest SQL text (or predicate) accepted, in characters; longer ones are refused before they are parsed.
MAX_SQL_CHARS = 100_000


@dataclass(frozen=True)
class QueryLimits:
    """Limits of one query: ``seconds`` of execution, ``memory_bytes`` DuckDB may hold (shared by the queries running
    at once in a process, never spilled to disk), ``max_rows`` returned (more are cut, and the result says so),
    ``max_chars`` of SQL text, and ``threads`` DuckDB runs on (0: one per core)."""

    seconds: float = 10.0
    memory_bytes: int = 1 << 30
    max_rows: int = 10_000
    max_chars: int = MAX_SQL_CHARS
    threads: int = 0

    def __post_init__(self) -> None:
        ranges = {
            "seconds": (0 < self.seconds <= 86_400, "> 0 and <= 86400"),
            "memory_bytes": (self.memory_bytes >= 16 << 20, ">= 16777216"),
            "max_rows": (1 <= self.max_rows <= 10_000_000, "1-10000000"),
            "max_chars": (1 <= self.max_chars <= 10_000_000, "1-10000000"),
            "threads": (0 <= self.threads <= 256, "0-256 (0: one per core)"),
        }
        for name, (ok, allowed) in ranges.items():
            if not ok:
                raise ValueError(f"query limit {name}={getattr(self, name)!r} is out of range: {allowed}")

    def describe(self) -> str:
        """The limits in words, as pages show them.

        >>> QueryLimits(seconds=2.5, memory_bytes=1 << 30, max_rows=500).describe()
        'at most 2.5 s, 1 GiB of memory and 500 rows per query'
        """
        gib = self.memory_bytes / (1 << 30)
        memory = f"{gib:g} GiB" if gib >= 1 else f"{self.memory_bytes / (1 << 20):g} MiB"
        return f"at most {self.seconds:g} s, {memory} of memory and {self.max_rows:,} rows per query"

"""Which steps trained on rows matching X: a SQL predicate over each source of a run, then every read of each matching
row, found by inverting the run's read order (``run.where``), never by scanning the steps.

Two parts: :func:`source_rows` evaluates the predicate over one source's verified shards (DuckDB), and
:func:`find_reads` maps it over the run's sources (``scan``: a map in order, sequential by default; a scan engine's
ordered map fits, since each source's share is a plain :class:`SourceQuery`) and asks the run where it read each row. Any kind of run plugs in through :class:`FindableRun`: native
runs invert their own order; a replayed run answers ``where`` with its framework's order inverted, or raises a
``BatchscopeError`` saying in one line why it cannot.

>>> found = find_reads(catalog.run("llm-7"), "text ILIKE '%lorem%'", session=SqlSession(catalog))   # doctest: +SKIP
>>> [(m.step, m.rank, m.position, m.key) for m in found.matches][:2]                              # doctest: +SKIP
[(3, 1, 2, 'doc-41'), (17, 0, 5, 'doc-41')]
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, TypeVar

import numpy as np

from ..catalog.version import DatasetVersion
from ..errors import InvalidQuery, SqlRefused
from ..sampling.where import WhereReads
from .duck import arrow_table
from .limits import QueryLimits
from .session import RECORD, SqlSession, canonical, internal_name
from .tables import quote

T = TypeVar("T")

#: Bins of the histogram of matches over steps.
HISTOGRAM_BINS = 50


class FindableRun(Protocol):
    """What :func:`find_reads` needs of a run (native and replayed runs have it): its sources, the version each pins,
    and ``where`` — every read of one record, over every epoch the run reaches when ``epochs`` is None."""

    name: str
    kind: str
    sources: Sequence[Any]  # each with a ``ref``

    @property
    def total_steps(self) -> int | None: ...

    def version(self, source: int) -> DatasetVersion: ...

    def where(self, source: int, record: int, *, first_epoch: int = 0, epochs: int | None = None) -> WhereReads: ...


@dataclass(frozen=True)
class SourceQuery:
    """One source's share of a find: ``predicate`` over the catalog version ``dataset@version`` under ``root``. Plain
    values only, so a scan engine can ship it to another process (:func:`source_rows` opens its own session there)."""

    root: str
    dataset: str
    version: str
    predicate: str
    limits: QueryLimits


_SESSIONS: dict[tuple[str, QueryLimits], SqlSession] = {}


def source_rows(query: SourceQuery, session: SqlSession | None = None) -> RowMatches | SqlRefused:
    """The rows of one source the predicate selects, or why it does not apply (the error, returned: other sources may
    still match). Without ``session``, one per catalog root and limits is opened in this process."""
    if session is None:
        key = (query.root, query.limits)
        if key not in _SESSIONS:
            from ..catalog.store import CatalogStore

            _SESSIONS[key] = SqlSession(CatalogStore(query.root), query.limits)
        session = _SESSIONS[key]
    version = session.catalog.resolve(f"{query.dataset}@{query.version}")
    try:
        return matching_rows(session, version, query.predicate)
    except SqlRefused as exc:
        return exc


#: How the sources are scanned: ``scan(source_rows, queries)`` returns one answer per query, in order. The default runs
#: them here, one after another, with the caller's session; a scan engine's ordered map fits as it is
#: (``lambda fn, queries: ordered(engine, fn, queries)``), its workers opening their own sessions.
SourceScan = Callable[[Callable[[SourceQuery], Any], Sequence[SourceQuery]], list[Any]]


def sequential(fn: Callable[[T], Any], items: Sequence[T]) -> list[Any]:
    """The default scan: one source after another.

    >>> sequential(lambda i: i * 2, [0, 1, 2])
    [0, 2, 4]
    """
    return [fn(item) for item in items]


@dataclass(frozen=True)
class StepRange:
    """Steps ``[start, stop)``; ``stop`` None means to the run's end.

    >>> StepRange.parse("10:20"), StepRange.parse("5:"), StepRange.parse(":8")
    (StepRange(start=10, stop=20), StepRange(start=5, stop=None), StepRange(start=0, stop=8))
    >>> StepRange.parse("8:3")
    Traceback (most recent call last):
    ...
    loaders.errors.InvalidQuery: steps '8:3' is not A:B with 0 <= A < B (A: or :B leave one end open)
    """

    start: int = 0
    stop: int | None = None

    def __post_init__(self) -> None:
        if self.start < 0 or (self.stop is not None and self.stop <= self.start):
            raise InvalidQuery(f"steps {self.start}:{'' if self.stop is None else self.stop} is not a range of steps (0 <= A < B)")

    @classmethod
    def parse(cls, text: str | None) -> "StepRange":
        if not text:
            return cls()
        found = re.fullmatch(r"\s*(\d*)\s*:\s*(\d*)\s*", text)
        if not found or (found.group(1) and found.group(2) and int(found.group(2)) <= int(found.group(1))):
            raise InvalidQuery(f"steps {text!r} is not A:B with 0 <= A < B (A: or :B leave one end open)")
        return cls(int(found.group(1) or 0), int(found.group(2)) if found.group(2) else None)

    def __contains__(self, step: object) -> bool:
        return isinstance(step, int) and step >= self.start and (self.stop is None or step < self.stop)

    def text(self) -> str:
        return f"{self.start}:{'' if self.stop is None else self.stop}"


@dataclass(frozen=True)
class RowMatches:
    """The rows of one version a predicate selects: record indices (ascending) and keys; ``truncated`` when the cap cut more."""

    records: list[int]
    keys: list[str]
    truncated: bool


def _keys(version: DatasetVersion, records: list[int], stored: list[Any] | None) -> list[str]:
    """Permalink keys of ``records``: from the key column read with them, else from the records (content hashes,
    ``~N`` suffixes of allowed duplicates)."""
    if stored is not None and not version.manifest.key_suffixes:
        return [str(value) for value in stored]
    keys = []
    for index, record in zip(records, version.read_indices(np.asarray(records, dtype=np.int64))):
        shard, row = version.locate(index)
        keys.append(version.key_at(shard, row, record))
    return keys


def check_boolean(cursor: Any, version: DatasetVersion, predicate: str) -> None:
    """SqlRefused unless ``predicate`` binds over ``version``'s columns as a boolean (nothing is read)."""
    relation = cursor.sql(f"SELECT (\n{predicate}\n) AS matched FROM {quote(internal_name(version))}")
    kind = str(relation.types[0])
    if kind.strip('"') not in ("BOOLEAN", "NULL"):
        raise SqlRefused(f"the predicate is {kind}, not a boolean: {predicate!r}")


def matching_rows(session: SqlSession, version: DatasetVersion, predicate: str, *, limit: int | None = None) -> RowMatches:
    """The rows of ``version`` (its verified shards) for which ``predicate`` is true, at most ``limit`` (default: the
    session's row cap)."""
    limit = session.limits.max_rows if limit is None else limit
    tables = {canonical(version): version, **session.expression_tables(predicate)}
    key = f", {quote(version.key)} AS key" if version.key else ""

    def work(cursor: Any) -> Any:
        check_boolean(cursor, version, predicate)
        return arrow_table(
            cursor.sql(
                f"SELECT {RECORD} AS record{key} FROM {quote(internal_name(version))} WHERE (\n{predicate}\n) "
                f"ORDER BY {RECORD} LIMIT {int(limit) + 1}"
            )
        )

    table = session.run(tables, work)
    truncated = table.num_rows > limit
    table = table.slice(0, limit)
    records = [int(r) for r in table.column("record").to_pylist()]
    stored = table.column("key").to_pylist() if version.key else None
    return RowMatches(records, _keys(version, records, stored), truncated)


@dataclass(frozen=True)
class Match:
    """One read of a matching row: at ``step``, ``rank`` (of ``world_size``, in force then) read it as its batch's
    ``position``-th sample (for a packed run, the sequence that holds the document); ``index`` is its global sample
    index, ``record`` the row's record index in ``source``."""

    step: int
    rank: int
    position: int
    key: str
    source: str
    epoch: int
    world_size: int
    index: int
    record: int
    source_index: int


@dataclass(frozen=True)
class SourceMatches:
    """What the predicate selected in one source: matching rows (at least, when ``truncated``) or why it does not apply."""

    source_index: int
    source: str
    dataset: str
    version: str
    rows: int
    truncated: bool
    error: str | None = None


@dataclass
class FindResult:
    """Every read of a row matching ``predicate`` by ``run`` within ``steps``, ordered by step, rank and position."""

    run: str
    kind: str
    predicate: str
    steps: StepRange
    total_steps: int | None
    packed: bool
    matches: list[Match] = field(default_factory=list)
    sources: list[SourceMatches] = field(default_factory=list)
    #: More reads than the cap, or more matching rows than the cap in a source: the list is a prefix.
    truncated: bool = False
    notes: list[str] = field(default_factory=list)

    def histogram(self, bins: int = HISTOGRAM_BINS) -> list[tuple[int, int, int]]:
        """``(first step, end step, matches)`` of up to ``bins`` equal ranges of steps over the range searched."""
        stop = self.steps.stop or self.total_steps or (max(m.step for m in self.matches) + 1 if self.matches else 0)
        return step_histogram([m.step for m in self.matches], self.steps.start, max(stop, self.steps.start + 1), bins=bins)


def step_histogram(steps: Sequence[int], start: int, stop: int, *, bins: int = HISTOGRAM_BINS) -> list[tuple[int, int, int]]:
    """Counts of ``steps`` in up to ``bins`` equal ranges covering ``[start, stop)``.

    >>> step_histogram([0, 1, 1, 9], 0, 10, bins=5)
    [(0, 2, 3), (2, 4, 0), (4, 6, 0), (6, 8, 0), (8, 10, 1)]
    """
    span = stop - start
    width = -(-span // min(bins, span))
    edges = list(range(start, stop, width))
    counts = np.bincount((np.asarray(steps, dtype=np.int64) - start) // width, minlength=len(edges)) if len(steps) else np.zeros(len(edges))
    return [(edge, min(edge + width, stop), int(count)) for edge, count in zip(edges, counts[: len(edges)])]


def _is_packed(run: Any) -> bool:
    """Whether a read is a packed sequence: a run's own ``packed`` (a replayed run says so), else its plan's packing."""
    packed = getattr(run, "packed", None)
    if isinstance(packed, bool):
        return packed
    return getattr(getattr(run, "plan", None), "pack", None) is not None


def find_reads(
    run: FindableRun,
    predicate: str,
    *,
    session: SqlSession,
    steps: StepRange | None = None,
    max_reads: int | None = None,
    scan: SourceScan = sequential,
) -> FindResult:
    """Every read by ``run`` of a row of its sources for which ``predicate`` (a SQL boolean over the source's columns)
    holds, within ``steps``; at most ``max_reads`` (default: the session's row cap), ``truncated`` when cut.

    The predicate is evaluated once per source (``scan`` maps over them); each matching row's reads come from
    ``run.where`` (a run that cannot invert its order raises its own one-line error). A predicate that applies to no source (an unknown column everywhere, not a boolean) is SqlRefused.
    """
    steps = steps or StepRange()
    cap = session.limits.max_rows if max_reads is None else max_reads
    where = getattr(run, "where", None)
    if where is None:
        raise InvalidQuery(f"run {run.name} ({run.kind}) cannot say where it read a row: its read order cannot be inverted")
    session.expression_tables(predicate)  # refuse a malformed predicate once, before any source is read
    versions = [run.version(source) for source in range(len(run.sources))]
    queries = [SourceQuery(str(session.catalog.root), v.name, v.id, predicate, session.limits) for v in versions]
    run_here = scan is sequential
    answers = scan(functools.partial(source_rows, session=session) if run_here else source_rows, queries)
    result = FindResult(run.name, run.kind, predicate, steps, run.total_steps, _is_packed(run))
    errors = [found for found in answers if isinstance(found, SqlRefused)]
    if errors and len(errors) == len(answers):
        raise errors[0]
    for source, (version, found) in enumerate(zip(versions, answers)):
        ref = str(run.sources[source].ref)
        if isinstance(found, SqlRefused):
            result.sources.append(SourceMatches(source, ref, version.name, version.id, 0, False, found.message))
            result.notes.append(f"source {ref}: the predicate does not apply ({found.message})")
            continue
        result.sources.append(SourceMatches(source, ref, version.name, version.id, len(found.records), found.truncated))
        result.truncated |= found.truncated
        for record, key in zip(found.records, found.keys):
            reads: WhereReads = where(source, record, epochs=None)
            for read in reads.reads:
                if read.step in steps:
                    result.matches.append(
                        Match(read.step, read.rank, read.sample, key, ref, read.epoch, read.world_size, read.index, record, source)
                    )
    result.matches.sort(key=lambda m: (m.step, m.rank, m.position, m.source_index, m.record))
    if len(result.matches) > cap:
        del result.matches[cap:]
        result.truncated = True
    return result


__all__ = [
    "FindResult",
    "FindableRun",
    "Match",
    "RowMatches",
    "SourceMatches",
    "SourceQuery",
    "StepRange",
    "find_reads",
    "matching_rows",
    "sequential",
    "source_rows",
    "step_histogram",
]

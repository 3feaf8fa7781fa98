"""Per-column statistics of a version, like a data viewer's: counts, nulls, distinct values, the range and mean of what
each column measures (numbers; lengths of text; items of lists such as token ids; bytes of binary and media), a
histogram of it (not for the key column, whose values only name rows), and facets (values with their counts) for columns with few distinct values and class labels.

Computed by DuckDB over the version's verified shards (two scans: one query for every column's summary, then one for
every histogram and facet, as ``GROUPING SETS``), then kept in the catalog as a derived file
(``indexes/{name}/{id}.profile.parquet``, stamped by :mod:`loaders.storage.derived`), so a second look is instant; a
file that fails its stamp is rebuilt, never served.

>>> profile = version_profile(SqlSession(catalog), catalog.resolve("web-text@v1"))   # doctest: +SKIP
>>> [(c.name, c.measure, c.nulls) for c in profile.columns]                           # doctest: +SKIP
[('id', 'length', 0), ('text', 'length', 0), ('score', 'value', 3)]
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from .. import storage
from ..catalog.version import DatasetVersion
from ..storage import derived
from .duck import arrow_table
from .session import SqlSession, canonical, internal_name
from .tables import quote

#: Layout of the stored profile (bump when its content changes meaning).
PROFILE_LAYOUT = 2
#: Bins of a column's histogram.
BINS = 20
#: Longest text value a facet holds whole.
FACET_CHARS = 200
#: Columns with at most this many distinct values (by DuckDB's estimate) get facets: each value and its count.
FACETS = 20

_MEMO: dict[tuple[str, str], "VersionProfile"] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Bin:
    """Values of the measure in ``[low, high)`` (the last bin includes ``high``); for a whole-number measure, the
    values ``low`` to ``high``, both included."""

    low: float
    high: float
    count: int


@dataclass(frozen=True)
class Facet:
    """One value of a low-cardinality column (``label`` names a class label's class) and its row count."""

    value: Any
    label: str
    count: int
    #: The value was longer than ``FACET_CHARS`` and is cut (it names no exact value).
    cut: bool = False


@dataclass(frozen=True)
class ColumnProfile:
    """One column: ``measure`` says what ``low``/``high``/``mean`` and the histogram count (``value``, ``length`` in
    characters, ``items`` of a list, ``bytes``; empty when nothing is measured)."""

    name: str
    kind: str
    type: str
    measure: str
    rows: int
    nulls: int
    distinct: int | None
    low: float | None
    high: float | None
    mean: float | None
    histogram: list[Bin] = field(default_factory=list)
    facets: list[Facet] = field(default_factory=list)
    #: More distinct values than facets listed (the rest are counted in ``other``).
    other: int = 0
    #: The measure is a whole number: each bin holds the values ``low`` to ``high``, both included.
    integral: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ColumnProfile":
        return cls(
            **{
                **data,
                "histogram": [Bin(**b) for b in data["histogram"]],
                "facets": [Facet(**f) for f in data["facets"]],
            }
        )


@dataclass(frozen=True)
class VersionProfile:
    """Every column's profile; ``seconds`` is how long computing it took, ``stored`` whether it came from the catalog."""

    version: str
    rows: int
    columns: list[ColumnProfile]
    seconds: float
    stored: bool

    def column(self, name: str) -> ColumnProfile | None:
        return next((c for c in self.columns if c.name == name), None)


def _base(type_: pa.DataType) -> pa.DataType:
    return type_.value_type if pa.types.is_dictionary(type_) else type_


def measure_of(field_: pa.Field) -> tuple[str, str]:
    """``(measure, SQL expression)`` of what a column's statistics count (``("", "")`` when nothing).

    >>> measure_of(pa.field("text", pa.string()))
    ('length', 'length("text")')
    >>> measure_of(pa.field("input_ids", pa.list_(pa.int32())))
    ('items', 'len("input_ids")')
    """
    column, type_ = quote(field_.name), _base(field_.type)
    if pa.types.is_boolean(type_):
        return "value", f"CAST({column} AS INTEGER)"
    if pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_):
        return "value", f"CAST({column} AS DOUBLE)"
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return "length", f"length({column})"
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_) or pa.types.is_fixed_size_binary(type_):
        return "bytes", f"octet_length({column})"
    if pa.types.is_list(type_) or pa.types.is_large_list(type_) or pa.types.is_fixed_size_list(type_):
        return "items", f"len({column})"
    if pa.types.is_struct(type_):
        names = {type_.field(i).name: type_.field(i).type for i in range(type_.num_fields)}
        if "bytes" in names and pa.types.is_binary(_base(names["bytes"])):  # Hugging Face Image/Audio
            return "bytes", f"octet_length({column}.bytes)"
    return "", ""


def _faceted(field_: pa.Field, kind: str) -> bool:
    type_ = _base(field_.type)
    return kind == "class_label" or any(
        check(type_) for check in (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_boolean)
    )


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


@dataclass(frozen=True)
class _Layout:
    """How one column's measure is cut into bins: ``count`` bins of ``width`` from ``low`` (the last ends at ``high``)."""

    low: float
    high: float
    count: int
    width: float

    @classmethod
    def of(cls, low: float | None, high: float | None, *, integral: bool) -> "_Layout | None":
        """At most ``BINS`` equal bins over ``[low, high]``; for whole numbers, bins of a whole width (one per value when
        they span fewer than ``BINS`` values).

        >>> _Layout.of(15, 58, integral=True)
        _Layout(low=15, high=58, count=15, width=3)
        >>> _Layout.of(0.0, 1.0, integral=False).width
        0.05
        """
        if low is None or high is None or not math.isfinite(low) or not math.isfinite(high):
            return None
        if integral:
            width = max(1, math.ceil((high - low + 1) / BINS))
            return cls(low, high, math.ceil((high - low + 1) / width), width)
        span = high - low
        return cls(low, high, BINS if span > 0 else 1, span / BINS if span > 0 else 1.0)

    def sql(self, expression: str) -> str:
        """Each row's bin number, unclamped (``high`` falls one past the last bin; null and NaN stay so)."""
        return f"floor((CAST({expression} AS DOUBLE) - {self.low!r}) / {self.width!r})"

    def bins(self, counted: dict[Any, int], *, integral: bool) -> list[Bin]:
        """Each bin with its count (from :meth:`sql`'s groups); whole-number bins end on their last value."""
        counts = [0] * self.count
        for key, n in counted.items():
            if key is not None and not math.isnan(key):
                counts[min(max(int(key), 0), self.count - 1)] += n
        last = 1 if integral else 0
        return [
            Bin(self.low + b * self.width, min(self.low + (b + 1) * self.width - last, self.high), counts[b]) for b in range(self.count)
        ]


def _integral(field_: pa.Field) -> bool:
    type_ = _base(field_.type)
    return pa.types.is_integer(type_) or pa.types.is_boolean(type_)


def _grouped(session: SqlSession, tables: dict[str, DatasetVersion], table: str, groups: dict[str, str]) -> dict[str, dict[Any, int]]:
    """Row counts per value of each expression in ``groups`` (name → SQL), all in one scan (``GROUPING SETS``)."""
    if not groups:
        return {}
    names = list(groups)
    inner = ", ".join(f"{expression} AS {name}" for name, expression in groups.items())
    flags = ", ".join(f"grouping({name}) AS g_{name}" for name in names)
    sets = ", ".join(f"({name})" for name in names)
    query = f"SELECT {', '.join(names)}, {flags}, count(*) AS n FROM (SELECT {inner} FROM {table}) GROUP BY GROUPING SETS ({sets})"
    counted: dict[str, dict[Any, int]] = {name: {} for name in names}
    for row in session.run(tables, lambda cursor: arrow_table(cursor.sql(query)).to_pylist()):
        name = next(name for name in names if row[f"g_{name}"] == 0)
        counted[name][row[name]] = int(row["n"])
    return counted


def _facets(counted: dict[Any, int], names: list[str]) -> tuple[list[Facet], int]:
    """The most frequent values (at most ``FACETS``, ties by value, null last) and how many rows hold the others."""
    ordered = sorted(counted.items(), key=lambda item: (-item[1], item[0] is None, item[0] if item[0] is not None else 0))
    facets = []
    for value, n in ordered[:FACETS]:
        cut = isinstance(value, str) and len(value) > FACET_CHARS
        if cut:
            value = value[:FACET_CHARS] + "…"
        label = "null" if value is None else str(value)
        if names and isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
            label = f"{value} · {names[value]}"
        facets.append(Facet(value, label, n, cut))
    return facets, sum(n for _, n in ordered[FACETS:])


def _compute(session: SqlSession, version: DatasetVersion) -> list[ColumnProfile]:
    """Two scans: every column's summary, then every histogram and facet together."""
    table = quote(internal_name(version))
    fields = list(version.schema)
    measures = [measure_of(f) for f in fields]
    parts = []
    for i, (f, (measure, expression)) in enumerate(zip(fields, measures)):
        parts.append(f"count({quote(f.name)}) AS n{i}")
        if _faceted(f, version.kinds.get(f.name, "")):
            parts.append(f"approx_count_distinct({quote(f.name)}) AS d{i}")
        if measure:
            parts.append(f"min({expression}) AS lo{i}, max({expression}) AS hi{i}, avg({expression}) AS mean{i}")

    def summary(cursor: Any) -> dict[str, Any]:
        return arrow_table(cursor.sql(f"SELECT count(*) AS rows, {', '.join(parts)} FROM {table}")).to_pylist()[0]

    tables = {canonical(version): version}
    facts = session.run(tables, summary)
    rows = int(facts["rows"])
    layouts: dict[int, _Layout] = {}
    groups: dict[str, str] = {}
    integral = [measure != "value" or _integral(f) for f, (measure, _) in zip(fields, measures)]
    for i, (f, (measure, expression)) in enumerate(zip(fields, measures)):
        layout = _Layout.of(_number(facts.get(f"lo{i}")), _number(facts.get(f"hi{i}")), integral=integral[i])
        if measure and layout is not None and f.name != version.key:  # a key names rows: its values have no shape to draw
            layouts[i] = layout
            groups[f"b{i}"] = layout.sql(expression)
        distinct = facts.get(f"d{i}")
        if distinct is not None and (version.kinds.get(f.name) == "class_label" or (distinct <= FACETS and 2 * distinct <= rows)):
            groups[f"f{i}"] = quote(f.name)
    counted = _grouped(session, tables, table, groups)
    out = []
    for i, (f, (measure, _)) in enumerate(zip(fields, measures)):
        facets, other = _facets(counted[f"f{i}"], version.class_names.get(f.name, [])) if f"f{i}" in counted else ([], 0)
        distinct = facts.get(f"d{i}")
        out.append(
            ColumnProfile(
                name=f.name,
                kind=version.kinds.get(f.name, "json"),
                type=str(f.type),
                measure=measure,
                rows=rows,
                nulls=rows - int(facts[f"n{i}"]),
                distinct=None if distinct is None else int(distinct),
                low=_number(facts.get(f"lo{i}")),
                high=_number(facts.get(f"hi{i}")),
                mean=_number(facts.get(f"mean{i}")),
                histogram=layouts[i].bins(counted[f"b{i}"], integral=integral[i]) if i in layouts else [],
                integral=integral[i] and bool(measure),
                facets=facets,
                other=other,
            )
        )
    return out


def profile_path(version: DatasetVersion) -> str:
    """Where a version's profile is kept: ``indexes/{name}/{id}.profile.parquet`` in the catalog."""
    return storage.join(version.root, "indexes", version.name, f"{version.id}.profile.parquet")


def _derivation(version: DatasetVersion) -> derived.Derivation:
    """What a kept profile is: the column statistics of exactly this version, in this layout (sealed)."""
    return derived.Derivation("column statistics", version.id, layout=PROFILE_LAYOUT)


def _stored(version: DatasetVersion) -> list[ColumnProfile] | None:
    table = derived.read_table(profile_path(version), _derivation(version), rows=len(version.schema))
    if table is None:
        return None
    try:
        columns = [ColumnProfile.from_json(json.loads(text)) for text in table.column("profile").to_pylist()]
    except (KeyError, TypeError, ValueError):
        return None
    return columns if [c.name for c in columns] == version.schema.names else None


def _store(version: DatasetVersion, columns: list[ColumnProfile]) -> None:
    table = pa.table({"column": [c.name for c in columns], "profile": [json.dumps(asdict(c)) for c in columns]})
    try:
        derived.write_table(profile_path(version), table, _derivation(version))
    except OSError:  # a read-only catalog still answers; the statistics are computed again next time
        pass


def version_profile(session: SqlSession, version: DatasetVersion, *, rebuild: bool = False) -> VersionProfile:
    """Every column's statistics (kept in this process and in the catalog; ``rebuild`` computes them again)."""
    key = (version.root, version.id)
    with _LOCK:
        if not rebuild and key in _MEMO:
            return _MEMO[key]
    start = time.perf_counter()
    columns = None if rebuild else _stored(version)
    stored = columns is not None
    if columns is None:
        columns = _compute(session, version)
        _store(version, columns)
    profile = VersionProfile(version.id, version.rows, columns, time.perf_counter() - start, stored)
    with _LOCK:
        _MEMO[key] = profile
    return profile


def forget() -> None:
    """Forget the profiles kept in this process (the catalog's copies stay)."""
    with _LOCK:
        _MEMO.clear()

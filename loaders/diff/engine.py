"""``diff_versions``: what changed between two dataset versions, with the summary computed eagerly and rows paged lazily.

>>> diff = diff_versions(catalog.resolve("web@v1"), catalog.resolve("web@v2"))  # doctest: +SKIP
>>> diff.counts.changed, [r.key for r in diff.rows(change="changed", limit=2)]   # doctest: +SKIP
(812, ['17', '42'])
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import storage
from ..catalog.version import DatasetVersion
from ..errors import BatchscopeError
from ..storage import derived
from .fields import field_diffs, preview
from .model import ROW_CHANGES, Counts, Duplicates, MatchSummary, RowChange, SchemaDiff, ShardDiff, VersionRef
from .pairing import fetch_records, pair_edited
from .rows import CODES, NAMES, PARTITION_ROWS, match_rows
from .schema import MatchPlan, diff_schema, diff_shards

if TYPE_CHECKING:
    from ..engine import Engine

#: Bumped whenever the change table or summary format changes, so stale cached diffs are ignored (2: sealed files).
FORMAT = 2
DEFAULT_SIMILARITY = 0.8
DEFAULT_PAIRING_LIMIT = 10_000


@dataclass(eq=False)
class VersionDiff:
    """The difference between versions ``a`` and ``b``.

    Schema, shards and counts are computed when the diff is made; row details
    (decoded values and per-field differences) only for the rows a page asks
    for through :meth:`rows` or :meth:`iter_rows`.
    """

    a: DatasetVersion
    b: DatasetVersion
    schema: SchemaDiff
    shards: ShardDiff
    summary: MatchSummary
    warnings: tuple[str, ...]
    changes: pa.Table = field(repr=False)
    similarity: float = DEFAULT_SIMILARITY

    # -- summary -----------------------------------------------------------
    @property
    def counts(self) -> Counts:
        """Rows added, removed, changed, edited and unchanged."""
        return self.summary.counts

    @property
    def columns(self) -> dict[str, int]:
        """Changed or edited rows per compared column."""
        return self.summary.columns

    @property
    def duplicates(self) -> Duplicates:
        """Rows whose key repeats within a version (changed shards only)."""
        return self.summary.duplicates

    @property
    def same_dataset(self) -> bool:
        """False when the two versions belong to differently named datasets."""
        return self.a.name == self.b.name

    @property
    def identical(self) -> bool:
        """No schema, kind, key or tokenizer change and no added, removed, changed or edited row (re-sharding alone is not a difference)."""
        return not self.schema.changed and self.counts.different == 0

    def ref(self, side: str) -> VersionRef:
        """Which version side ``"a"`` or ``"b"`` is."""
        version = self.a if side == "a" else self.b
        return VersionRef(version.name, version.id, version.ref, version.rows, len(version.shards))

    # -- rows ----------------------------------------------------------------
    def rows(self, change: str | None = None, column: str | None = None, after: str | None = None, limit: int = 50) -> list[RowChange]:
        """One page of row changes in key order, after the key ``after`` (a keyset cursor).

        ``change`` keeps one change type; ``column`` keeps changed and edited
        rows in which that column differs. A page ends after ``limit`` rows,
        extended so that rows sharing the last key (duplicates) stay together.
        """
        entries, _ = self._page(change, column, after, limit)
        return self._materialize(entries)

    def iter_rows(self, *, change: str | None = None, column: str | None = None, page: int = 256) -> Iterator[RowChange]:
        """Every row change in key order, decoded one page at a time."""
        after = None
        while True:
            entries, more = self._page(change, column, after, page)
            rows = self._materialize(entries)
            yield from rows
            if not more or not rows:
                return
            after = rows[-1].key

    def _page(self, change: str | None, column: str | None, after: str | None, limit: int) -> tuple[pa.Table, bool]:
        if change is not None and change not in ROW_CHANGES:
            raise BatchscopeError(f"unknown change type {change!r}; use one of {', '.join(ROW_CHANGES)}")
        if column is not None and column not in self.schema.compared:
            raise BatchscopeError(
                f"column {column!r} is not compared in the diff of {self.a.ref} and {self.b.ref} "
                f"(compared: {', '.join(self.schema.compared) or 'none'})"
            )
        if not isinstance(limit, int) or limit < 0:
            raise BatchscopeError(f"page limit must be a non-negative integer, got {limit!r}")
        table = self.changes
        mask = np.ones(table.num_rows, bool)
        if change is not None:
            mask &= table.column("change").to_numpy() == CODES[change]
        if column is not None:
            lists = table.column("columns").combine_chunks()
            hit = np.zeros(table.num_rows, bool)
            flat = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
            parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
            hit[parents[flat == self.schema.compared.index(column)]] = True
            mask &= hit
        if after is not None:
            mask &= pc.fill_null(pc.greater(table.column("key"), self._cursor(after)), False).to_numpy(zero_copy_only=False)
        picked = np.flatnonzero(mask)
        end = min(limit, len(picked))
        if 0 < end < len(picked):
            keys = table.column("key")
            last = keys[int(picked[end - 1])]
            while end < len(picked) and keys[int(picked[end])] == last:
                end += 1
        return table.take(pa.array(picked[:end], pa.int64())), end < len(picked)

    def _cursor(self, after: str) -> pa.Scalar:
        type_ = self.changes.schema.field("key").type
        try:
            return pa.scalar(str(after), pa.string()).cast(type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise BatchscopeError(f"cursor {after!r} is not a key of {self.b.ref} (keys are {type_})") from exc

    def _materialize(self, entries: pa.Table) -> list[RowChange]:
        a_index = entries.column("a").to_pylist()
        b_index = entries.column("b").to_pylist()
        left = fetch_records(self.a, [i for i in a_index if i >= 0])
        right = fetch_records(self.b, [i for i in b_index if i >= 0])
        kinds = {**self.a.kinds, **self.b.kinds}
        out = []
        for key, code, ai, bi, sim in zip(
            entries.column("key").to_pylist(),
            entries.column("change").to_pylist(),
            a_index,
            b_index,
            entries.column("similarity").to_pylist(),
        ):
            record_a, record_b = left.get(ai), right.get(bi)
            change = NAMES[code]
            fields = field_diffs(record_a, record_b, self.schema.compared, kinds) if record_a is not None and record_b is not None else []
            shown = record_b if change == "added" else record_a if change == "removed" else None
            out.append(
                RowChange(
                    key=str(key),
                    change=change,  # type: ignore[arg-type]
                    a_address=self.a.locate(ai) if ai >= 0 else None,
                    b_address=self.b.locate(bi) if bi >= 0 else None,
                    fields=tuple(fields),
                    a_key=self.a.key_at(*self.a.locate(ai), record_a) if record_a is not None else None,
                    b_key=self.b.key_at(*self.b.locate(bi), record_b) if record_b is not None else None,
                    similarity=None if sim is None else round(float(sim), 4),
                    preview=None if shown is None else preview(shown, kinds),
                )
            )
        return out

    # -- JSON ----------------------------------------------------------------
    def to_json(self, *, limit: int = 50) -> dict[str, Any]:
        """A JSON-ready summary plus the first ``limit`` row changes; ``next`` is the cursor of the following page."""
        entries, more = self._page(None, None, None, limit)
        rows = self._materialize(entries)
        return {
            "a": self.ref("a").to_json(),
            "b": self.ref("b").to_json(),
            "same_dataset": self.same_dataset,
            "identical": self.identical,
            "warnings": list(self.warnings),
            "key": self.schema.key,
            "similarity": self.similarity,
            "schema": self.schema.to_json(),
            "shards": self.shards.to_json(),
            "counts": self.counts.to_json(),
            "columns": dict(self.columns),
            "duplicates": self.duplicates.to_json(),
            "rows": [r.to_json() for r in rows],
            "next": rows[-1].key if more and rows else None,
        }


def diff_versions(
    a: DatasetVersion,
    b: DatasetVersion,
    *,
    similarity: float = DEFAULT_SIMILARITY,
    edited_pairing_limit: int = DEFAULT_PAIRING_LIMIT,
    partition_rows: int = PARTITION_ROWS,
    workers: int | None = None,
    cache: bool = True,
    engine: "str | Engine | None" = None,
) -> VersionDiff:
    """Compare two versions (usually of one dataset): schema, shards by checksum, and rows by key.

    Only shards whose checksums differ are read. ``similarity`` is the
    threshold for pairing removed and added rows of keyless datasets as
    ``edited``; ``edited_pairing_limit`` bounds that work (0 turns it off).
    ``partition_rows`` bounds the rows held in memory per side while
    matching. With ``cache`` the row-level match is kept under the catalog's
    ``diffs/`` directory and reused. The changed shards are read, and key
    buckets matched, as tasks of ``engine`` (``"local"``, ``"ray"``; default
    ``$BATCHSCOPE_ENGINE``, else local): every engine gives the same diff.

    >>> diff = diff_versions(catalog.resolve("web@v1"), catalog.resolve("web@v2"))  # doctest: +SKIP
    >>> diff.counts                                                                  # doctest: +SKIP
    Counts(added=3, removed=1, changed=12, edited=0, unchanged=9984)
    """
    if not 0.0 < similarity <= 1.0:
        raise BatchscopeError(f"similarity must be in (0, 1], got {similarity!r}")
    if edited_pairing_limit < 0:
        raise BatchscopeError(f"edited_pairing_limit must be >= 0, got {edited_pairing_limit!r}")
    if partition_rows < 1:
        raise BatchscopeError(f"partition_rows must be >= 1, got {partition_rows!r}")
    schema, warnings = diff_schema(a, b)
    if a.name != b.name:
        warnings.insert(0, f"comparing versions of different datasets: {a.ref} and {b.ref}")
    shards = diff_shards(a, b)
    key_as_text = schema.key is not None and not a.schema.field(schema.key).type.equals(b.schema.field(schema.key).type)
    plan = MatchPlan(
        key=schema.key,
        key_as_text=key_as_text,
        compared=schema.compared,
        a_shards=tuple(s.shard for s in shards.removed),
        b_shards=tuple(s.shard for s in shards.added),
    )
    params = {
        "format": FORMAT,
        "key": plan.key,
        "key_as_text": key_as_text,
        "compared": list(plan.compared),
        "similarity": similarity if plan.key is None else None,
        "pairing_limit": edited_pairing_limit if plan.key is None else None,
    }
    cached = _load(a, b, params) if cache else None
    if cached is not None:
        summary, changes = cached
    else:
        summary, changes = _compute(a, b, plan, shards, similarity, edited_pairing_limit, partition_rows, workers, engine)
        if cache:
            _save(a, b, params, summary, changes)
    warnings.extend(_duplicate_warnings(a, b, summary.duplicates))
    warnings.extend(summary.notes)
    return VersionDiff(a, b, schema, shards, summary, tuple(warnings), changes, similarity)


def _compute(
    a: DatasetVersion,
    b: DatasetVersion,
    plan: MatchPlan,
    shards: ShardDiff,
    similarity: float,
    limit: int,
    partition_rows: int,
    workers: int | None,
    engine: "str | Engine | None",
) -> tuple[MatchSummary, pa.Table]:
    match = match_rows(a, b, plan, partition_rows=partition_rows, workers=workers, engine=engine)
    assert match.changes is not None
    changes, edited, notes = match.changes, 0, []
    if plan.key is None:
        changes, edited, notes = pair_edited(a, b, changes, plan.compared, similarity=similarity, limit=limit)
    flat = pc.list_flatten(changes.column("columns").combine_chunks()).to_numpy(zero_copy_only=False)
    per_column = np.bincount(flat.astype(np.int64), minlength=len(plan.compared)) if len(flat) else np.zeros(len(plan.compared), np.int64)
    summary = MatchSummary(
        counts=Counts(
            added=match.added - edited,
            removed=match.removed - edited,
            changed=match.changed,
            edited=edited,
            unchanged=match.unchanged + shards.unchanged_rows,
        ),
        columns={c: int(n) for c, n in zip(plan.compared, per_column.tolist()) if n},
        duplicates=Duplicates(match.a_duplicates, match.b_duplicates, tuple(match.a_examples), tuple(match.b_examples)),
        notes=tuple(notes),
    )
    return summary, changes


def _duplicate_warnings(a: DatasetVersion, b: DatasetVersion, duplicates: Duplicates) -> list[str]:
    out = []
    for version, count, examples in ((a, duplicates.a_count, duplicates.a_examples), (b, duplicates.b_count, duplicates.b_examples)):
        if count:
            shown = ", ".join(repr(e) for e in examples)
            out.append(
                f"{version.ref} has {count:,} row(s) whose key repeats an earlier row's (e.g. {shown}); "
                "rows sharing a key are matched in order of appearance"
            )
    return out


# -- cache ----------------------------------------------------------------


def recount(changes: pa.Table, a_rows: int, compared: int) -> tuple[Counts, dict[int, int]]:
    """The counts (and changed rows per compared column, by position) that the change table ``changes`` implies for a
    version ``a`` of ``a_rows`` rows: every row of ``a`` not in the table is unchanged."""
    codes = changes.column("change").to_numpy()
    by_code = np.bincount(codes.astype(np.int64), minlength=len(CODES)) if len(codes) else np.zeros(len(CODES), np.int64)
    in_a = int((changes.column("a").to_numpy() >= 0).sum())
    flat = pc.list_flatten(changes.column("columns").combine_chunks()).to_numpy(zero_copy_only=False).astype(np.int64)
    if len(flat) and (flat.min() < 0 or flat.max() >= compared):
        raise ValueError(f"the change table names column {int(flat.max())}, of {compared} compared")
    per_column = np.bincount(flat, minlength=compared) if len(flat) else np.zeros(compared, np.int64)
    counts = Counts(
        added=int(by_code[CODES["added"]]),
        removed=int(by_code[CODES["removed"]]),
        changed=int(by_code[CODES["changed"]]),
        edited=int(by_code[CODES["edited"]]),
        unchanged=a_rows - in_a,
    )
    return counts, {i: int(n) for i, n in enumerate(per_column.tolist()) if n}


def _cache_paths(a: DatasetVersion, b: DatasetVersion, params: dict[str, Any]) -> tuple[str, str, derived.Derivation]:
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:24]
    directory = storage.join(a.root, "diffs", f"{a.id}..{b.id}")
    what = derived.Derivation("row-level diff", f"{a.id}..{b.id} {json.dumps(params, sort_keys=True)}", layout=FORMAT)
    return storage.join(directory, f"{digest}.json"), storage.join(directory, f"{digest}.arrow"), what


def _load(a: DatasetVersion, b: DatasetVersion, params: dict[str, Any]) -> tuple[MatchSummary, pa.Table] | None:
    """The cached match, when both files are sealed for exactly this diff; its counts and per-column counts are
    recounted from the change table (the summary file only adds duplicates and notes)."""
    summary_path, table_path, what = _cache_paths(a, b, params)
    data = derived.read_json(summary_path, what)
    raw = derived.read_bytes(table_path, what) if isinstance(data, dict) else None
    if raw is None:
        return None

    def decode() -> tuple[MatchSummary, pa.Table]:
        table = pa.ipc.open_file(pa.py_buffer(raw)).read_all()
        stored = MatchSummary.from_json(data)
        compared = params["compared"]
        counts, columns = recount(table, a.rows, len(compared))
        return dataclasses.replace(stored, counts=counts, columns={compared[i]: n for i, n in columns.items()}), table

    return derived.guarded(table_path, what, decode)


def _save(a: DatasetVersion, b: DatasetVersion, params: dict[str, Any], summary: MatchSummary, changes: pa.Table) -> None:
    summary_path, table_path, what = _cache_paths(a, b, params)
    buffer = io.BytesIO()
    with pa.ipc.new_file(buffer, changes.schema) as writer:
        writer.write_table(changes)
    try:
        derived.write_bytes(table_path, buffer.getvalue(), what)
        derived.write_json(summary_path, summary.to_json(), what)
    except OSError:
        pass  # derived data: a read-only catalog still diffs, it just does not remember

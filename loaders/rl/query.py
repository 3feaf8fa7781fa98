"""Groups of rollouts and queries over them, in numpy: one row per rollout, groups as runs of a stable sort by group key.

The rows come from a dataset version's index (``loaders.rl.index``) or from a
step's batch in memory (``RolloutIndex.from_facts``), so both answer a
``RolloutQuery`` the same way. NaN and infinite rewards are excluded from
every statistic and sort last.

>>> index = RolloutIndex.from_facts([rollout_facts({"reward": r, "group_id": g}) for r, g in [(1.0, "a"), (0.0, "b"), (1.0, "a"), (1.0, "b")]])
>>> [index.group_id(g) for g in index.select_groups(RolloutQuery(zero_variance=True))]
['a']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidQuery
from .facts import TRUNCATED, RolloutFacts, rollout_facts  # noqa: F401  (rollout_facts: the example above)

#: Group sort keys (``-`` in front: descending); a rollout listing takes the per-rollout ones.
GROUP_SORTS = ("index", "reward", "advantage", "length", "finish", "std", "size", "truncation")
ROW_SORTS = ("index", "reward", "advantage", "length", "finish")
VIEWS = ("groups", "rollouts")
LAYOUTS = ("grid", "stacked")
SCHEMA = pa.schema(
    [
        ("row", pa.int64()),
        ("group", pa.string()),
        ("gkey", pa.string()),
        ("reward", pa.float64()),
        ("advantage", pa.float64()),
        ("length", pa.int32()),
        ("logprobs_length", pa.int32()),
        ("ref_length", pa.int32()),
        ("finish", pa.string()),
        ("step", pa.int64()),
        ("problems", pa.int32()),
    ]
)


@dataclass(frozen=True)
class RolloutQuery:
    """What a group view shows: groups or single rollouts, the sort, the filters and the cursor (all URL parameters).

    >>> RolloutQuery(sort="-reward", zero_variance=True).params()
    {'sort': '-reward', 'zero_variance': '1'}
    """

    view: str = "groups"
    sort: str = "index"
    zero_variance: bool | None = None
    finish: str | None = None
    step: int | None = None
    group: str | None = None
    problems: bool = False
    start: int = 0
    layout: str = "grid"

    def __post_init__(self) -> None:
        if self.view not in VIEWS:
            raise InvalidQuery(f"view {self.view!r} is not one of {', '.join(VIEWS)}")
        allowed = GROUP_SORTS if self.view == "groups" else ROW_SORTS
        if self.sort_key not in allowed:
            raise InvalidQuery(f"sort {self.sort!r} is not one of {', '.join(allowed)} (prefix - for descending) for view {self.view!r}")
        if self.layout not in LAYOUTS:
            raise InvalidQuery(f"layout {self.layout!r} is not one of {', '.join(LAYOUTS)}")
        if self.start < 0:
            raise InvalidQuery(f"start {self.start} must be >= 0")

    @property
    def sort_key(self) -> str:
        return self.sort[1:] if self.sort.startswith("-") else self.sort

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")

    def params(self, **changes: Any) -> dict[str, Any]:
        """URL query parameters that differ from the defaults, after ``changes``."""
        values = {**self.__dict__, **changes}
        defaults = RolloutQuery()
        out: dict[str, Any] = {}
        for name in ("view", "sort", "zero_variance", "finish", "step", "group", "problems", "layout", "start"):
            value = values[name]
            if value == getattr(defaults, name) or value is None:
                continue
            out[name] = ("1" if value else "0") if isinstance(value, bool) else value
        return out


def _reduce(ufunc: np.ufunc, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return ufunc.reduceat(values, starts) if len(values) else np.zeros(0, values.dtype)


@dataclass
class Summary:
    """Statistics over a set of rollouts: NaN and infinite rewards are excluded and counted."""

    rollouts: int
    groups: int
    mean_reward: float | None
    std_reward: float | None
    excluded: int
    zero_variance_groups: int
    zero_variance_share: float | None
    truncated: int
    truncation_rate: float | None
    inconsistent: int


#: Sentinel of a missing ``step`` in the index's numpy arrays.
NO_STEP = -(1 << 62)
#: Per-position arrays (group order) and per-group arrays of an index, as stored (numeric, no nulls).
ROW_ARRAYS = ("row", "reward", "advantage", "length", "logprobs_length", "ref_length", "finish", "step", "problems", "record_order")
GROUP_ARRAYS = (
    "starts",
    "sizes",
    "finite",
    "mean",
    "std",
    "min",
    "max",
    "zero_variance",
    "truncated_count",
    "mean_advantage",
    "mean_length",
    "problem_rows",
)


def _numpy(column: pa.ChunkedArray | pa.Array, missing: Any, dtype: Any) -> np.ndarray:
    return pc.fill_null(column, missing).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


class RolloutIndex:
    """Rollouts in group order (a stable sort by group key, so dataset order within a group) and numpy statistics per group.

    Position ``p`` is a rollout's place in group order; ``row[p]`` its record
    index (or batch position); group ``g`` holds positions ``starts[g]`` to
    ``starts[g] + sizes[g]``; ``record_order`` lists positions by ``row``.
    """

    def __init__(self, rows: dict[str, np.ndarray], groups: dict[str, np.ndarray], group_ids: pa.Array, finish_names: list[str]) -> None:
        for name in ROW_ARRAYS:
            setattr(self, name, rows[name])
        for name in GROUP_ARRAYS:
            setattr(self, name, groups[name])
        self.zero_variance = self.zero_variance.astype(bool, copy=False)
        self.group_ids = group_ids
        self.finish_names = finish_names
        self.n = len(self.row)
        self.group_of = np.repeat(np.arange(len(self.starts)), self.sizes)
        self.truncated = self.finish == (finish_names.index(TRUNCATED) if TRUNCATED in finish_names else -2)
        self.excluded = self.sizes - self.finite
        self.first_row = self.row[self.starts] if self.n else np.zeros(0, np.int64)
        #: For a batch: each group's size and mean reward in its whole dataset (-1 and NaN when unknown), set by
        #: ``use_reference``; ``None`` when the index covers whole groups (a dataset version).
        self.reference_size: np.ndarray | None = None
        self.reference_mean: np.ndarray | None = None

    def use_reference(self, sizes: np.ndarray, means: np.ndarray, flat: np.ndarray) -> None:
        """Judge this (batch) index's groups by their whole-dataset statistics where known (``sizes >= 0``):
        zero variance, and the mean the advantage checks compare with."""
        known = sizes >= 0
        self.zero_variance = np.where(known, flat, self.zero_variance)
        self.reference_size, self.reference_mean = sizes, np.where(known, means, np.nan)

    @classmethod
    def compute(cls, table: pa.Table) -> "RolloutIndex":
        """Group, order and summarize rows of ``SCHEMA`` given in ascending ``row`` order."""
        n = table.num_rows
        if n:
            codes = pc.dictionary_encode(table.column("gkey")).combine_chunks()
            raw = codes.indices.to_numpy(zero_copy_only=False)
            missing = np.asarray(pc.is_null(codes.indices))
            keyed = np.where(missing, 0, raw).astype(np.int64)
            keyed[missing] = len(codes.dictionary) + np.arange(int(missing.sum()))
        else:
            keyed = np.zeros(0, np.int64)
        order = np.argsort(keyed, kind="stable")
        ordered = keyed[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if n else np.zeros(0, np.int64)
        finish = pc.dictionary_encode(table.column("finish")).combine_chunks() if n else None
        names = [str(v) for v in finish.dictionary.to_pylist()] if finish is not None else []
        rank = np.argsort(np.argsort(np.array(names, dtype=object))) if names else np.zeros(0, np.int64)
        finish_codes = np.full(n, -1, np.int16)
        if finish is not None:
            valid = ~np.asarray(pc.is_null(finish.indices))
            finish_codes[valid] = rank[finish.indices.to_numpy(zero_copy_only=False)[valid].astype(np.int64)]
        take = lambda a: a[order]  # noqa: E731
        record_order = np.empty(n, np.int64)
        record_order[order] = np.arange(n)
        rows = {
            "row": take(table.column("row").to_numpy().astype(np.int64)),
            "reward": take(_numpy(table.column("reward"), np.nan, np.float64)),
            "advantage": take(_numpy(table.column("advantage"), np.nan, np.float64)),
            "length": take(_numpy(table.column("length"), -1, np.int32)),
            "logprobs_length": take(_numpy(table.column("logprobs_length"), -1, np.int32)),
            "ref_length": take(_numpy(table.column("ref_length"), -1, np.int32)),
            "finish": take(finish_codes),
            "step": take(_numpy(table.column("step"), NO_STEP, np.int64)),
            "problems": take(_numpy(table.column("problems"), 0, np.int32)),
            "record_order": record_order,
        }
        group_ids = table.column("group").take(pa.array(order[starts], pa.int64())).combine_chunks() if n else pa.array([], pa.string())
        return cls(rows, _group_stats(rows, starts, n, sorted(names)), group_ids, sorted(names))

    @classmethod
    def from_facts(
        cls, facts: Sequence[RolloutFacts], *, rows: Sequence[int] | None = None, steps: Sequence[int | None] | None = None
    ) -> "RolloutIndex":
        """The index of rollouts held in memory (a step's batch); ``rows`` default to positions 0..n-1."""
        n = len(facts)
        table = pa.table(
            {
                "row": pa.array(list(rows) if rows is not None else list(range(n)), pa.int64()),
                "group": pa.array([f.group_id for f in facts], pa.string()),
                "gkey": pa.array([f"g:{f.group_id}" if f.group_id is not None else f"p:{f.prompt}" for f in facts], pa.string()),
                "reward": pa.array([f.reward for f in facts], pa.float64()),
                "advantage": pa.array([f.advantage for f in facts], pa.float64()),
                "length": pa.array([f.length for f in facts], pa.int32()),
                "logprobs_length": pa.array([None if f.logprobs is None else len(f.logprobs) for f in facts], pa.int32()),
                "ref_length": pa.array([None if f.ref_logprobs is None else len(f.ref_logprobs) for f in facts], pa.int32()),
                "finish": pa.array([f.finish_reason for f in facts], pa.string()),
                "step": pa.array(list(steps) if steps is not None else [None] * n, pa.int64()),
                "problems": pa.array([f.problems for f in facts], pa.int32()),
            },
            schema=SCHEMA,
        )
        return cls.compute(table)

    def group_id(self, g: int) -> str | None:
        """The group id of group ``g`` (``None`` for rollouts without one, grouped by prompt)."""
        return self.group_ids[int(g)].as_py()

    # -- queries ---------------------------------------------------------------
    def _finish_code(self, name: str) -> int:
        return self.finish_names.index(name) if name in self.finish_names else -2

    def _row_mask(self, query: RolloutQuery) -> np.ndarray:
        mask = np.ones(self.n, bool)
        if query.finish is not None:
            mask &= self.finish == self._finish_code(query.finish)
        if query.step is not None:
            mask &= self.step == query.step
        return mask

    def _group_mask(self, query: RolloutQuery) -> np.ndarray:
        mask = np.ones(len(self.starts), bool)
        if query.group is not None:
            mask &= np.asarray(pc.fill_null(pc.equal(self.group_ids, query.group), False)) if len(self.starts) else mask
        return mask

    def select_groups(self, query: RolloutQuery) -> np.ndarray:
        """Group numbers that pass the filters, ordered by ``query.sort`` (NaN last; ties in dataset order)."""
        mask = self._group_mask(query)
        if query.zero_variance is not None:
            mask &= self.zero_variance == query.zero_variance
        if (query.finish is not None or query.step is not None) and self.n:
            mask &= _reduce(np.logical_or, self._row_mask(query), self.starts)
        if query.problems:
            mask &= self.problem_rows > 0
        share = self.truncated_count / np.maximum(self.sizes, 1)
        keys = {
            "reward": self.mean,
            "advantage": self.mean_advantage,
            "length": self.mean_length,
            "std": self.std,
            "size": self.sizes.astype(np.float64),
            "finish": share,
            "truncation": share,
        }
        return _ordered(np.flatnonzero(mask), keys.get(query.sort_key), self.first_row, descending=query.descending)

    def _row_key(self, key: str) -> np.ndarray | None:
        if key == "reward":
            return self.reward
        if key == "advantage":
            return self.advantage
        if key == "length":
            return np.where(self.length >= 0, self.length, np.nan)
        if key == "finish":
            return np.where(self.finish >= 0, self.finish, np.nan)
        return None

    def select_rows(self, query: RolloutQuery) -> np.ndarray:
        """Positions that pass the filters (group filters apply to the row's group), ordered by ``query.sort``."""
        mask = self._row_mask(query)
        if query.zero_variance is not None:
            mask &= self.zero_variance[self.group_of] == query.zero_variance
        if query.group is not None and self.n:
            mask &= self._group_mask(query)[self.group_of]
        if query.problems:
            mask &= self.problems != 0
        if query.sort_key == "index":
            chosen = self.record_order[mask[self.record_order]]
            return chosen[::-1] if query.descending else chosen
        return _ordered(np.flatnonzero(mask), self._row_key(query.sort_key), self.row, descending=query.descending)

    def members(self, group: int, query: RolloutQuery) -> np.ndarray:
        """Positions of one group, ordered by the query's per-rollout key (else dataset order)."""
        start = int(self.starts[group])
        positions = np.arange(start, start + int(self.sizes[group]))
        return _ordered(positions, self._row_key(query.sort_key), self.row, descending=query.descending)

    def summary(self, groups: np.ndarray | None = None) -> Summary:
        """Statistics over every rollout (or those of ``groups``)."""
        if groups is None:
            rows = slice(None)
            groups = np.arange(len(self.starts))
            count = self.n
        else:
            chosen = np.zeros(len(self.starts), bool)
            chosen[groups] = True
            rows = chosen[self.group_of] if self.n else np.zeros(0, bool)
            count = int(rows.sum())
        rewards = self.reward[rows]
        ok = np.isfinite(rewards)
        with_rewards = int((self.finite[groups] > 0).sum())
        zero = int(self.zero_variance[groups].sum())
        truncated = self.truncated[rows]
        return Summary(
            rollouts=count,
            groups=len(groups),
            mean_reward=float(rewards[ok].mean()) if ok.any() else None,
            std_reward=float(rewards[ok].std()) if ok.any() else None,
            excluded=int((~ok).sum()),
            zero_variance_groups=zero,
            zero_variance_share=zero / with_rewards if with_rewards else None,
            truncated=int(truncated.sum()),
            truncation_rate=float(truncated.mean()) if count else None,
            inconsistent=int((self.problems[rows] != 0).sum()),
        )

    def lengths(self, position: int) -> dict[str, int | None]:
        """Lengths of the per-token lists at ``position`` (``None`` when absent), for ``rollout_facts(lengths=...)``."""
        values = {
            "completion_ids": self.length[position],
            "logprobs": self.logprobs_length[position],
            "ref_logprobs": self.ref_length[position],
        }
        return {name: int(v) if v >= 0 else None for name, v in values.items()}

    def finish_counts(self) -> list[tuple[str, int]]:
        """Each finish reason with its number of rollouts, most common first."""
        counts = np.bincount(self.finish[self.finish >= 0].astype(np.int64), minlength=len(self.finish_names))
        return sorted(((name, int(c)) for name, c in zip(self.finish_names, counts) if c), key=lambda p: (-p[1], p[0]))


def _group_stats(rows: dict[str, np.ndarray], starts: np.ndarray, n: int, finish_names: list[str]) -> dict[str, np.ndarray]:
    """Per-group statistics over finite rewards (population std; zero variance when every finite reward is equal)."""
    sizes = np.diff(np.r_[starts, n]).astype(np.int64)
    r = rows["reward"]
    ok = np.isfinite(r)
    finite = _reduce(np.add, ok.astype(np.int64), starts)
    total = _reduce(np.add, np.where(ok, r, 0.0), starts)
    squares = _reduce(np.add, np.where(ok, r * r, 0.0), starts)
    low = _reduce(np.minimum, np.where(ok, r, np.inf), starts)
    high = _reduce(np.maximum, np.where(ok, r, -np.inf), starts)
    zero = (finite > 0) & (low == high)
    truncated = rows["finish"] == (finish_names.index(TRUNCATED) if TRUNCATED in finish_names else -2)
    a = rows["advantage"]
    a_ok = np.isfinite(a)
    lengths = rows["length"]
    l_ok = lengths >= 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite > 0, total / np.maximum(finite, 1), np.nan)
        var = np.maximum(squares / np.maximum(finite, 1) - mean**2, 0.0)
        mean_advantage = _reduce(np.add, np.where(a_ok, a, 0.0), starts) / _reduce(np.add, a_ok.astype(np.int64), starts)
        mean_length = _reduce(np.add, np.where(l_ok, lengths, 0).astype(np.int64), starts) / _reduce(np.add, l_ok.astype(np.int64), starts)
    return {
        "starts": starts.astype(np.int64),
        "sizes": sizes,
        "finite": finite,
        "mean": mean,
        "std": np.where(finite > 0, np.where(zero, 0.0, np.sqrt(var)), np.nan),
        "min": low,
        "max": high,
        "zero_variance": zero,
        "truncated_count": _reduce(np.add, truncated.astype(np.int64), starts),
        "mean_advantage": mean_advantage,
        "mean_length": mean_length,
        "problem_rows": _reduce(np.add, (rows["problems"] != 0).astype(np.int64), starts),
    }


def _ordered(items: np.ndarray, key: np.ndarray | None, tie: np.ndarray, *, descending: bool) -> np.ndarray:
    if key is None:
        order = np.lexsort((tie[items],))
        return items[order[::-1]] if descending else items[order]
    values = key[items].astype(np.float64)
    missing = ~np.isfinite(values)
    values = np.where(missing, 0.0, values)
    if descending:
        values = -values
    return items[np.lexsort((tie[items], values, missing))]

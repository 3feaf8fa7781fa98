"""Samples a recorder keeps for themselves: content-addressed rows of Parquet files, each file registered as a version of
the run's ``<run>.samples`` dataset, so every kept sample has an address, a key and a permalink like any other row.

A sample's key is a hash of its values (:func:`loaders.catalog.records.content_key`), so the same sample read twice,
or by two ranks, has one key. A sample bigger than the per-sample limit, or one that would take the rank past its
total limit, is kept as a row that says so (``omitted``: its size and the limit) under the key of its full content.

>>> kept_row({"text": "hi"}, limits=Limits(per_sample=1 << 20, total=1 << 30), used=0)[0]["text"]
'hi'
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..catalog.records import content_key
from ..catalog.store import CatalogStore
from ..catalog.version import DatasetVersion
from .extract import size_of

#: The column of the kept-samples datasets that holds each row's content key.
KEY = "_key"


@dataclass(frozen=True)
class Limits:
    """Bytes of sample values a rank keeps: per sample, and in all (beyond either, a row says what was left out)."""

    per_sample: int
    total: int

    def __post_init__(self) -> None:
        for name in ("per_sample", "total"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} limit must be a non-negative number of bytes, got {value!r}")


def kept_row(fields: dict[str, Any], *, limits: Limits, used: int, given: str | None = None) -> tuple[dict[str, Any], int, str | None]:
    """The row that keeps ``fields`` (or says why it does not), the bytes it keeps, and which limit left it out."""
    size = size_of(fields)
    key = content_key(fields)
    row: dict[str, Any]
    over = None
    if size > limits.per_sample:
        over = f"{size:,} bytes, over the per-sample limit of {limits.per_sample:,}"
    elif used + size > limits.total:
        over = f"{size:,} bytes, past this rank's limit of {limits.total:,} kept bytes"
    if over is None:
        row = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in fields.items() if k != KEY}
    else:
        row = {"omitted": f"not kept: {over}"}
        size = 0
    row[KEY] = key
    if given is not None:
        row["recorded_key"] = given
    return row, size, over


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows as an Arrow table with every field any row has (missing values null); a column whose values Arrow cannot
    type together is kept as JSON text."""
    names = list(dict.fromkeys(k for row in rows for k in row))
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError):
            columns[name] = pa.array([None if v is None else json.dumps(v, default=repr) for v in values], pa.string())
    return pa.table(columns)


def write_kept(
    catalog: CatalogStore, dataset: str, path: str, rows: list[dict[str, Any]], *, tokenizer: str | None, notes: dict[str, Any]
) -> tuple[DatasetVersion, dict[str, tuple[int, int]]]:
    """Write ``rows`` (unique keys) to the Parquet file ``path`` and register it as a version of ``dataset``; returns
    the version and each key's ``(shard, row)``."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    pq.write_table(_table(rows), tmp, row_group_size=256)
    os.replace(tmp, path)
    version = catalog.register(dataset, [path], key=KEY, tokenizer=tokenizer, notes=notes)
    return version, {row[KEY]: (0, i) for i, row in enumerate(rows)}

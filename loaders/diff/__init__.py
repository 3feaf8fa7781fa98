"""Diff two dataset versions: schema, shards by checksum, rows by key, and per-field differences of changed rows.

>>> from loaders import Catalog
>>> from loaders.diff import diff_versions
>>> catalog = Catalog("/tmp/bs-doc")                                              # doctest: +SKIP
>>> diff = diff_versions(catalog.resolve("web@v1"), catalog.resolve("web@v2"))    # doctest: +SKIP
>>> diff.counts.to_json()                                                         # doctest: +SKIP
{'added': 3, 'removed': 1, 'changed': 12, 'edited': 0, 'unchanged': 9984}
>>> [f.column for f in diff.rows(change="changed", limit=1)[0].fields]            # doctest: +SKIP
['text']
"""

from .engine import DEFAULT_PAIRING_LIMIT, DEFAULT_SIMILARITY, VersionDiff, diff_versions
from .fields import field_diff, field_diffs, seq_ops, struct_paths, text_ops
from .model import (
    ROW_CHANGES,
    ColumnChange,
    Counts,
    Duplicates,
    FieldDiff,
    MatchSummary,
    PathChange,
    RowChange,
    SchemaDiff,
    SeqOp,
    ShardDiff,
    ShardRef,
    TextOp,
    VersionRef,
)
from .rows import PARTITION_ROWS

__all__ = [
    "DEFAULT_PAIRING_LIMIT",
    "DEFAULT_SIMILARITY",
    "PARTITION_ROWS",
    "ROW_CHANGES",
    "ColumnChange",
    "Counts",
    "Duplicates",
    "FieldDiff",
    "MatchSummary",
    "PathChange",
    "RowChange",
    "SchemaDiff",
    "SeqOp",
    "ShardDiff",
    "ShardRef",
    "TextOp",
    "VersionDiff",
    "VersionRef",
    "diff_versions",
    "field_diff",
    "field_diffs",
    "seq_ops",
    "struct_paths",
    "text_ops",
]

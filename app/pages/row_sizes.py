"""What reading rows will decode, estimated before it is: the uncompressed size the footer gives each row group.

A page of rows reads whole row groups (they are the unit the read path
decodes, verifies and caches), so fifty rows of a dataset written with huge
row groups can decode gigabytes. ``check_row_groups`` adds up the row groups a
request needs that are not cached yet (their columns, and the Python records
made from them: twice the footer's uncompressed size) and refuses the request
with 413 when that is more than one request may use.
"""

from __future__ import annotations

from typing import Iterable

import pyarrow.parquet as pq

from loaders.catalog.version import DatasetVersion, row_group_cache

from ..decode_budget import DecodeBudget

#: Decoded columns plus the records made from them, per byte of the footer's uncompressed size.
RECORDS_FACTOR = 2


def _footer(version: DatasetVersion, shard: int) -> pq.FileMetaData:
    """The shard's footer as the read path opened it: checked against the manifest first (a changed footer is a
    ChecksumMismatch naming the shard, never a parse error), kept with the open shard."""
    return version._open(shard).metadata


def row_group_bytes(version: DatasetVersion, shard: int, group: int) -> int:
    """What decoding row group ``group`` of ``shard`` and making its records needs, by its footer."""
    footer = _footer(version, shard)
    if not 0 <= group < footer.num_row_groups:
        return 0  # the read path names the missing row group
    return RECORDS_FACTOR * max(0, int(footer.row_group(group).total_byte_size))


def check_row_groups(version: DatasetVersion, groups: Iterable[tuple[int, int]], budget: DecodeBudget | None, what: str) -> None:
    """Refuse (413) reading ``groups`` (shard, row group) of ``version`` when those not cached need more than ``budget``."""
    if budget is None:
        return
    cached = row_group_cache()
    needed = sum(
        row_group_bytes(version, shard, group) for shard, group in set(groups) if (version.shards[shard].checksum, group) not in cached
    )
    budget.check(needed, f"{what} of {version.ref}")

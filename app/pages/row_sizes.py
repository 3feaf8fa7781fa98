"""What reading rows will decode, estimated before it is: the uncompressed size the footer gives each row group.

A page of rows reads whole row groups (they are the unit the read path
decodes, verifies and caches), so fifty rows of a dataset written with huge
row groups can decode gigabytes. ``check_row_groups`` adds up the row groups a
request needs that are not cached yet (their columns, and the Python records
made from them: four times the footer's uncompressed size) and refuses the request
with 413 when that is more than one request may use; ``reading_row_groups``
also holds a large-decode slot while they are decoded.
"""

from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

import pyarrow.parquet as pq

from loaders.catalog.version import DatasetVersion, row_group_cache
from loaders.storage.formats import shard_format

from ..decode_budget import DecodeBudget

#: Memory per byte of the footer's uncompressed size: decoding holds up to three times it at once (the decompressed
#: pages, the builder's slack, the array; measured on a 96 MB text cell), and the records made from it one more.
RECORDS_FACTOR = 4


def _footer(version: DatasetVersion, shard: int) -> pq.FileMetaData:
    """The shard's footer as the read path opened it: checked against the manifest first (a changed footer is a
    ChecksumMismatch naming the shard, never a parse error), kept with the open shard."""
    return version._open(shard).metadata


def row_group_bytes(version: DatasetVersion, shard: int, group: int) -> int:
    """What decoding row group ``group`` of ``shard`` and making its records needs, by its footer (or, for versions
    stored in another format, by what that format says a row group decodes to)."""
    if version.shard_format != "parquet":
        info = version.shards[shard]
        return RECORDS_FACTOR * shard_format(version.shard_format).decoded_bytes(info, group) if 0 <= group < len(info.row_groups) else 0
    footer = _footer(version, shard)
    if not 0 <= group < footer.num_row_groups:
        return 0  # the read path names the missing row group
    return RECORDS_FACTOR * max(0, int(footer.row_group(group).total_byte_size))


def check_row_groups(version: DatasetVersion, groups: Iterable[tuple[int, int]], budget: DecodeBudget | None, what: str) -> int:
    """Refuse (413) reading ``groups`` (shard, row group) of ``version`` when those not cached need more than ``budget``;
    returns what they need."""
    if budget is None:
        return 0
    cached = row_group_cache()
    needed = sum(
        row_group_bytes(version, shard, group) for shard, group in set(groups) if (version.shards[shard].checksum, group) not in cached
    )
    budget.check(needed, f"{what} of {version.ref}")
    return needed


@contextlib.contextmanager
def reading_row_groups(
    version: DatasetVersion, groups: Iterable[tuple[int, int]], budget: DecodeBudget | None, what: str
) -> Iterator[None]:
    """``check_row_groups``, then hold one of the budget's large-decode slots while the caller decodes them (when
    they need over an eighth of the budget), so a few huge rows decode at a time, never one per request."""
    needed = check_row_groups(version, groups, budget, what)
    if budget is None:
        yield
        return
    with budget.decoding(needed, f"{what} of {version.ref}"):
        yield

"""Corpus cases about stored bytes: lying footers, duplicate keys, media rewritten after registration, old versions.

Refused cases must fail at registration naming the file or the rows; probed
ones are registered (some as an older batchscope did, see ``legacy``) and every
read of what is wrong must be a clear error, never another record or new bytes.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from . import media_faults as media
from . import parquet_faults as faults
from .recipes import STRUCT_MEDIA, Case, Probe, damaged, listing, media_of, media_struct, parquet, sample, text_table

TRILLION = 10**12
TINY = text_table({"a": "alpha", "b": "beta"})


def _trillion_rows(path: Path) -> None:
    """Footer, row group and column chunks all claim 10^12 rows: only the page headers (2 values) hold the truth."""
    faults.rewrite_row_counts(path, file_rows=TRILLION, group_rows={0: TRILLION}, columns_too=True)


def _inflating_page(directory: Path) -> list[str]:
    """A one-column file whose first page claims to inflate to 2 GiB (it holds 23 bytes)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "part-0.parquet"
    pq.write_table(pa.table({"id": ["a", "b"]}), path, use_dictionary=False, write_statistics=False)
    faults.inflate_first_page(path, claimed=2**31 - 1)
    return [str(path)]


def _media_by_path(directory: Path) -> list[str]:
    """Two PNG files stored beside the shard and named by path from an image column."""
    (directory / "images").mkdir(parents=True, exist_ok=True)
    (directory / "images" / "a.png").write_bytes(media.small_png(side=16))
    (directory / "images" / "b.png").write_bytes(media.small_png(side=24))
    table = pa.table(
        {"id": ["a", "b"], "image": pa.array([media_struct(None, "images/a.png"), media_struct(None, "images/b.png")], STRUCT_MEDIA)}
    )
    return parquet(table)(directory)


def _rewrite_media(paths: list[str]) -> None:
    (Path(paths[0]).parent / "images" / "a.png").write_bytes(media.small_png(side=20))


ONE_ROW_GROUP = 10

INTEGRITY_REFUSED = [
    Case(
        "footer-trillion-rows",
        "a 2-row file whose footer, row group and column chunks all claim 10^12 rows",
        damaged(parquet(TINY, row_group=ONE_ROW_GROUP), _trillion_rows),
        refused=("part-0.parquet", "1,000,000,000,000 rows", "decompression bomb"),
    ),
    Case(
        "page-inflation-lie",
        "a 23-byte page whose header claims it inflates to 2 GiB",
        _inflating_page,
        refused=("part-0.parquet", "inflate to 2,147,483,647 bytes", "decompression bomb"),
    ),
    Case(
        "duplicate-keys",
        "the key 'a' held by rows 0, 2 and 4",
        parquet(pa.table({"id": ["a", "b", "a", "c", "a"], "text": list("01234")})),
        refused=("key column 'id' is not unique", "'a' at shard 0 row 0, shard 0 row 2, shard 0 row 4", "--allow-duplicate-keys"),
    ),
]

INTEGRITY_PROBED = [
    Case(
        "duplicate-keys-allowed",
        "keys repeated (one repeat colliding with a real key 'a~1'), registered with duplicates allowed",
        parquet(pa.table({"id": ["a", "b", "a", "a~1", "a"], "text": ["first", "bee", "second", "literal", "third"]})),
        allow_duplicate_keys=True,
        probes=(
            Probe(listing(), literal=("a~2", "a~3")),
            Probe(sample("a"), literal=("first",)),
            Probe(sample("a~1"), literal=("literal",)),
            Probe(sample("a~2"), literal=("second",)),
            Probe(sample("a~3"), literal=("third",)),
            Probe(sample("a~4"), 404, ("no row with key 'a~4'",)),
        ),
    ),
    Case(
        "legacy-trillion-rows",
        "registered before footers were bounded: a 2-row file whose footer claims 10^12 rows",
        damaged(parquet(TINY, row_group=ONE_ROW_GROUP), _trillion_rows),
        legacy=True,
        probes=tuple(Probe(url, 500, ("decompression bomb", "part-0.parquet")) for url in (listing(), sample("a"), media_of("a", "text"))),
    ),
    Case(
        "legacy-page-inflation-lie",
        "registered before pages were checked: a 23-byte page whose header claims it inflates to 2 GiB",
        _inflating_page,
        legacy=True,
        probes=tuple(
            Probe(url, 500, ("inflate to 2,147,483,647 bytes", "part-0.parquet")) for url in (listing(), sample("a"), media_of("a", "id"))
        ),
    ),
    Case(
        "legacy-duplicate-keys",
        "registered before keys were checked: the key 'a' held by two rows",
        parquet(pa.table({"id": ["a", "b", "a"], "text": ["first", "bee", "second"]})),
        legacy=True,
        probes=(
            Probe(sample("a"), 409, ("key 'a' names 2 rows", "shard 0 row 0, shard 0 row 2")),
            Probe(sample("b"), literal=("bee",)),
            Probe(listing(), literal=("first", "second")),
        ),
    ),
    Case(
        "media-rewritten-after-registration",
        "an image stored by path beside the shard, rewritten after registration",
        _media_by_path,
        damage=_rewrite_media,
        probes=(
            Probe(media_of("a", "image"), 500, ("images/a.png", "changed after registration")),
            Probe(media_of("b", "image")),
            Probe(sample("b")),
        ),
    ),
]

"""Corpus cases broken at the file level: Parquet that must be refused at registration, or damaged after it.

Refused cases must fail with a message naming the file and what is wrong,
changing nothing; damaged ones must make every read a clear error (status 500
naming dataset, version, shard and row group), never wrong data.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from . import media_faults as media
from . import parquet_faults as faults
from .recipes import (
    GOOD,
    Case,
    Probe,
    after_registration,
    damaged,
    listing,
    media_of,
    nested_list_type,
    parquet,
    sample,
)

WHERE = ("shard 0", "part-0.parquet")


def _refused(name: str, about: str, build: Any, *words: str, **options: Any) -> Case:
    return Case(name, about, build, refused=words, **options)


def _unreadable(name: str, about: str, harm: Any, *words: str, status: int = 500) -> Case:
    """A valid dataset damaged after registration: every read of it is a clear error, never wrong data."""
    probes = tuple(Probe(url, status, words) for url in (listing(), sample("a"), media_of("a", "text")))
    return Case(name, about, parquet(GOOD), damage=after_registration(harm), probes=probes)


SIX = parquet(GOOD)
REFUSED = [
    _refused(
        "truncated-half",
        "a Parquet file cut in half",
        damaged(SIX, lambda p: faults.truncate(p, keep=0.5)),
        "part-0.parquet",
        "no PAR1 magic at the end",
    ),
    _refused(
        "truncated-tail",
        "a Parquet file missing its last two bytes",
        damaged(SIX, lambda p: p.write_bytes(p.read_bytes()[:-2])),
        "part-0.parquet",
        "no PAR1 magic at the end",
    ),
    _refused(
        "wrong-magic", "PAR0 instead of PAR1 at the start", damaged(SIX, faults.wrong_magic), "part-0.parquet", "no PAR1 magic at the start"
    ),
    _refused("zero-bytes", "an empty file", damaged(SIX, lambda p: p.write_bytes(b"")), "part-0.parquet", "not a Parquet file"),
    _refused(
        "csv-named-parquet",
        "a CSV file named .parquet",
        damaged(SIX, lambda p: p.write_text("id,text\na,alpha\n" * 10)),
        "part-0.parquet",
        "not a Parquet file",
    ),
    _refused(
        "footer-length-lie",
        "the footer length field points before the start of the file",
        damaged(SIX, lambda p: p.write_bytes(p.read_bytes()[:-8] + (10**9).to_bytes(4, "little") + b"PAR1")),
        "part-0.parquet",
        "exceeds the file size",
    ),
    _refused(
        "footer-garbage",
        "random bytes where the footer should be",
        damaged(SIX, lambda p: p.write_bytes(faults.join(faults.split(p.read_bytes())[0], media.noise(300, seed=1)))),
        "part-0.parquet",
        "unreadable Parquet footer",
    ),
    _refused(
        "footer-total-rows-lie",
        "the footer claims 99 rows, its row groups hold 6",
        damaged(SIX, lambda p: faults.rewrite_row_counts(p, file_rows=99, group_rows={})),
        "part-0.parquet",
        "99 rows",
        "hold 6",
    ),
    _refused(
        "schema-drift",
        "the second shard's text column is an integer",
        parquet(GOOD, pa.table({"id": ["g"], "text": [7]})),
        "part-1.parquet",
        "schema differs",
        "text: int64",
    ),
    _refused("missing-key-column", "the key column does not exist", SIX, "key column 'nope'", "columns: id, text", key="nope"),
    _refused(
        "missing-file", "a shard that does not exist", damaged(SIX, lambda p: None, extra="gone.parquet"), "gone.parquet", "no such file"
    ),
    _refused(
        "nesting-too-deep",
        "a column nested 120 lists deep",
        parquet(pa.table({"id": ["a"], "x": pa.array([None], nested_list_type(120))})),
        "part-0.parquet",
        "too deeply nested",
    ),
    _refused("traversal-dataset-name", "a dataset named ../../etc", SIX, "invalid dataset name", "'../../etc'", dataset="../../etc"),
    _refused("script-dataset-name", "a dataset named <script>", SIX, "invalid dataset name", dataset="<script>alert(1)</script>"),
    _refused("traversal-tag", "a tag named ../latest", SIX, "invalid tag name", "'../latest'", tag="../latest"),
    _refused("unknown-kind", "a kind override naming no kind", SIX, "'<script>'", "text", kinds={"text": "<script>"}),
    _refused(
        "row-group-rows-lie",
        "row group 0's footer entry claims 4 rows (it holds 2), and the file total agrees",
        damaged(SIX, lambda p: faults.rewrite_row_counts(p, file_rows=8, group_rows={0: 4})),
        "part-0.parquet",
        "row group 0 claims 4 rows",
        "holds 2 values",
    ),
    _refused(
        "row-group-pages-lie",
        "row group 0 and its column chunks claim 1 row; its pages hold 2",
        damaged(SIX, lambda p: faults.rewrite_row_counts(p, file_rows=5, group_rows={0: 1}, columns_too=True)),
        "part-0.parquet",
        "row group 0 holds 2 rows",
        "footer says 1",
    ),
    _refused(
        "unknown-tokenizer",
        "a tokenizer that is not in the catalog",
        SIX,
        "no-such-tokenizer",
        tokenizer="no-such-tokenizer",
        refused_status=404,
    ),
]

UNREADABLE = [
    _unreadable(
        "changed-in-place",
        "one byte of the data flipped after registration",
        lambda p: faults.flip_byte(p, at=0.3),
        "checksum",
        "part-0.parquet",
    ),
    _unreadable(
        "truncated-after-registration",
        "the shard lost its tail after registration",
        lambda p: faults.truncate(p, keep=0.9),
        "changed after registration",
    ),
    _unreadable(
        "deleted-after-registration", "the shard was deleted after registration", lambda p: p.unlink(), "is missing", "part-0.parquet"
    ),
]

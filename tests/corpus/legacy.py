"""Versions as an older batchscope registered them: before footers were bounded, keys checked and media checksummed.

A catalog made then still holds such versions; reading them must refuse what
is wrong (a hostile footer, an ambiguous key) instead of serving it. This
writes a manifest and ``refs.json`` exactly as that registration did: the
file body as one checked segment, the footer's digest, no key or media checks.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq

from loaders import Catalog, DatasetVersion, storage
from loaders.catalog.kinds import infer_kinds
from loaders.catalog.manifest import Manifest
from loaders.storage.shards import ShardInfo


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def unchecked_shard(path: str) -> ShardInfo:
    """What an older registration recorded about ``path``, taking its footer at its word."""
    data = Path(path).read_bytes()
    footer_start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    meta = pq.ParquetFile(path).metadata
    return ShardInfo(
        uri=storage.normalize(path),
        size=len(data),
        rows=meta.num_rows,
        row_groups=tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups)),
        boundaries=(0, footer_start),
        segment_digests=(_digest(data[:footer_start]),),
        footer_digest=_digest(data[footer_start:]),
    )


def register_unchecked(catalog: Catalog, name: str, paths: list[str], *, key: str | None = "id", tag: str | None = "v1") -> DatasetVersion:
    """Write ``paths`` into ``catalog`` as a version of ``name`` the way an older registration did; returns it."""
    schema = pq.read_schema(paths[0])
    manifest = Manifest(
        name=name,
        schema=schema,
        kinds=infer_kinds(schema),
        key=key,
        shards=tuple(unchecked_shard(p) for p in paths),
        created="2025-01-01T00:00:00+00:00",
    )
    storage.write_bytes_atomic(catalog.path("datasets", name, "versions", f"{manifest.id}.json"), json.dumps(manifest.to_json()).encode())
    tags = {"latest": manifest.id, **({tag: manifest.id} if tag else {})}
    storage.write_bytes_atomic(catalog.path("datasets", name, "refs.json"), json.dumps({"head": manifest.id, "tags": tags}).encode())
    return catalog.resolve(f"{name}@{manifest.id}")

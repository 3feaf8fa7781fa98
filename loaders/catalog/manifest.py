"""Dataset manifests: the immutable, content-addressed description of one dataset version."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..storage.shards import ShardInfo


def schema_to_json(schema: pa.Schema) -> dict[str, Any]:
    """A readable column list plus the exact Arrow schema (base64 IPC) for round trips."""
    return {
        "columns": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema],
        "arrow": base64.b64encode(schema.serialize().to_pybytes()).decode(),
    }


def schema_from_json(data: dict[str, Any]) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(data["arrow"])))


def _schema_identity(schema: pa.Schema) -> list[list[str]]:
    """What of a schema counts for the version id: names and types (not writer metadata).

    Types are named as they read back from the manifest (an Arrow IPC round
    trip), so the id is the same at registration and on every later load: a
    map column read from Parquet prints its entries' name, which IPC drops.
    """
    stable = pa.ipc.read_schema(pa.py_buffer(schema.serialize()))
    return [[f.name, str(f.type)] for f in stable]


#: The fields of a manifest its id never covers: shown as recorded, marked unverified.
UNVERIFIED = ("created", "parent")
#: What the id of a manifest registered before ``covers_meta`` does not cover either.
UNVERIFIED_BEFORE_META = ("notes", "column metadata")


@dataclass(frozen=True)
class Manifest:
    """One dataset version. ``id`` hashes the content (and, since ``covers_meta``, the notes and the exact Arrow schema
    with its metadata); name, parent, time and tags do not count."""

    name: str
    schema: pa.Schema
    kinds: dict[str, str]
    key: str | None
    shards: tuple[ShardInfo, ...]
    tokenizer: str | None = None
    parent: str | None = None
    created: str = ""
    notes: dict[str, Any] = field(default_factory=dict)
    #: ``(shard, row, key)`` of rows whose duplicate key got a ``~N`` suffix (registered with duplicates allowed).
    key_suffixes: tuple[tuple[int, int, str], ...] = ()
    #: ``{"digest", "files"}`` of the checksum table of media stored by path (``loaders.catalog.media_files``), if any.
    media_files: dict[str, Any] | None = None
    #: How the shards are stored and read (:mod:`loaders.storage.formats`); Parquet unless a replay registered others.
    shard_format: str = "parquet"
    #: Whether the id covers the notes and the exact Arrow schema (every manifest registered since); a manifest from
    #: before has them unverified.
    covers_meta: bool = True
    #: The Arrow schema as stored (base64 IPC); empty means ``schema`` serialized now.
    schema_arrow: str = ""

    @property
    def arrow(self) -> str:
        """The stored form of the schema (base64 Arrow IPC), exactly as the manifest holds it."""
        return self.schema_arrow or schema_to_json(self.schema)["arrow"]

    @property
    def unverified(self) -> tuple[str, ...]:
        """What this manifest records that its id does not cover (pages mark these as unverified)."""
        return UNVERIFIED if self.covers_meta else (*UNVERIFIED, *UNVERIFIED_BEFORE_META)

    def content(self) -> dict[str, Any]:
        """The part of the manifest the id is a hash of (fields added later count only when set, so old ids hold)."""
        content: dict[str, Any] = {
            "schema": _schema_identity(self.schema),
            "kinds": dict(sorted(self.kinds.items())),
            "key": self.key,
            "tokenizer": self.tokenizer,
            "shards": [
                {
                    "uri": s.uri,
                    "size": s.size,
                    "rows": s.rows,
                    "checksum": s.checksum,
                    "row_groups": list(s.row_groups),
                    **({"pages_checked": True} if s.pages_checked else {}),
                }
                for s in self.shards
            ],
        }
        if self.key_suffixes:
            content["key_suffixes"] = [list(entry) for entry in self.key_suffixes]
        if self.media_files:
            content["media_files"] = dict(self.media_files)
        if self.shard_format != "parquet":
            content["shard_format"] = self.shard_format
        if self.covers_meta:
            content["meta"] = {"notes": self.notes, "arrow_schema": hashlib.sha256(self.arrow.encode()).hexdigest()}
        return content

    @property
    def id(self) -> str:
        canonical = json.dumps(self.content(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def size(self) -> int:
        return sum(s.size for s in self.shards)

    def to_json(self) -> dict[str, Any]:
        schema = schema_to_json(self.schema)
        schema["arrow"] = self.arrow
        return {
            "format": "batchscope.dataset/2" if self.covers_meta else "batchscope.dataset/1",
            "name": self.name,
            "id": self.id,
            "parent": self.parent,
            "created": self.created,
            "key": self.key,
            "tokenizer": self.tokenizer,
            "kinds": self.kinds,
            "schema": schema,
            "rows": self.rows,
            "shards": [s.to_json() for s in self.shards],
            "notes": self.notes,
            **({"key_suffixes": [list(e) for e in self.key_suffixes]} if self.key_suffixes else {}),
            **({"media_files": dict(self.media_files)} if self.media_files else {}),
            **({"shard_format": self.shard_format} if self.shard_format != "parquet" else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, covers_meta: bool = True) -> "Manifest":
        """The manifest stored as ``data``; ``covers_meta`` says whether its id is taken to cover notes and schema."""
        return cls(
            name=data["name"],
            schema=schema_from_json(data["schema"]),
            kinds=dict(data["kinds"]),
            key=data.get("key"),
            shards=tuple(ShardInfo.from_json(s) for s in data["shards"]),
            tokenizer=data.get("tokenizer"),
            parent=data.get("parent"),
            created=data.get("created", ""),
            notes=dict(data.get("notes") or {}),
            key_suffixes=tuple((int(s), int(r), str(k)) for s, r, k in data.get("key_suffixes") or ()),
            media_files=dict(data["media_files"]) if data.get("media_files") else None,
            shard_format=str(data.get("shard_format", "parquet")),
            covers_meta=covers_meta,
            schema_arrow=str(data["schema"]["arrow"]),
        )

"""Resuming an import: the journal of the shards it finished, and where in its inputs the next shard starts.

An import whose inputs are named (files, with their size and modification
time) writes into a staging folder named after them and its options, so
running the same import again finds it. Each time a shard is complete, the
journal (``journal.json`` in that folder) records every finished shard (name,
size, modification time, sha256) and the input position right after its last
row: the input file and the rows of it already written. A later run takes the
journal only when every shard it lists is still there as it was written; it
then drops anything else in the folder (the shard being written when the
import died) and continues converting from that position, without reading the
input files before it again.

>>> Position(file=2, row=500).to_json()
{'file': 2, 'row': 500}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pyarrow.parquet as pq

JOURNAL = "journal.json"
_FORMAT = 1


@dataclass(frozen=True)
class Position:
    """Where an import's input continues: rows ``[0, row)`` of input file ``file`` (and every file before) are written."""

    file: int = 0
    row: int = 0

    def to_json(self) -> dict[str, int]:
        return {"file": self.file, "row": self.row}


@dataclass
class Journal:
    """The finished shards of an import, the writer's sizes and the input position after them."""

    shards: list[dict[str, Any]] = field(default_factory=list)
    rows: int = 0
    row_group_size: int | None = None
    rows_per_shard: int | None = None
    position: Position = field(default_factory=Position)
    #: The importer's own state, saved once (the JSONL importer's inferred schema).
    state: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "shards": self.shards,
            "rows": self.rows,
            "row_group_size": self.row_group_size,
            "rows_per_shard": self.rows_per_shard,
            "position": self.position.to_json(),
            "state": self.state,
        }


def job_name(fmt: str, name: str, inputs: Sequence[str], options: Mapping[str, Any]) -> str:
    """The staging job of importing ``inputs`` (as they are now) as ``name`` with ``options``."""
    described = []
    for path in inputs:
        try:
            info = os.stat(path)
            described.append([path, info.st_size, info.st_mtime_ns])
        except OSError:
            described.append([path, None, None])
    text = json.dumps({"format": fmt, "name": name, "inputs": described, "options": dict(options)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_entry(path: str, rows: int) -> dict[str, Any]:
    """A finished shard as the journal records it."""
    info = os.stat(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return {"name": os.path.basename(path), "size": info.st_size, "mtime_ns": info.st_mtime_ns, "rows": rows, "sha256": digest.hexdigest()}


def write_journal(directory: str, journal: Journal) -> None:
    """Replace the journal atomically (a torn journal would be discarded, never trusted)."""
    path = os.path.join(directory, JOURNAL)
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(journal.to_json(), handle)
    os.replace(temporary, path)


def read_journal(directory: str) -> Journal | None:
    """The journal of ``directory``, when every shard it lists is there as written; else None (start over)."""
    try:
        with open(os.path.join(directory, JOURNAL)) as handle:
            data = json.load(handle)
        if data.get("format") != _FORMAT:
            return None
        shards = list(data["shards"])
        for entry in shards:
            info = os.stat(os.path.join(directory, entry["name"]))
            if info.st_size != entry["size"] or info.st_mtime_ns != entry["mtime_ns"]:
                return None
        position = Position(int(data["position"]["file"]), int(data["position"]["row"]))
        return Journal(shards, int(data["rows"]), data["row_group_size"], data["rows_per_shard"], position, dict(data.get("state") or {}))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keep_only(directory: str, journal: Journal | None) -> None:
    """Remove from ``directory`` everything but the journal's shards (what a killed import was writing)."""
    kept = {entry["name"] for entry in journal.shards} | {JOURNAL} if journal is not None else set()
    with contextlib.suppress(OSError):
        for entry in os.listdir(directory):
            if entry not in kept:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, entry))


def journaled_keys(directory: str, journal: Journal, key: str) -> dict[str, str]:
    """The keys the journal's shards hold (for the uniqueness check of the rows still to come), each with where it is."""
    found: dict[str, str] = {}
    for entry in journal.shards:
        column = pq.read_table(os.path.join(directory, entry["name"]), columns=[key]).column(key).to_pylist()
        for row, value in enumerate(column):
            found.setdefault(str(value), f"row {row} of shard {entry['name']} (written before the import resumed)")
    return found

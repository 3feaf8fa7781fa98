"""The manifest of a recorded run: written once by the first rank to start, checked by every rank and every resume.

A recorded run's ``run.json`` holds ``"kind": "recorded"`` and a ``recorded`` object: the world size every rank
must give, the source the ``keys`` name (as given, and the version id it resolved to when recording started), the
dataset that holds the samples kept for themselves, and the options that shape the records (micro-batches per step,
size limits, tokenizer). A rank or a resumed job that gives another world size or another source is refused, naming
both values.

>>> samples_dataset("llm-7")
'llm-7.samples'
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from typing import Any, Iterator

from .. import storage
from ..catalog.files import read_json
from ..catalog.store import CatalogStore, check_name
from ..errors import BatchscopeError
from ..run.manifest import manifest_path, now, run_dir

FORMAT = "batchscope.run/1"


class RecordRefused(BatchscopeError):
    """A recorder's settings contradict the run's earlier records (world size, rank, source, kind)."""

    status = 409


def samples_dataset(run: str) -> str:
    """The dataset holding the samples a recorded run kept for themselves."""
    return check_name("dataset", f"{run}.samples")


@contextlib.contextmanager
def _locked(catalog: CatalogStore, name: str) -> Iterator[None]:
    """Serialize ranks creating the same run's manifest (local catalogs; object stores publish a PUT whole)."""
    if storage.is_remote(catalog.root):
        yield
        return
    directory = run_dir(catalog, name)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, ".record.lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_or_create(
    catalog: CatalogStore, name: str, *, world_size: int, source: dict[str, str] | None, options: dict[str, Any]
) -> dict[str, Any]:
    """The manifest of recorded run ``name``: created when absent, else checked against these settings.

    ``source`` is ``{"ref", "dataset", "version"}`` (``None`` without a source); ``options`` are stored as given on
    creation. Raises :class:`RecordRefused`, naming both values, when the run holds another kind of run, another
    world size or another source.
    """
    check_name("run", name)
    path = manifest_path(catalog, name)
    with _locked(catalog, name):
        if storage.stat(path).exists:
            manifest = read_json(path, "run manifest")
            check(manifest, name=name, world_size=world_size, source=source)
            return manifest
        recorded = {"world_size": world_size, "source": source, "samples_dataset": samples_dataset(name), **options}
        manifest = {"format": FORMAT, "kind": "recorded", "name": name, "created": now(), "recorded": recorded}
        identity = json.dumps({"name": name, "created": manifest["created"], "recorded": recorded}, sort_keys=True)
        manifest["fingerprint"] = hashlib.sha256(identity.encode()).hexdigest()[:32]
        storage.write_bytes_atomic(path, json.dumps(manifest, indent=1).encode())
        return manifest


def check(manifest: dict[str, Any], *, name: str, world_size: int, source: dict[str, str] | None) -> None:
    """Refuse settings that contradict what run ``name`` recorded so far (both values named)."""
    if manifest.get("kind") != "recorded":
        raise RecordRefused(
            f"run {name!r} exists and is a {manifest.get('kind', 'native')} run, not a recorded one; record under another name"
        )
    recorded = manifest["recorded"]
    if recorded["world_size"] != world_size:
        raise RecordRefused(
            f"run {name!r} was recorded with world size {recorded['world_size']}; this job gives world_size={world_size} "
            "(a recorded run keeps one world size: record the new layout under another run name)"
        )
    before = recorded.get("source")
    if (before or {}).get("dataset") != (source or {}).get("dataset") or (before or {}).get("version") != (source or {}).get("version"):
        was = f"{before['dataset']}@{before['version']}" if before else "no source"
        now_ = f"{source['dataset']}@{source['version']} (from {source['ref']!r})" if source else "no source"
        raise RecordRefused(f"run {name!r} was recorded with source {was}; this job gives {now_}")


def check_rank(name: str, rank: int, world_size: int) -> None:
    """Refuse a rank outside ``[0, world_size)``."""
    if world_size < 1:
        raise RecordRefused(f"world_size must be at least 1, got {world_size} (run {name!r})")
    if not 0 <= rank < world_size:
        raise RecordRefused(f"rank {rank} is not below world_size {world_size} (run {name!r})")

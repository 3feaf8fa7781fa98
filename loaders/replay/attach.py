"""Attaching a replayed run: a framework's settings parsed, its files pinned, its order indexed, all or nothing.

``attach(catalog, "hf", "job", argv)`` runs the four steps of :class:`~loaders.replay.framework.Framework` and then
files the run: the documents become catalog versions read in place (their files checksummed, never copied), every
other file the replay reads is pinned by SHA-256, the replay's derived arrays are built (or found, already built for
the same settings and files, and checked), the metrics and logged batches given are checked against the run's steps
and ranks, and only then is anything written. The run's folder is assembled aside and renamed into ``runs/`` last;
on any error, versions filed for it and arrays built for it are removed again, so nothing half-attached is left.

>>> run = attach(catalog, "hf", "job", ["--dataset", "corpus/", "--seed", "7", "--world-size", "2",
...                                       "--batch-size", "4"])                     # doctest: +SKIP
>>> run.kind, run.world_size                                                       # doctest: +SKIP
('replayed', 2)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Sequence

from .. import storage
from ..catalog.store import CatalogStore, PreparedVersion, check_name
from ..errors import ReplayError
from ..run.manifest import manifest_path, now, run_dir
from .arrays import ArrayStore
from .context import Context, arrays_key
from .framework import Framework, framework
from .logged import logged_lines, parse_logged
from .metrics import Point, check_points, ledger_lines, read_metrics
from .pins import pin_file
from .run import LOGGED, ReplayedRun, ReplaySource


@dataclass(frozen=True)
class Imports:
    """What the run logged, to import with it: metrics files (``--metrics``) and logged batches (``--batches``)."""

    metrics: tuple[str, ...] = ()
    step_base: int | None = None  # the step number the metrics give the first step (default: the framework's)
    batches: str | None = None


@dataclass
class _Undo:
    """What an attach wrote so far, removed again if it fails."""

    versions: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    arrays: ArrayStore | None = None
    folder: str | None = None

    def run(self, catalog: CatalogStore) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        if self.arrays is not None:
            self.arrays.discard_written()
        for name, version_id, refs in reversed(self.versions):
            catalog.withdraw_version(name, version_id, refs=refs)


def _framework_versions(fw: Framework) -> dict[str, str]:
    found = {}
    for module in fw.requires:
        try:
            found[module] = importlib.metadata.version(module)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def _fingerprint(name: str, settings: dict[str, Any], sources: list[ReplaySource], pins: list[dict[str, Any]]) -> str:
    spec = {"framework": name, "settings": settings, "sources": [[s.dataset, s.version] for s in sources], "pins": pins}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]


def attach(catalog: CatalogStore, framework_name: str, name: str, argv: Sequence[str], *, imports: Imports = Imports()) -> ReplayedRun:
    """Create replayed run ``name`` from ``framework_name``'s flags ``argv`` (see :mod:`loaders.replay.attach`)."""
    check_name("run", name)
    if storage.is_remote(catalog.root):
        raise ReplayError(f"replayed runs live in a local catalog; {catalog.root} is remote")
    if storage.stat(manifest_path(catalog, name)).exists or os.path.exists(run_dir(catalog, name)):
        raise ReplayError(f"run {name!r} already exists in catalog {catalog.root}; pick another name")
    fw = framework(framework_name)
    settings = fw.parse(list(argv))
    settings_json = settings.to_json()
    layout = fw.layout(settings)
    prepared: list[PreparedVersion] = [
        catalog.prepare_version(d.name, list(d.files), key=d.key, kinds=d.kinds or None, tokenizer=d.tokenizer, shard_format=d.format)
        for d in layout.documents
    ]
    versions = [p.version(catalog.root) for p in prepared]
    pins = [pin_file(p.path, role=p.role) for p in layout.pinned]
    key = arrays_key(fw.name, settings_json, versions, pins)
    undo = _Undo(arrays=ArrayStore(catalog.path("indexes", "replay", key), recorded=None))
    assert undo.arrays is not None
    try:
        context = Context(versions, {p.path: p for p in pins}, undo.arrays)
        fw.check(settings, context)
        replay = fw.open(settings, context)
        shape = replay.shape()
        replay.prepare()
        step_base = imports.step_base if imports.step_base is not None else getattr(fw, "metrics_step_base", 0)
        points: list[Point] = []
        for path in imports.metrics:
            found = read_metrics(path, step_base=step_base)
            check_points(found, where=path, steps=shape.total_steps, world_size=shape.world_size, step_base=step_base)
            points += found
        logged = None
        if imports.batches is not None:
            if not os.path.isfile(imports.batches):
                raise ReplayError(f"{imports.batches}: no such file of logged batches")
            with open(imports.batches, encoding="utf-8") as f:
                logged = parse_logged(f, where=imports.batches, steps=shape.total_steps, world_size=shape.world_size)
        sources = [ReplaySource(v.name, v.name, v.id, v.rows, v.shard_format) for v in versions]
        pin_json = [p.to_json() for p in pins]
        manifest = {
            "format": "batchscope.run/1",
            "kind": "replayed",
            "name": name,
            "created": now(),
            "framework": fw.name,
            "framework_versions": _framework_versions(fw),
            "settings": settings_json,
            "sources": [s.to_json() for s in sources],
            "pins": pin_json,
            "arrays": {"key": key, "digests": dict(undo.arrays.digests)},
            "shape": {"total_steps": shape.total_steps, "global_batch_size": shape.global_batch_size, "world_size": shape.world_size},
            "imports": {"metrics": [os.path.abspath(p) for p in imports.metrics], "step_base": step_base, "batches": imports.batches},
            "fingerprint": _fingerprint(fw.name, settings_json, sources, pin_json),
        }
        folder = _assemble(catalog, name, manifest, points, logged, shape.world_size)
        undo.folder = folder
        for item in prepared:
            manifest_name, version_id = item.manifest.name, item.manifest.id
            refs = catalog.tags_file(manifest_name)
            existed = catalog.filed(manifest_name, version_id)
            catalog.publish_version(item)
            if not existed:
                undo.versions.append((manifest_name, version_id, refs))
        os.makedirs(catalog.path("runs"), exist_ok=True)
        try:
            os.rename(folder, run_dir(catalog, name))
        except OSError as exc:
            raise ReplayError(f"run {name!r} cannot be filed in {catalog.path('runs')}: {exc.strerror or exc}") from exc
        undo.folder = None
    except BaseException:
        undo.run(catalog)
        raise
    return ReplayedRun(catalog, manifest)


def _assemble(
    catalog: CatalogStore,
    name: str,
    manifest: dict[str, Any],
    points: list[Point],
    logged: dict[tuple[int, int], list[int]] | None,
    world_size: int,
) -> str:
    """The run's folder, written aside (``.attaching/``): its manifest, ledger of metrics and logged batches."""
    folder = catalog.path(".attaching", f"{name}-{os.getpid()}")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "ledger"))
    for rank, text in ledger_lines(points, world_size=world_size).items():
        with open(os.path.join(folder, "ledger", f"w{world_size}-r{rank}.jsonl"), "w", encoding="utf-8") as f:
            f.write(text)
    if logged is not None:
        with open(os.path.join(folder, LOGGED), "w", encoding="utf-8") as f:
            f.write(logged_lines(logged))
    with open(os.path.join(folder, "run.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    return folder

"""Run kinds: the three ways a run's batches are known, behind one interface every page and command uses.

- ``native``: the run read through :meth:`loaders.Run.reader`; any ``(step, rank)`` is recomputed by the read path and
  compared with the run's ledger ("verified").
- ``replayed``: the run read through another framework's deterministic read path (Megatron-Core, OLMo-core, MosaicML
  Streaming, Hugging Face, Grain); batches are recomputed by calling that framework's own code over the run's pinned
  files ("replayed").
- ``recorded``: the run read through something that cannot be recomputed (shuffle buffers, streams, hand-written
  loaders); ``batchscope.record`` wrote what each rank got while training ("recorded").

A run manifest names its kind (``"kind"``; a manifest without one is native). :func:`open_run` finds the class of a
kind in :data:`RUN_KINDS` by name and imports it only then, so this layer never imports the replay or recording
packages above it (the plug-in pattern of fsspec's ``known_implementations``).

>>> sorted(RUN_KINDS)
['native', 'recorded', 'replayed']
>>> LABELS["replayed"]
'replayed'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Iterator, Protocol, runtime_checkable

from ..errors import CatalogCorrupt

if TYPE_CHECKING:
    from ..catalog.store import CatalogStore
    from ..sampling.batch import Batch
    from ..sampling.world_sizes import WorldSizeSpan
    from ..training.ledger import Ledger
    from ..training.verification import Verification

#: kind → ``"module:Class"`` of its run; each class takes ``(catalog, manifest)``.
RUN_KINDS: dict[str, str] = {
    "native": "loaders.run.facade:Run",
    "replayed": "loaders.replay.run:ReplayedRun",
    "recorded": "loaders.record.run:RecordedRun",
}

#: What a page or command may say about a batch of each kind once it matches what the run logged.
LABELS: dict[str, str] = {"native": "verified", "replayed": "replayed", "recorded": "recorded"}


@runtime_checkable
class RunLike(Protocol):
    """What every kind of run answers: its batches by ``(step, rank)``, its world sizes, and what it logged."""

    name: str
    kind: str
    fingerprint: str
    manifest: dict[str, Any]

    @property
    def total_steps(self) -> int | None: ...  # None while unknown (a recorded run still training)

    @property
    def global_batch_size(self) -> int: ...

    @property
    def ledger(self) -> "Ledger": ...

    def world_size_at(self, step: int) -> int: ...

    def world_size_history(self) -> list["WorldSizeSpan"]: ...

    def check_step(self, step: int) -> None: ...

    def batch(self, step: int, rank: int = 0, *, world_size: int | None = None) -> "Batch": ...

    def global_batch(self, step: int) -> Iterator["Batch"]: ...

    def compare(self, batch: "Batch") -> "Verification": ...


def kind_of(manifest: dict[str, Any]) -> str:
    """The kind a run manifest declares (``native`` when it declares none)."""
    kind = manifest.get("kind", "native")
    if kind not in RUN_KINDS:
        raise CatalogCorrupt(f"run {manifest.get('name', '?')!r} has kind {kind!r}; known kinds: {', '.join(sorted(RUN_KINDS))}")
    return kind


def run_class(kind: str) -> type:
    """The class of runs of ``kind``, imported on first use."""
    module, _, name = RUN_KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def open_run(catalog: "CatalogStore", manifest: dict[str, Any]) -> RunLike:
    """The run a manifest describes, as the class of its kind."""
    return run_class(kind_of(manifest))(catalog, manifest)

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

:data:`CLAIMS` is the one place that says what pages and commands may say about each kind (and which of a native run's
parts it has): every page, ``show``, ``verify`` and ``tail`` read it, none asks ``kind == ...`` for its words.

>>> sorted(RUN_KINDS)
['native', 'recorded', 'replayed']
>>> LABELS["replayed"]
'replayed'
>>> claims("recorded").verdict("recorded", differing=0, reasons=[])
'● recorded (what the loader yielded, written while training)'
>>> claims("native").planned, claims("replayed").planned
(True, False)
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Protocol, runtime_checkable

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


@dataclass(frozen=True)
class KindClaims:
    """What pages and commands may say about runs of one kind, and which parts of a run it has.

    - ``label``: what a batch that agrees with the run's own record is called (and the status it then has);
    - ``planned``: the run has a batchscope read plan (plan, sources, packing and mixture panels, ``?against=``, the
      plan's transforms); only such a run is re-resolved or has plan transforms;
    - ``recomputed``: its batches are a pure function of its manifest (cached forever); a recorded run's are read back
      from what was written, so they change when a step is recorded again;
    - ``ledger_of_batches``: its ledger is written while it trains, one record per (step, rank), so a page follows it
      live; a replayed run's ledger holds only the metrics imported when it was attached;
    - ``compared_with``: what its batches are compared with, in words; ``record_column``: the step page's column of it;
    - ``verdicts``: the badge per comparison status (``{n}``: samples that differ, ``{samples}``: "1 sample differs",
      "3 samples differ", ``{notes}``: `` — `` and the comparison's reasons, when it gave any; ``mismatch-digest``: a
      mismatch blaming no sample);
    - ``counts``: ``batchscope verify``'s summary, ``(status, words)`` in order.
    """

    label: str
    planned: bool
    recomputed: bool
    ledger_of_batches: bool
    compared_with: str
    record_column: str
    verdicts: Mapping[str, str]
    counts: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if self.label not in self.verdicts:
            raise ValueError(f"kind claims: no verdict for its own label {self.label!r}")
        object.__setattr__(self, "verdicts", MappingProxyType(dict(self.verdicts)))

    def verdict(self, status: str, *, differing: int, reasons: list[str]) -> str:
        """The badge of a comparison with ``status`` (an unknown status is named after the label); a mismatch that
        blames no sample (only the batch digest differs) has its own badge, ``mismatch-digest``, where one is given."""
        notes = " — " + "; ".join(reasons) if reasons else ""
        samples = f"{differing} sample differs" if differing == 1 else f"{differing} samples differ"
        if status == "mismatch" and not differing and "mismatch-digest" in self.verdicts:
            status = "mismatch-digest"
        template = self.verdicts.get(status, self.label + " · " + status)
        return template.format(n=differing, samples=samples, notes=notes)


#: What pages and commands may say about each kind (every kind of :data:`RUN_KINDS` has an entry).
CLAIMS: dict[str, KindClaims] = {
    "native": KindClaims(
        label="verified",
        planned=True,
        recomputed=True,
        ledger_of_batches=True,
        compared_with="the ledger",
        record_column="ledger",
        verdicts={
            "no-ledger": "no ledger",
            "verified": "✓ verified",
            "untrained": "✓ verified, but fetched and never marked trained",
            "mismatch": "✗ {samples} from the ledger",
            "mismatch-digest": "✗ the batch digest differs from the ledger's",
        },
        counts=(
            ("verified", "verified"),
            ("mismatch", "mismatched"),
            ("no-ledger", "without a ledger entry"),
            ("untrained", "fetched but not trained"),
        ),
    ),
    "replayed": KindClaims(
        label="replayed",
        planned=False,
        recomputed=True,
        ledger_of_batches=False,
        compared_with="what the run logged",
        record_column="logged",
        verdicts={
            "no-ledger": "replayed · the run logged no batches to compare",
            "replayed": "✓ replayed · matches the indices the run logged",
            "mismatch": "✗ replayed · {n} sample(s) differ from what the run logged",
        },
        counts=(
            ("replayed", "replayed and matching what the run logged"),
            ("mismatch", "mismatched"),
            ("no-ledger", "the run logged nothing for"),
        ),
    ),
    "recorded": KindClaims(
        label="recorded",
        planned=False,
        recomputed=False,
        ledger_of_batches=True,
        compared_with="what was recorded",
        record_column="ledger",
        verdicts={
            "no-ledger": "not recorded{notes}",
            "recorded": "● recorded (what the loader yielded, written while training){notes}",
            "mismatch": "✗ {n} recorded sample(s) no longer resolve{notes}",
        },
        counts=(
            ("recorded", "recorded (written while training, not recomputed)"),
            ("mismatch", "mismatched"),
            ("no-ledger", "without a ledger entry"),
        ),
    ),
}

#: What a page or command may say about a batch of each kind once it matches what the run logged.
LABELS: dict[str, str] = {kind: c.label for kind, c in CLAIMS.items()}


def claims(kind: str) -> KindClaims:
    """What may be said about runs of ``kind`` (a kind :func:`kind_of` accepted)."""
    return CLAIMS[kind]


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
    def known_steps(self) -> int: ...  # steps a page can show: total_steps, or those recorded so far

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


def logged_steps(run: RunLike) -> list[int]:
    """The steps a run has logged so far, ascending: those its ledger holds batch records of, or for a kind whose
    ledger holds only metrics (a replayed run's, imported when it was attached) those its loss was logged for."""
    if claims(run.kind).ledger_of_batches:
        return run.ledger.steps()
    return [step for step, _ in run.ledger.series("loss", world_size_at=run.world_size_at)]

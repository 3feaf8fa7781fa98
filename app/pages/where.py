"""Page data of "where was this read": the runs that read a sample, per epoch, and the steps flagged samples touched.

Every read comes from the run's own ``where`` (a native run inverts its read order with
:func:`loaders.sampling.where.where_read`, a replayed run its framework's order; one that cannot, such as a recorded
run, says why in one line); nothing here scans a ledger or a step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from loaders import Catalog, DatasetVersion, Run
from loaders.errors import BatchscopeError
from loaders.run.kinds import claims

from .. import urls
from ..flags import Flag

#: Epochs of each run listed at once on a sample page (a "later epochs" link shows the next ones).
WHERE_EPOCHS = 8
#: Epochs per run and flagged sample the flags page inverts; runs reaching further are counted over these and marked.
FLAG_EPOCHS = 16
#: Epochs of packed runs the flags page inverts in all (each tokenizes a shuffle window or packs a block); past it,
#: a packed run's further flagged samples are left out of its count and the run is marked.
PACKED_EPOCHS = 64

OpenRun = Callable[[str], Run]


@dataclass
class ReadRow:
    """One read of the sample: a link to the rank page, anchored at the sample."""

    run: str
    source: str
    epoch: int
    step: int
    rank: int
    world_size: int
    sample: int
    index: int
    url: str


@dataclass
class RunReads:
    """What one run read of the sample, over epochs ``[first_epoch, next_epoch)`` of ``epochs``."""

    run: str
    run_url: str
    epochs: int
    first_epoch: int
    next_epoch: int | None
    reads: list[ReadRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    more_url: str | None = None
    error: str = ""

    @property
    def read_epochs(self) -> list[int]:
        """The epochs the listed reads are in (``epochs`` is how far the run's steps reach into its source)."""
        return sorted({read.epoch for read in self.reads})

    @property
    def summary(self) -> str:
        """What the panel says above the reads: when the sample was read, and how far the run reaches.

        >>> RunReads("r", "/runs/r", 2, 0, None, reads=[ReadRow("r", "s", 0, 3, 0, 1, 2, 9, "/u")]).summary
        'read once, in epoch 0; the run reaches into 2 epochs of its source'
        """
        times = {1: "once", 2: "twice"}.get(len(self.reads), f"{len(self.reads):,} times")
        epochs = self.read_epochs
        where = f"in epoch {epochs[0]}" if len(epochs) == 1 else f"in epochs {', '.join(map(str, epochs))}"
        reach = f"the run reaches into {self.epochs} epoch{'s' if self.epochs != 1 else ''} of its source"
        return f"read {times}, {where}; {reach}" if self.reads else f"not read in these epochs; {reach}"


#: ``(run name, the open run or why it cannot be opened, indices of its sources that pin the version)``.
RunsReading = list[tuple[str, Run | str, list[int]]]


def runs_reading(catalog: Catalog, open_run: OpenRun, version: DatasetVersion, only: str | None = None) -> RunsReading:
    """``(name, run or error message, source indices)`` of every run (or just ``only``) whose sources pin ``version``."""
    names = [only] if only is not None else catalog.runs()
    found: RunsReading = []
    for name in names:
        try:
            run = open_run(name)
        except BatchscopeError as exc:
            if only is not None:
                raise
            found.append((name, exc.message, []))
            continue
        sources = [i for i, s in enumerate(run.sources) if s.dataset == version.name and s.version == version.id]
        if sources or only is not None:
            found.append((name, run, sources))
    return found


def run_reads(run: Run, sources: Iterable[int], record: int, *, first_epoch: int, epochs: int | None) -> RunReads:
    """One run's reads of ``record`` (of each of ``sources``, the sources pinning the sample's version)."""
    out = RunReads(run.name, urls.run(run.name), 0, first_epoch, None)
    for source in sources:
        where = run.where(source, record, first_epoch=first_epoch, epochs=epochs)
        out.epochs = max(out.epochs, where.epochs)
        if where.next_epoch is not None:
            out.next_epoch = where.next_epoch if out.next_epoch is None else min(out.next_epoch, where.next_epoch)
        out.notes += where.notes
        ref = run.sources[source].ref
        out.reads += [
            ReadRow(
                r.run,
                ref,
                r.epoch,
                r.step,
                r.rank,
                r.world_size,
                r.sample,
                r.index,
                urls.rank(r.run, r.step, r.rank) + urls.sample_anchor(r.sample),
            )
            for r in where.reads
        ]
    out.reads.sort(key=lambda r: (r.epoch, r.step, r.rank, r.sample))
    return out


def where_read_panel(
    catalog: Catalog,
    open_run: OpenRun,
    version: DatasetVersion,
    key: str,
    record: int,
    *,
    run: str | None = None,
    first_epoch: int = 0,
    epochs: int | None = None,
) -> list[RunReads]:
    """Every run that read the sample (or only ``run``), with its reads over ``epochs`` (default
    :data:`WHERE_EPOCHS`) epochs from ``first_epoch``."""
    panel = []
    for name, opened, sources in runs_reading(catalog, open_run, version, run):
        if isinstance(opened, str):
            panel.append(RunReads(name, urls.run(name), 0, 0, None, error=opened))
            continue
        try:
            reads = run_reads(opened, sources, record, first_epoch=first_epoch, epochs=epochs or WHERE_EPOCHS)
        except BatchscopeError as exc:
            panel.append(RunReads(name, urls.run(name), 0, first_epoch, None, error=exc.message))
            continue
        if not sources:
            reads.error = f"run {name} does not read {version.ref}"
        if reads.next_epoch is not None:
            reads.more_url = urls.sample(version.name, version, key, where_run=name, where_epoch=reads.next_epoch)
        panel.append(reads)
    return panel


# -- flags ---------------------------------------------------------------------------------------------------
#: Flags counted for the flags page's per-run summary (the newest first); more are left out and the page says so.
FLAGS_COUNTED = 500
#: Reads listed per flag on the flags page (its sample page lists them all, epochs a page at a time).
FLAG_READS_SHOWN = 12


@dataclass
class FlagReads:
    """The steps that consumed one flagged sample (over :data:`FLAG_EPOCHS` epochs of each run)."""

    flag: int
    reads: list[ReadRow] = field(default_factory=list)
    more: int = 0
    partial: bool = False
    errors: list[str] = field(default_factory=list)


@dataclass
class RunTouched:
    """How many distinct steps of a run read at least one flagged sample."""

    run: str
    run_url: str
    steps: int
    samples: int
    partial: bool


@dataclass
class FlaggedSteps:
    """Per listed flag its reads, and per run the distinct steps flagged samples touched."""

    flags: dict[int, FlagReads]
    runs: list[RunTouched]
    counted: int
    capped: bool
    notes: list[str] = field(default_factory=list)


class _FlagReader:
    """Reads of flagged samples, sharing resolved versions and opened runs between flags."""

    def __init__(self, catalog: Catalog, open_run: OpenRun) -> None:
        self.catalog = catalog
        self.open_run = open_run
        self._versions: dict[tuple[str, str], tuple[DatasetVersion, RunsReading]] = {}
        self._packed_left: dict[str, int] = {}

    def reads(self, dataset: str, version_id: str, key: str) -> tuple[list[RunReads], list[str]]:
        if (dataset, version_id) not in self._versions:
            version = self.catalog.resolve(f"{dataset}@{version_id}")
            self._versions[(dataset, version_id)] = (version, runs_reading(self.catalog, self.open_run, version))
        version, runs = self._versions[(dataset, version_id)]
        record = version.index_of(*version.find(key))
        found, errors = [], []
        for name, run, sources in runs:
            if isinstance(run, str):
                errors.append(f"run {name}: {run}")
                continue
            packed = claims(run.kind).planned and run.plan.pack is not None
            limit = min(FLAG_EPOCHS, self._packed_left.setdefault(name, PACKED_EPOCHS)) if packed else FLAG_EPOCHS
            try:
                reads = run_reads(run, sources, record, first_epoch=0, epochs=limit)
            except BatchscopeError as exc:
                errors.append(f"run {name}: {exc.message}")
                continue
            if packed:
                self._packed_left[name] -= min(limit, reads.epochs)
            found.append(reads)
        return found, errors


def flagged_steps(catalog: Catalog, open_run: OpenRun, shown: list[Flag], every: Iterable[Flag]) -> FlaggedSteps:
    """Reads of the ``shown`` flags, and per run the distinct steps touched by ``every`` flag (up to :data:`FLAGS_COUNTED`)."""
    reader = _FlagReader(catalog, open_run)
    memo: dict[tuple[str, str, str], tuple[list[RunReads], list[str]]] = {}

    def reads_of(flag: Flag) -> tuple[list[RunReads], list[str]]:
        sample = (flag.dataset, flag.version, flag.key)
        if sample not in memo:
            try:
                memo[sample] = reader.reads(*sample)
            except BatchscopeError as exc:
                memo[sample] = [], [exc.message]
        return memo[sample]

    by_flag: dict[int, FlagReads] = {}
    for flag in shown:
        runs, errors = reads_of(flag)
        rows = [row for r in runs for row in r.reads]
        partial = any(r.next_epoch is not None for r in runs)
        by_flag[flag.id] = FlagReads(flag.id, rows[:FLAG_READS_SHOWN], max(0, len(rows) - FLAG_READS_SHOWN), partial, errors)
    steps: dict[str, set[int]] = {}
    samples: dict[str, int] = {}
    partial_runs: set[str] = set()
    counted: set[tuple[str, str, str]] = set()
    capped = False
    for flag in every:
        sample = (flag.dataset, flag.version, flag.key)
        if sample in counted:
            continue  # the same sample flagged again touches no other step
        if len(counted) >= FLAGS_COUNTED:
            capped = True
            break
        counted.add(sample)
        for r in reads_of(flag)[0]:
            steps.setdefault(r.run, set()).update(row.step for row in r.reads)
            samples[r.run] = samples.get(r.run, 0) + (1 if r.reads else 0)
            if r.next_epoch is not None:
                partial_runs.add(r.run)
    notes = []
    if partial_runs:
        notes.append(
            f"runs marked * are counted over part of their epochs: the first {FLAG_EPOCHS} of each flagged sample, and "
            f"for packed runs {PACKED_EPOCHS} epochs in all (each tokenizes a shuffle window or packs a block); "
            "each sample page lists every read"
        )
    if capped:
        notes.append(f"counted over the newest {FLAGS_COUNTED} flagged samples only")
    touched = [RunTouched(name, urls.run(name), len(steps[name]), samples[name], name in partial_runs) for name in sorted(steps)]
    return FlaggedSteps(by_flag, touched, len(counted), capped, notes)

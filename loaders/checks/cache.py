"""Lint results kept in the catalog, by the run's fingerprint, and extended as the run grows.

A run's lint is stored as consecutive ranges of steps, one derived table each
(``lint/<run>/<identity>/<start>-<stop>.parquet``, :mod:`loaders.storage.derived`): ``identity`` hashes the run's
name, kind, fingerprint and world-size history, the lint's layout and its options, and each table's stamp names its
identity and range, so a table of another run, range or configuration, or one torn or edited, is not used (it is
linted again and rewritten). Linting more of a run adds a range after the last one stored; nothing stored is read
back as findings without its stamp matching.

>>> cache = LintCache(catalog, run)                       # doctest: +SKIP
>>> cache.advance(budget_seconds=2.0).steps               # doctest: +SKIP
range(0, 64)
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import TYPE_CHECKING

from .. import storage
from ..storage import derived
from .lint import DATA_CHANGED, run_steps, stopped
from .options import LintOptions
from .part import LintPart
from .scan import ReadContext, lint_steps

if TYPE_CHECKING:
    from ..run.catalog import Catalog
    from ..run.kinds import RunLike

#: Layout of the stored tables (a change of what they hold bumps it, and older tables are linted again).
LAYOUT = 1
#: Samples a stored range holds at most (a range is linted in one go, so this bounds the time one step of progress takes).
CHUNK_SAMPLES = 512
_RANGE = re.compile(r"^(\d+)-(\d+)\.parquet$")


def identity(run: "RunLike", options: LintOptions) -> str:
    """What a stored lint of ``run`` with ``options`` is named by (see the module)."""
    facts = {
        "run": run.name,
        "kind": run.kind,
        "fingerprint": run.fingerprint,
        "world_sizes": [[s.start_step, s.world_size] for s in run.world_size_history()],
        "layout": LAYOUT,
        "options": options.digest(),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]


class LintCache:
    """The stored lint of one run under one set of options."""

    def __init__(self, catalog: "Catalog", run: "RunLike", options: LintOptions | None = None, *, chunk_samples: int | None = None) -> None:
        self.catalog = catalog
        self.chunk_samples = CHUNK_SAMPLES if chunk_samples is None else chunk_samples
        self.run = run
        self.options = options or LintOptions()
        self.identity = identity(run, self.options)
        self.directory = catalog.path("lint", run.name, self.identity)

    def _path(self, steps: range) -> str:
        return storage.join(self.directory, f"{steps.start}-{steps.stop}.parquet")

    def _version(self, steps: range) -> str:
        return f"{self.identity}:{steps.start}-{steps.stop}"

    def stored(self) -> LintPart | None:
        """The longest chain of stored ranges from step 0 whose tables all check, merged (``None`` when there is none)."""
        try:
            names = storage.list_names(self.directory)
        except (FileNotFoundError, NotADirectoryError):
            return None
        ranges: dict[int, list[int]] = {}
        for name in names:
            match = _RANGE.match(name)
            if match and int(match.group(1)) < int(match.group(2)):
                ranges.setdefault(int(match.group(1)), []).append(int(match.group(2)))
        parts: list[LintPart] = []
        start = 0
        while start in ranges:
            part = None
            for stop in sorted(ranges[start], reverse=True):
                part = self._load(range(start, stop))
                if part is not None:
                    break
            if part is None:
                break
            parts.append(part)
            start = part.steps.stop
        return LintPart.merge(parts) if parts else None

    def _load(self, steps: range) -> LintPart | None:
        what = self._derivation(steps)
        table = derived.read_table(self._path(steps), what)
        if table is None:
            return None
        part = derived.guarded(self._path(steps), what, lambda: LintPart.from_table(table))
        if part is None:
            return None
        return part if part.steps == steps else None

    def _store(self, part: LintPart) -> None:
        derived.write_table(self._path(part.steps), part.to_table(), self._derivation(part.steps))

    def _derivation(self, steps: range) -> derived.Derivation:
        """What a stored range is: this run's lint of ``steps`` under this configuration, in this layout (sealed)."""
        return derived.Derivation("stored lint", self._version(steps), layout=LAYOUT)

    def chunk_steps(self) -> int:
        """Steps per stored range (about ``chunk_samples`` samples)."""
        return max(1, self.chunk_samples // max(1, self.run.global_batch_size))

    def advance(self, *, budget_seconds: float) -> LintPart:
        """What is stored, extended by linting (and storing) further ranges until the run's end or until
        ``budget_seconds`` have passed (at least one range is linted when any is left)."""
        started = time.monotonic()
        stored = self.stored()
        parts = [stored] if stored is not None else []
        end = run_steps(self.run)
        start = stored.steps.stop if stored is not None else 0
        context = ReadContext(self.run, self.options, tokenizer=self.catalog.tokenizer)
        while start < end and (start == (stored.steps.stop if stored else 0) or time.monotonic() - started < budget_seconds):
            steps = range(start, min(end, start + self.chunk_steps()))
            try:
                part = lint_steps(self.run, steps, self.options, context=context)
            except DATA_CHANGED as exc:
                raise stopped(self.run, exc) from exc
            self._store(part)
            parts.append(part)
            start = steps.stop
        return LintPart.merge(parts) if parts else LintPart(range(0, 0))

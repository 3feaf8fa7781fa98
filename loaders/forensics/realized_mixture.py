"""Realized mixture: how many samples and tokens each source gave a run (whole run, windows of steps, one step).

Samples per source are arithmetic whenever a sample comes from one source (unpacked runs of every read format, and
lossless-packed read format 3–4 runs): the per-step counts repeat with a period (the mixture cycle in formats 3–4, the
block pattern in formats 1–2), so any range of steps is summed in O(period) without reading, at any run length.
Document tokens are exact for lossless packing (token counts per chunk). Everything else — tokens of unpacked
tokenized runs, and both figures for fixed-block packing, whose sequences mix sources — is *measured* on the
global batches of a bounded set of steps and says so (``samples_exact``, ``tokens_exact``, ``measured_steps``).

>>> mix = realized_mixture(run, window=10)                 # doctest: +SKIP
>>> mix.to_json()["sources"][0]["realized_samples"]        # doctest: +SKIP
0.7
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:
    from ..run.facade import Run
    from ..sampling.batch import Batch, Sample

#: Steps whose global batches are read when a figure cannot be computed (spread evenly over the run).
MEASURED_STEPS = 16
#: Most windows a mixture is cut into (a smaller ``window`` is widened to keep to it).
MAX_WINDOWS = 500
#: Windows a run is cut into by default.
DEFAULT_WINDOWS = 50


@dataclass(frozen=True)
class StepCounts:
    """Per source: samples (or documents) and document tokens of some global batches, and their padding."""

    samples: tuple[int, ...]
    tokens: tuple[int, ...] | None
    padding: int = 0

    def plus(self, other: "StepCounts") -> "StepCounts":
        tokens = None if self.tokens is None or other.tokens is None else _add(self.tokens, other.tokens)
        return StepCounts(_add(self.samples, other.samples), tokens, self.padding + other.padding)


def _add(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) + int(y) for x, y in zip(a, b))


@dataclass(frozen=True)
class Measurement:
    """Counts read from the global batches of ``steps`` (one :class:`StepCounts` per step)."""

    steps: tuple[int, ...]
    counts: tuple[StepCounts, ...]


@dataclass(frozen=True)
class MixWindow:
    """Steps ``[start, end)``: samples and tokens per source (``None``: not known for this window)."""

    start: int
    end: int
    samples: tuple[int, ...] | None
    tokens: tuple[int, ...] | None
    measured_steps: int = 0


@dataclass(frozen=True)
class RealizedMixture:
    """Planned against realized share per source, over the whole run and per window of ``window`` steps.

    ``unit`` names what ``samples`` counts: ``samples``, ``sequences`` (lossless packing: each from one source)
    or ``documents`` (fixed-block packing: a sequence mixes sources, so its documents are counted).
    """

    run: str
    sources: tuple[str, ...]
    planned: tuple[float, ...]
    unit: str
    total_steps: int
    window: int
    samples: tuple[int, ...]
    samples_exact: bool
    tokens: tuple[int, ...] | None
    tokens_exact: bool
    padding: int | None
    note: str
    measured_steps: tuple[int, ...] = ()
    windows: list[MixWindow] = field(default_factory=list)

    @staticmethod
    def shares(counts: Sequence[int] | None) -> list[float] | None:
        """``counts`` as shares of their sum (``None`` when unknown or empty)."""
        if counts is None or not sum(counts):
            return None
        total = sum(counts)
        return [c / total for c in counts]

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "unit": self.unit,
            "total_steps": self.total_steps,
            "window": self.window,
            "samples_exact": self.samples_exact,
            "tokens_exact": self.tokens_exact,
            "padding_tokens": self.padding,
            "note": self.note,
            "measured_steps": list(self.measured_steps),
            "sources": source_rows(self.sources, self.planned, self.samples, self.tokens),
            "windows": [
                {
                    "start": w.start,
                    "end": w.end,
                    "samples": _listed(w.samples),
                    "tokens": _listed(w.tokens),
                    "measured_steps": w.measured_steps,
                }
                for w in self.windows
            ],
        }


def source_rows(
    sources: Sequence[str], planned: Sequence[float], samples: Sequence[int], tokens: Sequence[int] | None
) -> list[dict[str, Any]]:
    """Per source: planned share; samples and tokens, their realized shares and deviations (realized − planned)."""
    sample_shares, token_shares = RealizedMixture.shares(samples), RealizedMixture.shares(tokens)

    def deviation(shares: list[float] | None, i: int) -> float | None:
        return shares[i] - planned[i] if shares else None

    return [
        {
            "source": name,
            "planned": planned[i],
            "samples": samples[i],
            "samples_share": sample_shares[i] if sample_shares else None,
            "samples_deviation": deviation(sample_shares, i),
            "tokens": tokens[i] if tokens is not None else None,
            "tokens_share": token_shares[i] if token_shares else None,
            "tokens_deviation": deviation(token_shares, i),
        }
        for i, name in enumerate(sources)
    ]


def _listed(values: tuple[int, ...] | None) -> list[int] | None:
    return None if values is None else list(values)


def planned_shares(run: "Run") -> tuple[float, ...]:
    """The plan's resolved weights, normalized."""
    total = sum(s.weight for s in run.sources)
    return tuple(s.weight / total for s in run.sources)


def fixed_block_packing(run: "Run") -> bool:
    """Whether the run packs fixed blocks of documents (its sequences mix sources)."""
    return run.plan.pack is not None and not run.lossless_packing


def period_counts(run: "Run") -> np.ndarray:
    """``C[t, s]``: positions of step ``t`` of one period the global batch gives source ``s``; steps repeat every
    ``len(C)`` steps (the mixture cycle, or for read formats 1–2 the block pattern over each stream's width)."""
    sources = len(run.sources)
    if run.step_mixture is not None:
        mix = run.step_mixture
        return np.stack([mix.step_counts(t) for t in range(mix.cycle)]).astype(np.int64)
    sampler = run.sampler
    width = sampler.width
    assert sampler.mixture is not None
    block = sampler.mixture.block
    period = block // math.gcd(block, width)
    counts = np.zeros((period, sources), dtype=np.int64)
    steps = np.repeat(np.arange(period, dtype=np.int64), width)
    for stream in range(run.streams):
        np.add.at(counts, (steps, sampler.sources_at(stream, np.arange(period * width, dtype=np.int64))), 1)
    return counts


def counts_before(prefix: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Counts per source over steps ``[0, steps[i])`` from a period's prefix sums ``prefix`` (``len = period + 1``)."""
    period = len(prefix) - 1
    whole, rest = np.divmod(np.asarray(steps, dtype=np.int64), period)
    return whole[:, None] * prefix[-1][None, :] + prefix[rest]


def window_bounds(total_steps: int, window: int | None) -> tuple[int, np.ndarray]:
    """The window size in force (at least 1, at most :data:`MAX_WINDOWS` windows) and the window starts plus the end."""
    default = max(1, total_steps // DEFAULT_WINDOWS)
    size = max(1, window if window is not None else default, -(-total_steps // MAX_WINDOWS))
    return size, np.append(np.arange(0, total_steps, size, dtype=np.int64), total_steps)


def measured_steps(total_steps: int, limit: int = MEASURED_STEPS) -> tuple[int, ...]:
    """Up to ``limit`` steps spread evenly from the first to the last."""
    if total_steps <= limit:
        return tuple(range(total_steps))
    return tuple(sorted({int(round(x)) for x in np.linspace(0, total_steps - 1, limit)}))


def batch_counts(run: "Run", batches: Iterable["Batch"]) -> StepCounts:
    """Samples (or documents) and document tokens per source counted from ``batches`` (``tokens`` is ``None`` when no
    sample has ``input_ids``).

    With fixed-block packing a sequence mixes sources, so its documents are counted instead, each once however many
    of the batches' sequences it spans (a document is its stream and its draw in that stream).
    """
    sources = len(run.sources)
    samples, tokens = [0] * sources, [0] * sources
    padding, tokenized = 0, False
    by_document = fixed_block_packing(run)
    documents: set[tuple[int, int, int]] = set()
    for batch in batches:
        for sample in batch.samples:
            spans = sample.inputs.get("doc_spans") if run.plan.pack is not None else None
            if spans is not None:
                tokenized = True
                padding += int(sample.inputs.get("padding") or 0)
                for document, span in zip(sample.documents, spans):
                    tokens[document.source] += int(span["end"]) - int(span["start"])
                    documents.add((sample.stream, document.draw, document.source))
                if spans and not by_document:
                    samples[sample.documents[0].source] += 1
                continue
            source = _source(sample)
            samples[source] += 1
            ids = sample.inputs.get("input_ids")
            if ids is not None:
                tokenized = True
                tokens[source] += len(ids)
    if by_document:
        for _, _, source in documents:
            samples[source] += 1
    return StepCounts(tuple(samples), tuple(tokens) if tokenized else None, padding)


def _source(sample: "Sample") -> int:
    return sample.documents[0].source


def measure(run: "Run", steps: Sequence[int]) -> Measurement:
    """Counts of the global batches of ``steps`` (read through ``run.batch`` at world size 1: the global batch)."""
    return Measurement(tuple(steps), tuple(batch_counts(run, [run.batch(s, 0, world_size=1)]) for s in steps))


#: Transforms that may give samples ``input_ids`` (a user function may too).
TOKEN_TRANSFORMS = frozenset({"tokenize", "chat_template", "use_tokens", "pack", "user"})


def may_have_tokens(run: "Run") -> bool:
    """Whether the run's samples can hold ``input_ids``: a transform that makes them, or a stored ``input_ids`` column."""
    transforms = [*run.plan.transforms, *(t for s in run.plan.sources for t in s.transforms)]
    if any(t.type in TOKEN_TRANSFORMS for t in transforms):
        return True
    return any("input_ids" in run.version(i).kinds for i in range(len(run.sources)))


def needs_reading(run: "Run") -> bool:
    """Whether some figure of the run's mixture is measured from batches rather than computed (never for runs whose
    samples cannot hold tokens and need no reading to count)."""
    if run.lossless_packing:
        return False
    return fixed_block_packing(run) or may_have_tokens(run)


def realized_mixture(run: "Run", *, window: int | None = None, measurement: Measurement | None = None) -> RealizedMixture:
    """Planned against realized share per source of ``run``, whole run and per window of ``window`` steps.

    ``measurement`` (from :func:`measure` over :func:`measured_steps`) supplies what arithmetic cannot; it is
    taken when not given and needed. Pass one kept from an earlier call to avoid reading again.
    """
    size, bounds = window_bounds(run.total_steps, window)
    names = tuple(s.ref for s in run.sources)
    if needs_reading(run) and measurement is None:
        measurement = measure(run, measured_steps(run.total_steps))
    fixed = fixed_block_packing(run)
    unit = "documents" if fixed else ("sequences" if run.lossless_packing else "samples")
    measured_in = _measured_windows(bounds, measurement) if measurement is not None else None
    if fixed:
        assert measurement is not None and measured_in is not None
        whole = _sum(measurement.counts, len(names))
        win_samples: list[tuple[int, ...] | None] = [c.samples if c is not None else None for c in measured_in]
    else:
        prefix = np.concatenate([np.zeros((1, len(names)), dtype=np.int64), np.cumsum(period_counts(run), axis=0)])
        before = counts_before(prefix, bounds)
        per_window = np.diff(before, axis=0)
        whole = StepCounts(tuple(int(x) for x in before[-1]), None)
        win_samples = [tuple(int(x) for x in row) for row in per_window.tolist()]
    if run.lossless_packing:
        tokens_at = _lossless_tokens(run, bounds)
        tokens: tuple[int, ...] | None = tuple(int(x) for x in tokens_at[-1])
        win_tokens: list[tuple[int, ...] | None] = [tuple(int(x) for x in row) for row in np.diff(tokens_at, axis=0)]
        capacity = run.total_steps * run.global_batch_size * run.plan.pack.seq_len  # type: ignore[union-attr]
        padding: int | None = capacity - sum(tokens)
    elif measurement is None or measured_in is None:  # samples that cannot hold tokens
        tokens, win_tokens, padding = None, [None] * (len(bounds) - 1), None
    else:
        summed = _sum(measurement.counts, len(names))
        tokens = summed.tokens
        win_tokens = [c.tokens if c is not None else None for c in measured_in]
        padding = summed.padding if run.plan.pack is not None else None
    steps = measurement.steps if measurement is not None else ()
    return RealizedMixture(
        run=run.name,
        sources=names,
        planned=planned_shares(run),
        unit=unit,
        total_steps=run.total_steps,
        window=size,
        samples=whole.samples,
        samples_exact=not fixed,
        tokens=tokens,
        tokens_exact=run.lossless_packing,
        padding=padding,
        note=_note(run, fixed, steps, tokens is not None),
        measured_steps=steps,
        windows=[
            MixWindow(int(a), int(b), win_samples[i], win_tokens[i], _count_in(steps, a, b))
            for i, (a, b) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
        ],
    )


def _count_in(steps: Sequence[int], start: int, end: int) -> int:
    return sum(1 for s in steps if start <= s < end)


def _sum(counts: Sequence[StepCounts], sources: int) -> StepCounts:
    if not counts:
        return StepCounts((0,) * sources, None)
    total = counts[0]
    for c in counts[1:]:
        total = total.plus(c)
    return total


def _measured_windows(bounds: np.ndarray, measurement: Measurement) -> list[StepCounts | None]:
    """Per window, the sum of the measured steps inside it (``None`` for a window without one)."""
    out: list[StepCounts | None] = [None] * (len(bounds) - 1)
    for step, counts in zip(measurement.steps, measurement.counts):
        w = int(np.searchsorted(bounds, step, side="right")) - 1
        out[w] = counts if out[w] is None else out[w].plus(counts)  # type: ignore[union-attr]
    return out


def _lossless_tokens(run: "Run", bounds: np.ndarray) -> np.ndarray:
    """Document tokens per source delivered over steps ``[0, b)`` for each ``b`` in ``bounds`` (exact)."""
    mix = run.step_mixture
    assert mix is not None
    width = mix.width
    out = np.zeros((len(bounds), len(run.sources)), dtype=np.int64)
    whole, rest = np.divmod(bounds, mix.cycle)
    for stream in range(run.streams):
        lane = mix.source_at[:, stream * width : (stream + 1) * width]
        per_step = np.stack([(lane == s).sum(axis=1) for s in range(len(run.sources))], axis=1)
        prefix = np.concatenate([np.zeros((1, len(run.sources)), dtype=np.int64), np.cumsum(per_step, axis=0)])
        read = whole[:, None] * mix.rates[stream][None, :] + prefix[rest]
        for source in range(len(run.sources)):
            if mix.rates[stream, source]:
                out[:, source] += run.concat.packers[(stream, source)].tokens_before(read[:, source])
    return out


def _note(run: "Run", fixed: bool, steps: Sequence[int], tokenized: bool) -> str:
    """What of the mixture is computed and what is measured, in words."""
    if run.lossless_packing:
        return "samples and document tokens computed exactly for every step (lossless packing: one source per sequence)"
    measured = f"measured on the global batches of {len(steps)} of {run.total_steps} steps"
    if fixed:
        return f"fixed-block packing mixes sources inside a sequence: documents and tokens {measured}"
    if not tokenized:
        return "samples computed exactly for every step; the samples hold no input_ids, so there are no tokens to count"
    return f"samples computed exactly for every step; tokens {measured}"


@dataclass(frozen=True)
class StepMix:
    """One step's own mix: per source, samples and tokens against the planned share of the global batch."""

    step: int
    sources: tuple[str, ...]
    planned: tuple[float, ...]
    unit: str
    counts: StepCounts

    def rows(self) -> list[dict[str, Any]]:
        """Per source: ``samples``, ``tokens``, their shares, the planned share and the deviations (share − planned)."""
        return source_rows(self.sources, self.planned, self.counts.samples, self.counts.tokens)


def step_mix(run: "Run", step: int, batches: Iterable["Batch"]) -> StepMix:
    """The mix of ``step`` counted from its batches (every rank's, or the global batch)."""
    unit = "documents" if fixed_block_packing(run) else ("sequences" if run.lossless_packing else "samples")
    return StepMix(step, tuple(s.ref for s in run.sources), planned_shares(run), unit, batch_counts(run, batches))

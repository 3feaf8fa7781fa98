"""Checks of a whole step's global batch: mostly padding, and a mix of sources far from the plan.

The plan's shares come from the run manifest's resolved sources (their weights, normalized); a run whose manifest
names no weights (or one source) has no mix to judge. What is counted per source follows what the plan's weights
draw: samples (unpacked runs), sequences (packed runs whose sequences each come from one source), or documents
(packed runs whose sequences mix sources).

>>> mix_deviation([35, 5], [0.5, 0.5], z=4.0)
(0, 35, 20.0, 4.74)
>>> mix_deviation([21, 19], [0.5, 0.5], z=4.0) is None
True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

if TYPE_CHECKING:
    from .context import Context as ReadContext
    from .context import StepRead

StepHit = tuple[str, "int | None", "int | None", "str | None", str]


def planned_shares(manifest: Mapping[str, Any]) -> tuple[list[str], list[float]] | None:
    """Source names and planned shares from a run manifest's resolved sources, or ``None`` when it names no weights."""
    resolved = manifest.get("resolved")
    sources = resolved.get("sources") if isinstance(resolved, Mapping) else None
    if not isinstance(sources, list) or len(sources) < 2:
        return None
    weights = [s.get("weight") if isinstance(s, Mapping) else None for s in sources]
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and w >= 0 for w in weights) or sum(weights) <= 0:
        return None
    total = float(sum(weights))
    return [str(s.get("ref") or s.get("dataset") or i) for i, s in enumerate(sources)], [float(w) / total for w in weights]


def mix_deviation(counts: Sequence[int], shares: Sequence[float], *, z: float) -> tuple[int, int, float, float] | None:
    """The source farthest from its planned share, as ``(source, count, expected, z-score)``, when some source's count is
    more than ``z`` binomial standard deviations plus one unit away from ``n × share``; else ``None``."""
    n = sum(counts)
    worst = None
    for source, (count, share) in enumerate(zip(counts, shares)):
        expected = n * share
        sd = math.sqrt(n * share * (1 - share))
        if abs(count - expected) > z * sd + 1:
            score = (count - expected) / sd if sd else math.inf
            if worst is None or abs(score) > abs(worst[3]):
                worst = (source, count, expected, score)
    return None if worst is None else (worst[0], worst[1], worst[2], round(worst[3], 2))


def step_counts(step: "StepRead", sources: int) -> tuple[list[int], str]:
    """Units per source read at the step, and their name (samples, sequences or documents)."""
    samples = [s for _, rank in step.ranks for s in rank]
    counts = [0] * sources
    if not any("doc_spans" in s.inputs for s in samples):
        for sample in samples:
            if sample.docs and sample.docs[0].document.source < sources:
                counts[sample.docs[0].document.source] += 1
        return counts, "samples"
    if any(len({d.document.source for d in s.docs}) > 1 for s in samples):
        reads = {d.read_id: d.document.source for s in samples for d in s.docs}
        for source in reads.values():
            if source < sources:
                counts[source] += 1
        return counts, "documents"
    for sample in samples:
        if sample.docs and sample.docs[0].document.source < sources:
            counts[sample.docs[0].document.source] += 1
    return counts, "sequences"


def step_checks(step: "StepRead", ctx: "ReadContext") -> Iterator[StepHit]:
    """``mostly-padding``: padding is more than ``max_share`` of the step's tokens. ``mix-off-plan``: a source's count at
    the step is more than ``z`` binomial standard deviations (plus one) from what the plan's share implies."""
    samples = [s for _, rank in step.ranks for s in rank]
    tokens = sum(s.tokens for s in samples)
    padding = sum(s.padding for s in samples)
    max_share = ctx.param("mostly-padding", "max_share")
    if tokens and padding / tokens > max_share:
        yield "mostly-padding", None, None, None, f"{padding:,} of {tokens:,} tokens of the step are padding ({padding / tokens:.0%})"
    plan = ctx.plan
    if plan is None or step.failed or not ctx.selected("mix-off-plan"):
        return
    names, shares = plan
    counts, unit = step_counts(step, len(shares))
    found = mix_deviation(counts, shares, z=ctx.param("mix-off-plan", "z"))
    if found is not None:
        source, count, expected, score = found
        n = sum(counts)
        yield (
            "mix-off-plan",
            None,
            None,
            None,
            f"{names[source]}: {count} of {n} {unit} ({count / n:.0%}) against {shares[source]:.0%} planned "
            f"(expected {expected:.1f}, z = {score:+.1f})",
        )

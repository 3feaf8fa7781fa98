"""What the run page says about a recorded run (``batchscope.record``) instead of a plan: the source its keys name and
whether it changed since, where the samples kept for themselves live, the size limits, and the gaps a failed write
left. A recorded run is never recomputed: its steps say "recorded", not "verified".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loaders import Catalog

from .. import urls


@dataclass
class RecordedGap:
    """Steps one rank could not write (a full disk...), as the recorder noted once it could write again."""

    first: int
    last: int
    rank: int
    reason: str


@dataclass
class RecordedInfo:
    """How a recorded run was recorded (the ``recorded`` part of its manifest) and what changed since."""

    world_size: int
    source: str | None
    source_version: str | None
    source_url: str | None
    source_note: str | None
    samples_dataset: str
    samples_url: str | None
    micro_batches: int
    max_sample_bytes: int | None
    max_bytes: int | None
    hook: str | None
    gaps: list[RecordedGap] = field(default_factory=list)


def recorded_info(catalog: Catalog, run: Any) -> RecordedInfo:
    """The run page's account of recorded run ``run`` (a :class:`loaders.record.run.RecordedRun`)."""
    source = run.source
    return RecordedInfo(
        world_size=run.world_size,
        source=source["ref"] if source else None,
        source_version=f"{source['dataset']}@{source['version']}" if source else None,
        source_url=urls.version(source["dataset"], source["version"]) if source else None,
        source_note=run.source_note(),
        samples_dataset=run.samples_dataset,
        samples_url=urls.dataset(run.samples_dataset) if run.samples_dataset in catalog.datasets() else None,
        micro_batches=run.micro_batches,
        max_sample_bytes=run.limits.get("max_sample_bytes"),
        max_bytes=run.limits.get("max_bytes"),
        hook=run.hook,
        gaps=[RecordedGap(g.first, g.last, g.rank, g.reason) for g in run.ledger.gaps()],
    )

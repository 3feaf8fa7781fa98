"""What every page uses: links, breadcrumbs, cursor pagers, and the check of a ``(step, rank)`` address."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from loaders.errors import RankOutOfRange
from loaders.run.kinds import claims

from ..links import Link

__all__ = [
    "Link",
    "Pager",
    "check_rank",
    "kind_badge",
    "rank_crumbs",
]  # Link lives in app.links (error pages use it too); pages import it here

if TYPE_CHECKING:
    from loaders import Run


@dataclass(frozen=True)
class Pager:
    """Cursor links around one page of rows; ``None`` where there is nowhere to go."""

    first: str | None = None
    prev: str | None = None
    next: str | None = None
    last: str | None = None
    summary: str = ""


def check_rank(run: Run, step: int, rank: int) -> int:
    """The world size in force at ``step`` of ``run``, once ``step`` is one of its steps and ``rank`` is below that world size."""
    run.check_step(step)
    world_size = run.world_size_at(step)
    if not 0 <= rank < world_size:
        raise RankOutOfRange(f"rank {rank} is not below the world size {world_size} in force at step {step} of run {run.name}")
    return world_size


def kind_badge(run: Run, detail: str | None = None) -> str | None:
    """The badge a run's pages wear beside its name: what its batches may be called (``replayed``, ``recorded``) and
    ``detail`` (the framework...); None for a native run, whose batches each say whether they are verified.

    >>> kind_badge(type("R", (), {"kind": "replayed"})(), "Grain") # a replayed run read through Grain
    'replayed · Grain'
    """
    if run.kind == "native":
        return None
    label = claims(run.kind).label
    return f"{label} · {detail}" if detail else label


def rank_crumbs(run: str, step: int, rank: int) -> list[Link]:
    """The breadcrumbs down to a step/rank page: runs, the run, the step, the rank."""
    from .. import urls

    return [
        Link("runs", urls.home()),
        Link(run, urls.run(run)),
        Link(f"step {step}", urls.step(run, step)),
        Link(f"rank {rank}", urls.rank(run, step, rank)),
    ]

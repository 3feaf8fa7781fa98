"""Page data of a step: every rank's share of the global batch, and every sample of every rank ranked by logged loss."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from loaders import Batch, Catalog
from loaders.forensics.realized_mixture import step_mix
from loaders.run.kinds import claims

from .. import urls
from ..jsonable import html_only
from ..run_cache import RunCache
from .common import Link, kind_badge
from .forensics import (
    Logged,
    SampleStats,
    check_sort,
    sample_documents,
    sample_padding_warning,
    sample_stats,
    sort_links,
    sort_samples,
    source_label,
    step_padding_warning,
)
from .mixture import StepMixView, step_mixture
from .progress import RunProgress, progress
from .steps import verdict


@dataclass
class RankShare:
    rank: int
    url: str
    samples: int
    sources: dict[str, int]
    tokens: int
    trained_tokens: int
    loss: float | None
    digest: str
    verified: bool | None
    verification: str
    padding: int = 0


@dataclass
class StepSample:
    """One sample of one rank of a step, as the step page ranks it (``url`` lands on its anchor of the rank page)."""

    rank: int
    position: int
    index: int
    loss: float | None
    source: str
    keys: list[str]
    tokens: int
    trained_tokens: int
    padding: int
    url: str
    padding_warning: str | None = None
    #: A rollout's reward and advantage (an episode's return as its reward); ``None`` for other samples.
    reward: float | None = None
    advantage: float | None = None


@dataclass
class StepPage:
    run: str
    step: int
    world_size: int
    ranks: list[RankShare]
    run_url: str
    prev_url: str | None
    next_url: str | None
    samples: list[StepSample]
    sort: str
    tokens: int
    padding: int
    padding_warning: str | None
    mix: StepMixView | None = None
    kind: str = "native"
    progress: RunProgress | None = None
    kind_badge: str | None = html_only(None)
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    sorts: list[Link] = html_only(default_factory=list)
    #: Whether the step's samples carry rewards (rollouts, episodes): the table then shows reward and advantage.
    rewards: bool = html_only(False)
    #: What the ranks table counts: its samples (``sequences`` of a packed run) and, per source, their documents.
    unit: str = html_only("samples")
    sources_label: str = html_only("")
    sources_help: str = html_only("")


def step_page(catalog: Catalog, runs: RunCache, name: str, step: int, *, sort: str | None = None) -> StepPage:
    """Every rank's share of ``step`` and every sample of every rank, ranked by ``sort`` (logged loss by default)."""
    run = runs.run(catalog, name)
    run.check_step(step)
    world_size = run.world_size_at(step)
    order = check_sort(sort, "loss")
    shares = []
    samples: list[StepSample] = []
    every: list[SampleStats] = []
    batches: list[Batch] = []
    for rank in range(world_size):
        batch = runs.batch(run, step, rank)
        batches.append(batch)
        stats = [sample_stats(run, s) for s in batch.samples]
        every += stats
        metrics = run.ledger.metrics(step, rank, world_size)
        logged = Logged.of(metrics, len(batch))
        loss = metrics.get("loss")
        check = verdict(run, batch)
        shares.append(
            RankShare(
                rank=rank,
                url=urls.rank(run.name, step, rank),
                samples=len(batch),
                sources=dict(Counter(d.source_name for s in batch.samples for d in sample_documents(s))),
                tokens=sum(t.tokens for t in stats),
                trained_tokens=sum(t.trained for t in stats),
                loss=loss if isinstance(loss, (int, float)) else None,
                digest=batch.digest,
                verified=check.verified,
                verification=check.label,
                padding=sum(t.padding for t in stats),
            )
        )
        samples += [
            StepSample(
                rank=rank,
                position=position,
                index=sample.index,
                loss=logged.losses[position],
                source=source_label(sample),
                keys=[d.key for d in sample_documents(sample)],
                tokens=stats[position].tokens,
                trained_tokens=stats[position].trained,
                padding=stats[position].padding,
                url=urls.rank(run.name, step, rank) + urls.sample_anchor(position),
                padding_warning=sample_padding_warning(stats[position]),
                reward=stats[position].reward,
                advantage=stats[position].advantage,
            )
            for position, sample in enumerate(batch.samples)
        ]
    rewards = any(s.reward is not None for s in samples)
    # a packed run's samples are sequences holding documents: its own plan says so, another kind's batches show it
    packed = run.plan.pack is not None if claims(run.kind).planned else any(len(s.documents) > 1 for b in batches for s in b.samples)
    ranked = sort_samples(
        samples,
        order,
        loss=lambda s: s.loss,
        length=lambda s: s.tokens - s.padding,
        source=lambda s: s.source,
        position=lambda s: (s.rank, s.position),
        reward=lambda s: s.reward,
        advantage=lambda s: s.advantage,
    )
    return StepPage(
        run=run.name,
        step=step,
        world_size=world_size,
        ranks=shares,
        run_url=urls.run(run.name),
        prev_url=urls.step(run.name, step - 1) if step > 0 else None,
        next_url=urls.step(run.name, step + 1) if step + 1 < run.known_steps else None,
        samples=ranked,
        sort=order,
        tokens=sum(t.tokens for t in every),
        padding=sum(t.padding for t in every),
        padding_warning=step_padding_warning(every),
        mix=step_mixture(step_mix(run, step, batches)) if claims(run.kind).planned else None,
        kind=run.kind,
        progress=progress(run),
        kind_badge=kind_badge(run),
        title=f"{run.name} · step {step}",
        crumbs=[Link("runs", urls.home()), Link(run.name, urls.run(run.name)), Link(f"step {step}", urls.step(run.name, step))],
        sorts=sort_links(urls.step(run.name, step), order, rewards=rewards),
        rewards=rewards,
        unit="sequences" if packed else "samples",
        sources_label="documents per source" if packed else "samples per source",
        sources_help="documents with tokens in this rank's sequences, per source (a sequence can hold several)"
        if packed
        else "this rank's samples, per source",
    )

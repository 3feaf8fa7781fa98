"""Page data of a step/rank (exactly what that rank consumed), and the ledger verdict every run page shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from loaders import Batch, Catalog, Document, Run
from loaders.errors import StorageError
from loaders.run.kinds import RunLike, claims

from .. import urls
from ..cut import Cut, cut_record
from ..errors import BadQuery
from ..flags import Flag, FlagStore
from ..jsonable import html_only
from ..renderers.inputs import InputBlock, InputPlace, TokenValues, input_blocks
from ..renderers.registry import View
from ..run_cache import RunCache
from .batch_views import batch_views
from .common import Link, check_rank, kind_badge, rank_crumbs
from .forensics import (
    Logged,
    check_sort,
    sample_documents,
    sample_padding_warning,
    sample_stats,
    scalar_metrics,
    sort_links,
    sort_samples,
    step_padding_warning,
    token_stats,
)
from .progress import RunProgress, progress
from .sample import FLAGS_SHOWN, FieldBlock, FlagForm, flag_form, render_fields


@dataclass
class Verdict:
    """What the run recorded compared with the recomputation: ``verified`` is True, False or None (nothing recorded).

    ``kind`` is the run's (:mod:`loaders.run.kinds`), and the label never claims more than it: a native run's batch is
    "verified" against its ledger, a replayed run's is "replayed" (and matches or differs from what the run logged), a
    recorded run's is "recorded" (what the loader yielded; ``verified`` is None: nothing recomputes it).
    """

    status: str
    verified: bool | None
    ledger_digest: str | None
    differing: list[int]
    label: str
    kind: str = "native"
    #: What differs, in words (empty unless ``status`` is ``mismatch``).
    reasons: list[str] = field(default_factory=list)


def verdict(run: RunLike, batch: Batch) -> Verdict:
    """The page's badge for ``run.compare(batch)``, in the words its kind may use (:data:`loaders.run.kinds.CLAIMS`:
    a native run's batch is "verified", a replayed run's "replayed", a recorded run's "recorded")."""
    check = run.compare(batch)
    label = claims(run.kind).verdict(check.status, differing=len(check.differing), reasons=check.reasons)
    reasons = list(check.reasons) if check.status == "mismatch" else []
    return Verdict(check.status, check.verified, check.ledger_digest, check.differing, label, run.kind, reasons)


# -- the step/rank page -------------------------------------------------------------------------
@dataclass
class DocumentEntry:
    source: str
    key: str
    dataset: str
    version: str
    shard: int
    row: int
    epoch: int
    url: str
    span: dict[str, int] | None = None


@dataclass
class SampleEntry:
    """One sample exactly as the rank consumed it."""

    index: int
    position: int
    key: str
    source: str
    dataset: str
    version: str
    shard: int
    row: int
    epoch: int
    url: str
    anchor: str
    digest: str
    packed: bool
    documents: list[DocumentEntry]
    fields: dict[str, Any]
    inputs: dict[str, Any]
    loss: float | None = None
    #: Fields too large to show whole, by column: what ``fields`` holds of them and the URL of the whole value.
    cut: dict[str, Cut] = field(default_factory=dict)
    #: ``…/ranks/{rank}#sample-{position}``: this sample at this step (the dataset ``url`` is where its record lives).
    step_url: str = ""
    tokens: int = 0
    trained_tokens: int = 0
    padding: int = 0
    all_padding: bool = False
    padding_warning: str | None = None
    #: A rollout's reward and advantage (an episode's return as its reward); ``None`` for other samples.
    reward: float | None = None
    advantage: float | None = None
    #: What "copy link" copies: ``step_url``, this sample at this step and rank (each document's permalink is its key link).
    copy_url: str = html_only("")
    copy_title: str = html_only("")
    version_url: str = html_only("")
    field_blocks: list[FieldBlock] = html_only(default_factory=list)
    input_blocks: list[InputBlock] = html_only(default_factory=list)
    flag_form: FlagForm | None = html_only(None)


@dataclass
class Comparison:
    """What one sample position would have been under the other version or run."""

    position: int
    status: str  # "same", "content changed" or "different record"
    keys: list[str]
    other_keys: list[str]
    other_versions: list[str]
    other_urls: list[str]


@dataclass
class Against:
    """The step/rank page compared with the same plan re-resolved against another version or run."""

    against: str
    run: str
    sources: list[str]
    changed: int
    same: int
    samples: list[Comparison]


def link_key(run: Run, document: Document) -> str:
    """The key a permalink to ``document`` uses: its version's key for that row (``~N`` for an allowed duplicate)."""
    version = run.version(document.source)
    if not version.manifest.key_suffixes:
        return document.key
    return version.key_at(document.address.shard, document.address.row, document.record)


def compare_against(run: Run, batch: Batch, other: str) -> Against:
    """Recompute this (step, rank) with one source swapped and say, sample by sample, what changes."""
    from loaders.catalog.records import digest

    alternative = run.against(other)
    theirs = alternative.batch(batch.step, batch.rank, world_size=batch.world_size)
    rows = []
    for position, (mine, alt) in enumerate(zip(batch.samples, theirs.samples)):
        keys = [d.key for d in mine.documents]
        other_keys = [d.key for d in alt.documents]
        if keys != other_keys:
            status = "different record"
        elif digest(mine.inputs) != digest(alt.inputs):
            status = "content changed"
        else:
            status = "same"
        rows.append(
            Comparison(
                position=position,
                status=status,
                keys=keys,
                other_keys=other_keys,
                other_versions=[d.address.version for d in alt.documents],
                other_urls=[urls.sample(d.address.dataset, d.address.version, link_key(alternative, d)) for d in alt.documents],
            )
        )
    changed = sum(1 for r in rows if r.status != "same")
    return Against(
        against=other,
        run=alternative.name,
        sources=[f"{s.dataset}@{s.version[:12]}" for s in alternative.sources],
        changed=changed,
        same=len(rows) - changed,
        samples=rows,
    )


@dataclass
class RankPage:
    run: str
    step: int
    rank: int
    world_size: int
    digest: str
    verified: bool | None
    verification: Verdict
    samples: list[SampleEntry]
    metrics: dict[str, Any]
    run_url: str
    step_url: str
    prev_url: str | None
    next_url: str | None
    against: Against | None = None
    sort: str = "position"
    kind: str = "native"
    padding_warning: str | None = None
    progress: RunProgress | None = None
    kind_badge: str | None = html_only(None)
    ranks: list[Link] = html_only(default_factory=list)
    sorts: list[Link] = html_only(default_factory=list)
    views: list[View] = html_only(default_factory=list)
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def summarize_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs for JSON: arrays of pixels summarized by dtype and shape (their bytes are behind media URLs)."""
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if isinstance(value, np.ndarray) and value.ndim >= 2:
            out[name] = {"dtype": str(value.dtype), "shape": list(value.shape)}
        else:
            out[name] = value
    return out


def _sample_entry(
    catalog: Catalog,
    flags: FlagStore,
    run: Run,
    batch: Batch,
    position: int,
    *,
    loss: float | None,
    token_values: TokenValues | None,
    token_threshold: int,
    collapse_chars: int,
    existing_flags: list[Flag] | None = None,
    field_bytes: int = 1 << 20,
) -> SampleEntry:
    """Sample ``position`` (0-based within this rank's batch) laid out for the page (its flags given, or looked up)."""
    sample = batch.samples[position]
    doc = sample.documents[0]
    version = run.version(doc.source)
    padding_only = not sample_documents(sample)
    stats = sample_stats(run, sample)
    documents = [_document_entry(run, d) for d in sample_documents(sample)]
    step_url = urls.rank(run.name, batch.step, batch.rank) + urls.sample_anchor(position)
    place = InputPlace(
        run.name, batch.step, batch.rank, position, f"run {run.name} step {batch.step} rank {batch.rank} sample {sample.index}"
    )
    blocks = input_blocks(run, sample, place, token_threshold=token_threshold, token_values=token_values)
    field_blocks = []
    first_key = documents[0].key if documents else ""
    record, cuts = cut_record(doc.record, field_bytes, lambda c: urls.media(doc.address.dataset, doc.address.version, first_key, c))
    if not sample.packed and not padding_only:
        from .datasets import version_tokenizer

        tokenizer, _ = version_tokenizer(catalog, version)
        field_blocks = render_fields(
            record,
            version,
            key=documents[0].key,
            shard=doc.address.shard,
            row=doc.address.row,
            tokenizer=tokenizer,
            only=None,
            highlight=None,
            collapse_chars=collapse_chars,
            token_threshold=token_threshold,
            cuts=cuts,
        )
    first = documents[0] if documents else _document_entry(run, doc)
    return SampleEntry(
        index=sample.index,
        position=position,
        key=first.key,
        source=first.source,
        dataset=first.dataset,
        version=first.version,
        shard=first.shard,
        row=first.row,
        epoch=first.epoch,
        url=first.url,
        anchor=urls.sample_id(position),
        digest=sample.digest,
        packed=sample.packed or padding_only,
        documents=documents,
        fields=record if not padding_only else {},
        cut=cuts if not padding_only else {},
        inputs=summarize_inputs(sample.inputs),
        loss=loss,
        step_url=step_url,
        tokens=stats.tokens,
        trained_tokens=stats.trained,
        padding=stats.padding,
        all_padding=padding_only,
        padding_warning=sample_padding_warning(stats),
        reward=stats.reward,
        advantage=stats.advantage,
        copy_url=step_url,
        copy_title="copies this sample's URL at this step and rank",
        version_url=urls.version(doc.address.dataset, doc.address.version),
        field_blocks=field_blocks,
        input_blocks=blocks,
        flag_form=None
        if padding_only
        else flag_form(
            flags,
            version,
            documents[0].key,
            existing=existing_flags,
            run=run.name,
            step=batch.step,
            rank=batch.rank,
            index=sample.index,
            position=position,
        ),
    )


def _document_entry(run: Run, d: Document) -> DocumentEntry:
    """A document of a sample as the page lists it (linked by its permalink key)."""
    key = link_key(run, d)
    return DocumentEntry(
        source=d.source_name,
        key=key,
        dataset=d.address.dataset,
        version=d.address.version,
        shard=d.address.shard,
        row=d.address.row,
        epoch=d.epoch,
        url=urls.sample(d.address.dataset, d.address.version, key),
        span=d.span,
    )


def rank_page(
    catalog: Catalog,
    runs: RunCache,
    flags: FlagStore,
    name: str,
    step: int,
    rank: int,
    *,
    token_threshold: int = 1024,
    collapse_chars: int = 2000,
    against: str | None = None,
    sort: str | None = None,
    field_bytes: int = 1 << 20,
) -> RankPage:
    """Exactly what ``rank`` consumed at ``step``, from the read path, checked against the ledger.

    ``sort`` orders the samples (:data:`~app.pages.forensics.SORTS`; position by default); anchors stay
    ``#sample-{position}`` whatever the order.
    """
    run = runs.run(catalog, name)
    world_size = check_rank(run, step, rank)
    batch = runs.batch(run, step, rank)
    metrics = run.ledger.metrics(step, rank, world_size)
    logged = Logged.of(metrics, len(batch))
    check = verdict(run, batch)
    existing = _batch_flags(flags, run, batch)
    order = check_sort(sort, "position")
    compared = _against(run, batch, against)  # refused before anything else is computed for a run without a plan
    samples = [
        _sample_entry(
            catalog,
            flags,
            run,
            batch,
            i,
            loss=logged.losses[i],
            token_values=logged.token_values[i],
            token_threshold=token_threshold,
            collapse_chars=collapse_chars,
            existing_flags=existing[i],
            field_bytes=field_bytes,
        )
        for i in range(len(batch))
    ]
    samples = sort_samples(
        samples,
        order,
        loss=lambda s: s.loss,
        length=lambda s: s.tokens - s.padding,
        source=lambda s: "padding" if s.all_padding else s.source,
        position=lambda s: (s.position,),
        reward=lambda s: s.reward,
        advantage=lambda s: s.advantage,
    )
    return RankPage(
        run=run.name,
        step=step,
        rank=rank,
        world_size=world_size,
        digest=batch.digest,
        verified=check.verified,
        verification=check,
        samples=samples,
        metrics=scalar_metrics(metrics),
        run_url=urls.run(run.name),
        step_url=urls.step(run.name, step),
        prev_url=_neighbour_step(run, step - 1, rank),
        next_url=_neighbour_step(run, step + 1, rank),
        against=compared,
        sort=order,
        kind=run.kind,
        progress=progress(run),
        kind_badge=kind_badge(run),
        padding_warning=step_padding_warning([token_stats(s.inputs) for s in batch.samples], what="batch"),
        sorts=sort_links(urls.rank(run.name, step, rank), order, rewards=any(s.reward is not None for s in samples)),
        ranks=[Link(f"rank {r}", urls.rank(run.name, step, r), "current" if r == rank else None) for r in range(world_size)],
        views=batch_views(batch, run),
        title=f"{run.name} · step {step} · rank {rank}",
        crumbs=rank_crumbs(run.name, step, rank),
    )


def _against(run: RunLike, batch: Batch, other: str | None) -> Against | None:
    """``?against=``: this (step, rank) re-resolved with another version or run — only a run with a read plan."""
    if not other:
        return None
    if not claims(run.kind).planned:
        raise BadQuery(f"?against= re-resolves a native run's read plan; run {run.name} is {claims(run.kind).label}")
    return compare_against(run, batch, other)  # type: ignore[arg-type]


def _batch_flags(flags: FlagStore, run: Run, batch: Batch) -> list[list[Flag] | None]:
    """The flags of every sample of ``batch`` (by its first document), one query per source version.

    None for each sample when the flag database fails: each flag form then shows the error inline.
    """
    try:
        return list(_flags_by_sample(flags, run, batch))
    except StorageError:
        return [None] * len(batch.samples)


def _flags_by_sample(flags: FlagStore, run: Run, batch: Batch) -> list[list[Flag]]:
    by_version: dict[int, list[str]] = {}
    keys_of = [link_key(run, sample.documents[0]) for sample in batch.samples]
    for sample, key in zip(batch.samples, keys_of):
        by_version.setdefault(sample.documents[0].source, []).append(key)
    found: dict[tuple[int, str], list[Flag]] = {}
    for source, keys in by_version.items():
        version = run.version(source)
        for key, listed in flags.for_keys(version.name, version.id, keys, limit=FLAGS_SHOWN).items():
            found[(source, key)] = listed
    return [found[(sample.documents[0].source, key)] for sample, key in zip(batch.samples, keys_of)]


def _neighbour_step(run: Run, step: int, rank: int) -> str | None:
    if not 0 <= step < run.known_steps:
        return None
    return urls.rank(run.name, step, min(rank, run.world_size_at(step) - 1))

"""Page data of rollout groups: a dataset version's groups, one rollout's token layers, and the groups of a step's batch.

The step/rank page shows ``rollout_batch_view`` (listed in
``batch_views.BATCH_VIEWS``) above its samples when the batch holds rollouts;
its sort and filter controls lead to ``run_rollouts_page`` with the same
query parameters as the dataset page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from loaders import Batch, Catalog, DatasetVersion, Run
from loaders.errors import CorruptData
from loaders.rl import (
    RolloutFacts,
    RolloutIndex,
    RolloutQuery,
    facts_of,
    rollout_column,
    rollout_columns,
    rollout_facts,
    use_dataset_groups,
    version_index,
)
from loaders.rl.columns import light_columns, rollout_records, step_column
from loaders.rl.confirm import IndexDisagrees
from loaders.rl.facts import number_text
from loaders.rl.index import rebuild_index

from .. import urls
from ..jsonable import html_only
from ..renderers.registry import View
from ..renderers.rollout import RolloutTokensView, rollout_tokens
from ..run_cache import RunCache
from .common import Link, check_rank
from .datasets import version_tokenizer
from .rollout_groups import Entry, GroupsBlock, Loader, groups_block

log = logging.getLogger(__name__)
#: Groups per page of a dataset's group view and of a step's batch view.
GROUPS_PER_PAGE = 20


def _facts(record: dict[str, Any], column: str, lengths: dict[str, int | None] | None) -> RolloutFacts:
    try:
        return rollout_facts(record.get(column), lengths=lengths)
    except ValueError:
        return facts_of([record], column)[0]


def dataset_loader(version: DatasetVersion, column: str, index: RolloutIndex) -> Loader:
    """Load rollouts of ``version`` by record index: the key and the rollout's small fields of each row group, read once."""
    explicit = column != rollout_columns(version)[0]
    columns = light_columns(version, column)

    def load(positions: list[int]) -> list[Entry]:
        rows = [int(index.row[p]) for p in positions]
        locations = [version.locate(r) for r in rows]
        entries = []
        for p, r, (shard, row), record in zip(positions, rows, locations, rollout_records(version, locations, columns)):
            facts = _facts(record, column, index.lengths(p) if columns is not None else None)
            entries.append(
                Entry(
                    facts,
                    version.name,
                    version.id,
                    version.key_at(shard, row, record),
                    r,
                    version.where(shard, row),
                    column,
                    explicit_column=explicit,
                )
            )
        return entries

    return load


# -- a dataset version's groups -------------------------------------------------------
@dataclass
class GroupsPage:
    dataset: str
    version: str
    ref: str
    column: str
    url: str
    version_url: str
    rollouts: int
    block: GroupsBlock
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    heading: str = html_only("")
    links: list[Link] = html_only(default_factory=list)


def _crumbs(version: DatasetVersion, last: Link) -> list[Link]:
    name = version.name
    return [Link("datasets", urls.home()), Link(name, urls.dataset(name)), Link(version.short_id, urls.version(name, version)), last]


def groups_page(
    catalog: Catalog, version: DatasetVersion, query: RolloutQuery, *, column: str | None = None, page_size: int = GROUPS_PER_PAGE
) -> GroupsPage:
    """One page of the rollout groups (or rollouts) of ``version`` that match ``query``, in its order."""
    chosen = rollout_column(version, column)
    index = version_index(catalog.root, version, chosen)
    name = version.name
    keep = {"column": column} if column else {}

    def action(**params: Any) -> str:
        return urls.rollout_groups(name, version, **keep, **params)

    def block_of(index: RolloutIndex) -> GroupsBlock:
        return groups_block(
            index,
            query,
            dataset_loader(version, chosen, index),
            action=action,
            page_size=page_size,
            group_url=lambda gid: action(group=gid),
            has_step=step_column(version) is not None,
            confirm_index=True,
        )

    try:
        block = block_of(index)
    except IndexDisagrees as exc:  # the stored index is not what the verified rows say: rebuilt, then shown
        log.warning("rollout index of %s column %r disagrees with the rows it shows (%s); rebuilding it", version.ref, chosen, exc)
        index = rebuild_index(catalog.root, version, chosen)
        try:
            block = block_of(index)
        except IndexDisagrees as again:
            raise CorruptData(f"rollout index of {version.ref} column {chosen!r}: {again}, even after rebuilding it") from again
    return GroupsPage(
        dataset=name,
        version=version.id,
        ref=version.ref,
        column=chosen,
        url=action(**query.params()),
        version_url=urls.version(name, version),
        rollouts=index.n,
        block=block,
        title=f"rollout groups · {version.ref}",
        crumbs=_crumbs(version, Link("groups", action())),
        heading=f"Rollout groups of {version.ref}",
        links=[Link(f"{index.n:,} rollouts of {version.ref}", urls.version(name, version))],
    )


# -- one rollout's token layers ---------------------------------------------------------
@dataclass
class RolloutPage:
    dataset: str
    version: str
    key: str
    column: str
    url: str
    sample_url: str
    group_url: str | None
    where: str
    reward: float | None
    advantage: float | None
    finish_reason: str | None
    group_id: str | None
    completion_ids: list[int] | None
    logprobs: list[Any] | None
    ref_logprobs: list[Any] | None
    warnings: list[str]
    tokens: RolloutTokensView | None = html_only(None)
    facts: list[tuple[str, str]] = html_only(default_factory=list)
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def rollout_page(catalog: Catalog, version: DatasetVersion, key: str, *, column: str | None = None) -> RolloutPage:
    """One rollout's token layers: logprob heat, and ``|logprob − ref_logprob|`` when both are present."""
    chosen = rollout_column(version, column)
    shard, row = version.find(key)
    record = version.read(shard, [row])[0]
    facts = facts_of([record], chosen)[0]
    tokenizer, warning = version_tokenizer(catalog, version)
    tokens = rollout_tokens(facts, tokenizer=tokenizer)
    if warning:
        tokens.warnings.append(warning)
    name = version.name
    return RolloutPage(
        dataset=name,
        version=version.id,
        key=key,
        column=chosen,
        url=urls.rollout(name, version, key, column=column),
        sample_url=urls.sample(name, version, key),
        group_url=urls.rollout_groups(name, version, group=facts.group_id) if facts.group_id else None,
        where=version.where(shard, row),
        reward=facts.reward,
        advantage=facts.advantage,
        finish_reason=facts.finish_reason,
        group_id=facts.group_id,
        completion_ids=facts.completion_ids,
        logprobs=facts.logprobs,
        ref_logprobs=facts.ref_logprobs,
        warnings=facts.warnings,
        tokens=tokens,
        facts=[("reward", number_text(facts.reward)), ("advantage", number_text(facts.advantage)), ("finish", facts.finish_reason or "—")],
        title=f"{key} tokens · {version.ref}",
        crumbs=_crumbs(version, Link(key, urls.sample(name, version, key))),
    )


# -- a step's batch ---------------------------------------------------------------------
def batch_entries(batch: Batch, run: Run, versions: dict[tuple[str, str], tuple[DatasetVersion, str]] | None = None) -> list[Entry]:
    """The rollouts of a batch (samples whose record has a ``rollout``-kind column), in batch order; ``versions``
    collects each source's version and rollout column."""
    entries = []
    for position, sample in enumerate(batch.samples):
        document = sample.documents[0]
        version = run.version(document.source)
        columns = rollout_columns(version)
        if not columns:
            continue
        address = document.address
        if versions is not None:
            versions[(address.dataset, address.version)] = (version, columns[0])
        entries.append(
            Entry(
                facts_of([document.record], columns[0])[0],
                address.dataset,
                address.version,
                document.key,
                version.index_of(address.shard, address.row),
                version.where(address.shard, address.row),
                columns[0],
                anchor_url=urls.rank(batch.run, batch.step, batch.rank) + urls.sample_anchor(position),
                position=position,
            )
        )
    return entries


#: A step page builds the group index of a source with at most this many rows to judge partial groups; larger
#: sources are judged by an index that already exists (else by the batch alone, with a note).
REFERENCE_BUILD_ROWS = 200_000


def _block(
    entries: list[Entry],
    query: RolloutQuery,
    action: Any,
    page_size: int,
    versions: dict[tuple[str, str], tuple[DatasetVersion, str]],
    root: str,
) -> GroupsBlock:
    index = RolloutIndex.from_facts([e.facts for e in entries])
    sources = [versions[(e.dataset, e.version)] for e in entries]
    unknown = use_dataset_groups(index, sources, root, build_rows=REFERENCE_BUILD_ROWS)
    block = groups_block(
        index, query, lambda positions: [entries[int(index.row[p])] for p in positions], action=action, page_size=page_size
    )
    partial = int(((index.reference_size >= 0) & (index.reference_size > index.sizes)).sum()) if index.reference_size is not None else 0
    if partial:
        block.summary.notes.append(
            f"{partial:,} of the {len(index.starts):,} groups are only partly in this batch: statistics cover the rollouts "
            "read here; zero variance and advantage checks use the whole group in its dataset"
        )
    if unknown:
        block.summary.notes.append(
            f"{unknown:,} group(s) could not be matched with their dataset's group index (not built yet, or no group id): "
            "their zero variance is judged on this batch alone and their advantages are not checked"
        )
    return block


@dataclass
class RolloutBatchView(View):
    """Rollouts of a step/rank batch grouped by group id (else prompt), statistics first."""

    partial: ClassVar[str] = "_partials/_rollout_batch.html"
    block: GroupsBlock | None = None
    page_url: str = ""
    step_url: str = ""
    rollouts: int = 0


def rollout_batch_view(batch: Batch, run: Run) -> RolloutBatchView | None:
    """The group view of a batch's rollouts, or ``None`` when it holds none."""
    versions: dict[tuple[str, str], tuple[DatasetVersion, str]] = {}
    entries = batch_entries(batch, run, versions)
    if not entries:
        return None

    def action(**params: Any) -> str:
        return urls.rank_rollouts(batch.run, batch.step, batch.rank, **params)

    return RolloutBatchView(
        block=_block(entries, RolloutQuery(), action, GROUPS_PER_PAGE, versions, run.catalog.root),
        page_url=action(),
        step_url=urls.step_rollouts(batch.run, batch.step),
        rollouts=len(entries),
    )


@dataclass
class RunRolloutsPage:
    run: str
    step: int
    rank: int | None
    url: str
    step_url: str
    rank_url: str | None
    rollouts: int
    block: GroupsBlock
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    heading: str = html_only("")
    links: list[Link] = html_only(default_factory=list)


def run_rollouts_page(
    catalog: Catalog, runs: RunCache, name: str, step: int, rank: int | None, query: RolloutQuery, *, page_size: int = GROUPS_PER_PAGE
) -> RunRolloutsPage:
    """The rollout groups one rank (or, with ``rank=None``, every rank) consumed at ``step``."""
    run = runs.run(catalog, name)
    run.check_step(step)
    world_size = run.world_size_at(step) if rank is None else check_rank(run, step, rank)
    ranks = [rank] if rank is not None else list(range(world_size))
    entries: list[Entry] = []
    versions: dict[tuple[str, str], tuple[DatasetVersion, str]] = {}
    for r in ranks:
        entries.extend(batch_entries(runs.batch(run, step, r), run, versions))

    def action(**params: Any) -> str:
        return urls.rank_rollouts(name, step, rank, **params) if rank is not None else urls.step_rollouts(name, step, **params)

    where = f"step {step}" + (f" · rank {rank}" if rank is not None else " · all ranks")
    crumbs = [Link("runs", urls.home()), Link(name, urls.run(name)), Link(f"step {step}", urls.step(name, step))]
    if rank is not None:
        crumbs.append(Link(f"rank {rank}", urls.rank(name, step, rank)))
    crumbs.append(Link("rollouts", action()))
    return RunRolloutsPage(
        run=name,
        step=step,
        rank=rank,
        url=action(**query.params()),
        step_url=urls.step(name, step),
        rank_url=urls.rank(name, step, rank) if rank is not None else None,
        rollouts=len(entries),
        block=_block(entries, query, action, page_size, versions, catalog.root),
        title=f"rollouts · {name} · {where}",
        crumbs=crumbs,
        links=[Link(f"step {step}", urls.step(name, step))]
        + (
            [
                Link(f"rank {rank}", urls.rank(name, step, rank)),
                Link("every rank of this step", urls.step_rollouts(name, step, **query.params(start=0))),
            ]
            if rank is not None
            else []
        )
        + [
            Link(f"rank {r}", urls.rank_rollouts(name, step, r, **query.params(start=0)), "current" if r == rank else None)
            for r in range(world_size)
        ],
        heading=f"Rollouts of {name} · {where}",
    )

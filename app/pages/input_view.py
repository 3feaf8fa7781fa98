"""Page data of one model input of one step/rank sample, alone and in full ("this field alone")."""

from __future__ import annotations

from dataclasses import dataclass

from loaders import Catalog
from loaders.errors import SampleNotFound

from .. import urls
from ..jsonable import html_only
from ..renderers.inputs import InputPlace, input_blocks
from ..renderers.registry import View
from ..run_cache import RunCache
from .common import Link, check_rank, rank_crumbs
from .forensics import Logged


@dataclass
class InputPage:
    """One model input (``column``) of the sample at ``position`` of a rank's batch, rendered in full.

    ``sample_url`` is the sample's anchor on its step/rank page.
    """

    run: str
    step: int
    rank: int
    position: int
    index: int
    column: str
    kind: str
    fragment_url: str
    sample_url: str
    view: View
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)


def input_page(catalog: Catalog, runs: RunCache, name: str, step: int, rank: int, position: int, field_name: str) -> InputPage:
    """One model input of one sample, in full: a page of its own, and the htmx fragment a deferred view loads."""
    run = runs.run(catalog, name)
    check_rank(run, step, rank)
    batch = runs.batch(run, step, rank)
    if not 0 <= position < len(batch):
        raise SampleNotFound(f"step {step} rank {rank} of run {name} has samples 0 to {len(batch) - 1}, not {position}")
    sample = batch.samples[position]
    place = InputPlace(run.name, step, rank, position, f"run {run.name} step {step} rank {rank} sample {sample.index}")
    logged = Logged.of(run.ledger.metrics(step, rank, batch.world_size), len(batch))
    blocks = input_blocks(run, sample, place, only=field_name, token_values=logged.token_values[position])
    if not blocks:
        raise SampleNotFound(f"sample {sample.index} of run {name} has no model input {field_name!r} (inputs: {', '.join(sample.inputs)})")
    block = blocks[0]
    sample_url = urls.rank(run.name, step, rank) + urls.sample_anchor(position)
    return InputPage(
        run=run.name,
        step=step,
        rank=rank,
        position=position,
        index=sample.index,
        column=block.column,
        kind=block.kind,
        fragment_url=block.fragment_url,
        sample_url=sample_url,
        view=block.view,
        title=f"{block.column} · {run.name} · step {step} · rank {rank} · #{position}",
        crumbs=[*rank_crumbs(run.name, step, rank), Link(f"#{position}", sample_url), Link(block.column, block.fragment_url)],
    )

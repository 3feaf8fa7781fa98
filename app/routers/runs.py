"""Routes of runs, steps and step/rank pages: every page recomputes through the read path, checked against the ledger."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import RedirectResponse, Response

from loaders import Run
from loaders.catalog.store import check_name

from .. import urls
from ..deps import CatalogDep, FlagsDep, RunsDep, SettingsDep
from ..pages.input_view import InputPage, input_page
from ..pages.runs import RunPage, run_page
from ..pages.step import StepPage, step_page
from ..pages.steps import RankPage, rank_page
from ..responses import VARY, kept, respond, wants_fragment, wants_json
from ..routing import canonical, page

router = APIRouter(tags=["runs"])

Step = Annotated[int, Path(description="Training step (0-based).")]
Rank = Annotated[int, Path(description="Rank, below the world size in force at that step.")]
Sort = Annotated[
    str | None,
    Query(max_length=20, description="Order of the samples: position, loss (highest first), length (most real tokens first) or source."),
]


@page(router, "/runs/{run}", summary="A run: plan, pinned sources, world sizes, metric curves with outlier steps", model=RunPage)
def run(
    request: Request,
    run: str,
    catalog: CatalogDep,
    runs: RunsDep,
    step: Annotated[int | None, Query(description="Jump to this step's page.")] = None,
    start: Annotated[int | None, Query(alias="from", ge=0, description="Charts start at this step (zoom).")] = None,
    end: Annotated[int | None, Query(alias="to", ge=0, description="Charts end at this step (zoom).")] = None,
    smooth: Annotated[float | None, Query(ge=0, lt=1, description="EMA smoothing weight of the curves (0 is off; default 0.6).")] = None,
    overlay: Annotated[str | None, Query(max_length=128, description="Draw this other run's curves on the same charts.")] = None,
    window: Annotated[
        int | None, Query(ge=1, description="Steps per window of the realized mixture (default: the run in 50 windows).")
    ] = None,
) -> Response:
    check_name("run", run)
    if step is not None:
        runs.run(catalog, run).check_step(step)
        return RedirectResponse(canonical(request, urls.step(run, step)).split("?")[0], status_code=303, headers=VARY)
    data = run_page(catalog, runs, run, start=start, end=end, smooth=smooth, overlay=overlay or None, window=window)
    return respond(request, data, template="run.html", block="metrics")


@page(
    router,
    "/runs/{run}/steps/{step}",
    summary="One step: every rank's share of the global batch, every sample ranked by loss",
    model=StepPage,
)
def step(request: Request, run: str, step: Step, catalog: CatalogDep, runs: RunsDep, sort: Sort = None) -> Response:
    check_name("run", run)

    def build() -> Response:
        return respond(request, step_page(catalog, runs, run, step, sort=sort), template="step.html")

    if wants_json(request) or wants_fragment(request):
        return build()
    opened = runs.run(catalog, run)
    key = ("step", run, opened.fingerprint, step, sort, *_ledger_state(opened))
    return kept(runs, key, build)


@page(router, "/runs/{run}/steps/{step}/ranks/{rank}", summary="Exactly what one rank consumed at one step", model=RankPage)
def rank(
    request: Request,
    run: str,
    step: Step,
    rank: Rank,
    catalog: CatalogDep,
    runs: RunsDep,
    flags: FlagsDep,
    settings: SettingsDep,
    against: Annotated[
        str | None,
        Query(max_length=300, description="Compare with the same plan re-resolved: a 'dataset@version-or-tag' or another run's name."),
    ] = None,
    sort: Sort = None,
) -> Response:
    check_name("run", run)

    def build() -> Response:
        data = rank_page(
            catalog,
            runs,
            flags,
            run,
            step,
            rank,
            token_threshold=settings.token_fragment_threshold,
            collapse_chars=settings.text_collapse_chars,
            against=against or None,
            sort=sort,
            field_bytes=settings.field_bytes,
        )
        return respond(request, data, template="rank.html", block="samples")

    if wants_json(request) or wants_fragment(request):
        return build()
    # The whole page is a function of the run, the step, the ledger, the world sizes and the flags: keep it while
    # none of them changes (a shared link to one step is opened by many people).
    opened = runs.run(catalog, run)
    key = ("rank", run, opened.fingerprint, step, rank, against, sort, *_ledger_state(opened), flags.count())
    return kept(runs, key, build)


def _ledger_state(run: Run) -> tuple[object, ...]:
    """What of a run can change after it is created: its ledger and its world-size history."""
    return run.ledger.signature(), tuple((s.start_step, s.world_size) for s in run.world_size_history())


@page(
    router,
    "/runs/{run}/steps/{step}/ranks/{rank}/samples/{position}/view/{name}",
    summary="One model input of one sample, rendered in full",
    model=InputPage,
)
def input_view(
    request: Request,
    run: str,
    step: Step,
    rank: Rank,
    position: Annotated[int, Path(description="Position of the sample in the rank's batch.")],
    name: str,
    catalog: CatalogDep,
    runs: RunsDep,
) -> Response:
    check_name("run", run)
    return respond(request, input_page(catalog, runs, run, step, rank, position, name), template="input_field.html")

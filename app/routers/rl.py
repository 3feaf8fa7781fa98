"""Routes of RL data: rollout groups (a version's and a step's), one rollout's token layers, episodes and their frames."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from loaders.catalog.store import check_name
from loaders.media import media_type
from loaders.rl import RolloutQuery, episode_frame

from ..deps import CatalogDep, RunsDep, SettingsDep
from ..errors import ERROR_RESPONSES
from ..http_semantics import KeyDep, VersionDep, content_tag, immutable
from ..pages.episodes import EpisodePage, EpisodesPage, episode_page, episodes_page
from ..pages.rollouts import GROUPS_PER_PAGE, GroupsPage, RolloutPage, RunRolloutsPage, groups_page, rollout_page, run_rollouts_page
from ..responses import respond
from ..routing import bytes_answer, page
from ..settings import Settings

router = APIRouter(tags=["rl"], responses=ERROR_RESPONSES)

Column = Annotated[str | None, Query(max_length=1000, description="The rollout/episode column (default: the first of its kind).")]


def rollout_query(
    view: Annotated[str, Query(max_length=20, description="groups (default) or rollouts (one row per rollout).")] = "groups",
    sort: Annotated[
        str, Query(max_length=20, description="index, reward, advantage, length, finish, std, size, truncation; '-' for descending.")
    ] = "index",
    zero_variance: Annotated[
        str | None, Query(pattern="^[01]?$", description="1: only groups whose rewards are all equal; 0: only the others.")
    ] = None,
    finish: Annotated[
        str | None,
        Query(max_length=200, description="Only groups with a rollout of this finish reason (rollouts view: only such rollouts)."),
    ] = None,
    group: Annotated[str | None, Query(max_length=10_000, description="Only this group id.")] = None,
    problems: Annotated[bool, Query(description="Only groups (rollouts) with an inconsistency.")] = False,
    start: Annotated[int, Query(ge=0, description="Cursor: position in the sorted, filtered list.")] = 0,
    layout: Annotated[str, Query(max_length=20, description="grid (completions side by side) or stacked.")] = "grid",
) -> RolloutQuery:
    """The query parameters of every group view, checked."""
    return RolloutQuery(
        view=view or "groups",
        sort=sort or "index",
        zero_variance=None if not zero_variance else zero_variance == "1",
        finish=finish or None,
        group=group if group not in (None, "") else None,
        problems=problems,
        start=start,
        layout=layout or "grid",
    )


QueryDep = Annotated[RolloutQuery, Depends(rollout_query)]
StepFilter = Annotated[
    str | None, Query(alias="step", pattern=r"^-?\d{0,18}$", description="Only rollouts whose 'step' column has this value.")
]


def _page_size(settings: Settings, query: RolloutQuery) -> int:
    """Groups per page: at most ``GROUPS_PER_PAGE`` (each holds several rollouts); rollouts per page: the page size."""
    return min(GROUPS_PER_PAGE, settings.page_size) if query.view == "groups" else settings.page_size


@page(router, "/datasets/{name}/versions/{version}/groups", summary="Rollout groups of a version, sorted and filtered", model=GroupsPage)
def groups(
    request: Request,
    catalog: CatalogDep,
    settings: SettingsDep,
    query: QueryDep,
    version: VersionDep,
    column: Column = None,
    step_filter: StepFilter = None,
) -> Response:
    if step_filter not in (None, "", "-"):
        query = replace(query, step=int(step_filter))  # type: ignore[arg-type]
    data = groups_page(catalog, version, query, column=column or None, page_size=_page_size(settings, query))
    return respond(request, data, template="rollouts.html", block="groups")


@page(
    router,
    "/datasets/{name}/versions/{version}/rollouts/{key:path}",
    summary="One rollout's token layers (logprob heat)",
    model=RolloutPage,
)
def rollout(request: Request, version: VersionDep, key: KeyDep, catalog: CatalogDep, column: Column = None) -> Response:
    return respond(request, rollout_page(catalog, version, key, column=column or None), template="rollout.html", block="tokens")


@page(router, "/runs/{run}/steps/{step}/rollouts", summary="Rollout groups of a step's global batch", model=RunRolloutsPage)
def step_rollouts(
    request: Request, run: str, step: int, catalog: CatalogDep, runs: RunsDep, settings: SettingsDep, query: QueryDep
) -> Response:
    check_name("run", run)
    data = run_rollouts_page(catalog, runs, run, step, None, query, page_size=_page_size(settings, query))
    return respond(request, data, template="rollouts.html", block="groups")


@page(router, "/runs/{run}/steps/{step}/ranks/{rank}/rollouts", summary="Rollout groups one rank consumed at a step", model=RunRolloutsPage)
def rank_rollouts(
    request: Request, run: str, step: int, rank: int, catalog: CatalogDep, runs: RunsDep, settings: SettingsDep, query: QueryDep
) -> Response:
    check_name("run", run)
    data = run_rollouts_page(catalog, runs, run, step, rank, query, page_size=_page_size(settings, query))
    return respond(request, data, template="rollouts.html", block="groups")


@page(
    router,
    "/datasets/{name}/versions/{version}/episodes",
    summary="Episodes of a version, sortable by return and length",
    model=EpisodesPage,
)
def episodes(
    request: Request,
    version: VersionDep,
    catalog: CatalogDep,
    settings: SettingsDep,
    column: Column = None,
    sort: Annotated[
        str, Query(max_length=20, description="index, return or length; '-' for descending (non-finite returns last).")
    ] = "index",
    start: Annotated[int, Query(ge=0, description="Cursor: position in the sorted list.")] = 0,
) -> Response:
    data = episodes_page(catalog, version, column=column or None, sort=sort, start=start, page_size=settings.page_size)
    return respond(request, data, template="episodes.html", block="rows")


@page(router, "/datasets/{name}/versions/{version}/episodes/{key:path}", summary="One episode's timeline at step t", model=EpisodePage)
def episode(
    request: Request,
    version: VersionDep,
    key: KeyDep,
    catalog: CatalogDep,
    column: Column = None,
    t: Annotated[int, Query(ge=0, description="The step shown (clamped to the episode).")] = 0,
) -> Response:
    return respond(request, episode_page(catalog, version, key, column=column or None, t=t), template="episode.html", block="timeline")


@router.get(
    "/media/datasets/{name}/versions/{version}/episodes/{key:path}",
    summary="Frame t of an episode (immutable)",
    **bytes_answer("image/png", "application/octet-stream", description="The frame's stored bytes"),
)
def frame(
    request: Request,
    version: VersionDep,
    key: KeyDep,
    t: Annotated[int, Query(ge=0, description="The step whose observation to send.")],
    column: Column = None,
) -> Response:
    data = episode_frame(version, key, column=column or None, t=t)
    return immutable(request, content_tag(data), lambda: data, sniff=media_type, filename=f"frame-{t}.bin")

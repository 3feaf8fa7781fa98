"""Route of a run's health page: what the lint checks found over the run (and its summary, for the run page)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from loaders.catalog.store import check_name

from ..deps import CatalogDep, RunsDep
from ..pages.health import HealthPage, health_page
from ..responses import respond
from ..routing import page

router = APIRouter(tags=["runs"])


@page(
    router,
    "/runs/{run}/health",
    summary="A run's health: what the checks found over every sample it read, where it clusters",
    model=HealthPage,
)
def health(
    request: Request,
    run: str,
    catalog: CatalogDep,
    runs: RunsDep,
    check: Annotated[str | None, Query(max_length=64, description="Only the findings of this check.")] = None,
    steps: Annotated[str | None, Query(max_length=40, description="Only the findings of steps A:B (B exclusive).")] = None,
    start: Annotated[int, Query(ge=0, description="First finding listed (paging).")] = 0,
    summary: Annotated[bool, Query(description="As an htmx fragment: the summary block the run page shows.")] = False,
) -> Response:
    check_name("run", run)
    data = health_page(catalog, runs, run, check=check or None, steps=steps or None, start=start)
    return respond(request, data, template="health.html", block="summary" if summary else "health")

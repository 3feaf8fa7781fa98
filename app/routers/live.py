"""How far a run has got (``/runs/{run}/live``): what live pages poll, for every kind of run."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from loaders.catalog.store import check_name

from ..deps import CatalogDep, RunsDep
from ..pages.progress import RunProgress, progress
from ..responses import respond
from ..routing import page

router = APIRouter(tags=["runs"])


@page(
    router,
    "/runs/{run}/live",
    summary="How far a run has got: last step, last loss, status, and a version that changes as its ledger grows",
    model=RunProgress,
)
def live(request: Request, run: str, catalog: CatalogDep, runs: RunsDep) -> Response:
    check_name("run", run)
    found = progress(runs.run(catalog, run))
    return respond(request, found, template="live.html", block="marker", headers={"Cache-Control": "no-store"})

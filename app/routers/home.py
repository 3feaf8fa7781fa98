"""The home page (runs, datasets, recent flags), and the lists of runs and of datasets."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..deps import CatalogDep, FlagsDep, RunsDep
from ..pages.home import DatasetsPage, HomePage, RunsPage, datasets_page, home_page, runs_page
from ..responses import respond
from ..routing import page

router = APIRouter(tags=["home"])


@page(router, "/", summary="Runs, datasets and recent flags", model=HomePage)
def home(request: Request, catalog: CatalogDep, flags: FlagsDep, runs: RunsDep) -> Response:
    return respond(request, home_page(catalog, flags, runs), template="home.html")


@page(router, "/runs", summary="Every run: steps, last logged step and loss, status", model=RunsPage)
def runs_list(request: Request, catalog: CatalogDep, runs: RunsDep) -> Response:
    return respond(request, runs_page(catalog, runs), template="runs.html")


@page(router, "/datasets", summary="Every dataset: its latest version, rows, shards, size and tags", model=DatasetsPage)
def datasets_list(request: Request, catalog: CatalogDep) -> Response:
    return respond(request, datasets_page(catalog), template="datasets.html")

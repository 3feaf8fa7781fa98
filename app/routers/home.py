"""The home page: runs, datasets, recent flags."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..deps import CatalogDep, FlagsDep, RunsDep
from ..pages.home import home_page
from ..responses import respond
from ..routing import page

router = APIRouter(tags=["home"])


@page(router, "/", summary="Runs, datasets and recent flags")
def home(request: Request, catalog: CatalogDep, flags: FlagsDep, runs: RunsDep) -> Response:
    return respond(request, home_page(catalog, flags, runs), template="home.html")

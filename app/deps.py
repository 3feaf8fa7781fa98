"""Request dependencies as ``Annotated`` aliases: the settings, the catalog, the flag store, the media cache, SQL.

Each is ``async`` although it only reads ``app.state``: FastAPI runs a plain
``def`` dependency in the thread pool, so four of them would cost every
request four trips to a worker thread and back before its handler starts.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from loaders import Catalog
from loaders.storage.cache import ByteLRU

from .flags import FlagStore
from .queries import Queries
from .run_cache import RunCache
from .settings import Settings


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_catalog(request: Request) -> Catalog:
    return request.app.state.catalog


async def get_flags(request: Request) -> FlagStore:
    return request.app.state.flags


async def get_runs(request: Request) -> RunCache:
    return request.app.state.runs


async def get_queries(request: Request) -> Queries:
    return request.app.state.queries


async def get_media_cache(request: Request) -> ByteLRU[Any]:
    return request.app.state.media_cache


SettingsDep = Annotated[Settings, Depends(get_settings)]
CatalogDep = Annotated[Catalog, Depends(get_catalog)]
FlagsDep = Annotated[FlagStore, Depends(get_flags)]
MediaCacheDep = Annotated[ByteLRU[Any], Depends(get_media_cache)]
RunsDep = Annotated[RunCache, Depends(get_runs)]
QueriesDep = Annotated[Queries, Depends(get_queries)]

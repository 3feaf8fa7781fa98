"""The app factory: ``create_app(settings)`` builds a fresh inspector; nothing is built at import time.

>>> app = create_app(Settings(root="/tmp/bs-doc"))     # doctest: +SKIP

``uvicorn --factory app.factory:create_app`` serves one configured from the
``BATCHSCOPE_*`` environment variables.
"""

from __future__ import annotations

import logging
import sys
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import anyio.to_thread
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from loaders import Catalog
from loaders.catalog.version import row_group_cache
from loaders.storage.cache import ByteLRU

from . import errors, urls
from .csrf import CsrfMiddleware, form_token
from .decode_budget import DecodeBudget
from .fair import FairGate, FairMiddleware
from .flags import FlagStore
from .head import HeadMiddleware
from .hosts import HostMiddleware
from .queries import Queries
from .registries import unique
from .routers import auth, datasets, diff, docs, flags, health, home, input_media, live, media, query, rl, runs
from .run_cache import RunCache
from .security import SecurityMiddleware
from .settings import Settings
from .templating import STATIC_DIR, Templates

#: Worker threads per request slot (threads waiting for a costly slot hold one, but no request slot).
THREADS_PER_SLOT = 4


def _size_of(value: Any) -> int:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    nbytes = getattr(value, "nbytes", None)
    return int(nbytes) if isinstance(nbytes, int) else sys.getsizeof(value)


#: The module of every resource's router, in the order the app includes them (a URL that two routes could match goes to
#: the first); a new resource is a module in ``app.routers`` and an entry here.
ROUTER_MODULES = unique(
    [auth, datasets, diff, docs, flags, health, home, input_media, live, media, query, rl, runs],
    name=lambda m: m.__name__,
    what="router module",
)


def routers() -> list[Any]:
    """The router of every resource, in order; a route (method and path) that two of them define is refused."""
    found = [module.router for module in ROUTER_MODULES.values()]
    unique(
        [
            (method, route.path)
            for router in found
            for route in router.routes
            for method in sorted(getattr(route, "methods", None) or ["*"])
        ],
        name=lambda r: f"{r[0]} {r[1]}",
        what="route",
    )
    return found


def warm(app: FastAPI) -> None:
    """Do once, at startup, what the first requests would otherwise each pay for.

    Loads every template (compiled once per process), builds every route's
    request handling (FastAPI prepares an included route on the first request
    that reaches it; the OpenAPI document visits them all and is kept) and
    registers Pillow's image formats (its first WebP thumbnail would otherwise).
    """
    from PIL import Image

    app.state.templates.warm()
    app.openapi()
    Image.init()


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Sync routes run in anyio's worker threads; how many requests run at once is the gate's business (``app.fair``: a
    # few at a time, fairly across clients), so threads only need to outnumber the requests admitted or waiting in one.
    anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS_PER_SLOT * app.state.settings.request_threads + 16
    try:
        await anyio.to_thread.run_sync(warm, app)
    except Exception as exc:  # noqa: BLE001 - warming only saves time; the requests report what is broken
        logging.getLogger(__name__).warning("warming the inspector up failed (requests will do it): %s", exc)
    yield


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new inspector app over the catalog ``settings.root`` (settings from the environment when omitted)."""
    settings = (settings or Settings.from_env()).with_form_secret()
    app = FastAPI(
        title="batchscope",
        summary="See exactly what a training job read. Every page's JSON twin lives at /api + the page's path.",
        version="0.1.0",
        docs_url=None,
        redoc_url=None,
        openapi_url=urls.openapi(),
        lifespan=_lifespan,  # servers run it before the first request; see ``warm``
    )
    app.state.settings = settings
    app.state.catalog = Catalog(settings.root)
    app.state.flags = FlagStore.for_catalog(settings.root, settings.flags_path)
    app.state.form_token = form_token(settings.form_secret)
    app.state.templates = Templates(form_token=app.state.form_token)
    app.state.media_cache = ByteLRU(budget=settings.media_cache_bytes, size_of=_size_of)
    app.state.decode_budget = DecodeBudget(limit=settings.request_memory_bytes, concurrency=settings.decode_concurrency)
    app.state.runs = RunCache(budget=app.state.decode_budget)
    app.state.gate = FairGate(slots=settings.request_threads, costly=settings.decode_concurrency)
    app.state.queries = Queries(app.state.catalog, settings.query_limits())  # DuckDB is imported by the first query
    row_group_cache().budget = settings.row_group_cache_bytes  # the cache is process-wide; the setting sizes it
    errors.install(app)
    app.add_middleware(FairMiddleware, gate=app.state.gate)  # innermost: only requests that passed every check wait for a slot
    app.add_middleware(CsrfMiddleware, token=app.state.form_token)  # runs after the Host and token checks
    app.add_middleware(HostMiddleware, names=settings.host_names())
    app.add_middleware(SecurityMiddleware, token=settings.token)  # its headers go on every answer
    app.add_middleware(HeadMiddleware)  # outermost: HEAD is a GET without a body through everything else
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    for router in routers():
        app.include_router(router)
    return app

"""The explicit registries (routers, batch views, kind presentations): complete, in order, each entry once."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from fastapi import APIRouter

import app.routers
from app import factory
from app.pages import batch_views
from app.pages.rollouts import rollout_batch_view
from app.registries import DuplicateEntry, unique


def test_every_router_module_is_listed_in_the_order_the_app_always_included_them() -> None:
    defined = [
        f"app.routers.{m.name}"
        for m in sorted(pkgutil.iter_modules(app.routers.__path__), key=lambda m: m.name)
        if hasattr(importlib.import_module(f"app.routers.{m.name}"), "router")
    ]
    assert list(factory.ROUTER_MODULES) == defined
    assert factory.routers() == [importlib.import_module(name).router for name in defined]


def test_a_route_two_routers_define_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clash = APIRouter()
    clash.get("/flags")(lambda: None)
    module = type("module", (), {"router": clash, "__name__": "app.routers.clash"})
    monkeypatch.setattr(factory, "ROUTER_MODULES", {**factory.ROUTER_MODULES, "app.routers.clash": module})
    with pytest.raises(DuplicateEntry, match="route 'GET /flags' is listed twice"):
        factory.routers()


def test_a_module_or_batch_view_listed_twice_is_refused() -> None:
    with pytest.raises(DuplicateEntry, match="router module 'app.routers.flags' is listed twice"):
        unique([app.routers.flags, app.routers.home, app.routers.flags], name=lambda m: m.__name__, what="router module")
    assert list(batch_views.BATCH_VIEWS.values()) == [rollout_batch_view]
    with pytest.raises(DuplicateEntry, match="batch view 'app.pages.rollouts.rollout_batch_view' is listed twice"):
        unique([rollout_batch_view] * 2, name=lambda f: f"{f.__module__}.{f.__qualname__}", what="batch view")

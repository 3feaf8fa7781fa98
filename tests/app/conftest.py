"""The one client factory of the app tests: a fresh app over a catalog, flags in a per-test database."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from fastapi.testclient import TestClient

from app.factory import create_app
from app.settings import Settings
from loaders import Catalog
from tests.support.local_client import local_client

MakeClient = Callable[..., TestClient]


@pytest.fixture
def make_client(inspector_catalog: Catalog, tmp_path: Path) -> MakeClient:
    """``make_client(**settings)``: a TestClient over the shared catalog unless ``root`` is given."""

    def make(**overrides: Any) -> TestClient:
        values = {"root": inspector_catalog.root, "flags_path": str(tmp_path / "flags.sqlite"), **overrides}
        return local_client(create_app(Settings(**values)), follow_redirects=False)

    return make


@pytest.fixture
def client(make_client: MakeClient) -> TestClient:
    return make_client()

"""The TestClient of the app tests: requests name ``localhost``, a host the inspector answers to by default."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

#: The base URL of test requests (``Host: localhost``; the default ``testserver`` is refused as a foreign host).
BASE_URL = "http://localhost"


def local_client(app: Any, **options: Any) -> TestClient:
    """``TestClient(app, **options)`` whose requests are addressed to ``localhost``."""
    return TestClient(app, base_url=BASE_URL, **options)

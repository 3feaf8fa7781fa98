"""The one place the CLI makes the links it prints: the server's base URL, then the page's path.

The base URL is, in this order: the ``base_url`` setting (``BATCHSCOPE_BASE_URL``); the address ``batchscope
serve`` recorded in the catalog root while it runs (``server.json``, :mod:`app.listen`); ``http://HOST:PORT`` from
``BATCHSCOPE_HOST`` and ``BATCHSCOPE_PORT`` (``http://127.0.0.1:8000`` by default).

>>> base_url("/nonexistent-catalog", environ={"BATCHSCOPE_PORT": "8765"})
'http://127.0.0.1:8765'
>>> link("/nonexistent-catalog", "/runs/r", environ={"BATCHSCOPE_BASE_URL": "https://scope.example/"})
'https://scope.example/runs/r'
"""

from __future__ import annotations

from typing import Mapping

from ..listen import recorded_address
from ..settings import Settings


def base_url(root: str, *, environ: Mapping[str, str] | None = None) -> str:
    """The URL the server over catalog ``root`` answers on (``environ``: the environment, for tests)."""
    settings = Settings.from_env(environ)
    if settings.base_url:
        return settings.url
    return (recorded_address(root) or settings.url).rstrip("/")


def link(root: str, path: str, *, environ: Mapping[str, str] | None = None) -> str:
    """``path`` (a URL path from :mod:`app.urls`) on the server over catalog ``root``, whole."""
    return base_url(root, environ=environ) + path

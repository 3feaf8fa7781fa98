"""Parse responses as HTML for DOM-level assertions."""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup


def soup(response: Any) -> BeautifulSoup:
    """The response body parsed as HTML."""
    return BeautifulSoup(response.text, "html.parser")

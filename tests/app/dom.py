"""Parse responses as HTML for DOM-level assertions."""

from __future__ import annotations

from typing import Any

from bs4 import BeautifulSoup


def soup(response: Any) -> BeautifulSoup:
    """The response body parsed as HTML."""
    return BeautifulSoup(response.text, "html.parser")


def form_token(client: Any) -> str:
    """The anti-forgery token the inspector's forms carry, read as a browser would: from the login page's form."""
    return str(soup(client.get("/login")).select_one("form input[name=csrf_token]")["value"])

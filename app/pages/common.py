"""Small dataclasses every page uses: links, breadcrumbs and cursor pagers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """A labelled URL; ``rel`` marks ``prev``/``next`` links the keyboard follows."""

    label: str
    url: str
    rel: str | None = None


@dataclass(frozen=True)
class Pager:
    """Cursor links around one page of rows; ``None`` where there is nowhere to go."""

    first: str | None = None
    prev: str | None = None
    next: str | None = None
    last: str | None = None
    summary: str = ""

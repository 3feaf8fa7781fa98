"""A labelled URL: the one value every page, breadcrumb trail and error page links with."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """A labelled URL; ``rel`` marks ``prev``/``next`` links the keyboard follows.

    >>> Link("next", "/runs/r/steps/2", rel="next").rel
    'next'
    """

    label: str
    url: str
    rel: str | None = None

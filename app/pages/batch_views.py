"""Views of a whole batch shown above a step/rank page's samples: one function per modality, listed here.

A modality (rollout groups, for example) provides a function that looks at
the batch and returns a view model, or ``None`` when the batch holds nothing
of its kind::

    def rollout_batch_view(batch: Batch, run: Run) -> View | None: ...

and an entry in ``BATCH_VIEWS``. The step/rank page lays each view out with
its ``partial`` template, in this order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..registries import unique
from .rollouts import rollout_batch_view

if TYPE_CHECKING:
    from loaders import Batch, Run

    from ..renderers.registry import View

BatchView = Callable[["Batch", "Run"], "View | None"]
#: Every batch view, in the order the page shows them; a function listed twice is refused (naming it) at import.
BATCH_VIEWS: dict[str, BatchView] = unique([rollout_batch_view], name=lambda f: f"{f.__module__}.{f.__qualname__}", what="batch view")


def batch_views(batch: "Batch", run: "Run") -> list["View"]:
    """Every listed view that has something to show for ``batch``."""
    views = []
    for function in BATCH_VIEWS.values():
        view = function(batch, run)
        if view is not None:
            views.append(view)
    return views

"""Views of a whole batch shown above a step/rank page's samples, registered by modality modules.

A modality (rollout groups, for example) registers a function that looks at
the batch and returns a view model, or ``None`` when the batch holds nothing
of its kind::

    @register_batch_view
    def rollout_groups(batch: Batch, run: Run) -> View | None: ...

The step/rank page lays each view out with its ``partial`` template.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from loaders import Batch, Run

    from ..renderers.registry import View

BatchView = Callable[["Batch", "Run"], "View | None"]
_VIEWS: list[BatchView] = []


def register_batch_view(function: BatchView) -> BatchView:
    """Add a batch view (a decorator)."""
    _VIEWS.append(function)
    return function


def batch_views(batch: "Batch", run: "Run") -> list["View"]:
    """Every registered view that has something to show for ``batch``."""
    _load_modules()
    views = []
    for function in _VIEWS:
        view = function(batch, run)
        if view is not None:
            views.append(view)
    return views


_loaded = False


def _load_modules() -> None:
    """Import every ``app.pages.*`` module once, so their registrations run."""
    global _loaded
    if _loaded:
        return
    from .. import pages

    for module in pkgutil.iter_modules(pages.__path__):
        importlib.import_module(f"{pages.__name__}.{module.name}")
    _loaded = True

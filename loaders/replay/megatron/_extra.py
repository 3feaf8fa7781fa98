"""megatron-core, imported only when a replay needs it; its absence is one line naming the extra to install.

>>> MissingExtra.status
501
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

from ...errors import BatchscopeError

EXTRA = "megatron"
INSTALL = f"pip install 'batchscope[{EXTRA}]'"


class MissingExtra(BatchscopeError):
    """A framework's optional extra is not installed; the message names it."""

    status = 501


def megatron_module(name: str) -> ModuleType:
    """``importlib.import_module(name)`` for a megatron-core module, quietly (its import warns that Transformer Engine
    and Apex are absent, which the data pipeline does not use)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "megatron":
            raise
        raise MissingExtra(f"replaying a Megatron-Core run needs megatron-core: {INSTALL}") from None

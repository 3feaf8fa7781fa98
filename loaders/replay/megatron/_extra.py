"""megatron-core, imported only when a replay needs it; its absence is one line naming the extra to install.

>>> TITLE, EXTRA
('Megatron-Core', 'megatron')
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

from ..framework import missing_extra

TITLE = "Megatron-Core"
EXTRA = "megatron"


def megatron_module(name: str) -> ModuleType:
    """``importlib.import_module(name)`` for a megatron-core module, quietly (its import warns that Transformer Engine
    and Apex are absent, which the data pipeline does not use); without megatron-core, ``FrameworkMissing``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "megatron":
            raise
        raise missing_extra(TITLE, EXTRA, ["megatron.core"]) from None

"""OLMo-core, imported only when a replay needs it: a missing package is one line naming the extra that installs it.

>>> EXTRA
'olmo'
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType

from ...errors import MissingExtra

EXTRA = "olmo"
_MODULES = ("olmo_core.data", "olmo_core.data.data_loader", "olmo_core.data.numpy_dataset", "olmo_core.data.utils", "olmo_core.config")


def olmo_core() -> ModuleType:
    """The ``olmo_core`` package with its data modules imported; :class:`MissingExtra` when it is not installed."""
    try:
        for name in _MODULES:
            importlib.import_module(name)
        package = importlib.import_module("olmo_core")
    except ImportError as exc:
        raise MissingExtra(f"replaying an OLMo-core run needs OLMo-core ({exc.name or exc}): pip install 'batchscope[{EXTRA}]'") from exc
    # OLMo-core logs every global-indices file it opens at INFO; a replay opens them on every lookup.
    logging.getLogger("olmo_core.data.data_loader").setLevel(logging.WARNING)
    return package


def installed_version() -> str:
    """The installed OLMo-core's version (``"3.0.0"``)."""
    return importlib.import_module("olmo_core.version").VERSION

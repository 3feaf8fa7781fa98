"""batchscope's public Python API: the read path (``loaders``) under the project's own name.

``from batchscope import Catalog, ReadPlan, Source`` is the same as importing them from
``loaders``; ``batchscope.importers`` holds the importers and ``batchscope.torch``
the PyTorch adapter (imported on use: it needs torch).

>>> from batchscope import Catalog            # doctest: +SKIP
>>> Catalog("batchscope-data").datasets()     # doctest: +SKIP
"""

from loaders import *  # noqa: F401,F403  (re-exported: the public API)
from loaders import __all__ as _loaders_all

from . import importers  # noqa: E402

__all__ = [*_loaders_all, "importers"]

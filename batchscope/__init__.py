"""batchscope's public Python API: the read path (``loaders``) under the project's own name.

``from batchscope import Catalog, ReadPlan, Source`` is the same as importing them from
``loaders``; ``batchscope.importers`` holds the importers, ``batchscope.torch``
the PyTorch adapter (imported on use: it needs torch), and ``batchscope.record``
wraps any loader to write down what it yields (``loaders.record``).

>>> from batchscope import Catalog            # doctest: +SKIP
>>> Catalog("batchscope-data").datasets()     # doctest: +SKIP
"""

from loaders import *  # noqa: F401,F403  (re-exported: the public API)
from loaders import __all__ as _loaders_all
from loaders.record import record  # noqa: E402  (batchscope.record: write down what any loader yields)

from . import importers  # noqa: E402

__all__ = [*_loaders_all, "importers", "record"]

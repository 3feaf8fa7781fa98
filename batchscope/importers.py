"""The importers (JSONL, Parquet, Hugging Face, Mosaic MDS, image folders, WebDataset), as ``batchscope.importers``."""

from loaders.importers import *  # noqa: F401,F403  (re-exported)
from loaders.importers import __all__  # noqa: F401

"""Importers: bring JSONL, Parquet from other tools, Hugging Face folders, Mosaic MDS, image folders and WebDataset tars into the catalog.

Each writes zstd Parquet shards with row groups sized for random access under
``catalog.data_dir(name)`` and registers them as a new version.

>>> from loaders.importers import import_jsonl                    # doctest: +SKIP
>>> import_jsonl(catalog, "notes", ["notes.jsonl"], tag="v1").id  # doctest: +SKIP
"""

from .huggingface import import_huggingface
from .images import import_images
from .jsonl import import_jsonl
from .mds import import_mds
from .parquet import import_parquet
from .webdataset import import_webdataset
from .writer import Progress

__all__ = [
    "Progress",
    "import_huggingface",
    "import_images",
    "import_jsonl",
    "import_mds",
    "import_parquet",
    "import_webdataset",
]

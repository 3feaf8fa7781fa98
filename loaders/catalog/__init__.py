"""The catalog: named, versioned, content-addressed datasets, tags and tokenizers under one root; the manifests
that describe versions, their keys and field kinds, random access to their rows, media stored beside shards, and
filtered copies that drop flagged keys.

``CatalogStore``, ``default_root`` and ``check_name`` are :mod:`loaders.catalog.store`'s, re-exported (``Catalog``,
the store with runs, is :class:`loaders.Catalog`).
"""

from .store import CatalogStore, check_name, default_root

__all__ = ["CatalogStore", "check_name", "default_root"]

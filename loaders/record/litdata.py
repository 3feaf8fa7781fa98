"""Recording a LitData ``StreamingDataLoader``: its order (shuffled chunks across ranks and workers, resumable from
its own state) is not recomputed here, so ``batchscope.record`` writes down what each rank got.

:func:`optimize_version` writes a registered version's rows as LitData chunks with LitData's own ``optimize``, key
column included, so every sample a ``StreamingDataset`` yields carries the key the recorder resolves in ``source``.
``litdata`` is imported on use (the ``litdata`` extra: ``pip install 'batchscope[litdata]'``).

>>> optimize_version(catalog, "web@v1", "chunks/web")                                     # doctest: +SKIP
>>> loader = StreamingDataLoader(StreamingDataset("chunks/web", shuffle=True), batch_size=8)  # doctest: +SKIP
>>> rec = batchscope.record(loader, run="lit", root=catalog.root, rank=rank, world_size=world_size,
...                         source="web@v1", keys=column("id"), hook="litdata")           # doctest: +SKIP
"""

from __future__ import annotations

import functools
import os
from typing import Any

from ..catalog.store import CatalogStore
from ..errors import RegistrationError

EXTRA = "litdata"


def _litdata() -> Any:
    try:
        import litdata
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"recording LitData needs the '{EXTRA}' extra: pip install 'batchscope[{EXTRA}]'") from exc
    return litdata


def _row(index: int, *, root: str, ref: str) -> dict[str, Any]:
    from ..catalog.store import CatalogStore

    return dict(CatalogStore(root).resolve(ref).record(index))


def optimize_version(catalog: CatalogStore, ref: str, output_dir: str | os.PathLike[str], *, chunk_bytes: str = "64MB") -> str:
    """Write every row of version ``ref`` (by record index, in order) as LitData chunks in ``output_dir``."""
    version = catalog.resolve(ref)
    if version.key is None:
        raise RegistrationError(f"{version.ref} has no key column: register it with key=... so recorded rows can be named by key")
    pinned = f"{version.name}@{version.id}"
    _litdata().optimize(
        fn=functools.partial(_row, root=catalog.root, ref=pinned),
        inputs=list(range(version.rows)),
        output_dir=os.fspath(output_dir),
        chunk_bytes=chunk_bytes,
        num_workers=1,
        mode="overwrite",
    )
    return os.fspath(output_dir)

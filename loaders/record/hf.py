"""Recording a Hugging Face ``datasets.IterableDataset`` (streaming, ``shuffle(buffer_size=...)``,
``split_dataset_by_node``): its order cannot be recomputed (a shuffle buffer's contents are lost on resume, as its
own docs say), so ``batchscope.record`` writes down what each rank got.

:func:`streaming` streams a registered version's own pinned Parquet files through ``datasets`` (each file checked
against its registered size first), so every row it yields has the version's key column and the recorder resolves it
as ``source``. ``datasets`` is imported on use (the ``hf`` extra: ``pip install 'batchscope[hf]'``).

>>> ds = streaming(catalog, "web@v1").shuffle(buffer_size=1000, seed=0)            # doctest: +SKIP
>>> ds = split_dataset_by_node(ds, rank=rank, world_size=world_size)              # doctest: +SKIP
>>> rec = batchscope.record(DataLoader(ds, batch_size=8), run="hf", root=catalog.root, rank=rank,
...                         world_size=world_size, source="web@v1", keys=column("id"), hook="hf")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from .. import storage
from ..catalog.store import CatalogStore
from ..errors import CorruptData, RegistrationError

EXTRA = "hf"


def _datasets() -> Any:
    try:
        import datasets
    except ModuleNotFoundError as exc:  # one clear line naming the extra
        raise ModuleNotFoundError(f"recording Hugging Face datasets needs the '{EXTRA}' extra: pip install 'batchscope[{EXTRA}]'") from exc
    return datasets


def streaming(catalog: CatalogStore, ref: str, *, columns: list[str] | None = None) -> Any:
    """A streaming ``datasets.IterableDataset`` over the shards of version ``ref`` (one shard per file, so
    ``split_dataset_by_node`` gives each rank whole files when their count divides the world size)."""
    version = catalog.resolve(ref)
    if version.key is None:
        raise RegistrationError(f"{version.ref} has no key column: register it with key=... so recorded rows can be named by key")
    for shard in version.shards:
        size = storage.stat(shard.uri).size
        if size != shard.size:
            raise CorruptData(f"{shard.uri}: {size} bytes, registered with {shard.size} (changed after registration)")
    files = [storage.normalize(shard.uri) for shard in version.shards]
    dataset = _datasets().load_dataset("parquet", data_files={"train": files}, split="train", streaming=True)
    return dataset.select_columns(columns) if columns is not None else dataset

"""Recording torchtitan's text data loader (``HuggingFaceTextDataset`` under a ``ParallelAwareDataloader``): it
tokenizes documents into one stream and cuts it into ``seq_len`` windows, so a sample is no row of any version; the
recorder keeps each window's token ids and labels for themselves (registered with the run's tokenizer, so pages draw
the tokens).

:func:`register_version` adds a registered version to torchtitan's own table of datasets (``DATASETS``), loading the
version's pinned Parquet files. ``torchtitan`` is imported on use (the ``torchtitan`` extra).

>>> name = register_version(catalog, "web@v1", text="text")                                   # doctest: +SKIP
>>> dataset = HuggingFaceTextDataset(name, None, tokenizer, seq_len=2048, dp_rank=r, dp_world_size=w)  # doctest: +SKIP
>>> rec = batchscope.record(ParallelAwareDataloader(dataset, r, w, batch_size=8), run="titan", root=catalog.root,
...                         rank=r, world_size=w, samples=batch_samples, tokenizer="my-bpe", hook="torchtitan")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from .. import storage
from ..catalog.store import CatalogStore
from .extract import samples as generic_samples

EXTRA = "torchtitan"


def _text_datasets() -> Any:
    try:
        from torchtitan.hf_datasets import DatasetConfig, text_datasets
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"recording torchtitan needs the '{EXTRA}' extra: pip install 'batchscope[{EXTRA}]'") from exc
    return DatasetConfig, text_datasets


def register_version(catalog: CatalogStore, ref: str, *, text: str = "text") -> str:
    """Add version ``ref`` (its ``text`` column) to torchtitan's datasets; returns the name to build it by."""
    from datasets import load_dataset

    version = catalog.resolve(ref)
    files = [storage.normalize(shard.uri) for shard in version.shards]
    name = f"batchscope:{version.name}@{version.id}"
    config, text_datasets = _text_datasets()
    text_datasets.DATASETS[name] = config(
        path=name,
        loader=lambda _path: load_dataset("parquet", data_files={"train": files}, split="train"),
        sample_processor=lambda sample: sample[text],
    )
    return name


def batch_samples(batch: Any) -> list[dict[str, Any]]:
    """torchtitan's ``(inputs, labels)`` as one dict per sample: ``input_ids`` (its ``input`` window), ``labels`` and
    any other per-sample input (positions)."""
    inputs, labels = batch
    columns = {("input_ids" if k == "input" else k): v for k, v in inputs.items()}
    return generic_samples({**columns, "labels": labels})

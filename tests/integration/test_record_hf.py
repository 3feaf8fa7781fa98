"""Recording a Hugging Face IterableDataset read with a shuffle buffer and split_dataset_by_node over 2 ranks: each
rank's recorded steps are exactly the batches it trained on, and the rows read back are the rows it yielded."""

from __future__ import annotations

import batchscope
from loaders import Catalog
from loaders.record import column
from loaders.record.hf import streaming
from tests.support.readpath import write_text_dataset


def test_shuffled_split_stream_is_recorded_exactly_per_rank(tmp_path):
    from datasets.distributed import split_dataset_by_node
    from torch.utils.data import DataLoader

    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "web", 48, row_group=4, shards=4)
    seen: dict[int, list[list[str]]] = {}
    texts: dict[str, str] = {}
    for rank in range(2):
        stream = split_dataset_by_node(streaming(catalog, "web@v1").shuffle(buffer_size=8, seed=3), rank=rank, world_size=2)
        loader = DataLoader(stream, batch_size=4)
        rec = batchscope.record(
            loader, run="hf", root=catalog.root, rank=rank, world_size=2, source="web@v1", keys=column("id"), hook="hf", flush_seconds=0
        )
        seen[rank] = []
        for batch in rec:
            seen[rank].append(list(batch["id"]))
            texts.update(zip(batch["id"], batch["text"]))
            rec.log(rec.step - 1, loss=float(len(seen[rank])))
    run = catalog.run("hf")
    assert run.total_steps == 6 and run.manifest["recorded"]["hook"] == "hf"
    everything = sorted(k for rank in seen for step in seen[rank] for k in step)
    assert everything == sorted(f"web-{i}" for i in range(48))  # one epoch, each row once over both ranks
    assert seen[0] != [sorted(s) for s in seen[0]]  # the buffer shuffled
    for rank in range(2):
        for step, keys in enumerate(seen[rank]):
            batch = run.batch(step, rank)
            assert batch.keys == keys and [s.record["text"] for s in batch.samples] == [texts[k] for k in keys]
            assert run.compare(batch).status == "recorded"

"""numpy collation: regular numeric inputs become arrays, text and nested values stay lists, provenance comes along."""

from __future__ import annotations

import numpy as np

from loaders import Catalog, Pack, ReadPlan, Source, Tokenize
from loaders.sampling.collate import collate_numpy
from tests.support.readpath import words_tokenizer_json, write_text_dataset


def test_text_and_packed_batches_collate_to_arrays_and_lists(tmp_path):
    catalog = Catalog(tmp_path / "c")
    write_text_dataset(catalog, "alpha", 40, row_group=4, shards=2)
    catalog.put_tokenizer("words", words_tokenizer_json())
    text = catalog.create_run("text", ReadPlan([Source("alpha@v1")], seed=1, global_batch_size=4, steps=5, streams=2))
    batch = text.batch(3, 1, world_size=2)
    arrays = collate_numpy(batch)
    assert arrays["index"].dtype == np.int64 and arrays["index"].tolist() == batch.indices
    assert arrays["key"] == batch.keys and arrays["text"] == [r["text"] for r in batch.records]
    assert arrays["digest"] == batch.digest and (arrays["step"], arrays["rank"]) == (3, 1)
    with text.reader(1, 2, ledger=False) as reader:
        collated = list(reader.numpy())
    assert [c["digest"] for c in collated] == [text.batch(s, 1, world_size=2).digest for s in range(5)]

    packed = catalog.create_run(
        "packed",
        ReadPlan(
            [Source("alpha@v1", transforms=[Tokenize("text", tokenizer="words")])],
            seed=1,
            global_batch_size=4,
            steps=3,
            streams=2,
            transforms=[Pack(seq_len=16, docs_per_block=8)],
        ),
    )
    batch = packed.batch(1, 0, world_size=1)
    arrays = collate_numpy(batch)
    assert arrays["input_ids"].shape == (4, 16) and arrays["input_ids"].dtype.kind == "i"
    assert arrays["loss_mask"].tolist() == [s.inputs["loss_mask"] for s in batch.samples]
    assert arrays["doc_spans"] == [s.inputs["doc_spans"] for s in batch.samples]  # nested: kept as lists

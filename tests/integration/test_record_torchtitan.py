"""Recording torchtitan's own text data loader on 2 data-parallel ranks (its dp_rank/dp_world_size): the token
windows each rank's trainer got are kept, read back exactly, and drawn as tokens with the run's tokenizer."""

from __future__ import annotations

import batchscope
from loaders import Catalog
from loaders.record.torchtitan import batch_samples, register_version
from tests.support.readpath import words_tokenizer_json, write_text_dataset


def test_token_windows_of_each_rank_are_recorded_and_read_back(tmp_path):
    from torchtitan.components.dataloader import ParallelAwareDataloader
    from torchtitan.components.tokenizer import HuggingFaceTokenizer
    from torchtitan.hf_datasets.text_datasets import HuggingFaceTextDataset

    catalog = Catalog(tmp_path / "catalog")
    write_text_dataset(catalog, "web", 24, row_group=4, shards=2)
    catalog.put_tokenizer("words", words_tokenizer_json())
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text(words_tokenizer_json())
    tokenizer = HuggingFaceTokenizer(tokenizer_path=str(tmp_path / "tok"))
    name = register_version(catalog, "web@v1")
    yielded = {}
    for rank in range(2):
        dataset = HuggingFaceTextDataset(name, None, tokenizer, seq_len=8, dp_rank=rank, dp_world_size=2)
        loader = ParallelAwareDataloader(dataset, rank, 2, batch_size=2)
        rec = batchscope.record(
            loader, run="titan", root=catalog.root, rank=rank, world_size=2, samples=batch_samples, tokenizer="words", hook="torchtitan",
            flush_seconds=0,
        )  # fmt: skip
        yielded[rank] = [(inputs["input"].tolist(), labels.tolist()) for inputs, labels in rec]
    run = catalog.run("titan")
    assert run.hook == "torchtitan" and len(yielded[0]) >= 3 and yielded[0] != yielded[1]
    for rank in range(2):
        for step, (inputs, labels) in enumerate(yielded[rank]):
            batch = run.batch(step, rank)
            assert [s.record["input_ids"] for s in batch.samples] == inputs
            assert [s.record["labels"] for s in batch.samples] == labels
    version = run.version(run.batch(0, 0).samples[0].documents[0].source)
    assert version.tokenizer == "words" and version.kinds["input_ids"] == "tokens"

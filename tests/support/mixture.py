"""A catalog of mixed runs for the realized-mixture pages: three sources of unequal weights, unpacked and packed."""

from __future__ import annotations

from pathlib import Path

from loaders import Catalog, Pack, ReadPlan, Shuffle, Source, Tokenize
from tests.support.readpath import words_tokenizer_json, write_text_dataset

NAMES = ("alpha", "beta", "gamma")
WEIGHTS = (5.0, 2.0, 1.0)
STEPS = 30


def build_mixture_catalog(root: Path) -> Catalog:
    """``mixed`` (unpacked, tokenized: tokens measured) and ``mixed-packed`` (lossless packing: all exact)."""
    catalog = Catalog(root / "catalog")
    for i, name in enumerate(NAMES):
        write_text_dataset(catalog, name, 23 + 17 * i, row_group=3, shards=2)
    catalog.put_tokenizer("words", words_tokenizer_json())
    tokenize = [Tokenize("text", tokenizer="words")]
    sources = [Source(f"{n}@v1", weight=w, transforms=tokenize) for n, w in zip(NAMES, WEIGHTS)]
    common = dict(seed=3, global_batch_size=6, streams=3, steps=STEPS, shuffle=Shuffle(chunk_size=4, window_chunks=2), mixture_block=64)
    catalog.create_run("mixed", ReadPlan(sources, **common))
    catalog.create_run("mixed-packed", ReadPlan(sources, transforms=[Pack(seq_len=11)], **common))
    return catalog

"""Shared helpers for read-path tests: tiny real catalogs and the invariant checks every reader configuration must pass."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from loaders import Catalog, ReadPlan, Run, Source


def write_text_dataset(
    catalog: Catalog, name: str, rows: int, *, row_group: int = 3, shards: int = 2, tag: str = "v1", prefix: str | None = None
):
    """Register a text dataset of ``rows`` rows with keys ``{prefix}{i}`` split over ``shards`` files."""
    prefix = prefix if prefix is not None else f"{name}-"
    directory = Path(catalog.root) / "src" / name / tag
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "id": [f"{prefix}{i}" for i in range(rows)],
            "text": [f"document {i} of {name}: " + "word " * (i % 7 + 1) for i in range(rows)],
        }
    )
    per_shard = max(1, -(-rows // shards))
    paths = []
    for number, start in enumerate(range(0, rows, per_shard)):
        path = directory / f"part-{number}.parquet"
        pq.write_table(table.slice(start, per_shard), path, row_group_size=row_group)
        paths.append(str(path))
    return catalog.register(name, paths, key="id", tag=tag)


def words_tokenizer_json() -> str:
    """A word-level tokenizer (``tokenizers`` JSON) knowing every word ``write_text_dataset`` writes."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<|endoftext|>": 0, "<|pad|>": 1, "[UNK]": 2}
    for word in ["document", "of", "word", "alpha", "beta", ":"] + [str(i) for i in range(200)]:
        vocab.setdefault(word, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer.to_str()


def alpha_beta_catalog(root: Path, *, tokenizer: bool = True) -> Catalog:
    """A catalog at ``root`` of ``alpha@v1`` (97 rows, 3 shards, row groups of 3) and ``beta@v1`` (31 rows, 1 shard,
    row groups of 2), with the ``words`` tokenizer unless ``tokenizer`` is False."""
    catalog = Catalog(root)
    write_text_dataset(catalog, "alpha", 97, row_group=3, shards=3)
    write_text_dataset(catalog, "beta", 31, row_group=2, shards=1)
    if tokenizer:
        catalog.put_tokenizer("words", words_tokenizer_json())
    return catalog


def batch_view(batch) -> list[tuple[int, str, str]]:
    """What must match between two ways of reading a batch: index, key and sample digest."""
    return [(s.index, s.key, s.digest) for s in batch.samples]


def assert_partition(run: Run, world_sizes: Iterable[int], steps: Iterable[int]) -> None:
    """For each step, every allowed world size's ranks together read exactly the world-size-1 batch, in order."""
    for step in steps:
        whole = batch_view(run.batch(step, 0, world_size=1))
        for world_size in world_sizes:
            joined = [item for rank in range(world_size) for item in batch_view(run.batch(step, rank, world_size=world_size))]
            assert joined == whole, f"step {step}: world size {world_size} differs from world size 1"


def read_all(run: Run, rank: int, world_size: int, **options) -> list[list[tuple[int, str, str]]]:
    with run.reader(rank, world_size, **options) as reader:
        return [batch_view(b) for b in reader]


def assert_resumes_identically(run: Run, rank: int, world_size: int, stop_after: int, **options) -> None:
    """Stop a reader after training ``stop_after`` batches, resume a new one from its state: together they equal one run."""
    uninterrupted = read_all(run, rank, world_size, ledger=False, **options)
    first: list = []
    with run.reader(rank, world_size, ledger=False, **options) as reader:
        for batch in reader:
            first.append(batch_view(batch))
            reader.mark_trained(batch.step)
            if len(first) == stop_after:
                state = reader.state_dict()
                break
        else:
            state = reader.state_dict()
    with run.reader(rank, world_size, ledger=False, **options) as resumed:
        resumed.load_state_dict(state)
        rest = [batch_view(b) for b in resumed]
    assert first + rest == uninterrupted


def text_run(root: Path, *, steps: int, global_batch_size: int, rows: int = 50, trained: bool = True) -> Run:
    """A run ``job`` over a text dataset; ``trained``: read to the end by one rank that logged (so marked trained)
    every step."""
    catalog = Catalog(root / "catalog")
    write_text_dataset(catalog, "alpha", rows, row_group=3, shards=2)
    run = catalog.create_run("job", ReadPlan([Source("alpha@v1")], seed=2, global_batch_size=global_batch_size, steps=steps, streams=2))
    if trained:
        with run.reader(0, 1, flush_seconds=0) as reader:
            for batch in reader:
                reader.log(batch.step, loss=1.0)
    return run


Reads = dict[tuple[int, int], set[tuple[int, int, int, int, int]]]


def forward_reads(run: Run) -> Reads:
    """Every (source, record) → {(epoch, step, rank, world size, sample)}, by reading every step (tests only).

    The forward scan that ``loaders.sampling.where`` must agree with without doing it.
    """
    packed = run.plan.pack is not None
    seen: Reads = defaultdict(set)
    for step in range(run.total_steps):
        world_size = run.world_size_at(step)
        for rank in range(world_size):
            for i, sample in enumerate(run.batch(step, rank, world_size=world_size).samples):
                for doc in sample.documents:
                    if packed and doc.span is None:
                        continue  # an all-padding sequence names a document it does not hold
                    record = run.version(doc.source).index_of(doc.address.shard, doc.address.row)
                    seen[(doc.source, record)].add((doc.epoch, step, rank, world_size, i))
    return seen

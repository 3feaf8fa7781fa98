"""Shared fixtures: one small inspector catalog (text, chat, packed tokens) built once per session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog

if TYPE_CHECKING:
    from tests.support.pairs import DiffCatalog

pytest_plugins = ["tests.support.s3server", "tests.support.nginx", "tests.support.ray_cluster"]

# The seal key of derived files lives outside the catalog (``loaders.storage.seal``): tests keep theirs (and every
# server and command they start) in a temporary directory, never in the home directory.
os.environ.setdefault("BATCHSCOPE_DERIVED_KEY_FILE", os.path.join(tempfile.mkdtemp(prefix="batchscope-key-"), "derived.key"))

ROW_GROUP = 3
CHAT_TOKENIZER = "chat-words"


def write_parquet(table: pa.Table, directory: Path, *, shards: int = 1, row_group: int = ROW_GROUP) -> list[str]:
    """Write ``table`` as ``shards`` Parquet files with small row groups; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    per = max(1, -(-len(table) // shards))
    paths = []
    for number, start in enumerate(range(0, len(table), per)):
        path = directory / f"part-{number}.parquet"
        pq.write_table(table.slice(start, per), path, row_group_size=row_group)
        paths.append(str(path))
    return paths


def word_tokenizer(words: list[str]) -> str:
    """A word-level Hugging Face tokenizer (JSON) with the ChatML special tokens, built offline."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from loaders.transforms.chat import SPECIAL_TOKENS

    vocab = {"[UNK]": 0}
    for word in words:
        vocab.setdefault(word, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer.to_str()


CHATS = [
    [{"role": "user", "content": "what is two plus two"}, {"role": "assistant", "content": "two plus two is four"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "name a colour"}, {"role": "assistant", "content": "blue"}],
    [{"role": "user", "content": "say hello"}, {"role": "assistant", "content": "hello there"}],
]


def _chat_table(catalog: Catalog) -> pa.Table:
    """Three chats rendered by the read path's ChatML template: one good, one missing ``<|im_end|>``, one mask shifted by one."""
    from loaders.transforms.chat import IM_END, render_chat

    words = sorted({w for chat in CHATS for m in chat for w in (m["role"] + " " + m["content"]).split()})
    catalog.put_tokenizer(CHAT_TOKENIZER, word_tokenizer(words))
    tokenizer = catalog.tokenizer(CHAT_TOKENIZER)
    ids, masks = [], []
    for number, chat in enumerate(CHATS):
        rendered = render_chat(chat, tokenizer)
        chat_ids, mask = list(rendered.input_ids), list(rendered.loss_mask)
        if number == 1:  # drop the final <|im_end|>
            end = tokenizer.token_to_id(IM_END)
            last = max(i for i, t in enumerate(chat_ids) if t == end)
            del chat_ids[last], mask[last]
        if number == 2:  # shift the mask right by one
            mask = [0] + mask[:-1]
        ids.append(chat_ids)
        masks.append(mask)
    return pa.table(
        {
            "id": ["good", "no-im-end", "shifted-mask"],
            "messages": pa.array(CHATS, pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            "input_ids": pa.array(ids, pa.list_(pa.int32())),
            "loss_mask": pa.array(masks, pa.list_(pa.int8())),
        }
    )


def build_inspector_catalog(root: Path) -> Catalog:
    """``docs`` (v1, v2: 12 then 11 text rows in 2 shards), ``chat`` (3 ChatML rows) and ``packed`` (2 packed sequences)."""
    catalog = Catalog(root / "catalog")
    rows = 12
    docs = pa.table(
        {
            "id": [f"doc-{i}" for i in range(rows)],
            "text": [f"document {i}: " + ("alpha " if i % 3 == 0 else "beta ") * (i + 1) for i in range(rows)],
            "score": [i / 4 for i in range(rows)],
            "meta": [{"source": "web" if i % 2 else "books", "lang": "en"} for i in range(rows)],
            "blob": [bytes([i]) * (i + 1) for i in range(rows)],
        }
    )
    catalog.register("docs", write_parquet(docs, root / "src" / "docs-v1", shards=2), key="id", tag="v1")
    catalog.register("docs", write_parquet(docs.slice(1), root / "src" / "docs-v2", shards=2), key="id", tag="v2")
    catalog.register("chat", write_parquet(_chat_table(catalog), root / "src" / "chat"), key="id", tag="v1", tokenizer=CHAT_TOKENIZER)
    packed = pa.table(
        {
            "id": ["pack-0", "pack-1"],
            "input_ids": pa.array([[5, 6, 7, 8, 9, 10], [11, 12, 13, 14]], pa.list_(pa.int32())),
            "position_ids": pa.array([[0, 1, 2, 0, 1, 2], [0, 1, 0, 1]], pa.list_(pa.int32())),
            "loss": pa.array([[0.5, 1.5, 2.5, 3.5, None, 0.1], [1.0, 1.0, 2.0, 3.0]], pa.list_(pa.float32())),
        }
    )
    catalog.register("packed", write_parquet(packed, root / "src" / "packed"), key="id", tag="v1")
    return catalog


@pytest.fixture(scope="session")
def inspector_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The shared small catalog; tests must not change it (flags go to a per-test database)."""
    return build_inspector_catalog(tmp_path_factory.mktemp("inspector"))


def build_runs_catalog(root: Path) -> Catalog:
    """Runs over real data: ``pretrain`` (packed, trained on 2 ranks then resumed on 1, losses logged) and ``plain`` (no ledger)."""
    import numpy as np

    from loaders import Pack, ReadPlan, Source, Tokenize
    from tests.support.tiny_lm import OnlineUnigram

    catalog = Catalog(root / "catalog")
    words = ["alpha", "beta", "gamma", "delta", "<|endoftext|>"] + [f"w{i}" for i in range(40)]
    catalog.put_tokenizer("words", word_tokenizer(words))
    docs = pa.table(
        {
            "id": [f"doc-{i}" for i in range(40)],
            "text": [
                " ".join(["alpha", "beta", "gamma", "delta"][i % 4] + f" w{(i * j) % 40}" for j in range(2 + i % 5)) for i in range(40)
            ],
        }
    )
    catalog.register("docs", write_parquet(docs, root / "src" / "docs", shards=2), key="id", tag="v1", tokenizer="words")
    catalog.register("docs", write_parquet(docs.slice(3), root / "src" / "docs-v2", shards=2), key="id", tag="v2", tokenizer="words")
    pretrain = catalog.create_run(
        "pretrain",
        ReadPlan(
            [Source("docs@v1", transforms=[Tokenize("text")])],
            seed=7,
            global_batch_size=4,
            steps=12,
            streams=2,
            transforms=[Pack(seq_len=24, docs_per_block=6)],
        ),
    )
    model = OnlineUnigram(catalog.tokenizer("words").get_vocab_size())

    def train(world_size: int, steps: range, state: dict | None) -> dict:
        readers = [pretrain.reader(r, world_size, start_step=steps.start, end_step=steps.stop, flush_seconds=0) for r in range(world_size)]
        for reader in readers:
            if state:
                reader.load_state_dict(state)
        for batches in zip(*readers):
            for reader, batch in zip(readers, batches):
                loss, per_sample = model.step(
                    np.array([s.inputs["input_ids"] for s in batch.samples]), np.array([s.inputs["loss_mask"] for s in batch.samples])
                )
                reader.log(batch.step, loss=loss, sample_loss=per_sample)
        saved = readers[0].state_dict()
        for reader in readers:
            reader.close()
        return saved

    state = train(2, range(0, 6), None)
    train(1, range(6, 12), state)
    catalog.create_run("plain", ReadPlan([Source("docs@v1")], seed=1, global_batch_size=4, steps=6, streams=4))
    return catalog


@pytest.fixture(scope="session")
def runs_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """A catalog with trained runs (see :func:`build_runs_catalog`); tests must not change it."""
    return build_runs_catalog(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="session")
def diff_catalog(tmp_path_factory: pytest.TempPathFactory) -> DiffCatalog:
    """Small v1/v2 pairs of text, chat tokens, images and clips with the changes between them; tests must not change it."""
    from tests.support.pairs import build_diff_catalog

    return build_diff_catalog(tmp_path_factory.mktemp("diffs"))


@pytest.fixture(scope="session")
def demo_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The real demo workspace (every dataset in v1 and v2, trained runs), built once per session."""
    import fcntl

    from batchscope_demo import ensure_demo

    # xdist workers of one run share one build (it takes most of a minute): the first builds it under a lock, the
    # others find it complete (tests only read it, and what they derive is written atomically)
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-demo"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return ensure_demo(str(shared / "workspace"), log=lambda _message: None)


@pytest.fixture(scope="session")
def lint_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """A catalog with one planted bug of every kind ``batchscope lint`` checks (``tests.support.lint_catalog``); tests
    must not change it."""
    from tests.support.lint_catalog import build_lint_catalog

    return build_lint_catalog(tmp_path_factory.mktemp("lint"))

"""The shard formats replays register their frameworks' files as, read in place: megatron's ``.bin``/``.idx`` pairs,
token files cut into documents by OLMo-core's rule, Mosaic MDS shards. Each is a version like any other (records,
keys, row groups of several records), every read checked: a byte changed in any file it reads is refused, naming it.
(That their records are what the frameworks read is proven against the frameworks in the ``*_attach`` tests.)"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from loaders import Catalog
from loaders.catalog.version import clear_read_caches
from loaders.errors import ChecksumMismatch, RegistrationError
from loaders.storage import mds, megatron_indexed, numpy_tokens
from loaders.storage.formats import format_name, shard_format
from loaders.storage.megatron_indexed import write_indexed

SEQUENCES = [[5, 6, 7], [8], [9, 10, 11, 12], [13, 14], [15]]


def _flip(path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    clear_read_caches()


def test_megatron_sequences_are_records_checked_in_both_the_bin_and_the_idx(tmp_path, monkeypatch):
    monkeypatch.setattr(megatron_indexed, "GROUP_BYTES", 8)
    write_indexed(str(tmp_path / "corpus"), SEQUENCES, dtype=np.uint16)
    catalog = Catalog(tmp_path / "catalog")
    version = catalog.register("corpus", [str(tmp_path / "corpus.bin")], shard_format="megatron-indexed")
    assert version.shards[0].row_groups == (2, 1, 2) and version.kinds["tokens"] == "tokens"
    assert [version.record(i) for i in range(5)] == [{"document": i, "tokens": s} for i, s in enumerate(SEQUENCES)]
    _flip(tmp_path / "corpus.bin", 10)  # a token of sequence 2, in row group 1
    fresh = Catalog(catalog.root).resolve("corpus@latest")
    assert fresh.record(0)["tokens"] == SEQUENCES[0]
    with pytest.raises(ChecksumMismatch, match=r"corpus\.idx and its \.bin\): row group 1 of shard .*corpus\.bin .* does not match"):
        fresh.record(2)
    _flip(tmp_path / "corpus.bin", 10)
    _flip(tmp_path / "corpus.idx", 34 + 4 * 3)  # the length of sequence 3, in row group 2
    with pytest.raises(ChecksumMismatch, match=r"row group 2 of shard .*corpus\.bin"):
        Catalog(catalog.root).resolve("corpus@latest").record(3)
    _flip(tmp_path / "corpus.idx", 34 + 4 * 3)
    _flip(tmp_path / "corpus.idx", 34 + 12 * 5 + 8)  # a document index: checked when the shard is opened
    with pytest.raises(ChecksumMismatch, match=r"index .*corpus\.idx of shard .*corpus\.bin changed after registration"):
        shard_format(version.shard_format).open(version.shards[0], where="corpus")


def test_a_megatron_index_that_does_not_describe_its_bin_is_refused(tmp_path):
    write_indexed(str(tmp_path / "corpus"), SEQUENCES, dtype=np.int32)
    with open(tmp_path / "corpus.bin", "ab") as f:
        f.write(b"\0\0\0\0")
    with pytest.raises(RegistrationError, match=r"corpus\.idx: its sequences hold 44 bytes, .*corpus\.bin has 48"):
        megatron_indexed.scan(str(tmp_path / "corpus.bin"))
    (tmp_path / "corpus.idx").write_bytes(b"MMIDIDX\0\0" + struct.pack("<QBQQ", 2, 4, 0, 1) + bytes(8))
    with pytest.raises(RegistrationError, match=r"megatron index version 2 with dtype code 4 is not readable"):
        megatron_indexed.scan(str(tmp_path / "corpus.bin"))


@pytest.mark.parametrize(
    "bos, documents",
    [(None, [[3, 0], [1, 4, 0], [5, 0], [1, 2, 0], [6, 7]]), (1, [[3, 0], [1, 4, 0, 5, 0], [1, 2, 0, 6, 7]])],
)
def test_token_files_are_cut_into_documents_by_olmo_cores_rule(tmp_path, monkeypatch, bos, documents):
    monkeypatch.setattr(numpy_tokens, "GROUP_BYTES", 6)
    tokens = [3, 0, 1, 4, 0, 5, 0, 1, 2, 0, 6, 7]  # EOS 0, BOS 1; 6 7 is an unterminated tail
    np.asarray(tokens, dtype=np.uint16).tofile(tmp_path / "part-0.npy")
    catalog = Catalog(tmp_path / "catalog")
    fmt = format_name("numpy-tokens", dtype="uint16", eos=0, bos=bos)
    version = catalog.register("tokens", [str(tmp_path / "part-0.npy")], shard_format=fmt)
    assert [version.record(i)["tokens"] for i in range(version.rows)] == documents
    assert [version.record(i)["start"] for i in range(version.rows)] == np.cumsum([0] + [len(d) for d in documents])[:-1].tolist()
    assert len(version.shards[0].row_groups) > 1
    other = catalog.register("tokens", [str(tmp_path / "part-0.npy")], shard_format=format_name("numpy-tokens", dtype="uint16", eos=7))
    assert other.id != version.id, "the options that cut the documents are part of the version"
    _flip(tmp_path / "part-0.npy", 2 * 11)
    with pytest.raises(ChecksumMismatch, match=r"row group \d+ of shard .*part-0\.npy .* does not match"):
        Catalog(catalog.root).resolve(f"tokens@{version.id}").record(version.rows - 1)


def test_token_files_need_their_options(tmp_path):
    np.zeros(4, dtype=np.uint32).tofile(tmp_path / "part.npy")
    catalog = Catalog(tmp_path / "catalog")
    with pytest.raises(RegistrationError, match=r"numpy-tokens format needs its options: numpy-tokens\?dtype=uint16&eos=0"):
        catalog.register("t", [str(tmp_path / "part.npy")], shard_format="numpy-tokens")
    with pytest.raises(RegistrationError, match=r"numpy-tokens takes dtype \(uint8, uint16, uint32, uint64\), eos"):
        catalog.register("t", [str(tmp_path / "part.npy")], shard_format="numpy-tokens?dtype=int7&eos=0")
    with pytest.raises(RegistrationError, match=r"shard format 'parquet' takes no options"):
        catalog.register("t", [str(tmp_path / "part.npy")], shard_format="parquet?x=1")


def test_mds_shards_are_read_in_place_with_the_columns_their_index_names(tmp_path, monkeypatch):
    from loaders.replay.streaming import demo_streams

    monkeypatch.setattr(mds, "GROUP_BYTES", 200)
    folder = demo_streams(str(tmp_path / "streams"), web=0, code=12, pictures=3, shard_bytes=900)
    code = tmp_path / "streams" / "code"
    shards = [str(code / s["raw_data"]["basename"]) for s in json.loads((code / "index.json").read_text())["shards"]]
    catalog = Catalog(tmp_path / "catalog")
    version = catalog.register("code", shards, shard_format="mds")
    assert version.kinds["tokens"] == "tokens" and version.rows == 12 and max(len(s.row_groups) for s in version.shards) > 1
    records = [version.record(i) for i in range(12)]
    assert [r["text"].split(":")[0] for r in records] == [f"code-{i}" for i in range(12)]
    assert all(isinstance(r["tokens"], list) and all(isinstance(t, int) for t in r["tokens"]) for r in records)
    pictures = catalog.register("pictures", [f"{folder}/pictures/shard.00000.mds"], shard_format="mds")
    assert pictures.record(0)["image"]["bytes"].startswith(b"\x89PNG")
    index = json.loads((code / "index.json").read_text())
    index["shards"][0]["column_encodings"] = ["str", "ndarray:int16"]
    (code / "index.json").write_text(json.dumps(index))
    with pytest.raises(ChecksumMismatch, match=r"shard .*shard\.00000\.mds or its columns in .*index\.json changed after registration"):
        shard_format("mds").open(version.shards[0], where="code")

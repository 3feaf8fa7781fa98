"""The version diff engine on tiny real catalogs: properties against a naive diff, shards never read, fields, paging, errors."""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders import BatchscopeError, Catalog, ChecksumMismatch
from loaders.catalog.records import content_key
from loaders.diff import diff_versions, seq_ops, struct_paths, text_ops
from loaders.diff.fields import field_diff, media_summary
from loaders.diff.hashing import equal_values, hash_array
from loaders.diff.schema import diff_shards
from tests.support.versions import Changes, register_pair, write_shards

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("text", pa.string()),
        ("score", pa.float64()),
        ("tokens", pa.list_(pa.int32())),
        ("meta", pa.struct([("a", pa.int64()), ("tags", pa.list_(pa.string()))])),
    ]
)
COMPARED = ["text", "score", "tokens", "meta"]
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

values = st.fixed_dictionaries(
    {
        "text": st.one_of(st.none(), st.text(alphabet="ab cd.", max_size=10)),
        "score": st.sampled_from([None, 0.0, -0.0, 1.5, math.nan]),
        "tokens": st.one_of(st.none(), st.lists(st.integers(0, 4), max_size=4)),
        "meta": st.one_of(st.none(), st.fixed_dictionaries({"a": st.integers(0, 2), "tags": st.lists(st.sampled_from("xy"), max_size=2)})),
    }
)


def put(
    catalog: Catalog,
    name: str,
    tag: str,
    rows: list[dict[str, Any]],
    *,
    schema: pa.Schema = SCHEMA,
    key: str | None = "id",
    per_shard: int = 4,
    kinds: dict[str, str] | None = None,
    allow_duplicate_keys: bool = False,
):
    """Write ``rows`` as Parquet shards of 2-row row groups and register them as ``name@tag``."""
    table = pa.Table.from_pylist(rows, schema=schema)
    paths = write_shards(table, os.path.join(catalog.root, "src", name, tag), rows_per_shard=per_shard, row_group_size=2)
    return catalog.register(name, paths, key=key, tag=tag, kinds=kinds, allow_duplicate_keys=allow_duplicate_keys)


def everything(diff) -> list:
    return list(diff.iter_rows(page=3))


def by_change(diff) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"added": set(), "removed": set(), "changed": set(), "edited": set()}
    for row in everything(diff):
        out[row.change].add(row.key)
    return out


def fingerprint(row: dict[str, Any], columns: list[str]) -> str:
    return content_key({c: row[c] for c in columns})


def naive_keyed(rows_a: list[dict], rows_b: list[dict], key: str) -> dict[str, set[str]]:
    a, b = {str(r[key]): r for r in rows_a}, {str(r[key]): r for r in rows_b}
    common = a.keys() & b.keys()
    changed = {k for k in common if fingerprint(a[k], COMPARED) != fingerprint(b[k], COMPARED)}
    return {"added": b.keys() - a.keys(), "removed": a.keys() - b.keys(), "changed": changed, "unchanged": common - changed}


def drop_unchanged_shards(a, b) -> int:
    """Delete the files of shards both versions share by checksum: a diff that read one would fail."""
    pairs = diff_shards(a, b).unchanged
    for i, j in pairs:
        for uri in (a.shards[i].uri, b.shards[j].uri):
            if os.path.exists(uri):
                os.remove(uri)
    return len(pairs)


@st.composite
def keyed_versions(draw):
    """Two versions of a keyed table: edits, removals and additions, in place or reordered, int or string keys."""
    keys = draw(st.lists(st.integers(0, 60), min_size=1, max_size=14, unique=True))
    rows_a = [{"id": k, **draw(values)} for k in keys]
    rows_b = []
    for row in rows_a:
        fate = draw(st.sampled_from(["keep", "keep", "edit", "drop"]))
        if fate == "keep":
            rows_b.append(dict(row))
        elif fate == "edit":
            rows_b.append({"id": row["id"], **draw(values)})
    rows_b += [{"id": 100 + k, **draw(values)} for k in draw(st.lists(st.integers(0, 20), max_size=4, unique=True))]
    if not rows_b:
        rows_b.append({"id": 999, **draw(values)})
    if draw(st.booleans()):
        rows_b = draw(st.permutations(rows_b))
    string_keys = draw(st.booleans())
    if string_keys:
        for row in rows_a + rows_b:
            row["id"] = f"k{row['id']}"
    return rows_a, rows_b, string_keys, draw(st.integers(2, 5))


@PROPERTY
@given(keyed_versions())
def test_keyed_diff_matches_naive_and_mirrors(case):
    rows_a, rows_b, string_keys, per_shard = case
    schema = SCHEMA.set(0, pa.field("id", pa.string())) if string_keys else SCHEMA
    with tempfile.TemporaryDirectory() as root:
        catalog = Catalog(root)
        a = put(catalog, "t", "v1", rows_a, schema=schema, per_shard=per_shard)
        b = put(catalog, "t", "v2", rows_b, schema=schema, per_shard=per_shard)
        drop_unchanged_shards(a, b)  # from here on, reading a shared shard raises

        same = diff_versions(a, a, cache=False)
        assert same.identical and same.counts.different == 0 and same.counts.unchanged == len(rows_a)
        assert same.rows() == []

        expected = naive_keyed(rows_a, rows_b, "id")
        forward = diff_versions(a, b, cache=False)
        got = by_change(forward)
        assert {k: got[k] for k in ("added", "removed", "changed")} == {k: expected[k] for k in ("added", "removed", "changed")}
        assert forward.counts.to_json() == {
            "added": len(expected["added"]),
            "removed": len(expected["removed"]),
            "changed": len(expected["changed"]),
            "edited": 0,
            "unchanged": len(expected["unchanged"]),
        }
        assert forward.identical == (not any(expected[k] for k in ("added", "removed", "changed")))

        spilled = diff_versions(a, b, cache=False, partition_rows=2, workers=1)
        assert spilled.changes.equals(forward.changes)

        backward = diff_versions(b, a, cache=False)
        back = by_change(backward)
        assert back["added"] == got["removed"] and back["removed"] == got["added"] and back["changed"] == got["changed"]
        forward_fields = {r.key: r.fields for r in everything(forward) if r.change == "changed"}
        for row in everything(backward):
            if row.change != "changed":
                continue
            there = forward_fields[row.key]
            assert [f.column for f in row.fields] == [f.column for f in there]
            flip = {"added": "removed", "removed": "added", "changed": "changed"}
            for mine, theirs in zip(row.fields, there):
                assert (mine.before, mine.after, mine.change) == (theirs.after, theirs.before, flip[theirs.change])


@st.composite
def keyless_versions(draw):
    pool = draw(st.lists(values, min_size=1, max_size=5))
    rows_a = [dict(draw(st.sampled_from(pool))) for _ in range(draw(st.integers(1, 10)))]
    rows_b = [dict(draw(st.sampled_from(pool))) for _ in range(draw(st.integers(1, 10)))]
    return rows_a, rows_b, draw(st.integers(2, 5))


@PROPERTY
@given(keyless_versions())
def test_keyless_diff_is_a_multiset_difference(case):
    rows_a, rows_b, per_shard = case
    schema = SCHEMA.remove(0)
    with tempfile.TemporaryDirectory() as root:
        catalog = Catalog(root)
        a = put(catalog, "t", "v1", rows_a, schema=schema, key=None, per_shard=per_shard)
        b = put(catalog, "t", "v2", rows_b, schema=schema, key=None, per_shard=per_shard)
        drop_unchanged_shards(a, b)
        count_a = Counter(fingerprint(r, COMPARED) for r in rows_a)
        count_b = Counter(fingerprint(r, COMPARED) for r in rows_b)
        plain = diff_versions(a, b, cache=False, edited_pairing_limit=0)
        assert plain.counts.to_json() == {
            "added": sum((count_b - count_a).values()),
            "removed": sum((count_a - count_b).values()),
            "changed": 0,
            "edited": 0,
            "unchanged": sum((count_a & count_b).values()),
        }
        paired = diff_versions(a, b, cache=False)
        assert paired.counts.added + paired.counts.edited == plain.counts.added
        assert paired.counts.removed + paired.counts.edited == plain.counts.removed
        assert diff_versions(a, a, cache=False).identical


def test_unchanged_shards_are_never_opened(tmp_path):
    catalog = Catalog(str(tmp_path / "catalog"))
    rows = [{"id": i, "text": f"line {i}", "score": float(i), "tokens": [i], "meta": None} for i in range(12)]
    edited = [dict(r, text="line five, edited") if r["id"] == 5 else r for r in rows]
    a = put(catalog, "t", "v1", rows, per_shard=4)
    b = put(catalog, "t", "v2", edited, per_shard=4)
    assert drop_unchanged_shards(a, b) == 2
    with pytest.raises(ChecksumMismatch, match="missing"):
        a.read(0, [0])  # the files are really gone
    diff = diff_versions(a, b, cache=False)
    assert [(s.shard, s.rows) for s in diff.shards.removed] == [(1, 4)]
    assert diff.shards.unchanged == ((0, 0), (2, 2)) and diff.shards.unchanged_rows == 8
    assert diff.counts.to_json() == {"added": 0, "removed": 0, "changed": 1, "edited": 0, "unchanged": 11}
    [row] = diff.rows()
    assert (row.key, row.a_address, row.b_address) == ("5", (1, 1), (1, 1))
    [field] = row.fields
    assert (field.column, field.kind, field.before, field.after) == ("text", "text", "line 5", "line five, edited")
    assert [(op.op, op.a, op.b) for op in field.words] == [("equal", "line ", "line "), ("replace", "5", "five, edited")]


def _cached_diff(tmp_path):
    """Two versions (one row replaced) and their diff, which is now cached in the catalog."""
    catalog = Catalog(str(tmp_path / "catalog"))
    rows = [{"id": i, "text": f"line {i}", "score": 1.0, "tokens": [], "meta": None} for i in range(6)]
    a = put(catalog, "t", "v1", rows)
    b = put(catalog, "t", "v2", rows[:-1] + [{"id": 9, "text": "new", "score": 1.0, "tokens": [], "meta": None}])
    return catalog, a, b, diff_versions(a, b)


def test_cached_match_is_reused_without_reading(tmp_path):
    catalog, a, b, first = _cached_diff(tmp_path)
    assert os.listdir(catalog.path("diffs", f"{a.id}..{b.id}"))
    for shard in b.shards:
        os.remove(shard.uri)
    again = diff_versions(a, b)
    assert again.counts == first.counts and again.changes.equals(first.changes)
    with pytest.raises(ChecksumMismatch, match=r"dataset t version .* shard \d"):
        diff_versions(a, b, cache=False)


def test_an_edited_cached_match_is_recomputed_not_served(tmp_path):
    catalog, a, b, first = _cached_diff(tmp_path)
    directory = catalog.path("diffs", f"{a.id}..{b.id}")
    [table_file] = [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".arrow")]
    forged = first.changes.slice(0, 0)  # a valid table claiming nothing changed
    with pa.ipc.new_file(table_file, forged.schema) as writer:
        writer.write_table(forged)
    again = diff_versions(a, b)
    assert again.counts == first.counts and again.changes.equals(first.changes)


def test_counts_are_recounted_from_the_change_table_never_read_from_the_summary(tmp_path):
    """The summary file's counts are never shown: a diff's counts are those its sealed change table implies, and a
    summary edited with its SHA-256 recomputed fails its seal and is recomputed."""
    from loaders.diff.engine import recount
    from loaders.storage import derived

    catalog, a, b, first = _cached_diff(tmp_path)
    assert recount(first.changes, a.rows, len(first.schema.compared))[0] == first.counts
    directory = catalog.path("diffs", f"{a.id}..{b.id}")
    [summary_file] = [os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".json")]
    raw = open(summary_file, "rb").read()
    header_end = raw.index(b"\n", len(derived.ENVELOPE))
    header, payload = json.loads(raw[len(derived.ENVELOPE) : header_end]), json.loads(raw[header_end + 1 :])
    payload["counts"] = {"added": 0, "removed": 0, "changed": 0, "edited": 0, "unchanged": 6}
    body = json.dumps(payload).encode()
    header.update(size=len(body), sha256=hashlib.sha256(body).hexdigest())
    with open(summary_file, "wb") as out:
        out.write(derived.ENVELOPE + json.dumps(header).encode() + b"\n" + body)
    again = diff_versions(a, b)
    assert again.counts == first.counts and not again.identical


def test_keyless_near_duplicate_rows_are_paired_as_edited(tmp_path):
    catalog = Catalog(str(tmp_path / "catalog"))
    schema = pa.schema([("text", pa.string()), ("score", pa.float64())])
    rows_a = [
        {"text": "the quick brown fox jumps over the lazy dog", "score": 1.0},
        {"text": "a completely different sentence about data", "score": 2.0},
        {"text": "this row stays exactly the same", "score": 3.0},
    ]
    rows_b = [
        {"text": "the quick brown fox jumped over the lazy dog", "score": 1.0},
        {"text": "this row stays exactly the same", "score": 3.0},
        {"text": "zzz", "score": 9.0},
    ]
    a = put(catalog, "k", "v1", rows_a, schema=schema, key=None, per_shard=2)
    b = put(catalog, "k", "v2", rows_b, schema=schema, key=None, per_shard=2)
    diff = diff_versions(a, b, cache=False)
    assert diff.counts.to_json() == {"added": 1, "removed": 1, "changed": 0, "edited": 1, "unchanged": 1}
    [edited] = diff.rows(change="edited")
    assert edited.a_address == (0, 0) and edited.b_address == (0, 0) and edited.similarity >= 0.8
    assert edited.a_key == a.key_of(rows_a[0]) and edited.b_key == b.key_of(rows_b[0])
    assert a.sample(edited.a_key)["text"] == rows_a[0]["text"]
    assert [f.column for f in edited.fields] == ["text"]
    assert [r.preview for r in diff.rows(change="added")] == ["zzz"]
    strict = diff_versions(a, b, cache=False, similarity=0.99)
    assert strict.counts.edited == 0 and strict.counts.added == 2 and strict.counts.removed == 2


def test_retyped_column_is_reported_and_the_rest_still_diffs(tmp_path):
    catalog = Catalog(str(tmp_path / "catalog"))
    schema_a = pa.schema([("id", pa.int64()), ("text", pa.string()), ("score", pa.int32()), ("old", pa.string())])
    schema_b = pa.schema([("id", pa.int64()), ("text", pa.string()), ("score", pa.int64()), ("extra", pa.bool_())])
    rows_a = [{"id": i, "text": f"t{i}", "score": i, "old": "x"} for i in range(5)]
    rows_b = [{"id": i, "text": "T2" if i == 2 else f"t{i}", "score": i * 10, "extra": True} for i in range(5)]
    a = put(catalog, "r", "v1", rows_a, schema=schema_a)
    b = put(catalog, "r", "v2", rows_b, schema=schema_b, kinds={"text": "json"})
    diff = diff_versions(a, b, cache=False)
    assert [c.column for c in diff.schema.added] == ["extra"] and [c.column for c in diff.schema.removed] == ["old"]
    assert [(c.column, c.a_type, c.b_type) for c in diff.schema.retyped] == [("score", "int32", "int64")]
    assert [(c.column, c.a_kind, c.b_kind) for c in diff.schema.kinds] == [("text", "text", "json")]
    assert diff.schema.compared == ("text",)
    assert any("score changed type from int32 to int64" in w for w in diff.warnings)
    assert diff.counts.changed == 1 and diff.counts.unchanged == 4 and not diff.identical
    assert [r.key for r in diff.rows(change="changed", column="text")] == ["2"]


def test_retyped_key_still_matches_rows_by_its_text(tmp_path):
    catalog = Catalog(str(tmp_path / "catalog"))
    schema_a = pa.schema([("id", pa.int64()), ("text", pa.string())])
    schema_b = pa.schema([("id", pa.string()), ("text", pa.string())])
    a = put(catalog, "k", "v1", [{"id": i, "text": f"t{i}"} for i in (1, 2, 3)], schema=schema_a)
    b = put(catalog, "k", "v2", [{"id": "1", "text": "t1"}, {"id": "2", "text": "two"}, {"id": "4", "text": "t4"}], schema=schema_b)
    diff = diff_versions(a, b, cache=False)
    assert any("matched by it, compared as text" in w for w in diff.warnings)
    assert diff.counts.to_json() == {"added": 1, "removed": 1, "changed": 1, "edited": 0, "unchanged": 1}
    assert [(r.key, r.change) for r in diff.rows()] == [("2", "changed"), ("3", "removed"), ("4", "added")]


def test_duplicate_keys_are_reported_not_fatal(tmp_path):
    catalog = Catalog(str(tmp_path / "catalog"))
    rows_a = [{"id": i, "text": "x", "score": None, "tokens": None, "meta": None} for i in (1, 2, 1, 3)]
    rows_b = [{"id": i, "text": "x", "score": None, "tokens": None, "meta": None} for i in (1, 2, 3)]
    a = put(catalog, "d", "v1", rows_a, allow_duplicate_keys=True)  # the diff compares key column values
    b = put(catalog, "d", "v2", rows_b)
    diff = diff_versions(a, b, cache=False)
    assert (diff.duplicates.a_count, diff.duplicates.a_examples, diff.duplicates.b_count) == (1, ("1",), 0)
    assert diff.counts.to_json() == {"added": 0, "removed": 1, "changed": 0, "edited": 0, "unchanged": 3}
    [removed] = diff.rows()
    assert removed.key == "1" and removed.a_address == (0, 2)
    assert removed.a_key == "1~1" and a.sample("1~1") == a.read(0, [2])[0]  # its link names that row, not the first "1"
    assert any("repeats an earlier row" in w for w in diff.warnings)


def test_different_datasets_are_compared_with_a_warning(tmp_path):
    catalog = Catalog(str(tmp_path / "catalog"))
    rows = [{"id": i, "text": "x", "score": 0.0, "tokens": [], "meta": None} for i in range(3)]
    a, b = put(catalog, "left", "v1", rows), put(catalog, "right", "v1", rows)
    diff = diff_versions(a, b, cache=False)
    assert not diff.same_dataset and diff.identical
    assert "different datasets" in diff.warnings[0] and diff.to_json()["same_dataset"] is False


def test_paging_filters_and_bad_requests(tmp_path):
    catalog = Catalog(str(tmp_path / "catalog"))
    rows = [{"id": i, "text": f"r{i}", "score": 0.0, "tokens": [i], "meta": None} for i in range(10)]
    changed = [dict(r, tokens=[9]) if r["id"] in (3, 4) else dict(r, text="x") if r["id"] in (6, 7) else r for r in rows]
    a = put(catalog, "p", "v1", rows)
    b = put(catalog, "p", "v2", [r for r in changed if r["id"] != 0] + [{"id": 11, "text": "n", "score": 0.0, "tokens": [], "meta": None}])
    diff = diff_versions(a, b)
    keys, after = [], None
    while True:
        page = diff.rows(after=after, limit=2)
        if not page:
            break
        keys += [r.key for r in page]
        after = page[-1].key
    assert keys == ["0", "3", "4", "6", "7", "11"]  # integer keys in numeric order
    assert [r.key for r in diff.rows(change="removed")] == ["0"]
    assert [r.key for r in diff.rows(column="tokens")] == ["3", "4"]
    assert [r.key for r in diff.rows(column="text", after="6")] == ["7"]
    assert diff.columns == {"text": 2, "tokens": 2}
    tokens = diff.rows(column="tokens", limit=1)[0].fields[0]
    assert tokens.kind == "tokens" and [(o.op, o.a, o.b) for o in tokens.ops] == [("replace", (3,), (9,))]
    data = json.loads(json.dumps(diff.to_json(limit=2), allow_nan=False))
    assert [r["key"] for r in data["rows"]] == ["0", "3"] and data["next"] == "3"
    assert data["counts"] == {"added": 1, "removed": 1, "changed": 4, "edited": 0, "unchanged": 5}
    for bad in ({"change": "moved"}, {"column": "nope"}, {"after": "not-a-number"}, {"limit": -1}):
        with pytest.raises(BatchscopeError):
            diff.rows(**bad)
    with pytest.raises(BatchscopeError, match="similarity"):
        diff_versions(a, b, similarity=0)


def assert_diff_matches_recorded_changes(catalog: Catalog, name: str, recorded: Changes) -> None:
    """``name@v1`` → ``name@v2`` must show exactly the keys its builder recorded (edited = changed or edited)."""
    diff = diff_versions(catalog.resolve(f"{name}@v1"), catalog.resolve(f"{name}@v2"))
    found = by_change(diff)
    if diff.schema.key is None:  # keyless: compare the sample keys of each side
        rows = everything(diff)
        found = {
            "added": {r.b_key for r in rows if r.change == "added"},
            "removed": {r.a_key for r in rows if r.change == "removed"},
            "changed": set(),
            "edited": {r.a_key for r in rows if r.change == "edited"},
        }
    assert sorted(found["added"]) == sorted(recorded.added)
    assert sorted(found["removed"]) == sorted(recorded.removed)
    assert sorted(found["changed"] | found["edited"]) == sorted(recorded.edited)


def test_diff_agrees_with_recorded_changes(tmp_path):
    """A builder records what it changed between v1 and v2; the diff must find exactly that."""
    catalog = Catalog(str(tmp_path / "catalog"))
    v1 = pa.table({"id": [f"doc-{i:03d}" for i in range(40)], "text": [f"document {i} says {'hello ' * (i % 4)}" for i in range(40)]})
    removed, edited = {"doc-003", "doc-017"}, {"doc-005", "doc-030"}
    rows = [dict(r, text=r["text"] + " (revised)") if r["id"] in edited else r for r in v1.to_pylist() if r["id"] not in removed]
    rows += [{"id": "doc-100", "text": "brand new"}, {"id": "doc-101", "text": "also new"}]
    changes = Changes(added=["doc-100", "doc-101"], removed=sorted(removed), edited=sorted(edited))
    register_pair(catalog, "texts", v1, pa.Table.from_pylist(rows), rows_per_shard=16, row_group_size=3)
    assert_diff_matches_recorded_changes(catalog, "texts", changes)


# -- per-field differences -------------------------------------------------------


@given(st.text(alphabet="ab .\n", max_size=30), st.text(alphabet="ab .\n", max_size=30))
def test_text_ops_rebuild_both_sides(before, after):
    ops = text_ops(before, after)
    assert "".join(op.a for op in ops) == before and "".join(op.b for op in ops) == after
    assert all(op.a == op.b for op in ops if op.op == "equal")


@given(st.lists(st.integers(0, 3), max_size=12), st.lists(st.integers(0, 3), max_size=12))
def test_seq_ops_align_both_sequences(before, after):
    ops = seq_ops(before, after)
    rebuilt_a, rebuilt_b = [], []
    for op in ops:
        if op.op == "equal":
            assert before[op.a_start : op.a_end] == after[op.b_start : op.b_end]
            rebuilt_a += before[op.a_start : op.a_end]
            rebuilt_b += after[op.b_start : op.b_end]
        else:
            rebuilt_a += list(op.a)
            rebuilt_b += list(op.b)
    assert rebuilt_a == before and rebuilt_b == after


def test_structural_diff_by_path():
    hello = {"role": "assistant", "content": "hello"}
    before = {"messages": [{"role": "user", "content": "hi there"}, hello], "reward": 0.5}
    inserted = {"role": "user", "content": "again"}
    after = {"messages": [{"role": "user", "content": "hi there"}, inserted, hello], "reward": 1.0, "image": b"\x89PNG"}
    paths, truncated = struct_paths(before, after, "rollout")
    assert not truncated
    assert [(p.path, p.change, p.before, p.after) for p in paths] == [
        ("rollout.messages[1]", "added", None, inserted),
        ("rollout.reward", "changed", 0.5, 1.0),
        ("rollout.image", "added", None, {"bytes": 4, "sha256": hashlib.sha256(b"\x89PNG").hexdigest()[:16]}),
    ]
    edited = [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hello world"}]
    chat = field_diff("messages", "chat", before["messages"], edited)
    assert chat.before is None and [(p.path, p.change) for p in chat.paths] == [("messages[1].content", "changed")]
    assert [(op.op, op.b) for op in chat.paths[0].words] == [("equal", "hello"), ("insert", " world")]


def test_field_kinds_shape_the_detail():
    image = field_diff("image", "image", {"bytes": b"abc", "path": "a.png"}, {"bytes": b"abcd", "path": "a.png"})
    assert image.before == {"size": 3, "sha256": media_summary(b"abc")["sha256"], "path": "a.png"} and image.after["size"] == 4
    scalar = field_diff("score", "scalar", 1, 2).to_json()
    assert scalar == {"column": "score", "kind": "scalar", "change": "changed", "before": 1, "after": 2}
    assert field_diff("score", "scalar", None, 2).change == "added" and field_diff("score", "scalar", 2, None).change == "removed"
    payload = field_diff("meta", "json", '{"a": 1, "b": [1]}', '{"a": 2, "b": [1]}')
    assert [(p.path, p.before, p.after) for p in payload.paths] == [("meta.a", 1, 2)]
    assert field_diff("x", "scalar", math.nan, math.inf).to_json()["before"] == "nan"


# -- hashing -------------------------------------------------------------------

NESTED = pa.struct([("s", pa.string()), ("f", pa.float32()), ("l", pa.list_(pa.struct([("b", pa.binary()), ("i", pa.int8())])))])
nested_values = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "s": st.one_of(st.none(), st.text(alphabet="ab", max_size=9)),
            "f": st.sampled_from([None, 0.0, -0.0, 2.5, math.nan]),
            "l": st.one_of(
                st.none(),
                st.lists(st.one_of(st.none(), st.fixed_dictionaries({"b": st.binary(max_size=10), "i": st.integers(-3, 3)})), max_size=3),
            ),
        }
    ),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(nested_values, min_size=1, max_size=7), st.integers(0, 3))
def test_hashes_are_equal_exactly_when_values_are(items, cut):
    array = pa.array(items, NESTED)
    hashes = hash_array(array)
    prints = [content_key({"v": v}) for v in array.to_pylist()]
    for i in range(len(items)):
        for j in range(len(items)):
            assert (hashes[i] == hashes[j]) == (prints[i] == prints[j])
    cut = min(cut, len(items))
    assert hash_array(array.slice(cut)).tolist() == hashes[cut:].tolist()
    assert hash_array(pa.chunked_array([array.slice(0, cut), array.slice(cut)], NESTED)).tolist() == hashes.tolist()
    other = pa.array(list(reversed(items)), NESTED)
    assert equal_values(array, other).tolist() == [p == q for p, q in zip(prints, reversed(prints))]

"""SQL over versions: tables named by refs, only verified bytes, a sandbox hostile queries cannot leave, limits that stop
runaway queries, one clear line for bad input; sorted listings and search counts equal the read path's own answers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog
from loaders.errors import ChecksumMismatch, SqlRefused, SqlStopped
from loaders.query import QueryLimits, SqlSession
from loaders.query import verified as verified_module
from loaders.query.listing import count_matches, sorted_records
from tests.conftest import write_parquet


def _records(version) -> list[dict]:  # type: ignore[no-untyped-def]
    return [record for shard, info in enumerate(version.shards) for record in version.read(shard, range(info.rows))]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """``docs`` v1 (9 rows, 3 shards, row groups of 2) and v2 (the first 6 rows), and ``labels`` (a Hugging Face ClassLabel)."""
    from tests.support import peers

    root = tmp_path_factory.mktemp("query")
    catalog = Catalog(root / "catalog")
    docs = pa.table(
        {
            "id": [f"d{i}" for i in range(9)],
            "text": ["Alpha one", "beta", "ALPHA two", None, "gamma alpha", "École", "beta beta", "delta", "alphabet"],
            "score": [3.0, None, 1.5, 2.0, 9.0, 1.5, 0.0, 4.0, 2.5],
            "tokens": pa.array([[1, 2], [3], [], [4, 5, 6], [7], [8, 9], [1], [2, 2], [3, 3, 3]], pa.list_(pa.int32())),
        }
    )
    catalog.register("docs", write_parquet(docs, root / "docs-v1", shards=3, row_group=2), key="id", tag="v1")
    catalog.register("docs", write_parquet(docs.slice(0, 6), root / "docs-v2", shards=1, row_group=2), key="id", tag="v2")
    peers.hf_dataset().select_columns(["label", "text"]).to_parquet(str(root / "labels.parquet"))
    catalog.register("labels", [str(root / "labels.parquet")], key="text", tag="v1")
    return catalog


@pytest.fixture
def session(catalog: Catalog) -> SqlSession:
    return SqlSession(catalog, QueryLimits(seconds=3, memory_bytes=256 << 20, max_rows=1000))


def test_every_version_is_a_table_named_by_its_ref_holding_exactly_its_records(catalog: Catalog, session: SqlSession) -> None:
    v1, v2 = catalog.resolve("docs@v1"), catalog.resolve("docs@v2")
    for ref in ("docs@v1", f"docs@{v1.id}", f"docs@{v1.short_id}", f"docs@{v1.id[:6]}"):
        result = session.query(f'SELECT * FROM "{ref}"')
        assert result.columns == ["id", "text", "score", "tokens"]
        assert result.rows() == _records(v1)
        assert set(result.tables) == {ref} and result.tables[ref].id == v1.id
    joined = session.query('SELECT a.id, b.score FROM "docs@v1" a JOIN "docs@v2" b USING (id) ORDER BY a.id DESC')
    assert joined.rows() == [{"id": r["id"], "score": r["score"]} for r in sorted(_records(v2), key=lambda r: r["id"], reverse=True)]
    assert session.query('SELECT count(*) AS n FROM "docs@latest"').rows() == [{"n": catalog.resolve("docs").rows}]


def test_the_row_cap_cuts_and_says_so(catalog: Catalog) -> None:
    session = SqlSession(catalog, QueryLimits(max_rows=4))
    result = session.query('SELECT id FROM "docs@v1" ORDER BY id')
    assert result.truncated and result.row_count == 4 and [r["id"] for r in result.rows()] == ["d0", "d1", "d2", "d3"]
    assert not session.query('SELECT id FROM "docs@v1" LIMIT 4').truncated
    assert result.to_json() == {"columns": ["id"], "rows": [{"id": f"d{i}"} for i in range(4)], "truncated": True}


@pytest.mark.parametrize(
    "sql, words",
    [
        ("SELECT * FROM read_csv('{secret}')", ["only the registered versions can be read", "secret.csv"]),
        ("SELECT * FROM read_text('/etc/passwd')", ["only the registered versions can be read", "/etc/passwd"]),
        ("SELECT * FROM glob('{root}/*')", ["only the registered versions can be read"]),
        ("SELECT * FROM '{secret}'", ["only the registered versions can be read"]),
        ("COPY (SELECT 1) TO '{out}'", ["COPY is refused"]),
        ("ATTACH '{out}' AS other", ["ATTACH is refused"]),
        ("ATTACH ':memory:' AS other", ["ATTACH is refused"]),
        ("INSTALL httpfs", ["INSTALL is refused"]),
        ("LOAD httpfs", ["LOAD is refused"]),
        ("PRAGMA enable_external_access=true", ["PRAGMA is refused"]),
        ("SET enable_external_access = true", ["SET is refused"]),
        ("SET allowed_paths = ['/']", ["SET is refused"]),
        ("CREATE TABLE t AS SELECT 1", ["CREATE is refused"]),
        ('DROP VIEW "docs@v1"', ["DROP is refused"]),
        ("EXPORT DATABASE '{out}'", ["EXPORT is refused"]),
        ("SELECT 1; COPY (SELECT 1) TO '{out}'", ["give one query, not 2 statements"]),
        ("SELECT * FROM pragma_version(); SELECT 2", ["give one query, not 2 statements"]),
        ("SELECT * FROM query('CREATE TABLE x AS SELECT 1')", ["single SELECT statement"]),
    ],
)
def test_hostile_queries_are_refused_with_one_line_and_touch_nothing(
    session: SqlSession, tmp_path: Path, sql: str, words: list[str]
) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a,b\n1,2\n")
    out = tmp_path / "out.csv"
    with pytest.raises(SqlRefused) as refused:
        session.query(sql.format(secret=secret, out=out, root=tmp_path))
    message = refused.value.message
    assert "\n" not in message and refused.value.status == 400
    for word in words:
        assert word in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.csv"]
    assert session.query('SELECT count(*) AS n FROM "docs@v1"').rows() == [{"n": 9}]  # the sandbox is still locked and whole
    assert session.query("SELECT current_setting('enable_external_access') AS on").rows() == [{"on": False}]


def test_runaway_queries_are_stopped_by_time_memory_or_length(catalog: Catalog) -> None:
    session = SqlSession(catalog, QueryLimits(seconds=0.5, memory_bytes=64 << 20))
    with pytest.raises(SqlStopped, match=r"^query stopped after 0.5 s, its time limit$"):
        session.query('SELECT sum(a.range * b.range) FROM range(100000) a, range(100000) b, "docs@v1" c')
    with pytest.raises(SqlStopped, match=r"^query stopped: it needs more than its memory limit of 67,108,864 bytes \(Out of Memory Error"):
        session.query("SELECT list(range) AS l FROM range(200000000)")
    with pytest.raises(SqlStopped, match=r"^query refused: 10,485,760 characters is more than the limit of 100,000$"):
        session.query("SELECT 1 " + " " * (10 * 2**20 - 9))
    assert session.query('SELECT count(*) AS n FROM "docs@v1"').rows() == [{"n": 9}]  # and the session goes on


@pytest.mark.parametrize(
    "sql, message",
    [
        ("SELEC 1", 'Parser Error: syntax error at or near "SELEC" (line 1, column 1)'),
        ('SELECT *\nFROM "docs@v1"\nWHERE (', 'Parser Error: syntax error at or near "(" (line 3, column 7)'),
        ('SELECT nope FROM "docs@v1"', 'Binder Error: Referenced column "nope" not found in FROM clause!'),
        (
            "SELECT * FROM docs",
            'unknown table docs: tables are versions, named in double quotes as "dataset@tag" or "dataset@version-id", such as "docs@latest"',
        ),
        ('SELECT * FROM "docs@v9"', "unknown table \"docs@v9\": dataset docs has no tag or version 'v9'"),
        ('SELECT * FROM "nope@v1"', "unknown table \"nope@v1\": no dataset named 'nope'"),
        ('SELECT * FROM "docs@"', "table \"docs@\" names no version after '@'"),
        ("   ", "the query is empty"),
    ],
)
def test_bad_input_is_one_line_naming_what_failed(session: SqlSession, sql: str, message: str) -> None:
    with pytest.raises(SqlRefused) as refused:
        session.query(sql)
    assert refused.value.message.startswith(message) and "\n" not in refused.value.message and refused.value.status == 400


def test_a_ref_inside_a_string_or_comment_is_not_a_table(session: SqlSession) -> None:
    result = session.query('SELECT \'"nope@v1"\' AS s, count(*) AS n FROM "docs@v2" -- "other@v1"')
    assert result.rows() == [{"s": '"nope@v1"', "n": 6}] and list(result.tables) == ["docs@v2"]


def test_shards_are_checked_once_per_process_and_a_changed_one_is_named_and_refused(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog")
    table = pa.table({"id": [f"r{i}" for i in range(6)], "n": list(range(6))})
    paths = write_parquet(table, tmp_path / "src", shards=2, row_group=2)
    version = catalog.register("data", paths, key="id", tag="v1")
    session = SqlSession(catalog)
    hashed = verified_module.CheckCounter.files
    assert session.query('SELECT sum(n) AS s FROM "data@v1"').rows() == [{"s": 15}]
    assert verified_module.CheckCounter.files == hashed + 2  # each shard read and hashed once
    for _ in range(3):
        session.query('SELECT sum(n) AS s FROM "data@v1"')
    assert verified_module.CheckCounter.files == hashed + 2  # remembered: a repeated query hashes nothing
    # Same size, one byte changed inside shard 1's second row group: refused, naming dataset, version and shard.
    data = bytearray(Path(paths[1]).read_bytes())
    start, end = version.shards[1].boundaries[1], version.shards[1].boundaries[2]
    data[(start + end) // 2] ^= 0xFF
    Path(paths[1]).write_bytes(bytes(data))
    with pytest.raises(ChecksumMismatch) as failed:
        session.query('SELECT sum(n) AS s FROM "data@v1"')
    assert failed.value.message.startswith(f"dataset data version {version.short_id} shard 1 (part-1.parquet): bytes {start}-{end}")
    with pytest.raises(SqlRefused, match="only the registered versions can be read"):  # nor read directly: the file is not open to it
        session.query(f"SELECT * FROM read_parquet('{paths[1]}')")
    Path(paths[1]).unlink()
    with pytest.raises(ChecksumMismatch, match="shard file .*part-1.parquet is missing"):
        session.query('SELECT count(*) FROM "data@v1"')


def test_a_version_on_s3_is_read_through_the_read_path(s3_bucket, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import io

    table = pa.table({"id": ["a", "b", "c"], "n": [1, 2, 3]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=2)
    uri = s3_bucket.put("data/part-0.parquet", buffer.getvalue())
    catalog = Catalog(tmp_path / "catalog")
    catalog.register("remote", [uri], key="id", tag="v1")
    session = SqlSession(catalog)
    assert session.query('SELECT id, n * 2 AS twice FROM "remote@v1" ORDER BY id DESC').rows() == [
        {"id": "c", "twice": 6},
        {"id": "b", "twice": 4},
        {"id": "a", "twice": 2},
    ]
    big = pa.table({"id": [f"k{i}" for i in range(2000)], "blob": [b"x" * 10_000] * 2000})  # 20 MB once decoded
    buffer = io.BytesIO()
    pq.write_table(big, buffer, row_group_size=500)
    catalog.register("big", [s3_bucket.put("data/big.parquet", buffer.getvalue())], key="id", tag="v1")
    with pytest.raises(SqlStopped, match=r"^big@\w+ is on remote storage and holds more than the memory limit of 16,777,216 bytes"):
        SqlSession(catalog, QueryLimits(memory_bytes=16 << 20)).query('SELECT count(*) FROM "big@v1"')


def test_search_counts_and_sorted_pages_equal_the_read_paths_answers(catalog: Catalog, session: SqlSession) -> None:
    from app.pages.rows import matches

    v1 = catalog.resolve("docs@v1")
    records = _records(v1)
    for text in ("alpha", "ALPHA", "é", "beta", "zzz"):
        expected = sum(bool(v) for v in matches(v1, "text", pa.array([r["text"] for r in records]), text).fill_null(False).to_pylist())
        assert count_matches(session, v1, "text", text) == expected, text
    labels = catalog.resolve("labels@v1")
    label_records = _records(labels)
    for text in ("dog", "0", "1", "c"):
        expected = sum(bool(v) for v in matches(labels, "label", pa.array([r["label"] for r in label_records]), text).to_pylist())
        assert count_matches(session, labels, "label", text) == expected, text
    order = sorted(range(9), key=lambda i: (records[i]["score"] is None, -(records[i]["score"] or 0), i))
    assert sorted_records(session, v1, "score", descending=True, start=0, size=4) == (order[:4], 9)
    assert sorted_records(session, v1, "score", descending=True, start=4, size=10) == (order[4:], 9)
    alpha = [
        i
        for i in sorted(range(9), key=lambda i: (records[i]["text"] is None, records[i]["text"] or "", i))
        if "alpha" in (records[i]["text"] or "").lower()
    ]
    assert sorted_records(session, v1, "text", start=0, size=10, search=("text", "alpha")) == (alpha, len(alpha))
    assert sorted_records(session, v1, "tokens", start=0, size=3)[0] == sorted(range(9), key=lambda i: (records[i]["tokens"], i))[:3]

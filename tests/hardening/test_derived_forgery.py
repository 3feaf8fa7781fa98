"""Derived data never changes what is shown: every file batchscope derives, forged every way (bytes flipped at many
offsets, truncated, rewritten with every digest it carries recomputed for wrong content), gives the honest answer or
one clear line, never a wrong fact, and never a server error with a traceback.

The kinds: the key index, the rollout index (rows and groups), the episode index, a cached diff (summary and change
table), a run's token counts (per chunk and per record), and the checksum table of media stored by path. Each is
checked through what users see: the JSON twins of the sample, groups, episodes and diff pages, a packed run's
batches, and the media endpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bs4 import BeautifulSoup

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog, Pack, ReadPlan, Shuffle, Source, Tokenize
from loaders.catalog.version import clear_read_caches
from loaders.rl.store import MEMO
from loaders.storage import derived
from tests.corpus import media_faults as media
from tests.loaders.test_rl import ROWS, register, register_episodes
from tests.support.local_client import local_client
from tests.support.readpath import words_tokenizer_json, write_text_dataset

#: Offsets (fractions of the file) where a byte is flipped, one forgery each.
FLIPS = (0.0, 0.05, 0.2, 0.4, 0.55, 0.7, 0.85, 0.999)
#: Lengths (fractions of the file) a file is cut to.
CUTS = (0.3, 0.9)


@dataclass
class Derived:
    """One derived file: where it is, what a user sees that depends on it, and how to forge it with valid digests.

    ``read_whole``: showing it reads (and so checks) the whole file, which a failed check rebuilds at once; the key
    index checks only the row groups a lookup reads."""

    name: str
    path: Callable[[], Path]
    shown: Callable[[], Any]
    restamp: Callable[[bytes], bytes]
    read_whole: bool = True


def _forgeries(honest: bytes, restamp: Callable[[bytes], bytes]) -> list[tuple[str, bytes]]:
    out = []
    for fraction in FLIPS:
        at = min(len(honest) - 1, int(len(honest) * fraction))
        out.append((f"byte {at} flipped", honest[:at] + bytes([honest[at] ^ 0x5A]) + honest[at + 1 :]))
    out += [(f"cut to {int(len(honest) * f)} bytes", honest[: int(len(honest) * f)]) for f in CUTS]
    out.append(("rewritten with wrong content and every digest recomputed", restamp(honest)))
    return out


def _fresh() -> None:
    """What a new server process starts with: nothing decoded, no index or media table loaded."""
    from loaders.catalog.media_files import _load_table

    clear_read_caches()
    MEMO.clear()
    _load_table.cache_clear()


# -- format-aware forgers: wrong content, every digest the file carries recomputed, the honest seal kept -------------
def _restamp_table(raw: bytes, column: str, value: Any, *, parquet: bool) -> bytes:
    table = pq.ParquetFile(pa.BufferReader(raw)).read() if parquet else pa.ipc.open_file(pa.py_buffer(raw)).read_all()
    meta = dict(table.schema.metadata or {})
    position = table.column_names.index(column)
    values = table.column(column).to_pylist()
    values[0] = value
    forged = table.set_column(position, column, pa.array(values, table.schema.field(column).type)).replace_schema_metadata(None)
    meta[derived.DIGEST] = derived.table_digest(forged).encode()
    if derived.GROUP_DIGESTS in meta:
        groups = json.loads(meta[derived.GROUP_DIGESTS])
        groups[0]["digest"] = derived.table_digest(forged.slice(0, groups[0]["rows"]))
        meta[derived.GROUP_DIGESTS] = json.dumps(groups).encode()
    forged = forged.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    if parquet:
        pq.write_table(forged, sink, row_group_size=4096)
    else:
        with pa.ipc.new_file(sink, forged.schema) as writer:
            writer.write_table(forged)
    return sink.getvalue().to_pybytes()


def _restamp_envelope(raw: bytes, edit: Callable[[bytes], bytes]) -> bytes:
    end = raw.index(b"\n", len(derived.ENVELOPE))
    header, payload = json.loads(raw[len(derived.ENVELOPE) : end]), edit(raw[end + 1 :])
    header.update(size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    return derived.ENVELOPE + json.dumps(header).encode() + b"\n" + payload


def _edit_summary(payload: bytes) -> bytes:
    summary = json.loads(payload)
    summary["counts"] = {"added": 0, "removed": 0, "changed": 0, "edited": 0, "unchanged": 99}
    return json.dumps(summary).encode()


def _empty_change_table(payload: bytes) -> bytes:
    table = pa.ipc.open_file(pa.py_buffer(payload)).read_all().slice(0, 0)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _other_counts(payload: bytes) -> bytes:
    import io

    import numpy as np

    counts = np.load(io.BytesIO(payload), allow_pickle=False)
    buffer = io.BytesIO()
    np.save(buffer, (counts[::-1] + 1).astype(counts.dtype), allow_pickle=False)
    return buffer.getvalue()


# -- the catalog ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("forgery")
    catalog = Catalog(root / "catalog")
    texts = [{"id": f"k{i}", "text": f"row {i}"} for i in range(12)]
    v1 = catalog.register("texts", [_parquet(root / "t1.parquet", texts)], key="id", tag="v1")
    changed = texts[2:] + [{"id": "new", "text": "added"}]
    changed[0] = {"id": "k2", "text": "edited"}
    v2 = catalog.register("texts", [_parquet(root / "t2.parquet", changed)], key="id", tag="v2")
    rollouts = register(catalog, root / "rollouts", ROWS)
    episodes = register_episodes(catalog, root / "episodes")
    write_text_dataset(catalog, "alpha", 40, row_group=4, shards=2)
    catalog.put_tokenizer("words", words_tokenizer_json())
    plan = ReadPlan(
        [Source("alpha@v1", transforms=[Tokenize("text", tokenizer="words")])],
        seed=3,
        global_batch_size=2,
        streams=2,
        steps=6,
        shuffle=Shuffle(window_chunks=2),
        transforms=[Pack(seq_len=16)],
    )
    run = catalog.create_run("packed", plan)
    (root / "pics" / "images").mkdir(parents=True)
    (root / "pics" / "images" / "a.png").write_bytes(media.small_png(side=16))
    kind = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    pics = pa.table({"id": ["a"], "image": pa.array([{"bytes": None, "path": "images/a.png"}], kind)})
    pq.write_table(pics, root / "pics" / "part-0.parquet")
    pictures = catalog.register("pics", [str(root / "pics" / "part-0.parquet")], key="id", kinds={"image": "image"})
    return {"root": root, "catalog": catalog, "v1": v1, "v2": v2, "rollouts": rollouts, "episodes": episodes, "run": run, "pics": pictures}


def _parquet(path: Path, rows: list[dict[str, Any]]) -> str:
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=3)
    return str(path)


def _client(world: dict[str, Any]) -> Any:
    """One app for the module: JSON twins and stored media are never kept between requests, so each answer is read anew."""
    if "client" not in world:
        world["client"] = local_client(create_app(Settings(root=world["catalog"].root, flags_path=str(world["root"] / "f.sqlite"))))
    return world["client"]


def _get(world: dict[str, Any], url: str) -> tuple[int, Any]:
    response = _client(world).get(urls.api(url) if not url.startswith("/media") else url)
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.status_code, response.json()
    return response.status_code, response.content


def _kinds(world: dict[str, Any]) -> list[Derived]:
    catalog, v1, v2, rollouts, episodes, run, pics = (world[k] for k in ("catalog", "v1", "v2", "rollouts", "episodes", "run", "pics"))
    indexes = Path(catalog.root) / "indexes"

    def samples() -> Any:
        return [_get(world, urls.sample("texts", v1, f"k{i}")) for i in (0, 5, 11)] + [_get(world, urls.sample("texts", v1, "nope"))[0]]

    def diff_files(suffix: str) -> Path:
        directory = Path(catalog.root) / "diffs" / f"{v1.id}..{v2.id}"
        [found] = [directory / n for n in os.listdir(directory) if n.endswith(suffix)]
        return found

    def token_file(entry: str, name: str) -> Path:
        key = run.manifest["resolved"][entry][0]["key"]
        return Path(catalog.path("token-counts", name.format(key=key)))

    def batches() -> Any:
        fresh = catalog.run("packed")
        return [(batch.keys, batch.digest) for batch in (fresh.batch(step, 0) for step in range(6))]

    return [
        Derived(
            "key index",
            lambda: indexes / "texts" / f"{v1.id}.keys.parquet",
            samples,
            lambda raw: _restamp_table(raw, "row", 5, parquet=True),
            read_whole=False,
        ),
        Derived(
            "rollout rows",
            lambda: indexes / "rollouts" / f"{rollouts.id}.rollouts.rollout.rows.arrow",
            lambda: _get(world, urls.rollout_groups("rollouts", rollouts)),
            lambda raw: _restamp_table(raw, "reward", 0.987654, parquet=False),
        ),
        Derived(
            "rollout groups",
            lambda: indexes / "rollouts" / f"{rollouts.id}.rollouts.rollout.groups.arrow",
            lambda: _get(world, urls.rollout_groups("rollouts", rollouts)),
            lambda raw: _restamp_table(raw, "mean", 0.987654, parquet=False),
        ),
        Derived(
            "episode index",
            lambda: indexes / "episodes" / f"{episodes.id}.episodes.episode.parquet",
            lambda: _get(world, urls.episodes("episodes", episodes)),
            lambda raw: _restamp_table(raw, "ret", 123.0, parquet=True),
        ),
        Derived(
            "diff summary",
            lambda: diff_files(".json"),
            lambda: _get(world, urls.diff("texts", v1, v2)),
            lambda raw: _restamp_envelope(raw, _edit_summary),
        ),
        Derived(
            "diff change table",
            lambda: diff_files(".arrow"),
            lambda: _get(world, urls.diff("texts", v1, v2)),
            lambda raw: _restamp_envelope(raw, _empty_change_table),
        ),
        Derived(
            "token counts per chunk",
            lambda: token_file("token_counts", "{key}.npy"),
            batches,
            lambda raw: _restamp_envelope(raw, _other_counts),
        ),
        Derived(
            "token counts per record",
            lambda: token_file("record_token_counts", "{key}.records.npy"),
            batches,
            lambda raw: _restamp_envelope(raw, _other_counts),
        ),
        Derived(
            "media checksum table",
            lambda: Path(catalog.root) / "datasets" / "pics" / "media" / f"{pics.manifest.media_files['digest']}.json",
            lambda: _get(world, urls.media("pics", pics, "a", "image")),
            lambda raw: json.dumps({k: [v[0], "0" * 32] for k, v in json.loads(raw).items()}).encode(),
            read_whole=False,  # registration data pinned by the version id, not rebuilt: a changed table is refused
        ),
    ]


def _one_clear_line(status: int, answer: Any) -> bool:
    """An error answer (JSON, or the HTML error page) whose message is one line, without a traceback."""
    if isinstance(answer, bytes):
        found = BeautifulSoup(answer, "html.parser").select_one(".message")
        message = found.get_text().strip() if found is not None else "\n"
    else:
        message = answer.get("error", "\n") if isinstance(answer, dict) else "\n"
    return status >= 400 and "Traceback" not in message and "\n" not in message


@pytest.mark.parametrize("index", range(9), ids=lambda i: str(i))
def test_every_forgery_of_a_derived_file_gives_the_right_answer_or_one_clear_line(world: dict[str, Any], index: int) -> None:
    kind = _kinds(world)[index]
    _fresh()
    honest_answer = kind.shown()  # builds the file (and shows what is right)
    path = kind.path()
    honest = path.read_bytes()
    refused = 0
    for forgery, forged in _forgeries(honest, kind.restamp):
        path.write_bytes(forged)
        _fresh()
        try:
            answer = kind.shown()
        except Exception as exc:  # noqa: BLE001 - the read path may refuse (a media table is pinned, not derived)
            assert kind.name == "media checksum table" and "\n" not in str(exc), (kind.name, forgery, exc)
            refused += 1
            continue
        if answer != honest_answer:
            status, body = answer if isinstance(answer, tuple) else (0, answer)
            assert kind.name == "media checksum table" and _one_clear_line(status, body), (kind.name, forgery, answer)
            refused += 1
        if kind.read_whole and forgery.startswith("rewritten"):
            assert path.read_bytes() != forged, (kind.name, forgery)  # read, refused (its seal), rebuilt
        path.write_bytes(honest)
    assert refused == (len(FLIPS) + len(CUTS) + 1 if kind.name == "media checksum table" else 0), (kind.name, refused)
    _fresh()
    assert kind.shown() == honest_answer

"""The field kind table: one spec per kind, and every set of kinds the code asks about is a query on it."""

from __future__ import annotations

import ast
from pathlib import Path

import pyarrow as pa
import pytest

from loaders.catalog.kinds import (
    BYTES_KINDS,
    CHECKSUMMED_KINDS,
    DIFF_JSON,
    DIFF_MEDIA,
    DIFF_PATHS,
    DIFF_SEQUENCE,
    KINDS,
    MEDIA_KINDS,
    PICTURE_KINDS,
    SPEC,
    SPECS,
    KindSpec,
    _by_name,
    infer_kind,
    kinds_where,
)
from loaders.diff import field_diff

REPO = Path(__file__).resolve().parents[2]
#: A changed pair of values of each kind, as a dataset would hold them.
CHANGED = {
    "text": ("the cat", "the dog"),
    "tokens": ([1, 2, 3], [1, 9, 3]),
    "mask": ([0, 1, 1], [0, 0, 1]),
    "labels": ([-100, 5], [-100, 6]),
    "chat": ([{"role": "user", "content": "hi"}], [{"role": "user", "content": "hey"}]),
    "image": (b"\x89PNG a", b"\x89PNG b"),
    "video": ({"bytes": None, "path": "a.mp4"}, {"bytes": None, "path": "b.mp4"}),
    "audio": (b"RIFF a", b"RIFF b"),
    "class_label": (1, 2),
    "episode": ({"actions": [1], "rewards": [0.5]}, {"actions": [2], "rewards": [0.5]}),
    "rollout": ({"completion": "a", "reward": 1.0}, {"completion": "b", "reward": 1.0}),
    "json": ('{"a": 1}', '{"a": 2}'),
    "scalar": (1.5, 2.5),
    "binary": (b"\x00", b"\x01"),
}


def test_one_spec_per_kind_in_the_documented_order() -> None:
    assert list(KINDS) == [s.name for s in SPECS] == list(SPEC) == [
        "text", "tokens", "mask", "labels", "chat", "image", "video", "audio",
        "class_label", "episode", "rollout", "json", "scalar", "binary",
    ]  # fmt: skip
    assert KINDS["image"].startswith("binary (encoded PNG")


def test_the_sets_of_kinds_are_queries_on_the_table() -> None:
    assert MEDIA_KINDS == ("image", "video", "audio")
    assert BYTES_KINDS == ("image", "video", "audio", "binary")
    assert PICTURE_KINDS == ("image", "video")
    assert CHECKSUMMED_KINDS == ("image", "video", "audio")  # every file a media value names by path
    assert kinds_where(diff=DIFF_SEQUENCE) == ("tokens", "mask", "labels")
    assert kinds_where(diff=DIFF_PATHS) + kinds_where(diff=DIFF_JSON) == ("chat", "episode", "rollout", "json")
    with pytest.raises(TypeError, match="no fact 'pictures'"):
        kinds_where(pictures=True)


def test_a_kind_specified_twice_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="field kind 'text' is specified twice"):
        _by_name((KindSpec("text", "a"), KindSpec("scalar", "b"), KindSpec("text", "c")))
    with pytest.raises(ValueError, match="diff treatment 'words'"):
        _by_name((KindSpec("text", "a", diff="words"),))


def test_inference_reads_its_hints_from_the_table() -> None:
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    for spec in SPECS:
        for word in spec.name_words:
            typ = pa.list_(pa.int64()) if spec.name == "tokens" else struct
            assert infer_kind(word, typ) == spec.name, (spec.name, word)
        if spec.hf_type:
            assert infer_kind("column", pa.int64(), {"_type": spec.hf_type}) == spec.name


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_diff_treats_each_kind_as_its_spec_says(kind: str) -> None:
    before, after = CHANGED[kind]
    diff = field_diff("c", kind, before, after)
    treatment = SPEC[kind].diff
    assert bool(diff.ops) == (treatment == DIFF_SEQUENCE)
    assert bool(diff.paths) == (treatment in (DIFF_PATHS, DIFF_JSON))
    media_summary = isinstance(diff.before, dict) and bool({"size", "path", "uri"} & set(diff.before))
    assert media_summary == (treatment == DIFF_MEDIA)


def test_no_module_writes_its_own_set_of_kinds() -> None:
    """A tuple, list or set of two or more kind names outside the table is a second source of truth."""
    found = []
    for path in [*(REPO / "loaders").rglob("*.py"), *(REPO / "app").rglob("*.py")]:
        if path.relative_to(REPO).as_posix() == "loaders/catalog/kinds.py" or "demo" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.Set, ast.List)):
                names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in KINDS]
                if len(names) >= 2 and len(names) == len(node.elts):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {names}")
    assert found == []

"""The bad-input corpus: every hostile or broken input as a small recipe, with what the inspector must answer.

Binary cases (damaged Parquet, bombs, broken clips) are generated from these
recipes at test time instead of being committed; hostile strings live in
``strings.json``. ``tests/hardening/test_corpus.py`` registers each case in one
catalog served by a real ``batchscope serve`` and checks its probes.

    python -m tests.corpus.make_corpus /tmp/corpus   # write and register every case, print how each went
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

from loaders import Catalog, ReadPlan, Shuffle, Source

from . import media_faults as media
from .file_cases import REFUSED, UNREADABLE, WHERE
from .integrity_cases import INTEGRITY_PROBED, INTEGRITY_REFUSED
from .legacy import register_unchecked
from .recipes import (
    GOOD,
    LOOKALIKE_KEYS,
    STRINGS,
    STRUCT_MEDIA,
    TRAVERSAL_KEYS,
    Case,
    Probe,
    deep_json,
    deep_struct,
    hostile_keys_table,
    listing,
    media_of,
    media_struct,
    media_with_outside_paths,
    parquet,
    raw,
    sample,
    text_table,
)

TOKENIZER = "corpus-words"
RUN = "corpus-run"
HOSTILE_RUN = "hostile-keys-run"
TEN_MB = 10 * 1024 * 1024
PAGE_LIMIT = 300_000  # bytes: a page over hostile data stays small (long values collapse or load as fragments)


def prepare(catalog: Catalog) -> None:
    """What the cases expect in the catalog before they are registered: a small word tokenizer."""
    from tests.conftest import word_tokenizer

    catalog.put_tokenizer(TOKENIZER, word_tokenizer(["alpha", "beta", "<script>"]))


def _create_run(catalog: Catalog, version: Any, *, name: str = RUN, batch: int = 2, steps: int = 3, shuffle: bool = True) -> None:
    plan = ReadPlan(
        [Source(f"{version.name}@{version.id}")], seed=1, global_batch_size=batch, steps=steps, shuffle=Shuffle(enabled=shuffle)
    )
    run = catalog.create_run(name, plan)
    with run.reader(0, 1) as reader:
        for _ in reader:
            pass


HOSTILE_KEYS = list(STRINGS.values())
HOSTILE_STEPS = -(-len(HOSTILE_KEYS) // 3)  # a run reading them in order, three a step


BAD_UTF8 = pa.array([b"fine", b"\xff\xfe not utf-8", b"\xc3"], pa.binary()).view(pa.string())

RENDERED = [
    Case(
        "invalid-utf8",
        "bytes that are not UTF-8 in a string column",
        parquet(pa.table({"id": ["a", "b", "c"], "text": BAD_UTF8})),
        probes=(
            Probe(sample("a"), literal=("fine",)),
            Probe(sample("b"), 500, ("row 1", "utf-8", *WHERE)),
            Probe(sample("c"), 500, ("row 2", "utf-8")),
            Probe(listing(), 500, ("utf-8", "shard 0")),
        ),
    ),
    Case(
        "hostile-keys",
        "every hostile string as a sample key",
        parquet(hostile_keys_table()),
        probes=(Probe(listing(), literal=tuple(STRINGS.values()), max_bytes=PAGE_LIMIT),)
        + tuple(Probe(sample(value), literal=(value, f"row of {name}")) for name, value in STRINGS.items()),
    ),
    Case(
        "hostile-text",
        "every hostile string as text, with hostile registration notes",
        parquet(text_table(dict(zip(STRINGS, STRINGS.values())))),
        notes={"<script>alert(1)</script>": "{{7*7}}", "source": '"><img src=x onerror=alert(1)>'},
        probes=(Probe(listing(), words=("{{7*7}}",)),) + tuple(Probe(sample(name), literal=(value,)) for name, value in STRINGS.items()),
    ),
    Case(
        "hostile-column-names",
        "column names that are markup and template syntax",
        parquet(
            pa.table({"id": ["a"], STRINGS["img-onerror"]: ["x"], STRINGS["jinja-expression"]: ["y"], STRINGS["bidi-override"]: ["z"]})
        ),
        probes=(
            Probe(listing(), literal=(STRINGS["img-onerror"], STRINGS["jinja-expression"], STRINGS["bidi-override"])),
            Probe(sample("a"), literal=(STRINGS["img-onerror"], STRINGS["jinja-expression"])),
            Probe(sample("a", field=STRINGS["img-onerror"]), literal=("x",)),
            Probe(sample("a", field="<nope>"), 404, ("no column", "'<nope>'")),
        ),
    ),
    Case(
        "hostile-json",
        "structs, maps and JSON text whose keys and values are markup",
        parquet(
            pa.table(
                {
                    "id": ["a"],
                    "meta": pa.array(
                        [{STRINGS["script"]: STRINGS["img-onerror"], "n": 1}],
                        pa.struct([(STRINGS["script"], pa.string()), ("n", pa.int64())]),
                    ),
                    "tags": pa.array([[(STRINGS["svg-onload"], STRINGS["jinja-raw"])]], pa.map_(pa.string(), pa.string())),
                    "doc_json": ['{"' + "<img src=x onerror=alert(1)>" + '": ["{{7*7}}", null, 1e308]}'],
                }
            )
        ),
        probes=(
            Probe(sample("a"), literal=(STRINGS["script"], STRINGS["img-onerror"], STRINGS["svg-onload"], STRINGS["jinja-raw"])),
            Probe(listing()),
        ),
    ),
    Case(
        "hostile-chat",
        "chat turns whose roles and contents are markup, and malformed turns",
        parquet(
            pa.table(
                {
                    "id": ["a", "b", "c"],
                    "messages": pa.array(
                        [
                            [
                                {"role": STRINGS["script"], "content": STRINGS["img-onerror"]},
                                {"role": "assistant", "content": STRINGS["jinja-statement"]},
                            ],
                            [{"role": None, "content": None}],
                            [],
                        ],
                        pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
                    ),
                }
            )
        ),
        probes=(
            Probe(sample("a"), literal=(STRINGS["script"], STRINGS["img-onerror"], STRINGS["jinja-statement"])),
            Probe(sample("b")),
            Probe(sample("c")),
            Probe(listing()),
        ),
    ),
    Case(
        "ten-megabyte-string",
        "one 10 MB string",
        parquet(text_table({"big": "<b>" + "x" * TEN_MB + "</b>", "small": "tiny"})),
        probes=(
            Probe(sample("big"), max_bytes=PAGE_LIMIT),
            Probe(listing(), max_bytes=PAGE_LIMIT),
            Probe(sample("small"), literal=("tiny",)),
        ),
    ),
    Case(
        "deep-json-text",
        "JSON text nested 1000 arrays deep",
        parquet(pa.table({"id": ["deep"], "payload_json": [deep_json(1000)]})),
        kinds={"payload_json": "json"},
        probes=(Probe(sample("deep"), max_bytes=PAGE_LIMIT), Probe(listing(), max_bytes=PAGE_LIMIT)),
    ),
    Case(
        "deep-arrow-nesting",
        "a struct nested 60 levels deep",
        parquet(pa.table({"id": ["deep"], "tree": deep_struct(60)})),
        probes=(Probe(sample("deep"), max_bytes=PAGE_LIMIT), Probe(listing(), max_bytes=PAGE_LIMIT)),
    ),
    Case(
        "million-tokens",
        "a token sequence of one million ids",
        parquet(pa.table({"id": ["long"], "input_ids": pa.array([[1, 2] * 500_000], pa.list_(pa.int32()))}), row_group=1),
        tokenizer=TOKENIZER,
        probes=(Probe(sample("long"), max_bytes=PAGE_LIMIT), Probe(listing(), max_bytes=PAGE_LIMIT)),
    ),
    Case(
        "traversal-keys",
        "keys shaped like paths that leave a directory",
        parquet(text_table({key: f"row {i}" for i, key in enumerate(TRAVERSAL_KEYS)})),
        probes=tuple(Probe(sample(key), literal=(key, f"row {i}")) for i, key in enumerate(TRAVERSAL_KEYS)),
    ),
    Case(
        "lookalike-keys",
        "keys that look alike: NFC/NFD, fullwidth, Cyrillic, zero-width",
        parquet(text_table({key: f"row {i}" for i, key in enumerate(LOOKALIKE_KEYS)})),
        probes=tuple(Probe(sample(key), literal=(f"row {i}",)) for i, key in enumerate(LOOKALIKE_KEYS))
        + (Probe(sample("cafe"), 404, ("no row with key 'cafe'",)),),
    ),
    Case(
        "empty-dataset",
        "a dataset of zero rows",
        parquet(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())})),
        probes=(
            Probe(listing()),
            Probe(listing(start=5)),
            Probe(sample("a"), 404, ("no row with key 'a'",)),
            Probe(raw("/datasets/{name}")),
        ),
    ),
    Case(
        "zero-row-shard",
        "a zero-row shard between two others",
        parquet(
            text_table({"a": "first"}),
            pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}),
            text_table({"z": "last"}),
        ),
        probes=(Probe(listing(), literal=("first", "last")), Probe(sample("z"), literal=("last",))),
    ),
    Case(
        "null-and-duplicate-keys",
        "a null key and a key used twice, registered with duplicates allowed",
        parquet(text_table({"a": "first a"}), pa.table({"id": [None, "a", "b"], "text": ["null key", "second a", "bee"]})),
        allow_duplicate_keys=True,
        probes=(
            Probe(listing(), literal=("null key", "second a", "a~1")),
            Probe(sample("a"), literal=("first a",)),
            Probe(sample("a~1"), literal=("second a",)),
            Probe(sample("b"), literal=("bee",)),
        ),
    ),
    Case(
        "numeric-extremes",
        "int64 limits, NaN, infinities, subnormals, wide decimals, far-future timestamps",
        parquet(
            pa.table(
                {
                    "id": ["a", "b"],
                    "i": pa.array([-(2**63), 2**63 - 1], pa.int64()),
                    "f": [float("nan"), float("-inf")],
                    "g": [5e-324, 1.7976931348623157e308],
                    "d": pa.array([10**37, -(10**37)], pa.decimal128(38, 0)),
                    "t": pa.array([253402300799, -62135596800], pa.timestamp("s")),
                }
            )
        ),
        probes=(
            Probe(listing()),
            Probe(sample("a"), words=("nan", str(-(2**63)), "5e-324", "9999-12-31")),
            Probe(sample("b"), words=("-inf",)),
        ),
    ),
    Case(
        "nan-rewards",
        "RL rollouts and episodes with NaN and infinite rewards and logprobs",
        parquet(
            pa.table(
                {
                    "id": ["a"],
                    "rollout": pa.array(
                        [
                            {
                                "prompt": STRINGS["script"],
                                "completion": "c",
                                "reward": float("nan"),
                                "advantage": float("inf"),
                                "logprobs": [float("nan"), -1.0],
                            }
                        ],
                        pa.struct(
                            [
                                ("prompt", pa.string()),
                                ("completion", pa.string()),
                                ("reward", pa.float64()),
                                ("advantage", pa.float64()),
                                ("logprobs", pa.list_(pa.float32())),
                            ]
                        ),
                    ),
                    "episode": pa.array(
                        [{"actions": [1, 2], "rewards": [float("nan"), float("-inf")], "dones": [False, True]}],
                        pa.struct(
                            [("actions", pa.list_(pa.int32())), ("rewards", pa.list_(pa.float32())), ("dones", pa.list_(pa.bool_()))]
                        ),
                    ),
                }
            )
        ),
        kinds={"rollout": "rollout", "episode": "episode"},
        probes=(Probe(sample("a"), literal=(STRINGS["script"],)), Probe(listing())),
    ),
    Case(
        "broken-images",
        "a decompression bomb, truncated and random bytes, an empty value, an SVG with a script, all as images",
        parquet(
            pa.table(
                {
                    "id": ["bomb", "truncated", "noise", "empty", "svg", "good"],
                    "image": pa.array(
                        [
                            media_struct(media.bomb_png(side=60_000)),
                            media_struct(media.truncated(media.small_png(side=64), keep=0.5)),
                            media_struct(media.noise(500, seed=2)),
                            media_struct(b""),
                            media_struct(media.SVG_WITH_SCRIPT),
                            media_struct(media.small_png()),
                        ],
                        STRUCT_MEDIA,
                    ),
                }
            ),
            row_group=3,
        ),
        probes=tuple(Probe(sample(k)) for k in ("bomb", "truncated", "noise", "empty", "svg", "good"))
        + tuple(Probe(media_of(k, "image")) for k in ("bomb", "svg", "good"))
        + (Probe(listing()),),
    ),
    Case(
        "broken-videos",
        "random bytes, a truncated clip and zero bytes as videos",
        parquet(
            pa.table(
                {
                    "id": ["noise", "truncated", "empty", "good"],
                    "video": [media.noise(2000, seed=3), media.truncated(media.tiny_clip(), keep=0.4), b"", media.tiny_clip()],
                }
            )
        ),
        probes=tuple(Probe(sample(k)) for k in ("noise", "truncated", "empty", "good")) + (Probe(listing()),),
    ),
    Case(
        "html-in-binary",
        "HTML with a script and an SVG stored in binary columns",
        parquet(pa.table({"id": ["a"], "blob": [media.HTML_WITH_SCRIPT], "picture_svg": [media.SVG_WITH_SCRIPT]})),
        probes=(Probe(sample("a")), Probe(media_of("a", "blob")), Probe(media_of("a", "picture_svg"))),
    ),
    Case(
        "media-path-traversal",
        "image and video paths that leave the shard directory: relative, absolute, percent-encoded, by symlink",
        media_with_outside_paths,
        probes=tuple(Probe(sample(k)) for k in ("relative", "absolute", "symlink", "encoded"))
        + (
            Probe(media_of("relative", "image"), 422, ("media path '../secret.txt'", "inside the shard's directory")),
            Probe(media_of("absolute", "image"), 422, ("is absolute",)),
            Probe(media_of("symlink", "image"), 422, ("symbolic link",)),
            Probe(media_of("symlink", "video"), 422, ("symbolic link",)),
        )
        + (Probe(listing()),),
    ),
    Case(
        "wrong-kind-override",
        "text declared as image, tokens and chat",
        parquet(pa.table({"id": ["a"], "text": ["plain <b>text</b>"], "n": [3], "m": ["not a chat"]})),
        kinds={"text": "image", "n": "tokens", "m": "chat"},
        probes=(Probe(sample("a")), Probe(listing())),
    ),
    Case(
        "bad-tokens",
        "token ids below zero and past the vocabulary, a mask of the wrong length",
        parquet(
            pa.table(
                {
                    "id": ["a"],
                    "input_ids": pa.array([[-1, 0, 2**31 - 1, 3]], pa.list_(pa.int32())),
                    "loss_mask": pa.array([[1, 0]], pa.list_(pa.int8())),
                }
            )
        ),
        tokenizer=TOKENIZER,
        probes=(Probe(sample("a")), Probe(listing())),
    ),
    Case(
        "malformed-urls",
        "malformed version prefixes, cursors and search parameters on a good dataset",
        parquet(GOOD),
        probes=(
            Probe(raw("/datasets/{name}/versions/zzzz"), 404, ("no tag or version 'zzzz'",)),
            Probe(raw("/datasets/{name}/versions/0"), 404, ("no tag or version '0'",)),
            Probe(raw("/datasets/{name}/versions/" + "a" * 65), 404, ("no tag or version",)),
            Probe(raw("/datasets/{name}/versions/%00"), 404, ("no tag or version",)),
            Probe(raw("/datasets/{name}/versions/v1%2F..%2F..%2Fetc"), 404, ("no page at",)),
            Probe(raw("/datasets/{name}/versions/{id}?start=" + str(10**30)), 200, ("no records here",)),
            Probe(raw("/datasets/{name}/versions/{id}?start=-1"), 422, ("start",)),
            Probe(raw("/datasets/{name}/versions/{id}?end=abc"), 422, ("end", "'abc'")),
            Probe(raw("/datasets/{name}/versions/{id}?q=" + "x" * 1001), 422, ("q",)),
            Probe(raw("/datasets/{name}/versions/{id}?q=%3Cscript%3E&column=%3Cnope%3E"), 422, ("<nope>",)),
            Probe(raw("/datasets/..%2F..%2Fetc/versions/v1"), 404, ("no page at",)),
            Probe(raw("/datasets/..%252F..%252Fetc/versions/v1"), 422, ("invalid dataset name",)),
            Probe(raw("/datasets/%3Cscript%3E/versions/v1"), 422, ("invalid dataset name", "<script>")),
            Probe(raw("/datasets/{name}/versions/{id}/samples/a?field=" + "x" * 1001), 422, ("field",)),
        ),
    ),
    Case(
        "hostile-keys-run",
        "a run whose samples have hostile keys: its step and rank pages show them as text",
        parquet(hostile_keys_table()),
        after=lambda catalog, version: _create_run(catalog, version, name=HOSTILE_RUN, batch=3, steps=HOSTILE_STEPS, shuffle=False),
        probes=tuple(
            Probe(raw(f"/runs/{HOSTILE_RUN}/steps/{step}/ranks/0"), literal=tuple(HOSTILE_KEYS[3 * step : 3 * step + 3]))
            for step in range(HOSTILE_STEPS)
        )
        + tuple(Probe(raw(f"/runs/{HOSTILE_RUN}/steps/{step}")) for step in range(HOSTILE_STEPS))
        + (Probe(raw(f"/runs/{HOSTILE_RUN}")),),
    ),
    Case(
        "run-extremes",
        "huge and negative steps and ranks on a run",
        parquet(GOOD),
        after=_create_run,
        probes=(
            Probe(raw(f"/runs/{RUN}/steps/{10**30}"), (404, 422), ("step",)),
            Probe(raw(f"/runs/{RUN}/steps/-1"), (404, 422), ("step",)),
            Probe(raw(f"/runs/{RUN}/steps/3"), 404, ("step 3",)),
            Probe(raw(f"/runs/{RUN}/steps/0/ranks/-1"), (404, 422), ("rank",)),
            Probe(raw(f"/runs/{RUN}/steps/0/ranks/{10**30}"), (404, 422), ("rank",)),
            Probe(raw(f"/runs/{RUN}/steps/0/ranks/1"), 404, ("rank 1",)),
            Probe(raw(f"/runs/{RUN}/steps/abc"), 422, ("step", "'abc'")),
            Probe(raw("/runs/..%2F..%2Fetc/steps/0"), (404, 422)),
            Probe(raw("/runs/%3Cscript%3E"), (404, 422), ("<script>",)),
        ),
    ),
]

CASES: list[Case] = REFUSED + INTEGRITY_REFUSED + UNREADABLE + INTEGRITY_PROBED + RENDERED


def build(case: Case, directory: Path) -> list[str]:
    """Write ``case``'s files below ``directory / case.name``; returns the paths to register."""
    return case.build(directory / case.name)


def register(catalog: Catalog, case: Case, paths: list[str]) -> Any:
    """Register ``case`` the way a user would (may raise: that is what refused cases test); legacy cases as an older version did."""
    if case.legacy:
        return register_unchecked(catalog, case.dataset_name, paths, key=case.key, tag=case.tag)
    return catalog.register(
        case.dataset_name,
        paths,
        key=case.key,
        tag=case.tag,
        kinds=case.kinds,
        tokenizer=case.tokenizer,
        notes=case.notes,
        allow_duplicate_keys=case.allow_duplicate_keys,
    )


def main(argv: list[str]) -> int:
    """Write every case below ``argv[0]`` into a catalog there and print what happened to each."""
    if len(argv) != 1:
        print(__doc__)
        return 2
    root = Path(argv[0])
    catalog = Catalog(root / "catalog")
    prepare(catalog)
    for case in CASES:
        paths = build(case, root / "src")
        try:
            version = register(catalog, case, paths)
        except Exception as exc:  # noqa: BLE001 - reporting what each case does is the point
            print(f"{case.name:28} refused: {exc}")
            continue
        if case.damage:
            case.damage(paths)
        if case.after:
            case.after(catalog, version)
        print(f"{case.name:28} registered {version.ref}: {case.about}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

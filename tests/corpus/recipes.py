"""Building blocks of the bad-input corpus: the Case and Probe types, table builders, URL makers, hostile values.

A :class:`Case` is registered as a dataset (or must be refused at
registration) and carries the :class:`Probe` requests whose answers the
hardening tests check; ``make_corpus.py`` holds the table of cases.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from app import urls

HERE = Path(__file__).resolve().parent
STRINGS: dict[str, str] = json.loads((HERE / "strings.json").read_text())
#: Content of a file outside every shard directory: no response may ever contain it.
SECRET = "batchscope-corpus-secret-7c1f"
ROW_GROUP = 2

Url = Callable[[Any], str]


@dataclass(frozen=True)
class Probe:
    """One request against a case's dataset version and what must come back.

    ``status`` is the answer's status (or the statuses that are each right);
    ``words`` must appear in the error message (status >= 400) or the page text;
    ``literal`` values must show as text on the page and exactly in its JSON twin.
    """

    url: Url
    status: int | tuple[int, ...] = 200
    words: tuple[str, ...] = ()
    literal: tuple[str, ...] = ()
    max_bytes: int | None = None

    @property
    def statuses(self) -> tuple[int, ...]:
        return self.status if isinstance(self.status, tuple) else (self.status,)


@dataclass(frozen=True)
class Case:
    """One hostile or broken input: files to register, and either the refusal or the probes it must survive."""

    name: str
    about: str
    build: Callable[[Path], list[str]]
    dataset: str | None = None
    key: str | None = "id"
    tag: str | None = "v1"
    kinds: Mapping[str, str] | None = None
    tokenizer: str | None = None
    notes: Mapping[str, Any] | None = None
    damage: Callable[[list[str]], None] | None = None
    refused: tuple[str, ...] = ()
    refused_status: int = 422
    probes: tuple[Probe, ...] = ()
    after: Callable[[Any, Any], None] | None = None
    allow_duplicate_keys: bool = False
    #: Register as a version written before footers, keys and media were checked (``legacy.register_unchecked``).
    legacy: bool = False

    @property
    def dataset_name(self) -> str:
        return self.dataset if self.dataset is not None else self.name


# -- building blocks -----------------------------------------------------------------
def parquet(*tables: pa.Table, row_group: int = ROW_GROUP) -> Callable[[Path], list[str]]:
    """A builder writing one Parquet shard per table (small row groups) into the case's directory."""

    def build(directory: Path) -> list[str]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for number, table in enumerate(tables):
            path = directory / f"part-{number}.parquet"
            pq.write_table(table, path, row_group_size=row_group)
            paths.append(str(path))
        return paths

    return build


def damaged(build: Callable[[Path], list[str]], harm: Callable[[Path], None], *, extra: str | None = None) -> Callable[[Path], list[str]]:
    """``build``, then ``harm`` its first file before registration (``extra`` adds a path that does not exist)."""

    def wrapped(directory: Path) -> list[str]:
        paths = build(directory)
        harm(Path(paths[0]))
        return paths + ([str(directory / extra)] if extra else [])

    return wrapped


def after_registration(harm: Callable[[Path], None]) -> Callable[[list[str]], None]:
    """A ``Case.damage`` that applies ``harm`` to the first registered file."""
    return lambda paths: harm(Path(paths[0]))


def text_table(rows: Mapping[str, str], **columns: list[Any]) -> pa.Table:
    """``id`` and ``text`` columns from ``{key: text}``, plus any extra columns."""
    return pa.table({"id": list(rows), "text": list(rows.values()), **columns})


def listing(**query: Any) -> Url:
    """The version page (listing) of the case's dataset."""
    return lambda v: urls.version(v.name, v.id, **query)


def sample(key: str, **query: Any) -> Url:
    """The sample permalink of ``key``."""
    return lambda v: urls.sample(v.name, v.id, key, **query)


def media_of(key: str, column: str) -> Url:
    """The stored bytes of ``column`` of the sample ``key``."""
    return lambda v: urls.media(v.name, v.id, key, column)


def raw(path: str) -> Url:
    """A hand-made URL (``{name}`` and ``{id}`` are filled in), for malformed paths no builder makes."""
    return lambda v: path.format(name=v.name if v else "", id=v.id if v else "")


GOOD = text_table({"a": "alpha", "b": "beta", "c": "gamma", "d": "delta", "e": "epsilon", "f": "zeta"})
STRUCT_MEDIA = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def media_struct(value: bytes | None = None, path: str | None = None) -> dict[str, Any]:
    """A Hugging Face style ``{bytes, path}`` image or video value."""
    return {"bytes": value, "path": path}


def deep_json(levels: int) -> str:
    """JSON text of arrays nested ``levels`` deep around a script tag."""
    return "[" * levels + '"<script>bottom</script>"' + "]" * levels


def deep_struct(levels: int) -> pa.Array:
    """One struct value nested ``levels`` deep around a bold tag."""
    value: Any = "<b>bottom</b>"
    type_: pa.DataType = pa.string()
    for _ in range(levels):
        value, type_ = {"in": value}, pa.struct([("in", type_)])
    return pa.array([value], type_)


def nested_list_type(levels: int) -> pa.DataType:
    """``list<list<...<int8>>>`` ``levels`` deep."""
    type_: pa.DataType = pa.int8()
    for _ in range(levels):
        type_ = pa.list_(type_)
    return type_


def media_with_outside_paths(directory: Path) -> list[str]:
    """Image and video structs whose stored paths point outside the shard directory (relative, absolute, by symlink)."""
    directory.mkdir(parents=True, exist_ok=True)
    secret = directory.parent / "secret.txt"
    secret.write_text(SECRET)
    link = directory / "inside-link.png"
    if not link.is_symlink():
        link.symlink_to(secret)
    (directory / "clips").mkdir(exist_ok=True)
    clip_link = directory / "clips" / "clip.mp4"
    if not clip_link.is_symlink():
        clip_link.symlink_to(secret)
    paths = {"relative": "../secret.txt", "absolute": str(secret), "symlink": "inside-link.png", "encoded": "..%2fsecret.txt"}
    table = pa.table(
        {
            "id": list(paths),
            "image": pa.array([media_struct(None, p) for p in paths.values()], STRUCT_MEDIA),
            "video": pa.array([media_struct(None, "clips/clip.mp4" if k == "symlink" else p) for k, p in paths.items()], STRUCT_MEDIA),
        }
    )
    return parquet(table)(directory)


def hostile_keys_table() -> pa.Table:
    """Every hostile string of ``strings.json`` as a key."""
    keys = list(STRINGS.values())
    return pa.table({"id": keys, "text": [f"row of {name}" for name in STRINGS]})


TRAVERSAL_KEYS = (
    "../../etc/passwd",
    "..%2f..%2fetc%2fpasswd",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/etc/passwd",
    "..\\..\\windows\\win.ini",
    ".",
    "..",
    "/",
    "?q=1#frag",
    "a/../b",
    "%00",
)
LOOKALIKE_KEYS = (
    "caf\u00e9",  # NFC
    "cafe\u0301",  # NFD: the same word, other code points
    "doc",
    "\uff44\uff4f\uff43",  # fullwidth
    "\u0430pple",  # Cyrillic a
    "apple",
    "key",
    "key\u200b",  # zero-width space
)

"""A small catalog with one planted bug of every kind ``batchscope lint`` checks, among clean data, and the runs that read it.

Clean text is real prose (docstrings of standard-library functions); chats are rendered by the read path's ChatML
template; rollouts come in groups whose rewards vary; images, clips and sounds are generated. :data:`PLANTED` names,
per check, the keys that must be found (and no other key of these runs may be).
"""

from __future__ import annotations

import inspect
import io
import json
import math
import os
import random
import string
import textwrap
import wave
from pathlib import Path

import numpy as np
import pyarrow as pa

from loaders import Catalog, Pack, RandomResizedCrop, ReadPlan, Shuffle, Source, Tokenize, UseTokens
from loaders.media.encode import encode_png, encode_video
from loaders.transforms.chat import IM_END, header_length, render_chat
from tests.conftest import word_tokenizer

#: check → keys it must find (checks about steps are pinned by their runs' tests).
PLANTED: dict[str, set[str]] = {
    "empty-document": {"text-empty"},
    "repetition": {"text-repeat", "text-lowent"},
    "duplicate": {"text-dup-a", "text-dup-b"},
    "unknown-tokens": {"text-unknown", "text-fffd"},
    "length-outlier": {"text-huge", "text-empty"},
    "chat-mask": {"chat-user-trained", "chat-assistant-masked", "chat-shifted", "chat-all-masked"},
    "no-trained-token": {"chat-all-masked"},
    "end-of-turn": {"chat-no-end"},
    "rl-nonfinite": {"ro-nan-reward", "ro-inf-advantage", "ro-nan-logprob"},
    "rl-logprob-positive": {"ro-positive-logprob"},
    "rl-reward-range": {"ro-big-reward"},
    "rl-zero-variance": {f"ro-flat-{i}" for i in range(4)},
    "decode-failure": {"pic-corrupt"},
    "blank-image": {"pic-black", "pic-gray"},
    "frozen-video": {"clip-frozen"},
    "silent-audio": {"sound-silent"},
}
#: The runs over the planted data and the checks each must find something for.
RUNS = {
    "lint-texts": ("empty-document", "repetition", "duplicate", "unknown-tokens", "length-outlier"),
    "lint-chats": ("chat-mask", "no-trained-token", "end-of-turn"),
    "lint-rollouts": ("rl-nonfinite", "rl-logprob-positive", "rl-reward-range", "rl-zero-variance"),
    "lint-media": ("decode-failure", "blank-image", "frozen-video", "silent-audio"),
}
#: The declared reward range of ``lint-rollouts`` (``--threshold``).
REWARD_RANGE = {"rl-reward-range.min": 0.0, "rl-reward-range.max": 1.0}
MODULES = (json, os.path, string, textwrap, random, inspect, math)


def _write(table: pa.Table, directory: Path, *, row_group: int = 4) -> list[str]:
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "part-0.parquet"
    pq.write_table(table, path, row_group_size=row_group)
    return [str(path)]


def prose() -> list[str]:
    """Docstrings of standard-library functions (real, varied English), each once."""
    seen: dict[str, None] = {}
    for module in MODULES:
        for name in sorted(dir(module)):
            doc = inspect.getdoc(getattr(module, name))
            if doc and 200 <= len(doc) <= 1500:
                seen.setdefault(" ".join(doc.split()), None)
    return list(seen)[:70]


def _texts(clean: list[str]) -> dict[str, str]:
    rng = random.Random(0)
    texts = {f"text-{i:03d}": text for i, text in enumerate(clean[:60])}
    texts["text-empty"] = "  \n "
    texts["text-repeat"] = "Read the docs first. " + "click here " * 60
    texts["text-lowent"] = " ".join(rng.choice(["yes", "no", "maybe"]) for _ in range(200))
    texts["text-dup-a"] = texts["text-dup-b"] = clean[60]
    texts["text-unknown"] = " ".join(f"zq{rng.randrange(10**6)}" for _ in range(40))
    texts["text-fffd"] = clean[61][:120] + " \ufffd\ufffd\ufffd\ufffd \ufffd\ufffd\ufffd\ufffd"
    texts["text-huge"] = " ".join(clean[62:70]) * 6
    return texts


CHATS = [
    [{"role": "user", "content": "what does json loads return"}, {"role": "assistant", "content": "a python object decoded from the text"}],
    [
        {"role": "system", "content": "answer briefly"},
        {"role": "user", "content": "name a module for paths"},
        {"role": "assistant", "content": "os path joins and splits paths"},
        {"role": "user", "content": "and for random numbers"},
        {"role": "assistant", "content": "random draws pseudo random numbers"},
    ],
    [{"role": "user", "content": "is textwrap a module"}, {"role": "assistant", "content": "yes it wraps and fills text"}],
]


BROKEN_CHATS = ("chat-user-trained", "chat-assistant-masked", "chat-shifted", "chat-all-masked", "chat-no-end")


def chat_messages() -> dict[str, list[dict[str, str]]]:
    """24 clean chats and the 5 to break, each different (a numbered question)."""
    chats = {}
    for i in range(24 + len(BROKEN_CHATS)):
        messages = [dict(m) for m in CHATS[i % len(CHATS)]]
        messages[-2]["content"] += f" number {i}"
        key = f"chat-{i:03d}" if i < 24 else BROKEN_CHATS[i - 24]
        chats[key] = messages
    return chats


def _break(key: str, ids: list[int], mask: list[int], spans: list[tuple[str, int, int]], tokenizer) -> tuple[list[int], list[int]]:  # noqa: ANN001
    assistant = [(s, e) for role, s, e in spans if role == "assistant"]
    if key == "chat-user-trained":
        trained = list(mask)
        for role, s, e in spans:
            if role == "user":
                trained[s + header_length("user", tokenizer) : e - 1] = [1] * (e - 1 - s - header_length("user", tokenizer))
        return ids, trained
    if key == "chat-assistant-masked":
        s, e = assistant[0]
        return ids, mask[:s] + [0] * (e - s) + mask[e:]
    if key == "chat-shifted":
        return ids, [0] + list(mask[:-1])
    if key == "chat-all-masked":
        return ids, [0] * len(ids)
    end = tokenizer.token_to_id(IM_END)
    at = max(i for i in range(*assistant[0]) if ids[i] == end)
    return ids[:at] + ids[at + 1 :], mask[:at] + mask[at + 1 :]


def _chats(tokenizer) -> list[dict]:  # noqa: ANN001 (a tokenizers.Tokenizer)
    rows = []
    for n, (key, messages) in enumerate(chat_messages().items()):
        ids, mask, spans = render_chat(messages, tokenizer)
        if key in BROKEN_CHATS:
            ids, mask = _break(key, list(ids), list(mask), spans, tokenizer)
        rows.append({"id": key, "messages": messages, "input_ids": ids, "loss_mask": mask, "n": n})
    return rows


def _rollouts() -> list[dict]:
    rng = random.Random(1)
    rows = []

    def rollout(key: str, group: str, reward: float, advantage: float, logprobs: list[float]) -> None:
        rows.append(
            {
                "id": key,
                "rollout": {
                    "prompt": f"question of {group}",
                    "completion": f"answer {key}",
                    "completion_ids": list(range(len(logprobs))),
                    "logprobs": logprobs,
                    "reward": reward,
                    "advantage": advantage,
                    "group_id": group,
                },
            }
        )

    def logprobs(n: int = 6) -> list[float]:
        return [-rng.uniform(0.01, 3.0) for _ in range(n)]

    for g in range(10):
        rewards = [float(i % 2) for i in range(4)] if g % 2 else [0.0, 1.0, 1.0, 0.5]
        for i, r in enumerate(rewards):
            rollout(f"ro-{g}-{i}", f"g{g}", r, r - sum(rewards) / 4, logprobs())
    for i in range(4):
        rollout(f"ro-flat-{i}", "g-flat", 1.0, 0.0, logprobs())
    rollout("ro-nan-reward", "g-bad", float("nan"), 0.0, logprobs())
    rollout("ro-inf-advantage", "g-bad", 1.0, float("inf"), logprobs())
    rollout("ro-nan-logprob", "g-bad", 0.0, -0.5, logprobs()[:3] + [float("nan")] + logprobs(2))
    rollout("ro-positive-logprob", "g-bad", 0.5, 0.1, logprobs()[:4] + [0.7])
    rollout("ro-big-reward", "g-bad", 5.0, 2.0, logprobs())
    return rows


def _picture(rng: np.random.Generator, size: int = 48) -> np.ndarray:
    ys, xs = np.mgrid[0:size, 0:size]
    base = np.stack([xs * 4, ys * 4, (xs + ys) * 2], axis=-1) % 256
    return (base + rng.integers(0, 40, size=(size, size, 3))).clip(0, 255).astype(np.uint8)


def _wav(samples: np.ndarray, rate: int = 8000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((samples * 32767).astype("<i2").tobytes())
    return buffer.getvalue()


def _media(root: Path, catalog: Catalog) -> None:
    rng = np.random.default_rng(0)
    pics = {"pic-corrupt": b"\x89PNG\r\n\x1a\n this is not an image"}
    pics.update({f"pic-{i:02d}": encode_png(_picture(rng)) for i in range(12)})
    pics["pic-black"] = encode_png(np.zeros((48, 48, 3), np.uint8))
    pics["pic-gray"] = encode_png(np.full((48, 48, 3), 128, np.uint8))
    catalog.register("pics", _write(pa.table({"id": list(pics), "image": list(pics.values())}), root / "pics"), key="id", tag="v1")
    clips = {}
    for i in range(3):
        frames = [np.roll(_picture(rng, 32), 3 * t, axis=1) for t in range(12)]
        clips[f"clip-{i}"] = encode_video(frames, fps=12)
    still = _picture(rng, 32)
    clips["clip-frozen"] = encode_video([still] * 12, fps=12)
    catalog.register("clips", _write(pa.table({"id": list(clips), "video": list(clips.values())}), root / "clips"), key="id", tag="v1")
    t = np.arange(4000) / 8000
    sounds = {f"sound-{i}": _wav(0.5 * np.sin(2 * np.pi * (220 + 110 * i) * t)) for i in range(3)}
    sounds["sound-silent"] = _wav(np.zeros(4000))
    catalog.register("sounds", _write(pa.table({"id": list(sounds), "audio": list(sounds.values())}), root / "sounds"), key="id", tag="v1")


def build_lint_catalog(root: Path) -> Catalog:
    """The catalog: datasets ``texts``, ``chats``, ``rollouts``, ``pics``, ``clips``, ``sounds``, ``tiny``, and the runs of
    :data:`RUNS` plus ``lint-crops`` (crops of ``pics``: the corrupt picture fails the first batch) and ``lint-tiny`` (3
    records read 8 at a time: each is read more than once in one step)."""
    catalog = Catalog(root / "catalog")
    clean = prose()
    texts = _texts(clean)
    chat_words = {w for chat in chat_messages().values() for m in chat for w in (m["role"] + " " + m["content"]).split()}
    words = sorted({w for key, text in texts.items() if key != "text-unknown" for w in text.split()} | chat_words)
    catalog.put_tokenizer("lint-words", word_tokenizer(words))
    table = pa.table({"id": list(texts), "text": list(texts.values())})
    catalog.register("texts", _write(table, root / "texts"), key="id", tag="v1", tokenizer="lint-words")
    chats = _chats(catalog.tokenizer("lint-words"))
    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("messages", pa.list_(message)),
            ("input_ids", pa.list_(pa.int32())),
            ("loss_mask", pa.list_(pa.int8())),
            ("n", pa.int32()),
        ]
    )
    catalog.register(
        "chats", _write(pa.Table.from_pylist(chats, schema=schema), root / "chats"), key="id", tag="v1", tokenizer="lint-words"
    )
    catalog.register("rollouts", _write(pa.Table.from_pylist(_rollouts()), root / "rollouts"), key="id", tag="v1")
    _media(root, catalog)
    catalog.register(
        "tiny",
        _write(pa.table({"id": ["t0", "t1", "t2"], "text": ["one small text", "another small text", "a third text"]}), root / "tiny"),
        key="id",
        tag="v1",
    )
    ordered = Shuffle(enabled=False)
    catalog.create_run(
        "lint-texts", ReadPlan([Source("texts@v1", transforms=[Tokenize("text")])], seed=0, global_batch_size=8, epochs=1, streams=2)
    )
    catalog.create_run(
        "lint-chats",
        ReadPlan([Source("chats@v1", transforms=[UseTokens("input_ids", "loss_mask")])], seed=0, global_batch_size=4, epochs=1, streams=2),
    )
    catalog.create_run(
        "lint-rollouts", ReadPlan([Source("rollouts@v1")], seed=0, global_batch_size=8, epochs=1, streams=1, shuffle=ordered)
    )
    catalog.create_run(
        "lint-media",
        ReadPlan(
            [Source("pics@v1", weight=4), Source("clips@v1", weight=1), Source("sounds@v1", weight=1)],
            seed=0,
            global_batch_size=6,
            epochs=1,
            streams=1,
        ),
    )
    catalog.create_run(
        "lint-crops",
        ReadPlan(
            [Source("pics@v1", transforms=[RandomResizedCrop("image", size=(16, 16))])],
            seed=0,
            global_batch_size=5,
            epochs=1,
            streams=1,
            shuffle=ordered,
        ),
    )
    catalog.create_run("lint-tiny", ReadPlan([Source("tiny@v1")], seed=0, global_batch_size=8, steps=2, streams=1))
    catalog.create_run(
        "lint-wide", ReadPlan([Source("texts@v1", transforms=[Tokenize("text")])], seed=0, global_batch_size=32, epochs=1, streams=1)
    )
    catalog.create_run(
        "lint-packed",
        ReadPlan(
            [Source("texts@v1", transforms=[Tokenize("text")])],
            seed=0,
            global_batch_size=4,
            epochs=1,
            streams=2,
            transforms=[Pack(seq_len=64)],
        ),
    )
    return catalog


class RecordedBatches:
    """A run of kind ``recorded`` holding the batches another run read (what a recording of that job would hold), that
    answers only the run-kind interface (:class:`loaders.run.kinds.RunLike`, and ``version``).

    ``manifest`` may declare another plan (a job whose loader did not do what its plan said); ``steps`` may be fewer
    than the other run's (a recording still going on) and grow.
    """

    kind = "recorded"

    def __init__(self, source, *, name: str, manifest: dict | None = None, steps: int | None = None) -> None:  # noqa: ANN001
        self._source = source
        self.name = name
        self.fingerprint = "recorded-" + source.fingerprint
        self.manifest = manifest if manifest is not None else {"name": name, "kind": "recorded", "resolved": source.manifest["resolved"]}
        self.steps = source.total_steps if steps is None else steps

    @property
    def total_steps(self) -> int:
        return self.steps

    @property
    def global_batch_size(self) -> int:
        return self._source.global_batch_size

    @property
    def ledger(self):  # noqa: ANN201
        return self._source.ledger

    def world_size_at(self, step: int) -> int:
        return self._source.world_size_at(step)

    def world_size_history(self) -> list:
        return self._source.world_size_history()

    def check_step(self, step: int) -> None:
        from loaders import StepOutOfRange

        if not 0 <= step < self.steps:
            raise StepOutOfRange(f"step {step} is outside run {self.name} (steps 0 to {self.steps - 1})")

    def batch(self, step: int, rank: int = 0, *, world_size: int | None = None):  # noqa: ANN201
        self.check_step(step)
        return self._source.batch(step, rank, world_size=world_size)

    def global_batch(self, step: int):  # noqa: ANN201
        for rank in range(self.world_size_at(step)):
            yield self.batch(step, rank)

    def compare(self, batch):  # noqa: ANN001, ANN201
        return self._source.compare(batch)

    def version(self, source: int):  # noqa: ANN201
        return self._source.version(source)

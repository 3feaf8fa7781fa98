"""``batchscope attach streaming``: a run that read through MosaicML Streaming, replayed as a replayed run.

The settings are the ``StreamingDataset`` arguments (same names, same defaults), the streams, and each launch of the
job (its physical world and per-device batch size, and for a resumption the state dict it resumed from), given as
flags or as one JSON file (``--settings FILE``: :meth:`StreamingSettings.to_json`'s form, a launch's ``resume`` either
the state dict or the path of a JSON file holding it)::

    batchscope attach streaming RUN --stream PATH[,proportion=P|,repeat=R|,choose=N][,split=S] ... \\
        --launch batch_size=B[,ranks_per_node=R][,nodes=N][,workers=W] \\
        [--launch batch_size=B,ranks_per_node=R,...,resume=STATE.json] ... --epochs E [--max-steps N] \\
        [--shuffle] [--shuffle-algo A] [--shuffle-seed S] [--shuffle-block-size N] [--num-canonical-nodes N] \\
        [--partition-algo A] [--batching-method M] [--sampling-method M] [--sampling-granularity N] \\
        [--epoch-size N] [--drop-last] [--streaming-version V]

Each stream's raw MDS shards are a catalog version read in place (format ``mds``: record ``i`` is the stream's sample
``i``, in its ``index.json``'s order); each ``index.json`` is pinned. A sample's inputs are its stored fields, decoded
from checked bytes. The world a step ran on is the world of its launch, so a run resumed on another number of ranks
has one world size per launch (``world_size_history``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...errors import ReplayError
from ...sampling.where import Read, WhereReads
from ..flags import Flags, natural, positive
from ..framework import Documents, Layout, Piece, Pinned, ReplayContext, ReplayedSample, Shape, document_names
from .library import EXTRA, TITLE
from .replay import STEP_MEANING, StreamingReplay
from .settings import Launch, ResumeState, StreamingSettings, StreamSpec

#: The StreamingDataset arguments given as flags: flag → (type, default), named as StreamingDataset's arguments.
DATASET_FLAGS: dict[str, tuple[Any, Any]] = {
    "--shuffle-algo": (str, "py1e"),
    "--shuffle-seed": (natural, 9176),
    "--shuffle-block-size": (positive, None),
    "--num-canonical-nodes": (positive, None),
    "--partition-algo": (str, "relaxed"),
    "--batching-method": (str, "random"),
    "--sampling-method": (str, "balanced"),
    "--sampling-granularity": (positive, 1),
    "--epoch-size": (positive, None),
}


def _pairs(text: str, flag: str, first: str) -> dict[str, str]:
    """``VALUE,key=value,...`` (or ``key=value,...``) as a mapping; a bare first value is ``first``."""
    out: dict[str, str] = {}
    for number, part in enumerate(p for p in text.split(",") if p):
        key, sep, value = part.partition("=")
        if not sep and number == 0:
            key, value = first, part
        elif not sep:
            raise ReplayError(f"attach streaming: {flag} {text!r}: {part!r} is not key=value")
        if key in out:
            raise ReplayError(f"attach streaming: {flag} {text!r} gives {key} twice")
        out[key.strip()] = value.strip()
    return out


def _number(value: str, what: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ReplayError(f"attach streaming: {what} is {value!r}, not a number") from None


def stream_of(text: str) -> StreamSpec:
    """``PATH[,proportion=P|,repeat=R|,choose=N][,split=S]`` as a stream.

    >>> stream_of("/data/web,proportion=0.7").proportion
    0.7
    """
    given = _pairs(text, "--stream", "local")
    unknown = sorted(set(given) - {"local", "split", "proportion", "repeat", "choose"})
    if unknown or "local" not in given:
        raise ReplayError(
            f"attach streaming: --stream {text!r}: PATH then proportion=, repeat=, choose= or split= (not {', '.join(unknown)})"
        )
    weights = {k: _number(given[k], f"--stream {k}") for k in ("proportion", "repeat") if k in given}
    if "choose" in given:
        weights["choose"] = int(_number(given["choose"], "--stream choose"))
    return StreamSpec(os.path.abspath(given["local"]), given.get("split", ""), **weights)  # type: ignore[arg-type]


def _state(value: Any, where: str) -> ResumeState:
    """A launch's resume state: the state dict itself, or the path of a JSON file holding it."""
    if isinstance(value, str):
        path = value if os.path.isabs(value) else os.path.join(where, value)
        try:
            with open(path, encoding="utf-8") as handle:
                value = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ReplayError(f"attach streaming: resume state {path}: cannot be read as JSON ({exc})") from None
    return ResumeState.from_state_dict(value)


def launch_of(text: str) -> Launch:
    """``batch_size=B[,ranks_per_node=R][,nodes=N][,workers=W][,resume=STATE.json][,step=S]`` as a launch.

    >>> launch_of("batch_size=4,ranks_per_node=2,workers=1").world_size
    2
    """
    given: dict[str, Any] = _pairs(text, "--launch", "batch_size")
    unknown = sorted(set(given) - {"batch_size", "ranks_per_node", "nodes", "workers", "resume", "step"})
    if unknown:
        raise ReplayError(f"attach streaming: --launch {text!r}: unknown setting(s) {', '.join(unknown)}")
    for key in ("batch_size", "ranks_per_node", "nodes", "workers", "step"):
        if key in given:
            given[key] = int(_number(given[key], f"--launch {key}"))
    if "resume" in given:
        given["resume"] = _state(given["resume"], os.getcwd())
    return Launch(**given)


def settings_file(path: str) -> StreamingSettings:
    """The settings in a JSON file (``StreamingSettings.to_json`` form; local paths and state files relative to it)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ReplayError(f"attach streaming: --settings {path}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReplayError(f"attach streaming: --settings {path}: expected a JSON object of settings")
    where = os.path.dirname(os.path.abspath(path))
    for stream in data.get("streams") or []:
        if isinstance(stream, dict) and isinstance(stream.get("local"), str):
            stream["local"] = os.path.join(where, stream["local"])
    for launch in data.get("launches") or []:
        if isinstance(launch, dict) and launch.get("resume") is not None:
            launch["resume"] = _state(launch["resume"], where).to_json()
    return StreamingSettings.from_json(data)


@dataclass(frozen=True)
class StreamingRunSettings:
    """The Streaming settings and how the streams' samples are catalogued."""

    streaming: dict[str, Any]
    tokenizer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def settings(self) -> StreamingSettings:
        return StreamingSettings.from_json(self.streaming)


def _index(spec: StreamSpec) -> str:
    return os.path.join(spec.local, spec.split, "index.json")


def _shard_files(spec: StreamSpec, number: int) -> tuple[str, ...]:
    """The raw shard files of a stream, in its ``index.json``'s order (each one refused, named, when absent)."""
    index = _index(spec)
    try:
        with open(index, encoding="utf-8") as handle:
            shards = json.load(handle)["shards"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReplayError(f"stream {number}: {index} is missing or not an MDS index ({exc})") from None
    files = []
    for shard in shards:
        raw = (shard.get("raw_data") or {}).get("basename") if isinstance(shard, dict) else None
        path = os.path.join(spec.local, spec.split, str(raw))
        if not raw or not os.path.isfile(path):
            zipped = ((shard.get("zip_data") or {}).get("basename") if isinstance(shard, dict) else None) or ""
            held = " (only its compressed form is there: shards are read in place, never decompressed)" if zipped else ""
            raise ReplayError(f"stream {number}: shard file {path} is missing{held}")
        files.append(path)
    if not files:
        raise ReplayError(f"stream {number}: {index} lists no shards")
    return tuple(files)


class StreamingRunReplay:
    """A Streaming run behind the replay interface: Streaming's own order, samples addressed in each stream's version."""

    def __init__(self, settings: StreamingRunSettings, context: ReplayContext) -> None:
        self.settings = settings.settings
        self.replay = StreamingReplay(self.settings, cache_dir=context.work_dir)
        counts = self.replay.data.samples_per_stream.tolist()
        rows = [v.rows for v in context.versions]
        if counts != rows:
            raise ReplayError(f"Streaming reads {counts} samples per stream, their pinned shards hold {rows}")
        self.first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def shape(self) -> Shape:
        history = tuple(self.replay.world_size_history())
        return Shape(self.replay.total_steps, self.replay.global_batch_size, history[0][1], history)

    def prepare(self) -> None:
        self.replay.prepare()

    def samples(self, step: int, rank: int) -> list[ReplayedSample]:
        return [
            ReplayedSample(s.sample_id, (Piece(s.stream, s.sample_id - int(self.first[s.stream])),), s.epoch)
            for s in self.replay.batch(step, rank)
        ]

    def where(self, source: int, record: int, *, first_epoch: int, epochs: int) -> WhereReads:
        total = self.settings.epochs
        stop = min(total, first_epoch + epochs)
        found = WhereReads("", source, record, total, first_epoch, stop if stop < total else None)
        sample_id = int(self.first[source]) + record
        spans = self.replay.launches()
        for at in self.replay.where(sample_id):
            if first_epoch <= at.epoch < stop:
                span = next(span for span in reversed(spans) if span.start_step <= at.step)
                position = at.rank * span.batch_size + at.position
                found.reads.append(Read("", at.epoch, at.step, at.rank, span.world_size, at.position, position, sample_id))
        return found

    def describe(self) -> list[tuple[str, str]]:
        s = self.settings
        streams = "; ".join(
            f"{spec.local}{'/' + spec.split if spec.split else ''}"
            + "".join(f" {k}={getattr(spec, k)}" for k in ("proportion", "repeat", "choose") if getattr(spec, k) is not None)
            for spec in s.streams
        )
        dataset = ", ".join(
            f"{name}={getattr(s, name)!r}"
            for name in ("shuffle", "shuffle_algo", "shuffle_seed", "shuffle_block_size", "num_canonical_nodes", "partition_algo",
                         "batching_method", "sampling_method", "sampling_granularity", "epoch_size")
        )  # fmt: skip
        launches = "; ".join(
            f"steps {span.start_step}-{span.end_step - 1}: {span.nodes} node(s) × {span.ranks_per_node} rank(s), "
            f"{span.workers} worker(s), batch_size {span.batch_size}"
            + (f", resumed at sample {span.resumed_at_sample} of epoch {span.first_epoch}" if span.launch else "")
            for span in self.replay.launches()
        )
        return [
            ("streams", streams),
            ("StreamingDataset", f"{dataset}; DataLoader drop_last={s.drop_last}; {s.epochs} epoch(s)"),
            ("launches", launches),
            ("library", f"mosaicml-streaming {self.replay.lib.version}"),
            ("step", STEP_MEANING),
        ]


class Streaming:
    """``batchscope attach streaming``: ``StreamingDataset``'s partitioning, shuffles and batching."""

    name = "streaming"
    title = TITLE
    extra = EXTRA
    requires = ("streaming",)
    metrics_step_base = 0

    def parse(self, argv: Sequence[str]) -> StreamingRunSettings:
        parser = Flags(self.name, __doc__.split("\n\n")[1] if __doc__ else None)
        parser.add_argument("--settings", metavar="FILE", help="every setting in one JSON file (instead of the flags below)")
        parser.add_argument("--stream", action="append", default=[], metavar="PATH[,proportion=P|,repeat=R|,choose=N][,split=S]")
        parser.add_argument("--launch", action="append", default=[], metavar="batch_size=B[,ranks_per_node=R,nodes=N,workers=W,resume=F]")
        parser.add_argument("--epochs", type=positive, help="epochs the run went (the DataLoader iterated once per epoch)")
        parser.add_argument("--max-steps", type=positive, help="the step the run stopped at, when before the last epoch's end")
        parser.add_argument("--shuffle", action="store_true", help="StreamingDataset(shuffle=True)")
        for flag, (kind, default) in DATASET_FLAGS.items():
            parser.add_argument(flag, type=kind, default=default, help=f"StreamingDataset({flag[2:].replace('-', '_')}=...)")
        parser.add_argument("--drop-last", action="store_true", help="DataLoader(drop_last=True)")
        parser.add_argument(
            "--streaming-version", help="the mosaicml-streaming version the run trained with (refused if another is installed)"
        )
        parser.add_argument("--tokenizer", help="catalog tokenizer that made the streams' token columns")
        args = parser.parse(argv)
        if args.settings:
            given = [f for f in ("--stream", "--launch", "--epochs") if getattr(args, f[2:].replace("-", "_"))]
            if given:
                raise ReplayError(f"attach streaming: --settings holds every setting; {', '.join(given)} cannot be given beside it")
            return StreamingRunSettings(settings_file(args.settings).to_json(), args.tokenizer)
        missing = [f for f in ("--stream", "--launch", "--epochs") if not getattr(args, f[2:].replace("-", "_"))]
        if missing:
            raise ReplayError(f"attach streaming: {', '.join(missing)} required (or --settings FILE)")
        settings = StreamingSettings(
            streams=tuple(stream_of(s) for s in args.stream),
            launches=tuple(launch_of(text) for text in args.launch),
            epochs=args.epochs,
            max_steps=args.max_steps,
            shuffle=args.shuffle,
            drop_last=args.drop_last,
            streaming_version=args.streaming_version,
            **{flag[2:].replace("-", "_"): getattr(args, flag[2:].replace("-", "_")) for flag in DATASET_FLAGS},
        )
        return StreamingRunSettings(settings.to_json(), args.tokenizer)

    def load(self, data: dict[str, Any]) -> StreamingRunSettings:
        return StreamingRunSettings(**data)

    def layout(self, settings: StreamingRunSettings) -> Layout:
        streams = settings.settings.streams
        names = document_names([os.path.join(s.local, s.split) for s in streams])
        documents = tuple(
            Documents(name, "mds", _shard_files(spec, number), tokenizer=settings.tokenizer)
            for number, (name, spec) in enumerate(zip(names, streams))
        )
        return Layout(documents, tuple(Pinned(_index(spec), "stream index") for spec in streams))

    def check(self, settings: StreamingRunSettings, context: ReplayContext) -> None:
        """Nothing to compare before opening: Streaming keeps no fingerprint; its refusals come as the replay opens."""

    def open(self, settings: StreamingRunSettings, context: ReplayContext) -> StreamingRunReplay:
        return StreamingRunReplay(settings, context)

"""``batchscope attach olmo``: an OLMo-core run, replayed with OLMo-core's own dataset and data loader, as a replayed run.

    batchscope attach olmo RUN --checkpoint DIR [--path-map THEN=NOW]... [--dp-world-size N] [--seed N]

``DIR`` is a checkpoint the trainer wrote (``.../stepN``: its ``config.json``, trainer state ``train/rank0.pt`` and
``data_paths.txt``; a ``config.json`` alone works too, with ``--dp-world-size``). The checkpoint is read when the run is
attached (its files' checksums are kept) and checked against the data: seed, sequence lengths, OLMo-core's dataset
fingerprint, the steps its trainer state reached. Step ``s`` is OLMo-core's trainer step ``s + 1``; rank ``r`` is
data-parallel rank ``r``. A sample is one instance, its ``inputs`` what OLMo-core's data loader handed the train module
for it (``input_ids``, ``index``, and ``label_mask``, ``instance_mask``, ``doc_lens``, ``metadata`` when the dataset
makes them), with ``loss_mask`` (``label_mask`` and ``instance_mask``: the tokens the loss is computed on) and the
documents it holds (``doc_spans``). The token files are one catalog version read in place (format ``numpy-tokens``:
record ``i`` of a file is its document ``i`` by OLMo-core's own boundaries); label masks and Dolma metadata files are
pinned by OLMo-core replay's own segment checksums, kept with the run.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...errors import ReplayError, SettingMismatch
from ...sampling.where import Read, WhereReads
from ...storage.formats import format_name
from ..flags import Flags, natural, positive
from ..framework import Documents, Layout, Piece, ReplayContext, ReplayedSample, Shape, document_names
from .framework import EXTRA, TITLE, olmo_core


@dataclass(frozen=True)
class OlmoSettings:
    """The checkpoint (and the checksums of its files when attached), where its files are now, and the world."""

    checkpoint: str
    checkpoint_files: dict[str, str]
    path_map: tuple[tuple[str, str], ...] = ()
    dp_world_size: int | None = None
    seed: int | None = None
    name: str | None = None
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "path_map", tuple(tuple(p) for p in self.path_map))

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "path_map": [list(p) for p in self.path_map]}


def _path_map(text: str) -> tuple[str, str]:
    then, sep, now = text.partition("=")
    if not sep or not then or not now:
        raise ReplayError(f"attach olmo: --path-map {text!r}: give THEN=NOW (a path prefix at training time, then here)")
    return then, os.path.abspath(now) if "://" not in now else now


def _row(value: Any, row: int, count: int) -> Any:
    """Instance ``row``'s part of a batch field (a tensor or list with one entry per instance), as plain values."""
    if hasattr(value, "numpy") and getattr(value, "ndim", 0) >= 1 and len(value) == count:
        item = value[row].numpy()
        return item.tolist() if item.ndim else item.item()
    if isinstance(value, (list, tuple)) and len(value) == count:
        return value[row]
    return value.tolist() if hasattr(value, "tolist") else value


def _span(d: Any) -> dict[str, int]:
    """Where a document piece lies in its instance, as packed spans say it: tokens ``[start, end)`` of the instance are
    tokens ``[offset, offset + end - start)`` of document ``document`` (of ``length`` tokens)."""
    return {
        "document": d.number,
        "start": d.position,
        "end": d.position + d.length,
        "offset": d.piece_start - d.start,
        "length": d.end - d.start,
    }


def _pinned(pins: Sequence[Any], shown: int = 12) -> str:
    """The files OLMo-core's replay pinned (label masks, Dolma metadata; token files are the catalog version)."""
    others = [p for p in pins if p.role != "tokens"]
    listed = "; ".join(f"{p.role} {p.path} ({p.checksum[7:19]}…)" for p in others[:shown])
    more = f"; and {len(others) - shown} more" if len(others) > shown else ""
    return f"{len(pins)} file(s) checked by 64 KiB segments on every read; besides the token files: {listed or 'none'}{more}"


class OlmoRunReplay:
    """An OLMo-core run behind the replay interface: OLMo-core's batches, instances' documents addressed in the
    token files' catalog version and checked against it."""

    def __init__(self, settings: OlmoSettings, context: ReplayContext) -> None:
        from .replay import OlmoReplay

        self.settings = settings
        self.context = context
        work = Path(context.work_dir)
        made: list[OlmoReplay] = []

        def attach() -> dict[str, Any]:
            replay = OlmoReplay.attach(
                settings.checkpoint, work_dir=work, path_map=settings.path_map, dp_world_size=settings.dp_world_size, seed=settings.seed
            )
            if replay.checkpoint.read != settings.checkpoint_files:
                raise SettingMismatch(f"checkpoint {settings.checkpoint} changed while the run was being attached")
            made.append(replay)
            return replay.to_json()

        facts = context.facts("olmo-replay", attach)
        self.replay = made[0] if made else OlmoReplay.from_json(facts, work_dir=work)
        if self.replay.dp_world_size is None:
            raise ReplayError(f"checkpoint {settings.checkpoint} has no trainer state naming the world size: give --dp-world-size")
        self.version = context.versions[0]
        self.first = np.concatenate([[0], np.cumsum([s.rows for s in self.version.shards])]).astype(np.int64)

    def shape(self) -> Shape:
        r = self.replay
        return Shape(r.total_steps, r.instances_per_batch, int(r.dp_world_size or 1))

    def prepare(self) -> None:
        """Build every epoch's global indices and their inverses, and check that the token files' catalog version cuts
        them into exactly the documents OLMo-core finds (``iter_document_indices``), so a document's number in a
        sample's provenance is its record in the version."""
        self.replay.prepare(inverse=True)
        provenance = self.replay.provenance
        for file, shard in enumerate(self.version.shards):
            ends = np.asarray(provenance._document_ends(file), dtype=np.int64)
            starts = np.concatenate([[0], ends])
            starts = starts[starts < provenance.tokens_in(file)]
            cut = [t.column("start").to_numpy() for s, _, t in self.version.scan_tables(["start"]) if s == file]
            found = np.concatenate(cut) if cut else np.zeros(0, dtype=np.int64)
            if not np.array_equal(found, starts):
                raise ReplayError(
                    f"{shard.uri}: its catalog version cuts {len(found)} documents, OLMo-core {len(starts)} (other boundaries)"
                )

    def samples(self, step: int, rank: int) -> list[ReplayedSample]:
        """OLMo-core's batch for the rank (each instance checked by OLMo-core's replay against its pinned bytes), its
        instances' documents addressed in the version."""
        batch = self.replay.batch(step, rank)
        count = len(batch.instances)
        out = []
        for row, instance in enumerate(batch.instances):
            pieces = tuple(Piece(0, int(self.first[d.file]) + d.number, _span(d)) for d in instance.documents)
            inputs = {name: _row(value, row, count) for name, value in batch.batch.items()}
            label, keep = inputs.get("label_mask"), inputs.get("instance_mask")
            if label is not None or keep is not None:
                trained = [bool(m) for m in label] if label is not None else [True] * len(inputs["input_ids"])
                inputs["loss_mask"] = [int(m and keep is not False) for m in trained]
            inputs["doc_spans"] = [dict(p.span or {}) for p in pieces]
            out.append(ReplayedSample(instance.index, pieces, batch.epoch - 1, inputs))
        return out

    def where(self, source: int, record: int, *, first_epoch: int, epochs: int) -> WhereReads:
        r = self.replay
        total = -(-r.total_steps // r.batches_per_epoch)
        stop = min(total, first_epoch + epochs)
        found = WhereReads("", source, record, total, first_epoch, stop if stop < total else None)
        file = int(np.searchsorted(self.first, record, side="right")) - 1
        number = record - int(self.first[file])
        ends = r.provenance._document_ends(file)
        start = int(ends[number - 1]) if number else 0
        end = int(ends[number]) if number < len(ends) else r.provenance.tokens_in(file)
        path = r.paths[file]
        first, last = r.instance_at(path, start), r.instance_at(path, end - 1)
        if first is None:
            found.notes.append("the document lies in the tail of its token file that makes no whole instance: never read")
            return found
        last = last if last is not None else int(r.provenance.offsets[file, 1]) - 1
        width = r.instances_per_batch // int(r.dp_world_size or 1)
        for index in range(first, last + 1):
            for at in r.where(index):
                if first_epoch <= at.epoch - 1 < stop:
                    found.reads.append(
                        Read("", at.epoch - 1, at.step, at.rank, at.dp_world_size, at.position, at.rank * width + at.position, index)
                    )
        found.reads.sort(key=lambda read: (read.step, read.rank, read.sample))
        return found

    def describe(self) -> list[tuple[str, str]]:
        r = self.replay
        state = r.checkpoint.state
        sums = ", ".join(f"{name} {digest[7:19]}…" for name, digest in sorted(self.settings.checkpoint_files.items()))
        return [
            (
                "checkpoint",
                f"{self.settings.checkpoint} ({sums})" + (f"; trainer step {state.global_step}, epoch {state.epoch}" if state else ""),
            ),
            (
                "dataset",
                f"OLMo-core {type(r.dataset).__name__}: {len(r.paths)} token file(s), sequence length {r.sequence_length}, "
                f"{len(r.dataset)} instances; fingerprint {r.fingerprint[:16]}…",
            ),
            (
                "data loader",
                f"NumpyFSLDataLoader: global batch {r.global_batch_size} tokens = {r.instances_per_batch} instances, seed {r.seed}, "
                f"{r.batches_per_epoch} batches per epoch over {r.dp_world_size} data-parallel rank(s)",
            ),
            ("pinned", _pinned(r.pins)),
            ("step", f"step s is OLMo-core's trainer step s + 1 ({r.total_steps} steps); rank r is data-parallel rank r"),
            (
                "library",
                f"ai2-olmo-core {r.olmo_core_version} (the checkpoint was written by {r.checkpoint.olmo_core_version or 'an unknown version'})",
            ),
        ]


class Olmo:
    """``batchscope attach olmo``: OLMo-core's numpy fixed-sequence-length dataset and data loader."""

    name = "olmo"
    title = TITLE
    extra = EXTRA
    requires = ("olmo_core",)
    metrics_step_base = 1  # OLMo-core's trainer logs step s as s + 1

    def parse(self, argv: Sequence[str]) -> OlmoSettings:
        parser = Flags(self.name, __doc__.split("\n\n")[1] if __doc__ else None)
        parser.add_argument("--checkpoint", required=True, metavar="DIR", help="a checkpoint folder the trainer wrote, or its config.json")
        parser.add_argument(
            "--path-map", action="append", default=[], type=_path_map, metavar="THEN=NOW", help="token files moved: prefix then, prefix now"
        )
        parser.add_argument("--dp-world-size", type=positive, help="data-parallel ranks (default: the trainer state's world size)")
        parser.add_argument("--seed", type=natural, help="the data loader's seed, checked against the checkpoint")
        parser.add_argument("--name", help="catalog dataset name of the token files' documents (default: their folder's name)")
        parser.add_argument("--tokenizer", help="catalog tokenizer that made the tokens")
        args = parser.parse(argv)
        olmo_core()  # before the trainer state is unpickled with torch, which comes with OLMo-core
        from .checkpoint import read_checkpoint

        checkpoint = read_checkpoint(args.checkpoint)
        return OlmoSettings(
            checkpoint.path, dict(checkpoint.read), tuple(args.path_map), args.dp_world_size, args.seed, args.name, args.tokenizer
        )

    def load(self, data: dict[str, Any]) -> OlmoSettings:
        return OlmoSettings(**data)

    def layout(self, settings: OlmoSettings) -> Layout:
        from . import settings as olmo
        from .checkpoint import read_checkpoint

        olmo_core()
        checkpoint = read_checkpoint(settings.checkpoint)
        if checkpoint.read != settings.checkpoint_files:
            raise SettingMismatch(f"checkpoint {settings.checkpoint} changed while the run was being attached")
        options = olmo.ReplayOptions(path_map=settings.path_map, dp_world_size=settings.dp_world_size, seed=settings.seed)
        with tempfile.TemporaryDirectory(prefix="olmo-layout-") as tmp:
            dataset = olmo.build_dataset(checkpoint, options, Path(tmp))
        paths = tuple(str(p) for p in dataset.paths)
        fmt = format_name("numpy-tokens", dtype=np.dtype(dataset.dtype).name, eos=dataset.eos_token_id, bos=dataset.bos_token_id)
        name = settings.name or document_names([os.path.commonpath([os.path.dirname(p) for p in paths])])[0]
        return Layout((Documents(name, fmt, paths, kinds={"tokens": "tokens"}, tokenizer=settings.tokenizer),))

    def check(self, settings: OlmoSettings, context: ReplayContext) -> None:
        """Nothing before opening: OLMo-core's replay checks the checkpoint against the files as it opens."""

    def open(self, settings: OlmoSettings, context: ReplayContext) -> OlmoRunReplay:
        return OlmoRunReplay(settings, context)

"""``batchscope attach megatron``: a Megatron-LM run, replayed with megatron-core's own datasets, as a replayed run.

The flags are Megatron-LM's own training arguments (:func:`~loaders.replay.megatron.args.parse_args`; the job's whole
command line can be given as it is), or the arguments saved in a checkpoint (``--from-checkpoint PATH``) or written in
an arguments file (``--from-args-file FILE``), which flags given beside them override::

    batchscope attach megatron RUN --data-path W1 PREFIX1 W2 PREFIX2 ... --split S --seq-length L --seed N \\
        --global-batch-size G --micro-batch-size M --data-parallel-size D (--train-samples N | --train-iters T) \\
        [--data-cache-path DIR] [--tokenizer-type TYPE --vocab-size V ...]

Step ``s`` is iteration ``s``, rank ``r`` is data-parallel rank ``r``; a rank's samples are listed micro-batch by
micro-batch, and each sample's ``inputs`` are what megatron-core's ``GPTDataset`` returns for it (``input_ids`` is its
``tokens``; ``labels``, ``loss_mask``, ``position_ids``), with the documents it holds (``doc_spans``). Each prefix's
``.bin``/``.idx`` pair is a catalog version read in place (format ``megatron-indexed``: record ``i`` is sequence
``i``), and every sample's tokens are compared with the checked bytes of its documents there, so a data file changed
after attaching is refused, naming it. The run's cached indexes are used in place (pinned) when it kept them;
otherwise megatron-core builds them once into the replay's work folder, and their checksums are kept.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...errors import ChecksumMismatch, ReplayError
from ...sampling.where import Read, WhereReads
from ..arrays import file_digest
from ..flags import Flags
from ..framework import Documents, Layout, Piece, Pinned, ReplayContext, ReplayedSample, Shape, document_names
from ._extra import EXTRA, TITLE
from .args import MegatronArgs, parse_args, read_args_file
from .checkpoint import read_checkpoint_args

MEGATRON_FLAGS = """Megatron-LM's training arguments (named and meant as its own; the rest of a job's command line is
accepted and ignored):
  --data-path W1 PREFIX1 W2 PREFIX2 ... | PREFIX ...   --data-args-path FILE   --split S   --seq-length L
  --seed N   --global-batch-size G   --micro-batch-size M   --data-parallel-size D (or --world-size with
  --tensor-/--pipeline-/--context-model-parallel-size)   --train-samples N | --train-iters T
  --rampup-batch-size START INCREMENT SAMPLES   --iterations-to-skip I ...   --data-cache-path DIR
  --eval-iters N   --eval-interval N   --mid-level-dataset-surplus F   --reset-position-ids
  --reset-attention-mask   --eod-mask-loss   --tokenizer-type TYPE --vocab-size V (--tokenizer-model,
  --vocab-file, --merge-file, --tokenizer-special-tokens ...)"""

#: ``MegatronArgs`` fields held as tuples (JSON gives lists back).
_TUPLES = ("data_path", "rampup_batch_size", "iterations_to_skip")


def args_to_json(args: MegatronArgs) -> dict[str, Any]:
    """The arguments as JSON (what the run manifest keeps)."""
    data = dataclasses.asdict(args)
    data["tokenizer"] = [[k, list(v) if isinstance(v, tuple) else v] for k, v in args.tokenizer]
    return data


def args_from_json(data: dict[str, Any]) -> MegatronArgs:
    """:func:`args_to_json` read back."""
    values = dict(data)
    for name in _TUPLES:
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    values["tokenizer"] = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in values["tokenizer"])
    return MegatronArgs(**values)


@dataclass(frozen=True)
class MegatronSettings:
    """The run's arguments (prefixes made absolute), where they came from, and how its documents are catalogued."""

    args: dict[str, Any]
    source: str = "flags"
    tokenizer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def megatron(self) -> MegatronArgs:
        return args_from_json(self.args)


def _absolute(args: MegatronArgs) -> MegatronArgs:
    """Prefixes and the cache folder as absolute paths (a replayed run is opened from any directory)."""
    prefixes = [os.path.abspath(p) for p in args.prefixes]
    data_path = tuple(x for pair in zip(args.data_path[0::2], prefixes) for x in pair) if args.weights else tuple(prefixes)
    cache = os.path.abspath(args.data_cache_path) if args.data_cache_path else None
    return dataclasses.replace(args, data_path=data_path, data_cache_path=cache)


class MegatronRunReplay:
    """A Megatron run behind the replay interface: megatron-core's ``MegatronReplay`` with its samples' documents
    addressed in the run's catalog versions and their tokens checked against them."""

    def __init__(self, settings: MegatronSettings, context: ReplayContext) -> None:
        from .replay import MegatronReplay

        self.settings = settings
        self.context = context
        self.args = settings.megatron
        self.sources = list(dict.fromkeys(self.args.prefixes))
        work = Path(context.work_dir)
        self.replay = MegatronReplay.open(self.args, work_dir=work)
        built = context.facts("megatron-built-indexes", self._built_digests)
        if self._built_digests() != built:  # a derived file of ours changed: rebuilt, never served
            from .replay import remove_built

            remove_built(work)
            self.replay = MegatronReplay.open(self.args, work_dir=work)
            if self._built_digests() != built:
                raise ReplayError(
                    f"{work}: megatron-core's rebuilt indexes differ from those built when the run was attached; attach it again"
                )
        self.source_of = [self.sources.index(p) for p in self.args.prefixes]

    def _built_digests(self) -> dict[str, str]:
        return {str(p): file_digest(str(p)) for s in self.replay.index_sets if s.origin == "built" for p in s.files.values()}

    def shape(self) -> Shape:
        return Shape(self.replay.total_iterations, self.args.global_batch_size, self.args.data_parallel_size)

    def prepare(self) -> None:
        """Nothing left: megatron-core's indexes are found (or built) when the replay opens."""

    def samples(self, step: int, rank: int) -> list[ReplayedSample]:
        batch = self.replay.batch(step, rank)
        out = []
        for sample in batch.samples:
            source = self.source_of[sample.dataset]
            lengths = self._check_tokens(source, sample)
            pieces = tuple(
                Piece(
                    source,
                    s.document,
                    {"document": s.document, "start": s.start, "end": s.start + s.length, "offset": s.offset, "length": n},
                )
                for s, n in zip(sample.spans, lengths)
            )
            inputs: dict[str, Any] = {
                "input_ids": sample.tokens.tolist(),
                "labels": sample.labels.tolist(),
                "loss_mask": sample.loss_mask.tolist(),
                "doc_spans": [dict(p.span or {}) for p in pieces],
                "microbatch": sample.microbatch,
                "row": sample.row,
            }
            if sample.position_ids is not None:
                inputs["position_ids"] = sample.position_ids.tolist()
            if batch.skipped:
                inputs["skipped"] = True  # Megatron-LM drew this iteration's data and did not train on it
            out.append(ReplayedSample(sample.index, pieces, sample.epoch, inputs))
        return out

    def _check_tokens(self, source: int, sample: Any) -> list[int]:
        """megatron-core's tokens (and last label) against the checked bytes of the documents its spans name; returns
        each document's length."""
        version = self.context.versions[source]
        records = version.read_indices(np.asarray([s.document for s in sample.spans], dtype=np.int64))
        text = [t for s, record in zip(sample.spans, records) for t in record["tokens"][s.offset : s.offset + s.length]]
        if text != [*sample.tokens.tolist(), int(sample.labels[-1])]:
            raise ChecksumMismatch(
                f"megatron-core read sample {sample.index} from {self.sources[source]}.bin differently from its pinned bytes "
                f"(documents {', '.join(str(s.document) for s in sample.spans)}): the .bin or .idx changed after attaching"
            )
        return [len(record["tokens"]) for record in records]

    def where(self, source: int, record: int, *, first_epoch: int, epochs: int) -> WhereReads:
        prefix = self.sources[source]
        dataset = self.source_of.index(source)
        total = self.replay.epochs(dataset)
        stop = min(total, first_epoch + epochs)
        found = WhereReads("", source, record, total, first_epoch, stop if stop < total else None)
        mbs, world = self.args.micro_batch_size, self.args.data_parallel_size
        for at in self.replay.where(prefix, record):
            if not first_epoch <= at.epoch < stop:
                continue
            sample = at.microbatch * mbs + at.row
            per_rank = self.replay.schedule.microbatches_at(at.iteration) * mbs
            found.reads.append(Read("", at.epoch, at.iteration, at.rank, world, sample, at.rank * per_rank + sample, at.index))
        if len(self.source_of) != len(set(self.source_of)):
            found.notes.append(f"{prefix} is listed more than once in --data-path: every listing's reads are shown")
        return found

    def describe(self) -> list[tuple[str, str]]:
        a, replay = self.args, self.replay
        blend = " ".join(a.data_path)
        datasets = ", ".join(f"{kind}({os.path.basename(prefix or 'blend')}): {len(d)} samples" for kind, prefix, d in replay._members)
        ramp = f"; --rampup-batch-size {' '.join(map(str, a.rampup_batch_size))}" if a.rampup_batch_size else ""
        skip = f"; --iterations-to-skip {' '.join(map(str, a.iterations_to_skip))} (drawn, not trained on)" if a.iterations_to_skip else ""
        origins = sorted({f"{s.origin} ({s.files['description'].parent})" for s in replay.index_sets})
        return [
            ("arguments", self.settings.source),
            ("data", f"--data-path {blend} --split {a.split!r} --seq-length {a.seq_length} --seed {a.seed}"),
            ("datasets", f"megatron-core {datasets}"),
            (
                "sampler",
                f"MegatronPretrainingSampler: global batch {a.global_batch_size} = {a.global_batch_size // (a.micro_batch_size * a.data_parallel_size)} "
                f"micro-batch(es) of {a.micro_batch_size} × data-parallel size {a.data_parallel_size}{ramp}{skip}",
            ),
            (
                "step",
                f"step s is iteration s ({replay.total_iterations} iterations); rank r is data-parallel rank r, its samples micro-batch by micro-batch",
            ),
            ("indexes", "; ".join(origins)),
        ]


class Megatron:
    """``batchscope attach megatron``: Megatron-LM's ``GPTDataset``/``BlendedDataset`` and pretraining sampler."""

    name = "megatron"
    title = TITLE
    extra = EXTRA
    requires = ("megatron.core",)
    metrics_step_base = 1  # Megatron-LM logs iteration s as s + 1 (it counts the iterations done)

    def parse(self, argv: Sequence[str]) -> MegatronSettings:
        argv = list(argv)
        parser = Flags(self.name, __doc__.split("\n\n")[1] if __doc__ else None, epilog=MEGATRON_FLAGS)
        parser.add_argument("--from-checkpoint", metavar="PATH", help="a checkpoint folder, iter_* folder or file whose saved args to use")
        parser.add_argument("--from-args-file", metavar="FILE", help="the launch script, or a JSON/YAML mapping of argument names")
        parser.add_argument("--batchscope-tokenizer", metavar="NAME", help="catalog tokenizer that shows the tokens as text")
        ours, rest = parser.parse_known(argv)
        if ours.from_checkpoint and ours.from_args_file:
            raise ReplayError("attach megatron: give --from-checkpoint or --from-args-file, not both")
        base, source = None, "flags"
        if ours.from_checkpoint:
            saved = read_checkpoint_args(ours.from_checkpoint)
            base, source = vars(saved.args.namespace()), f"saved in checkpoint {saved.path} (iteration {saved.iteration})"
        elif ours.from_args_file:
            base = vars(read_args_file(ours.from_args_file).namespace())
            source = f"arguments file {os.path.abspath(ours.from_args_file)}"
        if base is not None:
            base["tokenizer_special_tokens"] = list(base["tokenizer_special_tokens"] or []) or None
            base["data_path"] = list(base["data_path"])
        args = _absolute(parse_args(rest, base=base))
        if rest and base is not None:
            source += " and flags"
        return MegatronSettings(args_to_json(args), source, ours.batchscope_tokenizer)

    def load(self, data: dict[str, Any]) -> MegatronSettings:
        return MegatronSettings(**data)

    def layout(self, settings: MegatronSettings) -> Layout:
        args = settings.megatron
        sources = list(dict.fromkeys(args.prefixes))
        for prefix in sources:
            for suffix in (".bin", ".idx"):
                if not os.path.isfile(prefix + suffix):
                    raise ReplayError(f"--data-path prefix {prefix}: {prefix + suffix} does not exist (moved or deleted?)")
        documents = tuple(
            Documents(name, "megatron-indexed", (prefix + ".bin",), kinds={"tokens": "tokens"}, tokenizer=settings.tokenizer)
            for name, prefix in zip(document_names(sources), sources)
        )
        return Layout(documents, tuple(Pinned(str(path), f"{role} (the run's cached index)") for path, role in _run_cache(args)))

    def check(self, settings: MegatronSettings, context: ReplayContext) -> None:
        """Nothing before opening: the run's cached indexes are checked against the arguments as the replay opens."""

    def open(self, settings: MegatronSettings, context: ReplayContext) -> MegatronRunReplay:
        return MegatronRunReplay(settings, context)


def _run_cache(args: MegatronArgs) -> list[tuple[Path, str]]:
    """The run's cached index files that megatron-core would use for these arguments (every one, or none)."""
    import tempfile

    from . import indexes
    from .schedule import Schedule

    with tempfile.TemporaryDirectory(prefix="megatron-layout-") as tmp:
        top = indexes.build_train(
            args,
            indexes.sizes(args, Schedule.of(args).total_iterations),
            path_to_cache=tmp,
            defer=True,
            tokenizer_object=indexes.tokenizer(args),
        )
        sets, missing = indexes.locate(args, top, Path(tmp) / "none")
        shutil.rmtree(tmp, ignore_errors=True)
    if missing or any(s.origin != "run cache" for s in sets):
        return []
    return [(path, role) for s in sets for role, path in s.files.items()]

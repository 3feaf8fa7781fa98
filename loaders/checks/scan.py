"""Linting a range of steps: read every rank's batch of each step through the run-kind interface, judge each sample and
each step, and log the document reads the run-wide checks need.

:func:`lint_steps` is a pure function of ``(run, steps, options)``, so ranges of steps can be linted anywhere (threads,
processes, a scan engine) and merged (:meth:`LintPart.merge`). It uses only what every kind of run answers
(:class:`~loaders.run.kinds.RunLike`: ``world_size_history``, ``world_size_at``, ``batch``, ``version``, ``manifest``);
a run that also reads consecutive steps together (``batches(steps, rank, world_size=...)``, as native runs do, giving
the same batches) is read that way, which shares the reads of neighbouring steps.

A batch that cannot be decoded is a ``decode-failure`` finding for its rank; bytes that changed since registration (a
checksum mismatch, a media file changed, a catalog file edited) stop the lint with that error: nothing else is linted.

>>> part = lint_steps(run, range(0, 4), LintOptions(), tokenizer=catalog.tokenizer)   # doctest: +SKIP
>>> part.samples                                                         # doctest: +SKIP
32
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

from ..errors import BatchscopeError, CatalogCorrupt, ChecksumMismatch, CorruptData, DecodeError, TokenizerNotFound
from .context import StepRead
from .options import LintOptions
from .part import LintPart
from .reads import SampleRead, SourceFacts, content_hash, sample_read
from .registry import CHECK, READ_EVALUATORS, STEP_EVALUATORS, ReadEvaluator
from .rl import log_groups, rollout_values
from .spec import Finding
from .steps import planned_shares

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from ..run.kinds import RunLike
    from ..sampling.batch import Batch

#: Errors that mean the bytes a run reads changed since they were registered: the lint stops, it never judges them.
DATA_CHANGED = (ChecksumMismatch, CatalogCorrupt)


class ReadContext:
    """What the check functions of one lint share: the options, each source's facts (found once) and the plan's mix."""

    def __init__(self, run: "RunLike", options: LintOptions, *, tokenizer: Callable[[str], "Tokenizer"] | None = None) -> None:
        self.run = run
        self.options = options
        self._tokenizer = tokenizer
        self._facts: dict[int, SourceFacts] = {}
        self._evaluators: dict[tuple[tuple[int, ...], bool], list[ReadEvaluator]] = {}
        #: The rollouts of the last list of samples judged (the RL checks and the group log share them).
        self.rollouts_of: tuple[list[SampleRead], list[Any]] | None = None
        self.plan = planned_shares(run.manifest)

    def selected(self, check: str) -> bool:
        return self.options.selected(check)

    def evaluators(self, sample: SampleRead) -> list[ReadEvaluator]:
        """The selected read evaluators that apply to what ``sample`` holds (found once per kind of sample)."""
        sources = tuple(sorted({d.document.source for d in sample.docs}))
        key = (sources, sample.ids is not None)
        found = self._evaluators.get(key)
        if found is None:
            facts = [self.facts(s) for s in sources]
            holds = {
                "ids": sample.ids is not None,
                "text": sample.ids is not None or any(f.columns_of("text") or f.columns_of("chat") for f in facts),
                "chat": sample.ids is not None and any(f.chat is not None for f in facts),
                "media": any(f.media for f in facts),
                "rl": any(f.columns_of("rollout") or f.columns_of("episode") for f in facts),
            }
            found = self._evaluators[key] = [
                evaluate for names, evaluate, needs in READ_EVALUATORS if holds[needs] and any(self.options.selected(n) for n in names)
            ]
        return found

    def param(self, check: str, name: str) -> Any:
        return self.options.param(check, name)

    def facts(self, source: int) -> SourceFacts:
        found = self._facts.get(source)
        if found is None:
            opener = getattr(self.run, "version", None)
            if opener is None:  # a run that cannot name its sources' versions: every column is content, no tokenizer
                found = SourceFacts(f"source {source}", "", "", {}, None)
            else:
                version = opener(source)
                found = SourceFacts.of(version, self._source_tokenizer(source, version), version.ref)
            self._facts[source] = found
        return found

    def _source_tokenizer(self, source: int, version: Any) -> "Tokenizer | None":
        """The tokenizer a source's transforms name, else its dataset's, as the run resolved it (None when there is none)."""
        if self._tokenizer is None:
            return None
        manifest = self.run.manifest
        sources = manifest.get("plan", {}).get("sources") if isinstance(manifest.get("plan"), dict) else None
        named = []
        if isinstance(sources, list) and source < len(sources) and isinstance(sources[source], dict):
            named = [t["tokenizer"] for t in sources[source].get("transforms", []) if isinstance(t, dict) and t.get("tokenizer")]
        name = named[0] if named else version.tokenizer
        if not name:
            return None
        resolved = manifest.get("resolved", {}).get("tokenizers", {}) if isinstance(manifest.get("resolved"), dict) else {}
        try:
            return self._tokenizer(resolved.get(name, name))
        except TokenizerNotFound:
            return None


def read_number(read_id: tuple[Any, ...]) -> int:
    """A number naming one read, the same in every process: an unpacked sample's global index, else a negative hash of
    the packed document's stream, source, draw and epoch.

    >>> read_number(("sample", 12)), read_number(("packed", 0, 1, 2, 0)) < 0
    (12, True)
    """
    if read_id[0] == "sample":
        return int(read_id[1])
    return -1 - (int.from_bytes(hashlib.blake2b(repr(read_id).encode(), digest_size=8).digest(), "little") >> 2)


#: Samples a lint reads at once (consecutive steps of one rank read together share their reads).
SAMPLES_PER_READ = 512


def _judge(part: LintPart, ctx: ReadContext, samples: list[SampleRead]) -> None:
    """Every selected read check over ``samples`` (of any steps and ranks, judged together so each check's fixed costs are
    paid once for many samples), and the reads and rollout groups the run-wide checks need."""
    options = ctx.options
    by_evaluator: dict[Any, list[SampleRead]] = {}
    for sample in samples:
        for evaluate in ctx.evaluators(sample):
            by_evaluator.setdefault(evaluate, []).append(sample)
    for evaluate, judged in by_evaluator.items():
        for check, place, key, detail in evaluate(judged, ctx):
            if options.selected(check):
                part.findings.append(Finding(check, CHECK[check].severity, place.step, place.rank, place.position, key, detail))
    if options.selected("rl-zero-variance"):
        log_groups(by_evaluator.get(rollout_values, samples), ctx, part.groups)
    duplicates, lengths = options.selected("duplicate"), options.selected("length-outlier")
    for doc in (d for sample in samples for d in sample.docs):
        part.documents += 1
        if not doc.starts or not (duplicates or lengths):
            continue
        facts = ctx.facts(doc.document.source)
        content = content_hash(doc.document.record, facts) if duplicates else 0
        length = doc.length if doc.length is not None else (len(doc.text(facts)) if lengths and facts.text_only else -1)
        part.reads.add(doc.step, doc.rank, doc.position, doc.key, doc.document.source, content, read_number(doc.read_id), length)


def world_sizes(run: "RunLike", steps: range) -> list[tuple[range, int]]:
    """``steps`` cut where the run's world-size history changes, each part with the world size the run says is in force.

    >>> from types import SimpleNamespace as Span
    >>> class R:
    ...     world_size_history = lambda self: [Span(start_step=0, world_size=2), Span(start_step=5, world_size=1)]
    ...     world_size_at = lambda self, step: 2 if step < 5 else 1
    >>> world_sizes(R(), range(3, 8))
    [(range(3, 5), 2), (range(5, 8), 1)]
    """
    cuts = sorted({steps.start, steps.stop} | {s.start_step for s in run.world_size_history() if steps.start < s.start_step < steps.stop})
    return [(range(a, b), run.world_size_at(a)) for a, b in zip(cuts, cuts[1:])]


def read_batches(run: "RunLike", steps: range, rank: int, world_size: int) -> list["Batch | BatchscopeError"]:
    """Rank ``rank``'s batch at each of ``steps`` (one world size), or the decoding error that step's batch raised.

    Runs that read consecutive steps together (``batches``) do so; a range that fails is read again step by step, so only
    the failing steps are lost. Bytes that changed since registration are raised, never returned.
    """
    together = getattr(run, "batches", None)
    if together is not None and len(steps) > 1:
        try:
            return list(together(steps, rank, world_size=world_size))
        except DATA_CHANGED:
            raise
        except (DecodeError, CorruptData):
            pass
    out: list[Batch | BatchscopeError] = []
    for step in steps:
        try:
            out.append(run.batch(step, rank, world_size=world_size))
        except DATA_CHANGED:
            raise
        except (DecodeError, CorruptData) as exc:
            out.append(exc)
    return out


def lint_steps(
    run: "RunLike",
    steps: range,
    options: LintOptions,
    *,
    tokenizer: Callable[[str], "Tokenizer"] | None = None,
    context: ReadContext | None = None,
) -> LintPart:
    """Lint steps ``steps`` of ``run``: the findings of every read and step check, and the reads (see the module).

    ``tokenizer`` opens a tokenizer by name or id (``catalog.tokenizer``); without it, checks that need one (unknown
    tokens, ChatML turns) find nothing. Steps are read in chunks of about :data:`SAMPLES_PER_READ` samples, the next
    chunk on a reading thread while this one is judged (reading decodes, checks and tokenizes mostly outside the GIL).
    """
    ctx = context or ReadContext(run, options, tokenizer=tokenizer)
    part = LintPart(steps)
    per_read = max(1, SAMPLES_PER_READ // max(1, run.global_batch_size))
    chunks = [
        (range(start, min(window.stop, start + per_read)), world_size)
        for window, world_size in world_sizes(run, steps)
        for start in range(window.start, window.stop, per_read)
    ]

    def read(chunk: range, world_size: int) -> list[list["Batch | BatchscopeError"]]:
        return [read_batches(run, chunk, rank, world_size) for rank in range(world_size)]

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lint-read") as reader:
        ahead = reader.submit(read, *chunks[0]) if chunks else None
        for i, (chunk, _) in enumerate(chunks):
            assert ahead is not None
            by_rank = ahead.result()  # re-raises what reading raised (data that changed): the lint stops there
            ahead = reader.submit(read, *chunks[i + 1]) if i + 1 < len(chunks) else None
            reads = [_step_reads(part, options, step, [batches[j] for batches in by_rank]) for j, step in enumerate(chunk)]
            _judge(part, ctx, [sample for r in reads for _, samples in r.ranks for sample in samples])
            for r in reads:
                _judge_step(part, ctx, r)
    return part


def _step_reads(part: LintPart, options: LintOptions, step: int, batches: list["Batch | BatchscopeError"]) -> StepRead:
    """The reads of every rank's batch at ``step``; a batch that failed is a ``decode-failure`` finding for its rank."""
    read = StepRead(step, len(batches))
    for rank, batch in enumerate(batches):
        if isinstance(batch, BatchscopeError):
            read.failed = True
            part.failed_batches += 1
            if options.selected("decode-failure"):
                part.findings.append(Finding("decode-failure", CHECK["decode-failure"].severity, step, rank, None, None, batch.message))
            continue
        samples = [sample_read(position, sample, step=step, rank=rank) for position, sample in enumerate(batch.samples)]
        part.samples += len(samples)
        read.ranks.append((rank, samples))
    return read


def _judge_step(part: LintPart, ctx: ReadContext, read: StepRead) -> None:
    options = ctx.options
    for names, evaluate in STEP_EVALUATORS:
        if any(options.selected(n) for n in names):
            for check, rank, position, key, detail in evaluate(read, ctx):
                if options.selected(check):
                    part.findings.append(Finding(check, CHECK[check].severity, read.step, rank, position, key, detail))

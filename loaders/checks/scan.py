"""Linting a range of steps: read every rank's batch of each step through the run-kind interface, judge each sample and
each step, and log the document reads the run-wide checks need.

:func:`lint_steps` is a pure function of ``(run, steps, options)``, so ranges of steps can be linted anywhere (threads,
processes, a scan engine) and merged (:meth:`LintPart.merge`). It uses only what every kind of run answers
(:class:`~loaders.run.kinds.RunLike`: ``world_size_at``, ``batch``, ``version``, ``manifest``).

A batch that cannot be decoded is a ``decode-failure`` finding for its rank; bytes that changed since registration (a
checksum mismatch, a media file changed, a catalog file edited) stop the lint with that error: nothing else is linted.

>>> part = lint_steps(run, range(0, 4), LintOptions(), catalog=catalog)   # doctest: +SKIP
>>> part.samples                                                         # doctest: +SKIP
32
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..errors import CatalogCorrupt, ChecksumMismatch, CorruptData, DecodeError, TokenizerNotFound
from .options import LintOptions
from .part import LintPart
from .reads import SampleRead, SourceFacts, content_hash, sample_read
from .registry import CHECK, READ_EVALUATORS, STEP_EVALUATORS
from .rl import log_groups
from .spec import Finding
from .steps import planned_shares

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from ..run.kinds import RunLike

#: Errors that mean the bytes a run reads changed since they were registered: the lint stops, it never judges them.
DATA_CHANGED = (ChecksumMismatch, CatalogCorrupt)


@dataclass
class StepRead:
    """One step's global batch as read: every rank's samples (ranks whose batch failed are left out and ``failed``)."""

    step: int
    world_size: int
    ranks: list[tuple[int, list[SampleRead]]] = field(default_factory=list)
    failed: bool = False


class ReadContext:
    """What the check functions of one lint share: the options, each source's facts (found once) and the plan's mix."""

    def __init__(self, run: "RunLike", options: LintOptions, *, tokenizer: Callable[[str], "Tokenizer"] | None = None) -> None:
        self.run = run
        self.options = options
        self._tokenizer = tokenizer
        self._facts: dict[int, SourceFacts] = {}
        self.plan = planned_shares(run.manifest)

    def selected(self, check: str) -> bool:
        return self.options.selected(check)

    def param(self, check: str, name: str) -> Any:
        return self.options.param(check, name)

    def facts(self, source: int) -> SourceFacts:
        found = self._facts.get(source)
        if found is None:
            version = self.run.version(source)  # type: ignore[attr-defined]
            found = self._facts[source] = SourceFacts.of(version, self._source_tokenizer(source, version), version.ref)
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


def _hash63(value: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(value).encode(), digest_size=8).digest(), "little") >> 1


def _judge_sample(part: LintPart, ctx: ReadContext, step: int, rank: int, sample: SampleRead) -> None:
    options = ctx.options
    for names, evaluate in READ_EVALUATORS:
        if not any(options.selected(n) for n in names):
            continue
        for check, key, detail in evaluate(sample, ctx):
            if options.selected(check):
                part.findings.append(Finding(check, CHECK[check].severity, step, rank, sample.position, key, detail))
    if options.selected("rl-zero-variance"):
        log_groups(sample, ctx, step, rank, part.groups)
    duplicates, lengths = options.selected("duplicate"), options.selected("length-outlier")
    for doc in sample.docs:
        part.documents += 1
        if not doc.starts or not (duplicates or lengths):
            continue
        facts = ctx.facts(doc.document.source)
        record = doc.document.record
        content = content_hash(record, facts) if duplicates else 0
        length = doc.length if doc.length is not None else (len(doc.text(facts)) if lengths and not facts.media else -1)
        part.reads.add(step, rank, sample.position, doc.key, doc.document.source, content, _hash63(doc.read_id), length)


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
    tokens, ChatML turns) find nothing.
    """
    ctx = context or ReadContext(run, options, tokenizer=tokenizer)
    part = LintPart(steps)
    for step in steps:
        world_size = run.world_size_at(step)
        read = StepRead(step, world_size)
        for rank in range(world_size):
            try:
                batch = run.batch(step, rank, world_size=world_size)
            except DATA_CHANGED:
                raise
            except (DecodeError, CorruptData) as exc:
                read.failed = True
                part.failed_batches += 1
                if options.selected("decode-failure"):
                    part.findings.append(Finding("decode-failure", CHECK["decode-failure"].severity, step, rank, None, None, exc.message))
                continue
            samples = [sample_read(position, sample) for position, sample in enumerate(batch.samples)]
            part.samples += len(samples)
            for sample in samples:
                _judge_sample(part, ctx, step, rank, sample)
            read.ranks.append((rank, samples))
        for names, evaluate in STEP_EVALUATORS:
            if any(options.selected(n) for n in names):
                for check, rank_, position, key, detail in evaluate(read, ctx):
                    if options.selected(check):
                        part.findings.append(Finding(check, CHECK[check].severity, step, rank_, position, key, detail))
    return part

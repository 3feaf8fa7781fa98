"""The last ``batchscope verify`` of a run, kept beside its ledger so pages can say "verified" or "mismatch".

``batchscope verify`` writes ``runs/{run}/verification.json`` (atomically):
the plan's fingerprint, the steps it checked, its counts and exit code, the
ledger's signature (file names and sizes) and, for each (step, rank) that
did not match, a hash of the ledger record it compared with. The record is derived
data, so it is checked against the ledger whenever it is read
(:func:`verification_state`):

- a mismatch still stands while the ledger holds the same record for that
  (step, rank) (by a hash of what it says) — a rewritten record is no longer
  blamed;
- "verified" holds while the ledger has only grown since (every file it
  checked is still there, none shorter): the steps it checked are unchanged;
- a record of another plan, or one that cannot be read, is ignored.

>>> VerificationState("mismatch", "✗ 2 (step, rank) differ from the ledger").failed
True
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from .. import storage
from ..errors import BatchscopeError
from .ledger import Ledger, LedgerEntry
from .verification import EXIT_MISMATCH, EXIT_VERIFIED, PASSING, RunVerification

RECORD_NAME = "verification.json"
RECORD_FORMAT = 1
#: Mismatched (step, rank)s kept in the record (the count is always exact).
MAX_MISMATCHES = 1000


class RecordedRun(Protocol):
    """What the record needs of a run (any kind)."""

    name: str

    @property
    def fingerprint(self) -> str: ...

    @property
    def ledger(self) -> Ledger: ...


@dataclass(frozen=True)
class Mismatch:
    """A (step, rank) whose ledger record differed from the recomputation, and a hash of that record."""

    step: int
    rank: int
    world_size: int
    record: str


def entry_hash(entry: LedgerEntry | None) -> str:
    """A hash of what a ledger record says (batch digest, indices, keys, sample digests): a rewritten record has another."""
    if entry is None:
        return ""
    said = json.dumps([entry.digest, entry.indices, entry.keys, entry.samples, entry.digest_format], ensure_ascii=False)
    return hashlib.sha256(said.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class VerifyRecord:
    """What ``batchscope verify`` found, as it is kept in ``runs/{run}/verification.json``."""

    run: str
    fingerprint: str
    start: int
    stop: int
    counts: dict[str, int]
    exit_code: int
    meaning: str
    time: str
    ledger: list[list[Any]]
    mismatches: list[Mismatch] = field(default_factory=list)
    format: int = RECORD_FORMAT

    def __post_init__(self) -> None:
        if self.stop < self.start or self.start < 0:
            raise ValueError(f"steps {self.start}:{self.stop} are not a range of steps")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "VerifyRecord":
        values = dict(data)
        values["mismatches"] = [Mismatch(**m) for m in values.get("mismatches", [])]
        return cls(**values)


@dataclass(frozen=True)
class VerificationState:
    """What a page says of a run's verification: ``status`` (``verified``, ``mismatch``, ``not verified`` or the
    meaning of another exit code), a one-line ``label``, and the first mismatched (step, rank) when there is one."""

    status: str
    label: str
    first: Mismatch | None = None
    mismatched: int = 0

    @property
    def failed(self) -> bool:
        return self.status == "mismatch"


NOT_VERIFIED = VerificationState("not verified", "not verified: batchscope verify has not checked this ledger")


def record_path(root: str, run: str) -> str:
    """Where the record of ``run`` lives in the catalog at ``root``."""
    return storage.join(root, "runs", run, RECORD_NAME)


def record_verification(root: str, run: RecordedRun, report: RunVerification, *, meaning: str) -> VerifyRecord:
    """Keep ``report`` (what ``verify`` printed, whose exit code means ``meaning``) as the run's last verification."""
    ledger = run.ledger
    mismatches = [
        Mismatch(c.step, c.rank, c.world_size, entry_hash(ledger.entry(c.step, c.rank, c.world_size)))
        for c in report.with_status("mismatch")[:MAX_MISMATCHES]
    ]
    record = VerifyRecord(
        run=run.name,
        fingerprint=run.fingerprint,
        start=report.steps.start,
        stop=report.steps.stop,
        counts=dict(report.counts),
        exit_code=report.exit_code,
        meaning=meaning,
        time=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        ledger=[list(item) for item in ledger.signature()],
        mismatches=mismatches,
    )
    storage.write_bytes_atomic(record_path(root, run.name), json.dumps(record.to_json(), sort_keys=True).encode())
    return record


def last_verification(root: str, run: RecordedRun) -> VerifyRecord | None:
    """The run's last verification record, or ``None`` (none, unreadable, or made for another plan)."""
    try:
        record = VerifyRecord.from_json(json.loads(storage.read_bytes(record_path(root, run.name))))
    except (BatchscopeError, OSError, ValueError, TypeError, KeyError):
        return None
    return record if record.fingerprint == run.fingerprint and record.format == RECORD_FORMAT else None


def _only_grew(before: list[list[Any]], now: tuple[tuple[str, int], ...]) -> bool:
    sizes = dict(now)
    return all(name in sizes and sizes[name] >= size for name, size in before)


def verification_state(root: str, run: RecordedRun) -> VerificationState:
    """What the run's last verification still says about its ledger as it is now (see the module docstring)."""
    record = last_verification(root, run)
    if record is None:
        return NOT_VERIFIED
    ledger = run.ledger
    standing = [m for m in record.mismatches if m.record and entry_hash(ledger.entry(m.step, m.rank, m.world_size)) == m.record]
    steps = f"steps {record.start}-{record.stop - 1}" if record.stop - record.start > 1 else f"step {record.start}"
    if record.exit_code == EXIT_MISMATCH and standing:
        total = record.counts.get("mismatch", len(record.mismatches)) - (len(record.mismatches) - len(standing))
        return VerificationState(
            "mismatch",
            f"✗ mismatch: {total} (step, rank) of {steps} differ from the ledger (batchscope verify, {record.time})",
            first=standing[0],
            mismatched=total,
        )
    if not _only_grew(record.ledger, ledger.signature()):
        return VerificationState("not verified", "not verified: the ledger changed since batchscope verify checked it")
    if record.exit_code == EXIT_VERIFIED:
        checked = sum(n for status, n in record.counts.items() if status != "not-reached")
        word = record.meaning if record.meaning in PASSING else "verified"  # replayed and recorded runs say their own word
        return VerificationState("verified", f"✓ {word}: {checked} (step, rank) of {steps} (batchscope verify, {record.time})")
    if record.exit_code == EXIT_MISMATCH:  # every mismatched record was rewritten since
        return VerificationState("not verified", "not verified: the mismatched ledger records changed since batchscope verify")
    return VerificationState(record.meaning, f"! {record.meaning}: {steps} (batchscope verify exit {record.exit_code}, {record.time})")

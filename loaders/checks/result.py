"""The result of a lint: its findings, in step order, and a summary (counts per check and severity, what was read) with
the rule that turns it into an exit code.

>>> result = LintResult("r", "native", range(0, 2), LintOptions(), (Finding("duplicate", "warning", 1, 0, 3, "k", "same"),), samples=8)
>>> result.fails("warning"), result.fails("error")
(True, False)
>>> result.summary()["by_check"]["duplicate"]
1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .options import LintOptions
from .registry import CHECK
from .spec import SEVERITIES, Finding, severity_rank

#: Exit codes of ``batchscope lint``: no finding at or above ``--fail-on``; some; the lint could not run.
EXIT_CLEAN, EXIT_FINDINGS, EXIT_CANNOT_LINT = 0, 1, 2


@dataclass(frozen=True)
class LintResult:
    """What linting steps ``steps`` of a run found (``complete`` is False while a growing lint has not reached the end)."""

    run: str
    kind: str
    steps: range
    options: LintOptions
    findings: tuple[Finding, ...]
    samples: int = 0
    documents: int = 0
    failed_batches: int = 0
    complete: bool = True
    total_steps: int | None = None

    def counts(self) -> dict[str, int]:
        """Findings per selected check (zeros included), in registry order."""
        counts = {name: 0 for name in self.options.checks}
        for finding in self.findings:
            counts[finding.check] = counts.get(finding.check, 0) + 1
        return counts

    def by_severity(self) -> dict[str, int]:
        counts = {severity: 0 for severity in SEVERITIES}
        for finding in self.findings:
            counts[finding.severity] += 1
        return counts

    def fails(self, fail_on: str) -> bool:
        """Whether a finding is at or above ``fail_on`` (``info``, ``warning`` or ``error``)."""
        level = severity_rank(fail_on)
        return any(severity_rank(f.severity) >= level for f in self.findings)

    def exit_code(self, fail_on: str) -> int:
        return EXIT_FINDINGS if self.fails(fail_on) else EXIT_CLEAN

    def not_run(self) -> dict[str, str]:
        """Selected checks that could not judge anything here, and why (a threshold nobody declared)."""
        out = {}
        if (
            "rl-reward-range" in self.options.checks
            and self.options.param("rl-reward-range", "min") is None
            and self.options.param("rl-reward-range", "max") is None
        ):
            out["rl-reward-range"] = "no reward range declared (--threshold rl-reward-range.min=… / .max=…)"
        return out

    def summary(self) -> dict[str, Any]:
        """``run``, ``kind``, ``steps`` (``[start, stop)``), how much was read, counts per check and severity, the checks
        that did not run, the thresholds, and whether the lint reached the run's end."""
        return {
            "run": self.run,
            "kind": self.kind,
            "steps": [self.steps.start, self.steps.stop],
            "total_steps": self.total_steps,
            "complete": self.complete,
            "samples": self.samples,
            "documents": self.documents,
            "failed_batches": self.failed_batches,
            "findings": len(self.findings),
            "by_check": self.counts(),
            "by_severity": self.by_severity(),
            "severity_of": {name: CHECK[name].severity for name in self.options.checks},
            "not_run": self.not_run(),
            "thresholds": self.options.to_json()["thresholds"],
        }

    def to_json(self, url: Callable[[Finding], str | None], *, fail_on: str | None = None) -> dict[str, Any]:
        """``{"findings": [...], "summary": {...}}``: each finding with the ``url`` of its sample (or step)."""
        summary = self.summary()
        if fail_on is not None:
            summary["fail_on"] = fail_on
            summary["exit_code"] = self.exit_code(fail_on)
        return {"findings": [{**f.to_json(), "url": url(f)} for f in self.findings], "summary": summary}

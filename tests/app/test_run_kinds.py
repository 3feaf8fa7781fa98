"""The three kinds of run share one table of what their pages may say (``loaders.run.kinds.CLAIMS``) and one way the
run page swaps a native run's plan panels for a kind's own (``KIND_PARTS`` and ``_run_<kind>.html``)."""

from __future__ import annotations

import pytest

from app.pages.runs import KIND_PARTS
from app.templating import Templates
from loaders.run.kinds import CLAIMS, LABELS, RUN_KINDS, claims
from loaders.training.verification import MATCHING, PASSING, UNCHECKED


def test_every_kind_has_its_claims_its_run_page_parts_and_its_partial():
    assert set(CLAIMS) == set(RUN_KINDS) == set(KIND_PARTS)
    env = Templates().env
    for kind in RUN_KINDS:
        module = env.get_template(f"_partials/_run_{kind}.html").module
        assert all(callable(getattr(module, name, None)) for name in ("facts", "no_metrics", "panels")), kind
        assert isinstance(module.fingerprint_of, str) and module.fingerprint_of, kind


def test_each_kind_passes_verify_only_under_its_own_label_and_only_native_claims_verified():
    assert set(PASSING) == set(LABELS.values()) and len(set(LABELS.values())) == len(LABELS)
    assert [k for k, c in CLAIMS.items() if "verified" in " ".join(c.verdicts.values())] == ["native"]
    assert claims("replayed").label in MATCHING and claims("recorded").label in UNCHECKED


@pytest.mark.parametrize(
    "kind, status, reasons, label",
    [
        ("native", "mismatch", ["digest differs"], "✗ 2 samples differ from the ledger"),
        ("replayed", "replayed", [], "✓ replayed · matches the indices the run logged"),
        ("recorded", "mismatch", ["sample 1: gone"], "✗ 2 recorded sample(s) no longer resolve — sample 1: gone"),
        ("recorded", "no-ledger", [], "not recorded"),
        ("replayed", "untrained", [], "replayed · untrained"),  # a status its kind never gives is named, not claimed
    ],
)
def test_a_verdict_says_what_its_kind_may(kind, status, reasons, label):
    assert claims(kind).verdict(status, differing=2, reasons=reasons) == label

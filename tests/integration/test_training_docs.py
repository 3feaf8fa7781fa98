"""The Lightning and transformers.Trainer examples of docs/training.md run as they are, and their ledgers verify."""

from __future__ import annotations

import re

import pytest

from tests.support.training import ROOT, finish, make_lm_run, start, verify_cli

pytestmark = pytest.mark.slow

DOC = (ROOT / "docs" / "training.md").read_text()


def _example(section: str) -> str:
    """The first Python block after the heading ``section``."""
    after = DOC[DOC.index(f"\n## {section}\n") :]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


STEPS = 8  # both examples train 8 batchscope steps (Lightning: max_steps=8; transformers: 4 steps of 2 batches)


@pytest.mark.parametrize("section", ["PyTorch Lightning", "Hugging Face `transformers.Trainer`"])
def test_the_training_examples_run_and_verify(tmp_path, section):
    run = make_lm_run(tmp_path, steps=16, name="llm-7", catalog="batchscope-data")
    script = tmp_path / "example.py"
    script.write_text(_example(section))
    finish(start(script, cwd=tmp_path))
    result = verify_cli(run)  # the plain command: the job trained 8 of the run's 16 steps
    assert result.exit_code == 0, result.output
    assert f"{STEPS} verified, 0 mismatched, 0 without a ledger entry, 0 fetched but not trained" in result.output
    beyond = run.ledger.entry(STEPS, 0, 1)  # Lightning prefetches one batch past max_steps: fetched, never trained
    assert beyond is None or not beyond.trained
    prefetched = int(beyond is not None)
    assert f"{prefetched} prefetched, {16 - STEPS - prefetched} not reached (trained through step {STEPS - 1};" in result.output

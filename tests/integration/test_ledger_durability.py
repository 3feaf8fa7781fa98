"""A hung rank loses at most the last 2 s of its ledger: the flush timer writes the tail while the main thread hangs."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.support.readpath import text_run
from tests.support.training import start, verify_cli

pytestmark = pytest.mark.slow


def test_a_hung_rank_has_its_ledger_tail_on_disk_within_two_seconds(tmp_path):
    run = text_run(tmp_path, steps=8, global_batch_size=2, trained=False)
    rank = start("hang_reader.py", run.catalog.root, run.name, "--steps", "5")
    try:
        assert rank.stdout is not None and rank.stdout.readline().strip() == "handed out 5"
        hung_at = time.monotonic()
        on_disk = []
        while time.monotonic() - hung_at < 2.5:  # the period is 2 s; 0.5 s for a loaded machine
            on_disk = [s for s in range(8) if (entry := run.ledger.entry(s, 0, 1)) is not None and entry.trained]
            if on_disk == list(range(5)):
                break
            time.sleep(0.05)
        assert on_disk == list(range(5)), f"after {time.monotonic() - hung_at:.1f} s the ledger holds trained steps {on_disk}"
        assert rank.poll() is None, "the rank should still be hanging"
        os.kill(rank.pid, signal.SIGSTOP)  # frozen from here: what is on disk now is all it will ever write
        assert run.ledger.metrics(4, 0, 1) == {"loss": 0.25}
        result = verify_cli(run, "--steps", "0:5")
        assert result.exit_code == 0, result.output
    finally:
        rank.kill()
        rank.wait()

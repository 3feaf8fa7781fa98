"""Lint and layout of the whole repository, with the ruff settings in pyproject.toml ([tool.ruff])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_finds_nothing_to_change(command: list[str]) -> None:
    done = subprocess.run([str(RUFF), *command, "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=240)
    fix = "ruff check --fix ." if command == ["check"] else "ruff format ."
    assert done.returncode == 0, f"ruff {' '.join(command)} (run `.venv/bin/{fix}`):\n{done.stdout}\n{done.stderr}"

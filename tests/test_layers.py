"""The import contract in pyproject.toml ([tool.importlinter]): layers, a library without web imports, no cycles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_contract_is_kept():
    lint = "from importlinter.cli import lint_imports_command; lint_imports_command()"  # the lint-imports command
    done = subprocess.run([sys.executable, "-c", lint, "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"lint-imports found broken import contracts:\n{done.stdout}\n{done.stderr}"
    assert "0 broken" in done.stdout, done.stdout

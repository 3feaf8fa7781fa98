"""The README is the user's manual: it opens with the two commands and documents every setting and CLI command."""

from __future__ import annotations

from pathlib import Path

from app.cli import app as cli
from app.settings import specs

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_opens_with_the_two_commands() -> None:
    first_block = README.split("```")[1]
    assert "make demo" in first_block and "make test" in first_block


def test_documents_every_setting_and_its_variable() -> None:
    for spec in specs():
        assert f"| `{spec.name}` | `{spec.env}` |" in README, spec.name


def test_documents_every_cli_command() -> None:
    names = [c.name for c in cli.registered_commands] + [g.name for g in cli.registered_groups]
    assert names
    for name in names:
        assert f"batchscope {name}" in README, name


def test_links_point_at_files_that_exist() -> None:
    import re

    root = Path(__file__).resolve().parents[1]
    for target in re.findall(r"\]\(((?:docs|bench)/[^)#]+)\)", README):
        assert (root / target).exists(), target


def test_every_test_named_as_proof_exists() -> None:
    import re

    root = Path(__file__).resolve().parents[1]
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", README)
    assert len(named) > 30
    for path, test in named:
        source = (root / path).read_text()
        assert not test or re.search(rf"def {test}\b", source), f"{path}::{test}"

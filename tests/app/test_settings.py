"""Settings: defaults, BATCHSCOPE_* variables, overrides, clear errors, and docs that cover every setting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.settings import InvalidSetting, Settings, env_name, specs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "inspector.md"


def test_environment_then_overrides() -> None:
    env = {"BATCHSCOPE_ROOT": "/data/catalog", "BATCHSCOPE_PORT": "9001", "BATCHSCOPE_TOKEN": "s3cret", "BATCHSCOPE_DIFF_SIMILARITY": "0.5"}
    settings = Settings.from_env(env, port=9002, host=None)
    assert (settings.root, settings.port, settings.token, settings.diff_similarity, settings.host) == (
        "/data/catalog",
        9002,
        "s3cret",
        0.5,
        "127.0.0.1",
    )
    assert Settings.from_env({}) == Settings()


def test_every_setting_has_an_env_var_help_and_a_default() -> None:
    names = [s.name for s in specs()]
    assert names[:4] == ["root", "host", "port", "token"]
    for spec in specs():
        assert spec.env == "BATCHSCOPE_" + spec.name.upper() == env_name(spec.name)
        assert spec.help.endswith(".") and len(spec.help) > 20
        assert getattr(Settings(), spec.name) == spec.default


@pytest.mark.parametrize(
    "env, words",
    [
        ({"BATCHSCOPE_PORT": "eighty"}, ["BATCHSCOPE_PORT='eighty'", "int"]),
        ({"BATCHSCOPE_PORT": "70000"}, ["port (BATCHSCOPE_PORT) = 70000", "0-65535"]),
        ({"BATCHSCOPE_PAGE_SIZE": "0"}, ["page_size", "1-10000"]),
        ({"BATCHSCOPE_DIFF_SIMILARITY": "1.5"}, ["diff_similarity", "0.0-1.0"]),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], words: list[str]) -> None:
    with pytest.raises(InvalidSetting) as raised:
        Settings.from_env(env)
    assert all(w in str(raised.value) for w in words)


def test_unknown_override_is_refused() -> None:
    with pytest.raises(InvalidSetting, match="unknown setting"):
        Settings.from_env({}, colour="blue")


def test_docs_document_every_setting() -> None:
    text = DOCS.read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", text, re.MULTILINE)}
    for spec in specs():
        assert spec.name in rows, f"docs/inspector.md does not document {spec.name}"
        row = rows[spec.name]
        assert f"`{spec.env}`" in row
        assert spec.help in row
        if spec.default is None:
            assert "(none)" in row
        elif spec.default == "":
            assert "(empty)" in row
        else:
            assert f"`{spec.default}`" in row


def test_serve_help_lists_every_setting() -> None:
    import shutil
    import subprocess
    import sys

    batchscope = shutil.which("batchscope") or str(Path(sys.executable).parent / "batchscope")
    done = subprocess.run([batchscope, "serve", "--help"], capture_output=True, text=True, timeout=120, env={"COLUMNS": "300", "PATH": ""})
    assert done.returncode == 0, done.stderr
    for spec in specs():
        assert f"{spec.env} (default" in done.stdout

"""The wheel (built from the source distribution): no build warnings, templates and static files shipped, and installed in a
fresh venv it serves the demo."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from loaders import Catalog
from tests.support.processes import free_port, stop, wait_until_serving

REPO = Path(__file__).resolve().parent.parent
#: What a source distribution holds: the build inputs, copied so the build writes nothing into the checkout.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "app", "loaders", "batchscope", "batchscope_demo", "templates", "static")
#: Warning categories Python and setuptools print (``SetuptoolsDeprecationWarning``, ``BuildBackendWarning``...).
WARNING = re.compile(r"\b\w*Warning\b")

pytestmark = pytest.mark.slow


def _ui_files(top: str) -> set[str]:
    return {
        str(path.relative_to(REPO)).replace(os.sep, "/")
        for path in (REPO / top).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def _run(command: list[str], *, cwd: Path | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel built from the source distribution of a copy of the sources, and both builds' output."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    output = _run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(dist)!r})"], cwd=source)
    (sdist,) = dist.glob("batchscope-*.tar.gz")
    output += _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(dist),
            str(sdist),
        ],  # fmt: skip
    )
    (built,) = dist.glob("batchscope-*.whl")
    return built, output


def test_the_build_prints_no_warnings(wheel: tuple[Path, str]) -> None:
    _, output = wheel
    assert WARNING.findall(output) == []


def test_the_wheel_ships_every_template_and_static_file_and_the_license(wheel: tuple[Path, str]) -> None:
    built, _ = wheel
    names = set(zipfile.ZipFile(built).namelist())
    shipped = {name.removeprefix("batchscope/") for name in names if name.startswith(("batchscope/templates/", "batchscope/static/"))}
    assert shipped == _ui_files("templates") | _ui_files("static")
    assert {"batchscope/__init__.py", "app/__init__.py", "loaders/__init__.py"} <= names
    demo = {name.removeprefix("batchscope_demo/") for name in names if name.startswith("batchscope_demo/")}
    assert demo == {p.name for p in (REPO / "batchscope_demo").glob("*.py")}  # the demo generator ships as its own package
    assert not [name for name in names if name.startswith("loaders/demo")]  # and not inside the read path
    metadata = zipfile.ZipFile(built).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


@pytest.fixture(scope="module")
def installed(wheel: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; its dependencies come from this interpreter's site-packages (read only)."""
    built, _ = wheel
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (target,) = venv.glob("lib/python*/site-packages")
    # Only the dependencies: a bare path line does not run this venv's own .pth files (its editable install).
    (target / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "-q",
            str(built),
        ],  # fmt: skip
        check=True,
        timeout=240,
    )
    return venv


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BATCHSCOPE_ROOT", "BATCHSCOPE_TOKEN")}


def test_installed_package_imports_from_the_venv_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    script = (
        "import app.templating as t, batchscope, batchscope_demo, loaders; from batchscope import Catalog, ReadPlan, importers;"
        "from batchscope.torch import make_loader;"
        "print(batchscope.__file__, loaders.__file__, t.TEMPLATES_DIR, t.STATIC_DIR, Catalog is loaders.Catalog,"
        " importers.import_parquet.__module__, batchscope_demo.__file__, sep='\\n')"
    )
    out = subprocess.run(
        [str(installed / "bin" / "python"), "-c", script], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    package, loaders_file, templates, static, same, importer, demo = out.stdout.split("\n")[:7]
    for path in (package, loaders_file, templates, static, demo):
        assert Path(path).is_relative_to(installed), path
    assert templates.endswith("batchscope/templates") and static.endswith("batchscope/static")
    assert same == "True" and importer == "loaders.importers.parquet"


def test_installed_wheel_serves_the_demo_outside_the_checkout(installed: Path, demo_catalog: Catalog, tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [str(installed / "bin" / "batchscope"), "serve", "--root", str(demo_catalog.root), "--port", str(port)],
        cwd=tmp_path,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(base + "/", process=process, what="installed batchscope serve", seconds=90)
        version = demo_catalog.resolve("web-text@v1").id
        for path in ("/", "/datasets/web-text", f"/datasets/web-text/versions/{version}", "/runs/demo-pretrain",
                     "/runs/demo-pretrain/steps/0/ranks/0", "/flags", "/api/docs"):  # fmt: skip
            with urllib.request.urlopen(base + path, timeout=60) as response:
                assert response.status == 200, path
                assert "<html" in response.read().decode().lower(), path
        for asset in ("app.css", "vendor/htmx.min.js"):
            with urllib.request.urlopen(f"{base}/static/{asset}", timeout=30) as response:
                assert response.read() == (REPO / "static" / asset).read_bytes()
    finally:
        stop(process)

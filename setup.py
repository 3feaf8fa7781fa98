"""Package layout that ``pyproject.toml`` cannot say: ``templates/`` and ``static/`` ship inside ``batchscope``.

In the repository they sit at the top level; in a wheel they are package data
at ``batchscope/templates`` and ``batchscope/static``, where the app looks
first (``app.templating.ui_dir``). Everything else is in ``pyproject.toml``.
"""

import os

from setuptools import find_packages, setup

#: Top-level packages: the read path, the inspector, the public API, and the demo workspace generator (``batchscope demo``).
PACKAGES = ("loaders", "app", "batchscope", "batchscope_demo")

#: Package name → folder, for every folder below ``templates/`` and ``static/``.
UI = {
    ".".join(["batchscope", *os.path.normpath(folder).split(os.sep)]): folder
    for top in ("templates", "static")
    for folder, _dirs, _files in os.walk(top)
}

setup(
    packages=find_packages(include=[name for top in PACKAGES for name in (top, f"{top}.*")]) + sorted(UI),
    package_dir=UI,
    package_data={package: ["*"] for package in UI},
)

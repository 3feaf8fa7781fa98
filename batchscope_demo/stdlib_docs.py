"""The demo's text corpus: real English prose from the docstrings of Python's standard library, collected in an
isolated interpreter so the result is the same for a given Python build."""

from __future__ import annotations

import functools
import inspect
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass

#: Docstrings shorter than this many characters (after ``inspect.cleandoc``) are skipped.
MIN_CHARS = 64


@dataclass(frozen=True)
class Doc:
    """One docstring: ``id`` is the dotted name (``json.loads``), ``kind`` module/class/function/method/property."""

    id: str
    kind: str
    text: str


def _collect_in_isolation() -> None:  # pragma: no cover - runs in a `python -I -S` subprocess
    """Import every standard-library module and print ``[[id, kind, doc], ...]`` as JSON.

    Runs as the whole program of an isolated interpreter (no site-packages, no
    environment), so only the standard library is importable and nothing a
    module does on import touches the caller's process.
    """
    import importlib
    import inspect
    import io
    import json
    import pkgutil
    import sys
    import warnings

    skip = {
        "antigravity", "this", "__hello__", "__phello__", "turtle", "turtledemo", "tkinter", "idlelib",
        "lib2to3", "pydoc_data", "ensurepip", "venv", "curses", "readline", "dbm", "msilib", "msvcrt",
        "winreg", "winsound", "nt", "xxsubtype", "xxlimited", "xxlimited_35",
    }  # fmt: skip
    real_stdout, sys.stdout = sys.stdout, io.StringIO()
    warnings.simplefilter("ignore")
    docs: dict[str, tuple[str, str]] = {}

    def add(name: str, kind: str, doc: object) -> None:
        if isinstance(doc, str) and doc.strip():
            docs[name] = (kind, doc)

    def modules():
        for name in sorted(n for n in sys.stdlib_module_names if not n.startswith("_") and n not in skip):
            try:
                module = importlib.import_module(name)
            except BaseException:
                continue
            yield module
            for info in pkgutil.iter_modules(getattr(module, "__path__", None) or [], name + "."):
                last = info.name.rsplit(".", 1)[-1]
                if last.startswith("_") or "test" in last or "win" in last:
                    continue
                try:
                    yield importlib.import_module(info.name)
                except BaseException:
                    continue

    for module in modules():
        add(module.__name__, "module", module.__doc__)
        for attr, obj in sorted(vars(module).items()):
            if attr.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            qualified = f"{module.__name__}.{attr}"
            if inspect.isclass(obj):
                add(qualified, "class", obj.__doc__)
                for member_name, member in sorted(vars(obj).items()):
                    if member_name.startswith("_"):
                        continue
                    if isinstance(member, property):
                        add(f"{qualified}.{member_name}", "property", member.__doc__)
                    elif inspect.isroutine(member) or isinstance(member, (classmethod, staticmethod)):
                        add(f"{qualified}.{member_name}", "method", getattr(member, "__doc__", None))
            elif inspect.isroutine(obj):
                add(qualified, "function", obj.__doc__)
    sys.stdout = real_stdout
    json.dump([[name, kind, doc] for name, (kind, doc) in sorted(docs.items())], sys.stdout)


@functools.lru_cache(maxsize=1)
def stdlib_docs() -> tuple[Doc, ...]:
    """Docstrings of the standard library, cleaned, deduplicated and sorted by id (cached per process).

    Deterministic for a given Python build: only the standard library is
    importable while they are collected.
    """
    source = textwrap.dedent(inspect.getsource(_collect_in_isolation)) + f"\n{_collect_in_isolation.__name__}()\n"
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-W", "ignore", "-c", source],
        capture_output=True,
        env=env,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"collecting standard-library docstrings failed (exit {done.returncode}): {tail[0]}")
    seen: set[str] = set()
    out = []
    for doc_id, kind, raw in json.loads(done.stdout):
        text = inspect.cleandoc(raw).strip()
        if len(text) < MIN_CHARS or text in seen:
            continue
        seen.add(text)
        out.append(Doc(doc_id, kind, text))
    return tuple(out)

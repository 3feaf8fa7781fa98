"""The Jinja2 environment: autoescaping everywhere, the filters templates may use, whole pages and single blocks."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any, Mapping

import jinja2
from jinja2.bccache import Bucket, BytecodeCache

from loaders.catalog.kinds import PICTURE_KINDS
from loaders.rl.facts import number_text
from loaders.run.kinds import CLAIMS

from . import urls
from .markup import segments_html, token_spans_html
from .reveal import visible

REPO = Path(__file__).resolve().parent.parent


def ui_dir(name: str) -> Path:
    """Where ``templates`` or ``static`` is: inside the installed ``batchscope`` package, else the source checkout's.

    A wheel ships both as package data of ``batchscope`` (``site-packages/batchscope/templates``);
    in the repository they sit beside the packages.
    """
    installed = REPO / "batchscope" / name
    return installed if installed.is_dir() else REPO / name


TEMPLATES_DIR = ui_dir("templates")
STATIC_DIR = ui_dir("static")

_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")


def human_bytes(n: int | float | None) -> str:
    """``1536`` → ``'1.5 KB'`` (powers of 1024).

    >>> human_bytes(1536)
    '1.5 KB'
    """
    if n is None:
        return ""
    value = float(n)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def count(n: int | None, noun: str | None = None, plural: str | None = None) -> str:
    """Thousands separators, and the noun in the right number.

    >>> count(1234, "row")
    '1,234 rows'
    >>> count(1, "row")
    '1 row'
    """
    if n is None:
        return ""
    text = f"{n:,}"
    if noun is None:
        return text
    return f"{text} {noun if n == 1 else (plural or noun + 's')}"


def short_id(value: str | None, length: int = 12) -> str:
    """The first characters of a version id or digest."""
    return "" if value is None else str(value)[:length]


def percent(share: float | None, *, signed: bool = False) -> str:
    """A share as a percentage with one decimal (``–`` when unknown); ``signed`` for deviations.

    >>> percent(0.625), percent(-0.0125, signed=True), percent(None)
    ('62.5%', '-1.2%', '–')
    """
    if share is None:
        return "–"
    return f"{100 * share:+.1f}%" if signed else f"{100 * share:.1f}%"


FILTERS = {
    "bytes": human_bytes,
    "count": count,
    "percent": percent,
    "number": number_text,
    "short_id": short_id,
    "visible": visible,
    "segments": segments_html,
    "token_spans": token_spans_html,
}


def _revision(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10] if path.is_file() else "0"


class _CompiledTemplates(BytecodeCache):
    """Compiled template code kept in memory for the whole process, so a new app does not compile its templates again.

    Jinja keys each entry by template name and file, and checks the source's
    checksum when loading it, so an edited template is compiled afresh. Every
    ``Templates`` environment has the same options, so their code is the same.
    """

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def load_bytecode(self, bucket: Bucket) -> None:
        with self._lock:
            code = self._code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        code = bucket.bytecode_to_string()
        with self._lock:
            self._code[bucket.key] = code

    def clear(self) -> None:
        with self._lock:
            self._code.clear()


_COMPILED = _CompiledTemplates()


class Templates:
    """Renders page templates and their named blocks (a fragment is a block of its page's template)."""

    def __init__(self, directory: Path = TEMPLATES_DIR, static_dir: Path = STATIC_DIR, *, form_token: str = "") -> None:
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(directory)),
            autoescape=True,  # every template, .html or not: dataset text is data, never markup
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            bytecode_cache=_COMPILED,
            auto_reload=False,  # templates ship with the package: no file stat per render (restart to see edits)
        )
        self.env.filters.update(FILTERS)
        revisions: dict[str, str] = {}

        def static_url(path: str) -> str:
            if path not in revisions:
                revisions[path] = _revision(static_dir / path)
            return urls.static(path, revisions[path])

        self.env.globals.update(urls=urls, static_url=static_url, form_token=form_token, picture_kinds=PICTURE_KINDS, run_kinds=CLAIMS)

    def warm(self) -> int:
        """Load (compile, the first time in this process) every template, so no request pays for it; returns how many.

        The app calls this at startup; requests then find each template loaded.
        """
        names = self.env.list_templates(extensions=["html"])
        for name in names:
            self.env.get_template(name)
        return len(names)

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        """The whole page."""
        return self.env.get_template(name).render(context)

    def render_block(self, name: str, block: str, context: Mapping[str, Any]) -> str:
        """One named block of a page template, rendered with the page's context."""
        template = self.env.get_template(name)
        if block not in template.blocks:
            raise KeyError(f"template {name} has no block {block!r} (blocks: {', '.join(template.blocks)})")
        return "".join(template.blocks[block](template.new_context(dict(context))))

"""Options and error handling shared by every CLI command."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console

from loaders import BatchscopeError, Catalog, CatalogCorrupt, InvalidQuery
from loaders.catalog.store import DEFAULT_ROOT
from loaders.errors import DanglingTag

console = Console()
err_console = Console(stderr=True)

#: Where ``make demo`` (``batchscope demo``) builds the demo workspace.
DEMO_ROOT = "demo-data"
#: Entries that make a directory a catalog root (a fresh or flags-only directory is not one yet).
_CATALOG_ENTRIES = ("datasets", "runs")

RootOption = Annotated[
    Optional[str],
    typer.Option(
        "--root",
        "-r",
        help="Catalog root (default: $BATCHSCOPE_ROOT, else ./batchscope-data if it holds a catalog, "
        "else ./demo-data if it does (after `make demo`), else ./batchscope-data).",
        show_default=False,
    ),
]


EngineOption = Annotated[
    Optional[str],
    typer.Option(
        "--engine",
        help="Where the scan runs: local (every core of this machine) or ray (the Ray cluster $RAY_ADDRESS names, "
        "else a local Ray; needs batchscope[ray]). Default: $BATCHSCOPE_ENGINE, else local.",
        show_default=False,
    ),
]


def _holds_catalog(path: str) -> bool:
    return any(os.path.isdir(os.path.join(path, entry)) for entry in _CATALOG_ENTRIES)


def cli_root(root: str | None) -> str:
    """The catalog root a command uses, in this order:

    1. ``--root``;
    2. ``$BATCHSCOPE_ROOT``;
    3. ``./batchscope-data`` when it holds a catalog (datasets or runs);
    4. ``./demo-data`` when it holds one (``make demo`` built it here);
    5. ``./batchscope-data`` (created when something is registered).
    """
    if root:
        return root
    if os.environ.get("BATCHSCOPE_ROOT"):
        return os.environ["BATCHSCOPE_ROOT"]
    if not _holds_catalog(DEFAULT_ROOT) and _holds_catalog(DEMO_ROOT):
        err_console.print(f"catalog root: ./{DEMO_ROOT} (the demo workspace; --root or $BATCHSCOPE_ROOT choose another)", style="dim")
        return DEMO_ROOT
    return DEFAULT_ROOT


def open_catalog(root: str | None) -> Catalog:
    """The catalog at :func:`cli_root`."""
    return Catalog(cli_root(root))


#: Exit code when the catalog itself cannot be read (a corrupt manifest, a tag pointing nowhere...): nothing could be checked.
CANNOT_CHECK = 2


def print_url(url: str) -> None:
    """A URL on a line of its own, whole: never wrapped, cut or put inside a box, so it can be copied or clicked."""
    console.print(url, soft_wrap=True, highlight=False, markup=False, overflow="ignore", crop=False)


def print_error(message: str) -> None:
    """One ``error: ...`` line on stderr."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)


@contextlib.contextmanager
def friendly_errors(exit_code: int = 1, *, failed_check: int | None = None) -> Iterator[None]:
    """Print a read-path error (or a failed write, such as a full disk) as one clear line and exit non-zero.

    A corrupt catalog file, or a tag pointing at a version the dataset does not have, exits ``CANNOT_CHECK`` (2) whatever
    ``exit_code`` is; with ``failed_check``, stored data that failed a check (an error answered with a 5xx status, such
    as a changed shard) exits with it instead.
    """
    try:
        yield
    except (CatalogCorrupt, DanglingTag) as exc:
        print_error(exc.message)
        sys.exit(CANNOT_CHECK)
    except BatchscopeError as exc:
        print_error(exc.message)
        sys.exit(failed_check if failed_check is not None and exc.status >= 500 else exit_code)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print_error(f"{exc.strerror or exc}{where}")
        sys.exit(exit_code)


def parse_steps(text: str | None, total: int) -> range:
    """``--steps A:B`` (B exclusive), ``A:`` (to the end) or ``A`` (one step) as a range; all ``total`` steps when not given.

    >>> parse_steps("3:7", 10), parse_steps("8:", 10), parse_steps(None, 4)
    (range(3, 7), range(8, 10), range(0, 4))
    """
    if not text:
        return range(total)
    start, sep, stop = text.partition(":")
    try:
        if not sep:
            return range(int(start), int(start) + 1)
        return range(int(start or 0), int(stop) if stop else total)
    except ValueError:
        raise InvalidQuery(f"--steps expects A:B, A: or A, got {text!r}") from None

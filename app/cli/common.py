"""Options and error handling shared by every CLI command."""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console

from loaders import BatchscopeError, Catalog, CatalogCorrupt, default_root

console = Console()
err_console = Console(stderr=True)

RootOption = Annotated[
    Optional[str],
    typer.Option("--root", "-r", help="Catalog root (default: $BATCHSCOPE_ROOT, else ./batchscope-data).", show_default=False),
]


def open_catalog(root: str | None) -> Catalog:
    return Catalog(root or default_root())


#: Exit code when the catalog itself cannot be read (a corrupt manifest, refs.json...): nothing could be checked.
CANNOT_CHECK = 2


def print_error(message: str) -> None:
    """One ``error: ...`` line on stderr."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)


@contextlib.contextmanager
def friendly_errors(exit_code: int = 1) -> Iterator[None]:
    """Print a read-path error (or a failed write, such as a full disk) as one clear line and exit non-zero.

    A corrupt catalog file exits ``CANNOT_CHECK`` (2) whatever ``exit_code`` is.
    """
    try:
        yield
    except CatalogCorrupt as exc:
        print_error(exc.message)
        sys.exit(CANNOT_CHECK)
    except BatchscopeError as exc:
        print_error(exc.message)
        sys.exit(exit_code)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        print_error(f"{exc.strerror or exc}{where}")
        sys.exit(exit_code)

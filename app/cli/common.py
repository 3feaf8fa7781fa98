"""Options and error handling shared by every CLI command."""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console

from loaders import BatchscopeError, Catalog, default_root

console = Console()
err_console = Console(stderr=True)

RootOption = Annotated[
    Optional[str],
    typer.Option("--root", "-r", help="Catalog root (default: $BATCHSCOPE_ROOT, else ./batchscope-data).", show_default=False),
]


def open_catalog(root: str | None) -> Catalog:
    return Catalog(root or default_root())


@contextlib.contextmanager
def friendly_errors(exit_code: int = 1) -> Iterator[None]:
    """Print a read-path error as one clear line and exit non-zero, instead of a traceback."""
    try:
        yield
    except BatchscopeError as exc:
        err_console.print(f"[bold red]error:[/] {exc.message}", highlight=False, soft_wrap=True)
        sys.exit(exit_code)

"""The ``batchscope`` command line: one typer app, subcommands grouped by resource."""

from __future__ import annotations

import typer

from . import datasets, serve

app = typer.Typer(
    name="batchscope",
    help="See exactly what a training job read.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

datasets.install(app)
serve.install(app)

for _optional in ("importers", "runs", "show", "step", "flags", "diff", "where", "attach", "tail", "query", "lint"):
    try:
        module = __import__(f"app.cli.{_optional}", fromlist=["install"])
    except ModuleNotFoundError as exc:  # a command group not built yet
        if exc.name != f"app.cli.{_optional}":
            raise
        continue
    module.install(app)


def main() -> None:
    """Entry point of the ``batchscope`` console script."""
    app()

"""CLI: serve the inspector, and build + serve the demo workspace."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .common import RootOption, console, friendly_errors


def install(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("demo")(demo)


def serve(
    root: RootOption = None,
    host: Annotated[str, typer.Option("--host", help="Interface to bind; 127.0.0.1 keeps it on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", help="Port to listen on.")] = 8000,
) -> None:
    """Serve the inspector over the catalog at ROOT."""
    from app.server import run_server
    from app.settings import Settings

    with friendly_errors():
        settings = Settings.from_env(**({"root": root} if root else {}), host=host, port=port)
        run_server(settings)


def demo(
    root: Annotated[str, typer.Option("--root", "-r", help="Where the demo workspace lives.")] = "demo-data",
    port: Annotated[int, typer.Option("--port", "-p", help="Port to serve on.")] = 8000,
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the generated data.")] = 0,
    no_serve: Annotated[bool, typer.Option("--no-serve", help="Build the workspace, then exit.")] = False,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Delete and rebuild the workspace.")] = False,
) -> None:
    """Build the demo workspace (once; reused later) and serve the inspector over it."""
    from loaders.demo import ensure_demo

    with friendly_errors():
        ensure_demo(root, seed=seed, rebuild=rebuild, log=console.print)
        if not no_serve:
            serve(root=root, host=host, port=port)

"""CLI: serve the inspector, and build + serve the demo workspace."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .common import RootOption, cli_root, console, friendly_errors


def settings_epilog() -> str:
    """Every inspector setting with its environment variable, default and help (from ``app.settings``)."""
    from app.settings import specs

    lines = ["Settings (environment variables):"]
    for spec in specs():
        default = "none" if spec.default is None else repr(spec.default)
        lines.append(f"{spec.env} (default {default}): {spec.help}")
    return "\n\n".join(lines)


def install(app: typer.Typer) -> None:
    app.command("serve", epilog=settings_epilog())(serve)
    app.command("demo")(demo)


def serve(
    root: RootOption = None,
    host: Annotated[
        Optional[str],
        typer.Option(
            "--host", help="Interface to bind (default: $BATCHSCOPE_HOST, else 127.0.0.1, this machine only).", show_default=False
        ),
    ] = None,
    port: Annotated[
        Optional[int], typer.Option("--port", "-p", help="Port to listen on (default: $BATCHSCOPE_PORT, else 8000).", show_default=False)
    ] = None,
    workers: Annotated[
        Optional[int],
        typer.Option(
            "--workers", "-w", help="Server processes (default: $BATCHSCOPE_WORKERS, else 0: one per core, at most 8).", show_default=False
        ),
    ] = None,
    allowed_hosts: Annotated[
        Optional[str],
        typer.Option(
            "--allowed-hosts",
            help="Comma-separated Host names to answer (default: $BATCHSCOPE_ALLOWED_HOSTS, else the bind address and localhost).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the inspector over the catalog at ROOT (every BATCHSCOPE_* setting applies; see docs/inspector.md).

    Its address is recorded in ROOT (server.json) while it runs, so the links other commands print open it. A port
    in use is one line naming it (exit 2).
    """
    from app.server import run_server
    from app.settings import Settings

    with friendly_errors(exit_code=2):
        settings = Settings.from_env(root=cli_root(root), host=host, port=port, workers=workers, allowed_hosts=allowed_hosts)
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
    from batchscope_demo import ensure_demo

    with friendly_errors():
        ensure_demo(root, seed=seed, rebuild=rebuild, log=console.print)
        if not no_serve:
            serve(root=root, host=host, port=port, workers=None, allowed_hosts=None)

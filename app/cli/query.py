"""CLI: ``batchscope sql QUERY`` (SQL over every registered version) and ``batchscope find RUN --where PREDICATE``
(every read of a row matching a predicate, by inverting the run's order). Bad input is one line and exit 2."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from .common import RootOption, console, err_console, friendly_errors, open_catalog, print_error

#: Exit code of a query or predicate that cannot run as written (and of any other refused input).
BAD_INPUT = 2
#: Exit code when stored data failed a check (a shard that changed after registration).
FAILED_CHECK = 1
#: Longest cell text printed in the terminal table (``--json`` and ``--csv`` print values whole).
CELL_CHARS = 80


def install(app: typer.Typer) -> None:
    app.command("sql")(sql)
    app.command("find")(find)


def _limits() -> Any:
    from app.settings import Settings

    with friendly_errors(BAD_INPUT):
        return Settings.from_env().query_limits()


def _cell(value: Any) -> str:
    from app.pages.sql import csv_value

    text = csv_value(value).replace("\n", "⏎")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def sql(
    query: Annotated[
        str, typer.Argument(metavar="QUERY", help='One SQL query; each version is a table named by its ref, e.g. "web-text@v1".')
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"columns": [...], "rows": [{column: value}...], "truncated": ...}.')
    ] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print CSV (a header row, then every row).")] = False,
    root: RootOption = None,
) -> None:
    """Run one SQL query (DuckDB) over the registered versions, read-only, from their verified shards.

    Every version is a table named by its ref in double quotes ("web-text@v1", "web-text@3f2a9c01"). Limits come from
    BATCHSCOPE_SQL_SECONDS, BATCHSCOPE_SQL_MEMORY_BYTES and BATCHSCOPE_SQL_ROWS. Exit 0: done; 2: the query cannot
    run (syntax, unknown table or column, a statement that is not a query, a limit reached); 1: a shard failed its check.
    """
    from app.pages.sql import result_csv, result_json
    from loaders.query import SqlSession

    if as_json and as_csv:
        print_error("give --json or --csv, not both")
        sys.exit(BAD_INPUT)
    limits = _limits()
    with friendly_errors(BAD_INPUT, failed_check=FAILED_CHECK):
        result = SqlSession(open_catalog(root), limits).query(query)
    if as_json:
        typer.echo(json.dumps(result_json(result), ensure_ascii=False))
    elif as_csv:
        sys.stdout.write(result_csv(result))
    else:
        table = Table(*[escape(c) for c in result.columns])
        for row in result.rows():
            table.add_row(*[escape(_cell(row.get(c))) for c in result.columns])
        console.print(table)
        err_console.print(f"{result.row_count:,} row(s) in {result.seconds:.3f} s", style="dim")
    if result.truncated:
        err_console.print(f"cut at {result.max_rows:,} rows (BATCHSCOPE_SQL_ROWS); the query returns more", style="yellow")


def find(
    run_name: Annotated[str, typer.Argument(metavar="RUN", help="Run name.")],
    where: Annotated[str, typer.Option("--where", help="A SQL boolean expression over the columns of the run's sources.")],
    steps: Annotated[Optional[str], typer.Option("--steps", help="Only steps A:B (B exclusive; A: or :B leave one end open).")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"matches": [{"step", "rank", "position", "key", "source", ...}], ...}.')
    ] = False,
    root: RootOption = None,
) -> None:
    """Every read by RUN of a row matching --where: step, rank and position (at the world size in force then), key,
    source and epoch, with the rank page's URL.

    The predicate is evaluated over each source's verified shards (DuckDB); each matching row's reads come from
    inverting the run's read order, so no step is scanned. Exit 0: done (even with no match); 2: the predicate
    cannot run, or the run cannot invert its order; 1: a shard failed its check.
    """
    from app import urls
    from app.jsonable import jsonable
    from app.settings import Settings
    from loaders.query import SqlSession
    from loaders.query.find import StepRange, find_reads

    limits = _limits()
    with friendly_errors(BAD_INPUT, failed_check=FAILED_CHECK):
        catalog = open_catalog(root)
        run = catalog.run(run_name)
        found = find_reads(run, where, session=SqlSession(catalog, limits), steps=StepRange.parse(steps))
    base = Settings.from_env().url.rstrip("/")
    if as_json:
        matches = [
            {**jsonable(m), "url": base + urls.rank(run_name, m.step, m.rank) + urls.sample_anchor(m.position)} for m in found.matches
        ]
        document = {
            "run": found.run,
            "kind": found.kind,
            "where": found.predicate,
            "steps": found.steps.text(),
            "packed": found.packed,
            "matches": matches,
            "count": len(matches),
            "truncated": found.truncated,
            "sources": jsonable(found.sources),
            "histogram": [{"start": a, "end": b, "count": n} for a, b, n in found.histogram()],
            "notes": found.notes,
        }
        typer.echo(json.dumps(document, ensure_ascii=False))
        return
    for source in found.sources:
        what = escape(source.error) if source.error else f"{source.rows:,}{'+' if source.truncated else ''} matching row(s)"
        console.print(f"[bold]{escape(source.source)}[/]: {what}", highlight=False)
    if not found.matches:
        console.print(f"no read of a matching row in steps {found.steps.text()}", style="dim")
    what = "sequence" if found.packed else "position"
    for m in found.matches:  # one line each, the URL whole so it can be copied
        url = base + urls.rank(run_name, m.step, m.rank) + urls.sample_anchor(m.position)
        typer.echo(f"step {m.step}  rank {m.rank} of {m.world_size}  {what} {m.position}  key {m.key}  {m.source}  epoch {m.epoch}  {url}")
    for note in found.notes:
        console.print(escape(note), style="dim")
    if found.truncated:
        err_console.print(f"cut at {limits.max_rows:,} (BATCHSCOPE_SQL_ROWS): there are more", style="yellow")

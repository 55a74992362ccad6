"""What every command module of the ``sgam`` CLI shares: the app, the consoles, the error handling
and exit codes, and the printing and parsing helpers."""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import asdict
from collections.abc import Callable
from datetime import date, datetime
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sgam.api import MemoryGraph, instant_arg
from sgam.graph.errors import ForgottenSubject, SgamError, StoreUnavailable, UnknownAttribute, UnknownSubject, UnknownTenant
from sgam.graph.store import Retries
from sgam.graph.codec import native

# Plain help (typer's documented rich_markup_mode=None, for every sub-app too): typer 0.29's Rich
# help panel prints a type after every option, "<bool>" after flags that take no value, where its
# plain formatter leaves flags bare (tests/unit/test_cli_help.py).
app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                  help="SGAM: schema-guided, bitemporal agent memory on Neo4j.")

console = Console()
err = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")


# Exit codes (README, "Errors"). 0: done; 1: an error (one line on stderr), or a check that found
# something (doctor, schema diff); 2: a usage error, or some input lines or items were refused
# (replay, ingest: the report names them); 3: `sgam neo4j status`: the server is not running.
EXIT_ERROR = 1
EXIT_UNKNOWN_NAME = 4   # a tenant, subject or attribute name that names nothing (or a forgotten subject)
EXIT_UNAVAILABLE = 5    # Neo4j not reachable (or it refused the credentials), after the bounded retries
UNKNOWN_NAMES = (UnknownTenant, UnknownSubject, ForgottenSubject, UnknownAttribute)


def exit_code(exc: SgamError) -> int:
    """The documented exit code of an SGAM error."""
    if isinstance(exc, UNKNOWN_NAMES):
        return EXIT_UNKNOWN_NAME
    if isinstance(exc, StoreUnavailable):
        return EXIT_UNAVAILABLE
    return EXIT_ERROR


def friendly(func: F) -> F:
    """Print an SGAM error as one line on stderr and exit with its code, instead of a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # The driver logs each retry of a failing transaction as a multi-line warning; the command
        # says the outcome in one line instead (the wait is bounded: SGAM_NEO4J_RETRY_SECONDS).
        logging.getLogger("neo4j").setLevel(logging.ERROR)
        try:
            return func(*args, **kwargs)
        except SgamError as exc:
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(exit_code(exc)) from None
        except (OSError, UnicodeDecodeError) as exc:   # a file named on the command line
            err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_ERROR) from None

    return wrapper  # type: ignore[return-value]


def retried_line(retries: Retries) -> str:
    """The summary line for write transactions that succeeded only after a retry."""
    return (f"{retries.transactions} transaction(s) retried after transient errors (deadlocks, lock "
            f"time-outs between concurrent writers), {retries.attempts} extra attempt(s); all completed")


def jsonable(value: Any) -> Any:
    value = native(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if hasattr(value, "nodes") and hasattr(value, "relationships"):
        return [n.get("id") for n in value.nodes]
    if hasattr(value, "element_id") and hasattr(value, "items"):  # a node or relationship
        return {k: jsonable(v) for k, v in value.items()}
    return value


def print_table(name: str, records: list[dict[str, Any]]) -> None:
    """The rows as a table of the columns an analyst reads (sgam/cli/tables.py); --json has them all."""
    from sgam.cli.tables import TRANSPOSED, table_rows, unbroken

    columns, rows = table_rows(name, records)
    if name in TRANSPOSED:  # one wide record: a field per line reads better than 15 columns
        console.print(f"{name}: {len(records)} row(s)", highlight=False)
        for row in rows:
            table = Table(show_header=False)
            table.add_column(style="bold", no_wrap=True)
            table.add_column(overflow="fold")
            for column, text in zip(columns, row):
                table.add_row(column, text)
            console.print(table)
        return
    table = Table(title=f"{name}: {len(records)} row(s)", title_justify="left")
    for column, whole in zip(columns, unbroken(columns, rows, console.width)):
        table.add_column(column, overflow="fold", no_wrap=whole)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def instant(text: str | None, option: str) -> datetime | None:
    """An instant option, read by the API's rule (:func:`sgam.api.instant_arg`)."""
    return None if text is None else instant_arg(text, option)


def run_planned(change: Callable[[MemoryGraph, bool], R], describe: Callable[[R], str], question: str,
                dry_run: bool, yes: bool, as_json: bool, check: Callable[[R], None] = lambda _: None) -> None:
    """A change with a dry run: ``change(graph, True)`` makes the plan (``check`` may refuse it);
    unless ``dry_run``, it is shown and confirmed (not with ``yes`` or ``as_json``) and then made;
    the last report is printed as JSON or described."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        report = change(graph, True)
        check(report)
        if not dry_run:
            if not yes and not as_json:
                console.print(describe(report), highlight=False, markup=False)
                if not typer.confirm(question):
                    raise typer.Exit(1)
            report = change(graph, False)
    if as_json:
        # R is a report dataclass; typeshed's DataclassInstance cannot bound a runtime TypeVar
        console.print_json(json.dumps(jsonable(asdict(report))))  # type: ignore[call-overload]
    else:
        console.print(describe(report), highlight=False, markup=False)

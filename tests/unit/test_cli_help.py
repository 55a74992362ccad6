"""Every command's --help reads well: every option says what it does, and a flag shows no type."""

from __future__ import annotations

from collections.abc import Iterator

from typing import Any

import typer.main
from typer.testing import CliRunner

from sgam.cli import app

runner = CliRunner()


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group under ``command`` with the words that invoke it (typer builds
    them with the Click it carries, so groups are told by their ``commands``)."""
    yield path, command
    if hasattr(command, "commands"):
        for name, sub in sorted(command.commands.items()):
            yield from commands(sub, (*path, name))


ALL = list(commands(typer.main.get_command(app)))


def test_the_walk_reaches_nested_commands() -> None:
    paths = {path for path, _ in ALL}
    assert {("forget",), ("schema", "show"), ("queue", "status"), ("bench",)} <= paths
    assert len(paths) > 30


def test_every_option_has_help_text() -> None:
    missing = [f"sgam {' '.join(path)} {'/'.join(param.opts)}"
               for path, command in ALL for param in command.params
               if param.param_type_name == "option" and not (param.help or "").strip()]
    assert missing == []


def test_forget_help_shows_no_bool_metavar() -> None:
    shown = runner.invoke(app, ["forget", "--help"], terminal_width=120)
    assert shown.exit_code == 0
    assert "--dry-run" in shown.output and "--yes" in shown.output
    assert "<bool>" not in shown.output


def test_no_help_page_shows_a_bool_metavar() -> None:
    shown = {" ".join(path): runner.invoke(app, [*path, "--help"], terminal_width=120).output
             for path, _ in ALL}
    assert all("Usage" in text for text in shown.values())
    assert [path for path, text in shown.items() if "<bool>" in text] == []


def test_the_cli_docstring_names_every_command() -> None:
    """The command list kept by hand in sgam/cli/__init__.py names every command and group of the app."""
    import re

    import sgam.cli
    from typer.main import get_command

    named = set(re.findall(r"\bsgam ([a-z][a-z0-9-]*)", sgam.cli.__doc__ or ""))
    commands = {name for name, command in get_command(app).commands.items()  # type: ignore[attr-defined]
                if not command.hidden}   # a hidden alias stays out of every list
    assert commands - named == set(), f"add these to the list in sgam/cli/__init__.py: {sorted(commands - named)}"
    assert named - commands == set(), f"the list names commands the app lacks: {sorted(named - commands)}"

"""The Neo4j Browser resources, without a browser: the style parses as Browser parses it, and the
favourites and the guide carry every named query."""

from __future__ import annotations

import io
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sgam.local import browser
from sgam.queries import load_queries


def test_style_parses_like_browser() -> None:
    rules = browser.check_style()
    for label in ("Entity", "Person", "Customer", "Account", "Policy", "Value", "Episode"):
        assert rules[f"node.{label}"]["color"].startswith("#"), label
    colours = [rules[f"node.{t}"]["color"] for t in ("Person", "Customer", "Account", "Policy")]
    assert len(set(colours)) == len(colours)
    for label in ("Entity", "Person", "Customer", "Account", "Policy", "Value"):
        assert rules[f"node.{label}"]["caption"] == "{name}"
    assert rules["relationship"]["caption"] == "{attribute} = {value} [{valid_from}, {valid_to})"
    assert rules["relationship.MENTIONS"]["caption"] == "<type>"
    # Type rules come after node.Entity: in Browser the later matching rule wins.
    order = list(rules)
    assert all(order.index("node.Entity") < order.index(f"node.{t}") for t in ("Customer", "Value"))


def test_style_command_is_the_style_on_one_line() -> None:
    command = browser.style_command()
    assert command.startswith(":style node {") and "\n" not in command
    assert browser.parse_grass(command.removeprefix(":style ")) == browser.parse_grass(browser.style())


@pytest.mark.parametrize("bad", [
    "node { caption: '{a}: {b}'; }",              # a colon inside a caption: Browser drops it
    "/* comment */ node { color: #FFFFFF; }",      # comments become part of the selector
    "node { color: #FFFFFF;",                      # unterminated
])
def test_check_style_rejects_what_browser_would_ignore(bad: str) -> None:
    with pytest.raises(ValueError):
        browser.check_style(bad)


def test_favorites_zip_has_every_query_with_its_params() -> None:
    archive = zipfile.ZipFile(io.BytesIO(browser.favorites_zip()))
    names = set(archive.namelist())
    for query in load_queries().values():
        path = f"{browser.FAVORITES_FOLDER}/{query.name}.cypher"
        assert path in names
        text = archive.read(path).decode("utf-8")
        first, *rest = text.splitlines()
        assert first == f"// SGAM {query.name}: {query.doc}"
        params, cypher = rest[:len(query.params)], rest[len(query.params):]
        assert "\n".join(params) == query.param_script()
        assert all(line.startswith(":param ") and line.endswith(";") for line in params)
        assert "\n".join(cypher).strip() == query.text.strip()
    assert f"{browser.FAVORITES_FOLDER}/0-picture.cypher" in names
    assert all(n.endswith(".cypher") for n in names)


class _Guide(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.slides = 0
        self.code: list[str] = []
        self._in_code = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "slide":
            self.slides += 1
        if tag == "pre" and "runnable" in (dict(attrs).get("class") or ""):
            self._in_code = True
            self.code.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self._in_code = False

    def handle_data(self, data: str) -> None:
        if self._in_code:
            self.code[-1] += data


def test_guide_has_a_runnable_slide_per_query() -> None:
    guide = _Guide()
    guide.feed(browser.render_guide())
    queries = load_queries()
    assert guide.slides == 2 + len(queries)
    assert browser.style_command() in guide.code
    for query in queries.values():
        assert any(query.text.strip() in code for code in guide.code), query.name


def test_export_and_help(tmp_path: Path) -> None:
    paths = browser.export(tmp_path / "out")
    assert [p.name for p in paths] == [browser.STYLE_FILE, browser.FAVORITES_FILE, browser.GUIDE_FILE]
    assert paths[0].read_text(encoding="utf-8") == browser.style()
    help_text = browser.browser_help("http://127.0.0.1:7474/browser/", paths[0])
    assert browser.CONFIG_COMMAND in help_text and "http://127.0.0.1:7474/browser/" in help_text
    # CLI commands, not Python calls; the style as a file to drop or a URL to load, never as a
    # one-line :style that a terminal hard-wraps inside a caption
    assert f"drag {paths[0]}" in help_text and ":style http://localhost:PORT/sgam.grass" in help_text
    assert "`sgam browser export DIR`" in help_text and "`sgam browser guide`" in help_text
    assert ":play URL" in help_text and "sgam.browser." not in help_text and ":style node" not in help_text
    assert max(len(line) for line in help_text.splitlines()) <= 120


def test_cli_help_writes_the_style_it_names(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sgam.cli import app

    result = CliRunner().invoke(app, ["browser", "help", "--dir", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    written = tmp_path / "b" / browser.STYLE_FILE
    assert written.read_text(encoding="utf-8") == browser.style()
    assert f"drag {written}" in result.stdout


def test_readme_shows_the_picture_query_the_demo_prints() -> None:
    """Pasted from the README, the query draws what `sgam demo` prints: only facts valid now
    (pol-basic, which ended in April, is not drawn under acc-1001)."""
    from sgam.demo import BROWSER_QUERY

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert BROWSER_QUERY in readme
    assert "f.valid_from <= datetime()" in BROWSER_QUERY and "datetime() < f.valid_to" in BROWSER_QUERY

"""The named queries' headers and their generated README, without a database."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from sgam.graph.errors import InvalidDelta
from sgam.queries import docs
from sgam.queries.loader import load_queries, parse

QUERIES = Path(__file__).resolve().parents[2] / "queries"

# What issue 5 asks the analysts' library to answer, by query name.
REQUIRED = {
    "current", "as-of", "history", "history-chain", "provenance", "changes", "customer-policies",
    "neighbourhood", "traverse", "stale", "low-confidence", "quarantine", "subgraph", "doctor",
}


def test_committed_readme_is_the_generated_one() -> None:
    committed = (QUERIES / "README.md").read_text(encoding="utf-8")
    assert committed == docs.render_readme(), (
        "queries/README.md is out of date: regenerate it with `sgam query --readme > queries/README.md`"
    )


def test_every_file_is_loaded_and_documented() -> None:
    files = sorted(p.name for p in QUERIES.glob("*.cypher"))
    queries = load_queries()
    assert sorted(q.path for q in queries.values()) == files
    assert REQUIRED <= set(queries)
    readme = docs.render_readme()
    for name in queries:
        assert f"## `{name}`" in readme


@pytest.mark.parametrize("name", sorted(load_queries()))
def test_header_is_complete(name: str) -> None:
    query = load_queries()[name]
    assert query.name and query.doc and query.example and query.params
    assert docs.problems(query) == []
    assert sorted(docs.example_keys(query.example)) == sorted(p.name for p in query.params)


@pytest.mark.parametrize("name", sorted(load_queries()))
def test_queries_only_read(name: str) -> None:
    text = load_queries()[name].text.upper()
    for clause in ("CREATE ", "MERGE ", "DELETE ", " SET ", "REMOVE ", "LOAD CSV"):
        assert clause not in text, f"{name} contains {clause.strip()}"


def test_examples_are_browsers_arrow_form() -> None:
    """Browser evaluates `:param name => expression` on the server; its map form does not (a
    datetime('...') stays a string, 10 becomes 10.0), so no example may use the map form."""
    keys = docs.example_keys(
        ":param tenant => 'a:b'\n:param at => datetime('2026-06-02T00:00:00Z');\n"
        ":param xs => ['p: q', 'r => s']\n:param n => null"
    )
    assert keys == ["tenant", "at", "xs", "n"]
    for bad in (":param {tenant: 'x'}", "tenant => 'x'", ":param tenant: 'x'", ":param tenant =>"):
        with pytest.raises(ValueError, match="arrow form"):
            docs.example_keys(bad)
    for query in load_queries().values():
        assert all(line.startswith(":param ") and " => " in line and not line.startswith(":param {")
                   for line in query.example.splitlines()), query.name
        script = query.param_script().splitlines()
        assert [s.rstrip(";") for s in script] == query.example.splitlines()
        assert all(s.endswith(";") for s in script)


def test_every_printed_example_is_the_param_script() -> None:
    """queries/README.md, the favourites and the guide print the same generated lines."""
    from sgam.local import browser

    readme = docs.render_readme()
    favourites = browser.favorites()
    guide = browser.render_guide()
    for query in load_queries().values():
        script = query.param_script()
        assert f"```cypher\n{script}\n```" in readme, query.name
        assert script in favourites[f"{browser.FAVORITES_FOLDER}/{query.name}.cypher"]
        assert html.escape(script) in guide, query.name
    assert "\n:param {" not in readme and ":param {" not in guide  # the intro names it, as the wrong form
    assert not any(":param {" in text for text in favourites.values())


def test_problems_name_what_is_wrong() -> None:
    query = parse(
        "// name: bad\n// doc: a short one\n// param: tenant string  the tenant\n"
        "// param: unused int  never used\n// example: :param tenant => 'x'\n// example: :param other => 1\n"
        "MATCH (n {tenant_id: $tenant, id: $undeclared}) RETURN n\n"
    )
    found = " | ".join(docs.problems(query))
    assert "too short" in found and "'unused'" in found and "undeclared" in found
    assert "the example :param names ['tenant', 'other']" in found


def test_bounded_and_float_parameters_are_checked() -> None:
    hops = load_queries()["neighbourhood"]
    base = {"tenant": "t", "subject": "s", "valid_at": "2026-06-02"}
    assert hops.bind({**base, "hops": "2"})["hops"] == 2
    for bad in ("0", "5", "two", 2.5):
        with pytest.raises(InvalidDelta, match=r"parameter 'hops' must be int\[1\.\.4\]"):
            hops.bind({**base, "hops": bad})
    low = load_queries()["low-confidence"]
    assert low.bind({"tenant": "t", "threshold": "0.25"})["threshold"] == 0.25
    with pytest.raises(InvalidDelta, match=r"'threshold' must be float\[0\.\.1\]"):
        low.bind({"tenant": "t", "threshold": "1.5"})
    with pytest.raises(InvalidDelta, match="needs parameter 'threshold'"):
        low.bind({"tenant": "t"})


def test_a_date_that_does_not_parse_names_the_parameter() -> None:
    changes = load_queries()["changes"]
    with pytest.raises(InvalidDelta, match=r"parameter 'since' must be datetime.*'2026-13-45'"):
        changes.bind({"tenant": "t", "since": "2026-13-45", "until": "2026-12-01"})
    with pytest.raises(InvalidDelta, match="'until'"):
        changes.bind({"tenant": "t", "since": "2026-01-01", "until": "2026-12-01T10:00"})

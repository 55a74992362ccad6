"""The rewrite that lets a named read run once per row of a batch (current_many): the query reads
its arguments from the row's ``args`` variable, and every clause's WITH carries it along."""

from __future__ import annotations

import re

import pytest

from sgam.api import _per_row
from sgam.queries.loader import get_query, packed


@pytest.mark.parametrize("name", ["current", "as-of", "history"])
def test_a_named_read_reads_only_the_rows_arguments(name: str) -> None:
    text = _per_row(get_query(name).packed_text)
    assert "$" not in text
    assert "args." in text
    # every WITH that starts a clause keeps `args` (STARTS WITH is an operator, left alone)
    clauses = re.findall(r"(?<!STARTS )(?<!ENDS )\bWITH\s+(\S+)", text)
    assert clauses and all(c == "args," for c in clauses), clauses
    assert "STARTS WITH args.attribute" in text or name == "history"


@pytest.mark.parametrize("text", [
    "MATCH (n) WHERE n.id = $args.id AND n.at < $now RETURN n",        # another parameter
    "MATCH (n {id: $args.id}) WITH DISTINCT n RETURN n",                # WITH DISTINCT cannot carry args
    "MATCH (n {id: $args.id}) WITH * RETURN n",
    "CALL () { MATCH (n {id: $args.id}) RETURN n } RETURN n",          # a subquery that imports nothing
])
def test_a_text_it_cannot_rewrite_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="per row"):
        _per_row(text)


def test_the_packed_known_check_is_rewritten_too() -> None:
    from sgam.api import KNOWN
    text = _per_row(packed(KNOWN, ("tenant", "subjects")))
    assert "$" not in text and "args.tenant" in text and "args.subjects" in text


def test_instants_are_sent_as_text_that_the_query_reads_as_instants() -> None:
    """Every datetime parameter of every named query: the packed text reads it only through
    ``datetime($args.name)``, and it is sent as ISO 8601 text; other parameters stay as they are."""
    from datetime import datetime, timezone

    from sgam.queries.loader import load_queries

    instant = datetime(2026, 6, 2, 12, 30, 15, 250_000, tzinfo=timezone.utc)
    checked = 0
    for query in load_queries().values():
        instants = {p.name for p in query.params if p.type == "datetime"}
        for name in instants:
            assert f"$args.{name}" in query.packed_text
            assert query.packed_text.count(f"$args.{name}") == query.packed_text.count(f"datetime($args.{name})")
            checked += 1
        bound = {p.name: instant if p.name in instants else "x" for p in query.params}
        sent = query.sendable({**bound, "subjects": ["s"]})
        assert sent == {**{n: instant.isoformat() if n in instants else "x" for n in bound}, "subjects": ["s"]}
        assert all(datetime.fromisoformat(sent[n]) == instant for n in instants)
    assert checked >= 5  # as-of's valid_at and known_at, and other time-travel reads
    assert packed("RETURN $a, $b, $c", {"a", "b"}, {"b"}) == "RETURN $args.a, datetime($args.b), $c"

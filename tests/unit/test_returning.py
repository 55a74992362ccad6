"""A typed read's last RETURN computes only the columns it uses (``loader.returning``).

The rule: keep the items whose name is asked for or named by the ``ORDER BY``/``SKIP``/``LIMIT``
after the clause, in their order; leave the text as written when dropping an item could change
which rows come back (``DISTINCT``, an aggregation, whose other items group it, a ``UNION``), when
the clause is not a list of ``expression AS name`` items, or when a column asked for is not among
them. tests/integration/test_query_folding.py holds every shipped query to its own answers.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgam.queries.loader import FACT_COLUMNS, load_queries, returning

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: n.upper() not in {"AS", "OR", "AND", "IN", "IS", "NOT", "XOR", "NULL", "TRUE", "FALSE"})
# Expressions whose commas, quotes and brackets must not split an item.
EXPRESSIONS = st.sampled_from([
    "n.a", "n {.a, .b, c: toString(n.c)}", "[x IN n.list WHERE x > 1 | x]", "'a, b'", '"x, (y"',
    "coalesce(n.a, n.b, 'c')", "CASE WHEN n.a IN ['p', 'q'] THEN 1 ELSE 2 END", "{k: [1, 2], j: {m: 3}}",
    "size(n.list)", "n.a + ', ' + n.b",
])


@given(st.lists(st.tuples(EXPRESSIONS, NAMES), min_size=1, max_size=6, unique_by=lambda t: t[1]), st.data())
def test_only_the_columns_asked_for_and_the_order_keys_are_kept(items: list[tuple[str, str]],
                                                                data: st.DataObject) -> None:
    names = [name for _, name in items]
    asked = tuple(data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
    ordered = data.draw(st.lists(st.sampled_from(names), unique=True))
    tail = ("\nORDER BY " + ", ".join(ordered)) if ordered else ""
    text = "MATCH (n)\nRETURN " + ", ".join(f"{e} AS {a}" for e, a in items) + tail + "\n"
    kept = [(e, a) for e, a in items if a in asked or a in ordered]
    expected = text if len(kept) == len(items) else \
        "MATCH (n)\nRETURN " + ", ".join(f"{e} AS {a}" for e, a in kept) + tail + "\n"
    assert returning(text, asked) == expected


@pytest.mark.parametrize("text", [
    "MATCH (n)\nRETURN DISTINCT n.a AS a, n AS fact\n",                       # rows depend on every item
    "MATCH (n)\nRETURN n.a AS a, count(n) AS fact\n",                         # a is a grouping key
    "MATCH (n)\nRETURN n.a AS a, collect(n) AS fact\n",
    "MATCH (n)\nRETURN n.a AS a, n AS fact\nUNION\nMATCH (n)\nRETURN n.a AS a, n AS fact\n",
    "MATCH (n)\nRETURN n.a AS a, n.b AS b\n",                                 # no column fact
    "MATCH (n)\nRETURN n.a AS a, n AS fact, n.*\n",                           # not a plain item
    "MATCH (n) RETURN n.a AS a, n AS fact\n",                                 # not a clause of its own line
    "MATCH (n)\nRETURN n.a AS a, n {.x AS fact\n",                           # unbalanced
])
def test_a_return_whose_rows_depend_on_its_items_or_that_is_not_plain_stays(text: str) -> None:
    assert returning(text, FACT_COLUMNS) == text


def test_a_return_inside_a_subquery_is_not_the_last_clause() -> None:
    text = "CALL () {\n  MATCH (n)\n  RETURN n.a AS a, n AS fact\n}\nRETURN a, fact\nORDER BY a\n"
    assert returning(text, FACT_COLUMNS) == text  # the last RETURN keeps a: the order names it
    assert returning(text.replace("ORDER BY a", "LIMIT 1"), FACT_COLUMNS) == \
        "CALL () {\n  MATCH (n)\n  RETURN n.a AS a, n AS fact\n}\nRETURN fact\nLIMIT 1\n"


@pytest.mark.parametrize("name", ["current", "as-of", "history"])
def test_a_typed_read_computes_its_fact_and_its_order_keys(name: str) -> None:
    query = load_queries()[name]
    text = returning(query.text, FACT_COLUMNS)
    last = text[text.rindex("\nRETURN "):]
    order = re.search(r"ORDER BY (.*)", last)
    assert order is not None
    aliases = re.findall(r"\bAS (\w+)", last)
    assert sorted(aliases) == sorted([*order.group(1).replace(" ", "").split(","), "fact"])
    # Its stopping form keeps at most $args.first rows before that RETURN, which is cut the same way.
    bound = {p.name: None for p in query.params} | {"tenant": "t", "subject": "s", "attribute": "a"}
    stopping = query.packed_for(bound, aliases=False, stop=True, columns=FACT_COLUMNS)
    if query.stops_early:
        head, last = stopping[:stopping.rindex("\nRETURN ")], stopping[stopping.rindex("\nRETURN "):]
        assert head.endswith("\nWITH * LIMIT $args.first")
        assert sorted(re.findall(r"\bAS (\w+)", last)) == sorted(aliases)
    else:
        assert "$args.first" not in stopping

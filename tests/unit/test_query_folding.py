"""A named query's tests of its optional parameters for null, decided before the text is sent.

``NamedQuery.packed_for`` replaces ``$name IS NULL`` / ``$name IS NOT NULL`` by ``true`` or
``false`` for the call's values, where the test is a whole operand. The answers stay the query's
own: tests/integration/test_query_folding.py runs every query both ways on a real Neo4j.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgam.queries.loader import load_queries, parse

HEADER = """// name: probe
// doc: a probe
// param: tenant string  the tenant
// param: a string?  optional a
// param: b list?  optional b
// param: at datetime?  optional instant
// example: :param tenant => 'demo'
"""


def probe(body: str):  # type: ignore[no-untyped-def]
    return parse(HEADER + body)


def test_a_test_of_an_optional_parameter_is_answered_for_the_call() -> None:
    q = probe("MATCH (n {tenant_id: $tenant}) WHERE ($a IS NULL OR n.a = $a) AND ($b IS NOT NULL) RETURN n")
    assert q.null_tests == {"a", "b"}
    given_a = q.packed_for({"tenant": "t", "a": "x", "b": None, "at": None})
    assert "(false OR n.a = $args.a) AND (false)" in given_a
    both_null = q.packed_for({"tenant": "t", "a": None, "b": None, "at": None})
    assert "(true OR n.a = $args.a) AND (false)" in both_null
    assert "(false OR n.a = $args.a) AND (true)" in q.packed_for({"tenant": "t", "a": "x", "b": ["y"], "at": None})
    # The text Browser shows and the one sent for no decision stay as they were.
    assert "$a IS NULL" in q.text and "$args.a IS NULL" in q.packed_text


def test_an_instant_is_decided_before_it_is_read_as_a_datetime() -> None:
    q = probe("RETURN CASE WHEN $at IS NULL THEN 1 ELSE $at END AS x")
    assert q.packed_for({"tenant": "t", "a": None, "b": None, "at": "2026-01-01T00:00:00+00:00"}).strip() == \
        "RETURN CASE WHEN false THEN 1 ELSE datetime($args.at) END AS x"


@pytest.mark.parametrize("body", [
    "RETURN $tenant IS NULL AS x",           # a required parameter: never null, never decided
    "RETURN size($a) IS NULL AS x",          # a test of an expression around the parameter
    "RETURN 1 + $a IS NULL AS x",            # the null test covers the sum
    "RETURN [1] + $b IS NOT NULL AS x",
    "RETURN n.$a IS NULL AS x",
    "RETURN $ab IS NULL AS x",               # another (undeclared) name that starts like one
])
def test_a_test_that_is_not_a_whole_operand_is_left_to_the_server(body: str) -> None:
    q = probe(body)
    assert q.packed_for({"tenant": "t", "a": "x", "b": ["y"], "at": None}) == q.packed_text


@pytest.mark.parametrize("keyword", ["WHERE", "AND", "OR", "XOR", "NOT", "WHEN", "(", ","])
def test_a_test_after_a_boolean_keyword_or_an_opening_is_decided(keyword: str) -> None:
    q = probe(f"WITH 1 AS one WHERE true {keyword} $a IS NULL RETURN one" if keyword not in ("WHERE", "WHEN", "(", ",")
              else {"WHERE": "WITH 1 AS one WHERE $a IS NULL RETURN one",
                    "WHEN": "RETURN CASE WHEN $a IS NULL THEN 1 END AS x",
                    "(": "RETURN ($a IS NULL) AS x",
                    ",": "RETURN coalesce(null, $a IS NULL) AS x"}[keyword])
    assert q.null_tests == {"a"}
    assert "$args.a IS NULL" not in q.packed_for({"tenant": "t", "a": None, "b": None, "at": None})


@given(st.sampled_from(sorted(load_queries())), st.data())
def test_every_query_decides_exactly_its_tests(name: str, data: st.DataObject) -> None:
    query = load_queries()[name]
    nulls = data.draw(st.sets(st.sampled_from(sorted(query.null_tests))) if query.null_tests else st.just(set()))
    bound = {p.name: (None if p.name in nulls else "given") for p in query.params}
    text = query.packed_for(bound)
    for tested in query.null_tests:
        assert f"$args.{tested} IS NULL" not in text and f"$args.{tested} IS NOT NULL" not in text
    # Only the tests changed: put each decided test back and the text is the packed one again.
    undecided = query.packed_text
    assert len(text) <= len(undecided)
    assert text.count("$args.") <= undecided.count("$args.")


def test_one_text_per_combination_of_decisions() -> None:
    query = load_queries()["as-of"]
    names = sorted(query.null_tests)
    texts = set()
    for decided in itertools.product((None, "given"), repeat=len(names)):
        bound = {p.name: "given" for p in query.params} | dict(zip(names, decided))
        texts.add(query.packed_for(bound))
        assert query.packed_for(dict(bound)) is query.packed_for(bound)  # cached: the same text object
    assert len(texts) == 2 ** len(names)

"""Deciding a named query's null tests before it is sent changes no answer (a real Neo4j).

``NamedQuery.packed_for`` replaces each test of an optional parameter for null by its answer for
the call. The specification of every query is its own text: run as written (``packed_text``, the
tests left to the server), it gives the answer the decided text must give. Every query is run
both ways for every combination of null and given values of its tested parameters, on the demo
data, and the answers compared as multisets (rows that tie under an ORDER BY may come in another
order under another plan).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from importlib.resources import files
from typing import Any

import pytest
from neo4j.exceptions import Neo4jError
from neo4j.graph import Node, Relationship

from sgam import MemoryGraph
from sgam.ingest.replay import replay
from sgam.queries import loader
from tests.conftest import plugins_for

NOW = datetime.now(timezone.utc)
# A value for every parameter name the query files use, chosen so that the demo data answers
# (instants of transaction time are taken after the data is written: see the test).
GIVEN: dict[str, Any] = {
    "subject": "mira", "subjects": ["mira", "cust-ada"], "attribute": "passport_deadline",
    "plan_attribute": "plan", "memory_types": ["task_state", "preference", "profile", "relation"],
    "statuses": ["confirmed", "candidate"], "principal": "*", "known_at": NOW, "valid_at": NOW,
    "valid_from": datetime(2026, 1, 1, tzinfo=timezone.utc), "valid_to": NOW, "until": NOW,
    "since": datetime(2026, 1, 1, tzinfo=timezone.utc), "customer": "cust-ada", "project": "apollo",
    "relations": ["holds", "covered_by"], "episode": "e1", "episodes": ["e1", "e2"], "status": "open",
    "current_only": True, "exact_limit": 50, "k": 5, "fetch": 50, "limit": 50, "hops": 2, "days": 0,
    "min_score": 0.0, "threshold": 1.0, "text": "passport", "memory_id": "none",
    "single_valued": ["plan"], "vector": [0.05] * 384,
}


# Relations start from the customer: Mira has none.
SUBJECT = {"traverse": "cust-ada", "neighbourhood": "cust-ada", "customer-policies": "cust-ada"}


def _seed(graph: MemoryGraph, tenant: str) -> None:
    """The demo episodes, and a pending candidate (a birthday waits for Mira to confirm it)."""
    for resource in ("demo.jsonl", "demo-correction.jsonl"):
        text = (files("sgam") / "resources" / resource).read_text(encoding="utf-8")
        summary = replay(graph.store, text.replace('"tenant_id": "demo"', f'"tenant_id": "{tenant}"').splitlines())
        assert not summary.errors
    graph.record_episode(tenant_id=tenant, id="bday", content="Mira's birthday is 2 March.",
                         occurred_at=datetime(2026, 3, 1, tzinfo=timezone.utc), actor="agent:assistant")
    graph.write(tenant_id=tenant, subject="mira", attribute="birthday", value="1990-03-02",
                valid_from=datetime(2026, 3, 1, tzinfo=timezone.utc), source_episode_id="bday",
                asserted_by="agent:assistant", confidence=0.6)


def _answer(graph: MemoryGraph, text: str, args: dict[str, Any]) -> Any:
    try:
        return sorted(repr(sorted(row.items())) for row in graph.store.read(text, {"args": args}))
    except Neo4jError as exc:  # the same refusal both ways is the same answer
        return ("refused", exc.code)


def _seeded(graph: MemoryGraph, tenant: str, name: str, request: pytest.FixtureRequest
            ) -> tuple[loader.NamedQuery, dict[str, Any]]:
    """Query ``name`` and a value for each of its parameters, on the demo data in ``tenant``."""
    query = loader.load_queries()[name]
    plugins_for(request, query.text)
    _seed(graph, tenant)
    given = {**GIVEN, "tenant": tenant, "subject": SUBJECT.get(name, "mira")}
    given.update(dict.fromkeys(("known_at", "until"), datetime.now(timezone.utc)))
    given["memory_id"] = graph.current(tenant, "mira", "passport_deadline")[0].memory_id
    return query, given


def _decisions(query: loader.NamedQuery, given: dict[str, Any]) -> Iterator[tuple[dict[str, bool], dict[str, Any]]]:
    """Each combination of null and given values of the query's tested parameters: which are
    null, and the bound parameters."""
    tested = sorted(query.null_tests)
    for decided in itertools.product((False, True), repeat=len(tested)):
        bound = {p.name: given[p.name] for p in query.params}
        bound.update({n: None for n, null in zip(tested, decided) if null})
        yield dict(zip(tested, decided)), bound


@pytest.mark.parametrize("name", sorted(n for n, q in loader.load_queries().items() if q.null_tests))
def test_decided_null_tests_give_the_query_s_own_answers(graph: MemoryGraph, tenant: str, name: str,
                                                         request: pytest.FixtureRequest) -> None:
    query, given = _seeded(graph, tenant, name, request)
    answered = 0
    for decided, bound in _decisions(query, given):
        args = query.sendable(bound)
        folded = query.packed_for(bound)
        assert folded != query.packed_text
        expected = _answer(graph, query.packed_text, args)
        assert _answer(graph, folded, args) == expected, (name, decided)
        answered += bool(expected) and expected[0] != "refused"
    assert answered or name in NOTHING_TO_ANSWER, f"{name}: the demo data answered no combination"


# Queries the demo data gives nothing to (it holds no project and no quarantined extraction): their
# decided texts are still run and compared, empty against empty.
NOTHING_TO_ANSWER = {"decisions-superseded", "mistakes-to-avoid", "open-tasks", "quarantine"}


def _plain(value: Any) -> Any:
    """A value with its graph objects as their labels or type and properties: a virtual one
    (``picture``'s ``apoc.create.vRelationship``) has a new element id at every run."""
    if isinstance(value, Relationship):
        return ("relationship", value.type, _plain(dict(value)))
    if isinstance(value, Node):
        return ("node", sorted(value.labels), _plain(dict(value)))
    if isinstance(value, dict):
        return sorted((k, _plain(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _plain_answer(graph: MemoryGraph, text: str, args: dict[str, Any]) -> Any:
    try:
        return sorted(repr(_plain(row)) for row in graph.store.read(text, {"args": args}))
    except Neo4jError as exc:
        return ("refused", exc.code)


def _columns(query: loader.NamedQuery) -> list[tuple[str, ...]]:
    """Each name the query's last RETURN gives, alone (``loader.returning`` leaves a query it
    cannot trim as it is)."""
    last = query.text[query.text.rindex("\nRETURN "):] if "\nRETURN " in query.text else ""
    names = sorted(set(re.findall(r"\bAS (\w+)", last)))
    return [(n,) for n in names]


def _read(query: loader.NamedQuery) -> list[tuple[str, ...]]:
    """The columns the typed reads ask of the query (the fact map; a path's columns)."""
    names = {n for (n,) in _columns(query)}
    return [c for c in (loader.FACT_COLUMNS, loader.PATH_COLUMNS) if set(c) <= names]


TRIMMED = sorted(n for n, q in loader.load_queries().items()
                 if any(loader.returning(q.text, c) != q.text for c in _columns(q)))


@pytest.mark.parametrize("name", TRIMMED)
def test_a_read_of_some_columns_gives_the_query_s_own_answers_in_them(graph: MemoryGraph, tenant: str, name: str,
                                                                       request: pytest.FixtureRequest) -> None:
    """The last RETURN cut down to the columns read (and the order's keys) gives, in those
    columns, what the query as written gives (both projected by ``loader.projected``, as a typed
    read sends them): for the columns the typed reads ask, at every decision of the null tests;
    for every other column alone, with every parameter given."""
    query, given = _seeded(graph, tenant, name, request)
    decisions = list(_decisions(query, given))
    answered = 0
    for columns in _read(query) + _columns(query):
        for decided, bound in decisions if columns in _read(query) else decisions[:1]:
            args = query.sendable(bound)
            cut = query.packed_for(bound, columns=columns)
            expected = _plain_answer(graph, loader.projected(query.packed_for(bound), columns), args)
            assert _plain_answer(graph, loader.projected(cut, columns), args) == expected, (name, columns, decided)
            answered += bool(expected) and expected[0] != "refused"
    assert answered or name in NOTHING_TO_ANSWER, f"{name}: the demo data answered no combination"

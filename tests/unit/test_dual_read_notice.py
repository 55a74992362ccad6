"""Reads without the migration aliases while no migration's dual read is in force.

``current``, ``as-of`` and ``history`` widen an attribute with the aliases of the schema migrations
in force (graph/evolution.py, "Dual reads"). ``NamedQuery.packed_for(aliases=False)`` leaves
that clause and its disjunct out; a store sends that text only while its ``MigrationWatch`` says no
migration is in force, and asks again ``NOTICE_SECONDS`` after it last asked. The answers are
compared on a real Neo4j in tests/integration/test_dual_read_notice.py.
"""

from __future__ import annotations

import itertools

import pytest

from sgam.graph import evolution
from sgam.graph.evolution import ALIASES_IN_FORCE, MigrationWatch
from sgam.queries.loader import load_queries

QUERIES = load_queries()
ALIASED = {"current", "as-of", "history"}


def test_the_reads_that_widen_by_aliases_are_known_and_say_when_the_same_way() -> None:
    widening = {name for name, q in QUERIES.items() if "SchemaMigration" in q.text and "aliases" in q.text}
    assert widening == ALIASED
    assert {name for name, q in QUERIES.items() if q.reads_aliases} == ALIASED
    for name in ALIASED:
        assert QUERIES[name].aliases_in_force == ALIASES_IN_FORCE, name


@pytest.mark.parametrize("name", sorted(ALIASED))
def test_the_lean_text_is_the_full_one_without_the_aliases_and_nothing_else(name: str) -> None:
    query = QUERIES[name]
    tested = sorted(query.null_tests)
    for nulls in itertools.product((False, True), repeat=len(tested)):
        bound = {p.name: "x" for p in query.params} | {n: None for n, null in zip(tested, nulls) if null}
        full, lean = query.packed_for(bound), query.packed_for(bound, aliases=False)
        assert "SchemaMigration" in full and " IN aliases" in full
        assert "SchemaMigration" not in lean and "aliases" not in lean
        start, end = full.index("WITH CASE WHEN"), full.index("END AS aliases\n") + len("END AS aliases\n")
        assert lean == (full[:start] + full[end:]).replace(" OR f.attribute IN aliases", "", 1), nulls


def test_a_query_without_aliases_has_one_text_either_way() -> None:
    for name, query in QUERIES.items():
        if name in ALIASED:
            continue
        bound = {p.name: None if p.optional else "x" for p in query.params}
        assert query.packed_for(bound, aliases=False) == query.packed_for(bound), name


def test_the_watch_asks_when_its_answer_is_older_than_the_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(evolution.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(evolution, "NOTICE_SECONDS", 1.0)
    watch = MigrationWatch()
    assert watch.in_force  # nothing learnt yet: the aliases are read
    asked = watch.due()
    assert asked == 100.0
    watch.learn(False, asked)
    assert not watch.in_force
    now[0] = 100.9
    assert watch.due() is None  # fresh: no question
    now[0] = 101.1
    asked = watch.due()
    assert asked == 101.1
    watch.learn(True, asked)
    assert watch.in_force
    # An answer asked for earlier than the one held (another thread's, slower) does not replace it.
    watch.learn(False, 100.5)
    assert watch.in_force


def test_a_migration_waits_longer_than_any_reader_s_notice() -> None:
    assert evolution.WAIT_FACTOR > 1

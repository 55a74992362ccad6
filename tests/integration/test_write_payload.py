"""What the write path sends, against the real Neo4j: a fact's date or datetime value goes as ISO
text and is stored typed (on the fact and its value node), by every path that creates facts; a
statement's parameters are sent whole but never spelled out in the driver's debug log."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date, datetime, timezone

import pytest

from sgam import Episode, MemoryDelta, MemoryGraph
from sgam.graph.steps import Statement, UnloggedList, UnloggedMap

AT = datetime(2025, 3, 1, tzinfo=timezone.utc)
# (attribute, subject type, value, the Cypher type it is stored as); default.yaml
TYPED = [
    ("passport_deadline", "Person", date(2026, 6, 30), "DATE NOT NULL"),
    ("last_contacted_at", "Person", datetime(2025, 2, 3, 4, 5, 6, 789_000, tzinfo=timezone.utc),
     "ZONED DATETIME NOT NULL"),
    ("home_city", "Person", "Porto", "STRING NOT NULL"),
]


def _deltas(tenant: str, subject: str) -> list[MemoryDelta]:
    return [MemoryDelta(tenant_id=tenant, subject=subject, subject_type=kind, attribute=attribute, value=value,
                        valid_from=AT, source_episode_id="e1", asserted_by="user:mira")
            for attribute, kind, value, _ in TYPED]


def _write_one_by_one(graph: MemoryGraph, deltas: list[MemoryDelta]) -> None:
    for delta in deltas:
        assert graph.write(delta).ok


def _write_many(graph: MemoryGraph, deltas: list[MemoryDelta]) -> None:
    assert not graph.write_many(deltas).rejected


def _import(graph: MemoryGraph, deltas: list[MemoryDelta]) -> None:
    assert not graph.import_history(deltas).rejected


@pytest.mark.parametrize("write", [_write_one_by_one, _write_many, _import], ids=["write", "write_many", "import"])
def test_temporal_values_are_stored_typed(graph: MemoryGraph, tenant: str,
                                          write: Callable[[MemoryGraph, list[MemoryDelta]], None]) -> None:
    graph.record_episodes([Episode(tenant_id=tenant, id="e1", content="passport, call, city", occurred_at=AT,
                                   actor="user:mira")])
    write(graph, _deltas(tenant, "mira"))
    stored = graph.store.driver.execute_query(
        "MATCH (:Entity {tenant_id: $tenant, id: 'mira'})-[f]->(v:Value) "
        "RETURN f.attribute AS attribute, f.value AS value, valueType(f.value) AS fact_type, "
        "v.value AS node_value, valueType(v.value) AS node_type",
        tenant=tenant, database_=graph.store.database).records
    by_attribute = {r["attribute"]: r for r in stored}
    assert sorted(by_attribute) == sorted(a for a, *_ in TYPED)
    for attribute, _, value, cypher_type in TYPED:
        row = by_attribute[attribute]
        assert (row["fact_type"], row["node_type"]) == (cypher_type, cypher_type), attribute
        for got in (row["value"], row["node_value"]):
            native = got.to_native() if hasattr(got, "to_native") else got
            assert native == value, attribute
    # and the API reads them back as Python values
    now = {f.attribute: f.value for f in graph.current(tenant, "mira")}
    assert now == {attribute: value for attribute, _, value, _ in TYPED}


def test_a_date_value_compares_with_cypher_dates(graph: MemoryGraph, tenant: str) -> None:
    """Stored typed, not as text: Cypher's date comparisons and functions work on it."""
    graph.record_episodes([Episode(tenant_id=tenant, id="e1", content="deadlines", occurred_at=AT, actor="user:a")])
    deltas = [MemoryDelta(tenant_id=tenant, subject=f"p{i}", subject_type="Person", attribute="passport_deadline",
                          value=date(2026, 1, 1 + i), valid_from=AT, source_episode_id="e1", asserted_by="user:a")
              for i in range(5)]
    assert not graph.write_many(deltas).rejected
    due = graph.store.driver.execute_query(
        "MATCH (e:Entity {tenant_id: $tenant})-[f:PASSPORT_DEADLINE]->() WHERE f.value < date('2026-01-03') "
        "RETURN e.id AS id ORDER BY id", tenant=tenant, database_=graph.store.database).records
    assert [r["id"] for r in due] == ["p0", "p1"]


def test_parameters_are_sent_whole_but_not_spelled_out_in_the_debug_log(
        graph: MemoryGraph, tenant: str, caplog: pytest.LogCaptureFixture) -> None:
    secret = "do-not-log-this-value"
    query, params = Statement("UNWIND $rows AS r RETURN r.v AS v, $map.k AS k",
                              {"rows": [{"v": secret}] * 3, "map": {"k": secret}}).sent()
    assert isinstance(params["rows"], UnloggedList) and isinstance(params["map"], UnloggedMap)
    assert secret not in repr(params)
    assert repr(params["rows"]) == "<list of 3>" and repr(params["map"]) == "<map of k>"
    with caplog.at_level(logging.DEBUG, logger="neo4j"):
        records = graph.store.driver.execute_query(query, params, database_=graph.store.database).records
    assert [(r["v"], r["k"]) for r in records] == [(secret, secret)] * 3
    sent = [m for m in caplog.messages if "C: RUN" in m]
    assert sent and not any(secret in m for m in sent)

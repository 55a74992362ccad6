"""What the write path sends, against the real Neo4j: a fact's date or datetime value goes as ISO
text and is stored typed (on the fact and its value node), by every path that creates facts; so
does an episode's ``occurred_at``; a statement's parameters and its text are sent whole but never
spelled out in the driver's debug log."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgam import Episode, MemoryDelta, MemoryGraph
from sgam.graph.steps import Statement, UnloggedList, UnloggedMap, UnloggedQuery

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


# Instants an episode may carry: the ends of the years Neo4j and Python share, a whole second, a
# microsecond, a named zone across a daylight-saving change and fixed offsets either side of UTC.
EDGE_INSTANTS = [
    datetime(1, 1, 1, tzinfo=timezone.utc),
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone.utc),
    datetime(2026, 3, 29, 1, 30, tzinfo=ZoneInfo("Europe/Lisbon")),
    datetime(2026, 10, 25, 1, 30, fold=1, tzinfo=ZoneInfo("Europe/Lisbon")),
    datetime(2025, 6, 1, 23, 0, 0, 1, tzinfo=timezone(timedelta(hours=-9, minutes=-30))),
    datetime(2025, 6, 1, 0, 0, tzinfo=timezone(timedelta(hours=14))),
]


def _recorded_instants(graph: MemoryGraph, tenant: str, instants: list[datetime]) -> None:
    """Record one episode per instant; each is stored as a ZONED DATETIME at its UTC instant."""
    episodes = [Episode(tenant_id=tenant, id=f"e{i}", content=f"said at {at.isoformat()}", occurred_at=at,
                        actor="user:mira") for i, at in enumerate(instants)]
    assert set(graph.record_episodes(episodes).values()) == {"created"}
    stored = graph.store.driver.execute_query(
        "MATCH (e:Episode {tenant_id: $tenant}) "
        "RETURN e.id AS id, e.occurred_at AS at, valueType(e.occurred_at) AS type",
        tenant=tenant, database_=graph.store.database).records
    by_id = {r["id"]: r for r in stored}
    assert sorted(by_id) == sorted(e.id for e in episodes)
    for i, at in enumerate(instants):
        row = by_id[f"e{i}"]
        assert row["type"] == "ZONED DATETIME NOT NULL", at
        # the same instant (== across zones is False for a time in a daylight-saving gap or fold)
        assert row["at"].to_native() == at.astimezone(timezone.utc), at
        assert row["at"].utcoffset() == timedelta(0), at
    # Cypher's time comparisons see the instants as instants: the earliest and latest by the index.
    utc = sorted(at.astimezone(timezone.utc) for at in instants)
    first, last = utc[0], utc[-1]
    ends = graph.store.driver.execute_query(
        "MATCH (e:Episode {tenant_id: $tenant}) WHERE e.occurred_at <= $first OR e.occurred_at >= $last "
        "RETURN e.occurred_at AS at", tenant=tenant, first=first, last=last,
        database_=graph.store.database).records
    assert {r["at"].to_native() for r in ends} == {first, last}


def test_an_episode_time_is_stored_typed_at_its_instant(graph: MemoryGraph, tenant: str) -> None:
    """``occurred_at`` goes as ISO text (the driver's conversion cost most of recording an episode)
    and is stored as a zoned datetime at the same instant, in UTC."""
    _recorded_instants(graph, tenant, EDGE_INSTANTS)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31),
                             timezones=st.timezones()), min_size=1, max_size=8, unique=True))
def test_any_episode_time_round_trips(graph: MemoryGraph, instants: list[datetime]) -> None:
    tenant = f"t-occurred-{uuid.uuid4().hex[:12]}"
    try:
        _recorded_instants(graph, tenant, instants)
    finally:
        graph.delete_tenant(tenant)


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


def test_a_query_is_sent_whole_but_its_debug_log_line_names_its_head(
        graph: MemoryGraph, caplog: pytest.LogCaptureFixture) -> None:
    """The driver formats each RUN for its debug log on every call (log on or off): the text's
    ``repr`` is its first line and its length, and the server still gets every character."""
    tail = "// " + "é-long-comment " * 200
    text = "RETURN $x AS x, 'ünïcode' AS y\n" + tail + "\n"
    query, params = Statement(text, {"x": 7}).sent()
    assert isinstance(query, UnloggedQuery) and query == text
    assert repr(query) == f"<query of {len(text)} characters: RETURN $x AS x, 'ünïcode' AS y...>"
    with caplog.at_level(logging.DEBUG, logger="neo4j"):
        read = graph.store.read(text, {"x": 7})
        written = graph.store.run_write(text, {"x": 8})
    assert read == [{"x": 7, "y": "ünïcode"}] and written == [{"x": 8, "y": "ünïcode"}]
    sent = [m for m in caplog.messages if "C: RUN" in m]
    assert len(sent) >= 2 and all("long-comment" not in m for m in sent)
    assert all(f"<query of {len(text)} characters: RETURN $x AS x" in m for m in sent)


def _cypher_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=300))
def test_any_query_text_reaches_the_server_as_written(graph: MemoryGraph, text: str) -> None:
    """Whatever the text holds (quotes, backslashes, newlines, any script), the server parses the
    very characters written: a string literal of them comes back equal."""
    query = Statement(f"RETURN {_cypher_literal(text)} AS echoed").sent()[0]
    assert isinstance(query, UnloggedQuery) and str(query) == query
    assert repr(query).startswith(f"<query of {len(query)} characters: ")
    [row] = graph.store.read(query, {})
    assert row["echoed"] == text

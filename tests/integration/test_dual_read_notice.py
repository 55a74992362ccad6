"""Reads leave the migration aliases out while no migration's dual read is in force (a real Neo4j).

``current``, ``as-of`` and ``history`` widen an attribute with the aliases of the schema migrations
in force. A store sends them without that clause while its ``MigrationWatch`` says none is in force
and asks again ``NOTICE_SECONDS`` after it last asked; a migration, once recorded as running,
waits ``WAIT_FACTOR`` notices before it moves a fact (graph/evolution.py, "Dual reads").
The specification of the lean text is the full one: both give the same answers when no migration
is in force.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from datetime import datetime, timezone
from typing import Any

import pytest

import sgam.graph.store as store_module
from sgam import AsyncMemoryGraph, MemoryGraph
from sgam.graph import evolution
from sgam.graph.errors import SgamError
from sgam.graph.evolution import ALIASES_IN_FORCE, MigrationWatch
from sgam.graph.schema import Schema
from sgam.queries import loader
from tests.conftest import default_schema
from tests.integration.test_migrations import cleanup, connect, example, seed, suffix  # noqa: F401
from tests.integration.test_query_folding import GIVEN, _answer, _seed

AT = datetime(2026, 3, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("name", ["current", "as-of", "history"])
def test_without_a_migration_in_force_the_lean_text_gives_the_full_text_s_answers(
        graph: MemoryGraph, tenant: str, name: str) -> None:
    query = loader.load_queries()[name]
    _seed(graph, tenant)
    given = {**GIVEN, "tenant": tenant, "subject": "mira", "known_at": datetime.now(timezone.utc)}
    tested = sorted(query.null_tests)
    answered = 0
    for nulls in itertools.product((False, True), repeat=len(tested)):
        bound = {p.name: given[p.name] for p in query.params} | {n: None for n, null in zip(tested, nulls) if null}
        args = query.sendable(bound)
        expected = _answer(graph, query.packed_for(bound), args)
        assert _answer(graph, query.packed_for(bound, aliases=False), args) == expected, (name, nulls)
        answered += bool(expected) and expected[0] != "refused"
    assert answered, f"{name}: the demo data answered no combination"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements this process sends (sync and async stores)."""
    texts: list[str] = []
    real, areal = store_module._run, store_module._arun

    def counted(tx: Any, statement: Any) -> Any:
        texts.append(statement.query)
        return real(tx, statement)

    async def acounted(tx: Any, statement: Any) -> Any:
        texts.append(statement.query)
        return await areal(tx, statement)

    monkeypatch.setattr(store_module, "_run", counted)
    monkeypatch.setattr(store_module, "_arun", acounted)
    return texts


def _asked(texts: list[str]) -> int:
    return sum(t == store_module.IN_FORCE for t in texts)


def _aliased(texts: list[str]) -> list[bool]:
    """For each read of current sent: whether it read the aliases."""
    return ["SchemaMigration" in t for t in texts if "MATCH (s:Entity {tenant_id: $args.tenant, id: $args.subject})" in t]


def test_a_reader_learns_of_a_migration_within_the_notice(graph: MemoryGraph, tenant: str, sent: list[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process records a migration that renames ``home_city`` to an old name's alias: a
    reader keeps its lean reads until its answer is a notice old, then reads the aliases (the old
    name answers from the new one), and goes back to lean reads once the window has closed."""
    mid, old = f"test-notice-{uuid.uuid4().hex[:8]}", f"town_{uuid.uuid4().hex[:8]}"
    # Only this test's migration counts (the database is shared with every other test).
    monkeypatch.setattr(store_module, "IN_FORCE", f"RETURN EXISTS {{ MATCH (m:SchemaMigration) "
                        f"WHERE m.id = '{mid}' AND ({ALIASES_IN_FORCE}) }} AS in_force")
    monkeypatch.setattr(evolution, "NOTICE_SECONDS", 1.0)
    graph.store.migrations = MigrationWatch()
    graph.record_episode(tenant_id=tenant, id="e0", content="Mira lives in Lisbon", occurred_at=AT, actor="user:mira")
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Lisbon", valid_from=AT,
                source_episode_id="e0", asserted_by="user:mira")
    try:
        sent.clear()
        assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Lisbon"]
        assert _asked(sent) == 1 and _aliased(sent) == [False]
        graph.store.run_write(
            "CREATE (:SchemaMigration {id: $id, status: 'running', aliases: $aliases})",
            {"id": mid, "aliases": [f"{old}>home_city", f"home_city>{old}"]})
        sent.clear()
        graph.current(tenant, "mira", "home_city")
        assert _asked(sent) == 0 and _aliased(sent) == [False]  # within the notice: not asked again
        time.sleep(1.05)
        sent.clear()
        assert [(f.value, f.attribute) for f in graph.current(tenant, "mira", old)] == [("Lisbon", "home_city")]
        assert _asked(sent) == 1 and _aliased(sent) == [True]
        graph.store.run_write("MATCH (m:SchemaMigration {id: $id}) SET m.status = 'done', "
                              "m.dual_read_until = datetime('2020-01-01T00:00:00Z')", {"id": mid})
        time.sleep(1.05)
        sent.clear()
        assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Lisbon"]
        assert _asked(sent) == 1 and _aliased(sent) == [False]
    finally:
        graph.store.run_write("MATCH (m:SchemaMigration {id: $id}) DELETE m", {"id": mid})
        graph.store.migrations = MigrationWatch()


def test_the_async_store_reads_lean_as_the_sync_one(neo4j_connection: tuple[str, Any], tenant: str,
                                                    sent: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    mid = f"test-notice-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(store_module, "IN_FORCE", f"RETURN EXISTS {{ MATCH (m:SchemaMigration) "
                        f"WHERE m.id = '{mid}' AND ({ALIASES_IN_FORCE}) }} AS in_force")
    uri, auth = neo4j_connection

    async def scenario() -> list[str]:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as agraph:
            agraph.store.migrations = MigrationWatch()  # as if its answer from connecting were old
            await agraph.record_episode(tenant_id=tenant, id="e0", content="Mira lives in Lisbon", occurred_at=AT,
                                        actor="user:mira")
            await agraph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Lisbon",
                               valid_from=AT, source_episode_id="e0", asserted_by="user:mira")
            sent.clear()
            first = await agraph.current(tenant, "mira", "home_city")
            second = await agraph.as_of(tenant, "mira", "home_city", valid_at=AT)
            await agraph.delete_tenant(tenant)
            return [f.value for f in (*first, *second)]

    assert asyncio.run(scenario()) == ["Lisbon", "Lisbon"]
    assert _asked(sent) == 1 and not any("SchemaMigration" in t for t in sent if "$args.subject" in t)


def test_a_graph_asks_when_it_connects_so_that_its_first_reads_need_not(
        neo4j_connection: tuple[str, Any], tenant: str, sent: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The question a read asks when its answer is a notice old is asked when a graph connects
    (sync and async), so a process's first read is one round trip, lean while no migration is in
    force."""
    monkeypatch.setattr(evolution, "NOTICE_SECONDS", 60.0)  # no second question within this test
    uri, auth = neo4j_connection
    sent.clear()
    with MemoryGraph.connect(uri, auth, schema=default_schema()) as graph:
        assert _asked(sent) == 1
        graph.record_episode(tenant_id=tenant, id="e0", content="Mira lives in Lisbon", occurred_at=AT,
                             actor="user:mira")
        graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Lisbon", valid_from=AT,
                    source_episode_id="e0", asserted_by="user:mira")
        sent.clear()
        assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Lisbon"]
        assert _asked(sent) == 0 and _aliased(sent) == [False]

    async def scenario() -> list[str]:
        sent.clear()
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as agraph:
            assert _asked(sent) == 1
            sent.clear()
            found = await agraph.current(tenant, "mira", "home_city")
            assert _asked(sent) == 0 and _aliased(sent) == [False]
            await agraph.delete_tenant(tenant)
            return [f.value for f in found]

    assert asyncio.run(scenario()) == ["Lisbon"]


def test_a_migration_waits_for_the_readers_notice_before_it_moves_a_fact(
        connect, tenant: str, suffix: str, sent: list[str], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    events: list[str] = sent
    monkeypatch.setattr(evolution.time, "sleep", lambda seconds: events.append(f"sleep {seconds}"))
    graph = connect(example(1, suffix))
    seed(graph, tenant, suffix)
    events.clear()
    report = graph.apply_schema(Schema.from_data(example(2, suffix)))
    assert report.status == "applied"
    start = next(i for i, e in enumerate(events) if e.lstrip().startswith("MERGE (m:SchemaMigration"))
    wait = events.index(f"sleep {evolution.WAIT_FACTOR * evolution.NOTICE_SECONDS}")
    moved = next(i for i, e in enumerate(events) if "DELETE f" in e or "SET f" in e)
    assert start < wait < moved, events[start:moved + 1]
    # And the migrated fact is read by the old name through the aliases right after.
    legacy = connect(example(1, suffix))
    [mail] = legacy.current(tenant, "cust-0", f"email_{suffix}")
    assert mail.value == "ada0@fixed.example"


def test_an_unknown_name_is_still_refused_with_the_lean_reads(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="e0", content="x", occurred_at=AT, actor="user:mira")
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Lisbon", valid_from=AT,
                source_episode_id="e0", asserted_by="user:mira")
    with pytest.raises(SgamError):
        graph.current(tenant, "mira", f"no_such_{uuid.uuid4().hex[:6]}")

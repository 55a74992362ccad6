"""The store under load and by property: concurrency, the oracle, queries, access mode, async."""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import exceptions as neo4j_errors

from sgam import AsyncMemoryGraph, MemoryDelta, MemoryGraph, ProvisioningError, SgamError, StoreUnavailable
from sgam.graph.ddl import bootstrap_op
from sgam.graph.schema import default_schema
from sgam.graph.steps import InTx, one
from sgam.graph.steps import Statement as Cypher
from sgam.queries import load_queries
from sgam.bench.oracle import Slot, Statement
from tests.conftest import plugins_for

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
VALUES = [date(2026, 7, 15), date(2026, 6, 30), date(2026, 8, 1)]


def day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


def test_concurrent_writers_leave_exactly_one_current_version(graph: MemoryGraph, tenant: str) -> None:
    writers = 8
    for i in range(writers):
        graph.record_episode(tenant_id=tenant, id=f"e{i}", content=f"city {i}", occurred_at=day(i))

    def write(i: int) -> str:
        return graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value=f"city-{i}",
                           valid_from=day(10), source_episode_id=f"e{i}").outcome

    with ThreadPoolExecutor(max_workers=writers) as pool:
        outcomes = list(pool.map(write, range(writers)))
    # Same instant, same op and confidence: the tie rule orders by value, whatever the arrival
    # order, so the greatest value holds; each other statement either changed the slot or was kept.
    assert outcomes.count("created") == 1
    assert set(outcomes) <= {"created", "changed", "kept"}
    assert [f.value for f in graph.current(tenant, "mira", "home_city")] == [f"city-{writers - 1}"]
    believed = [f for f in graph.history(tenant, "mira", "home_city") if f.expired_at is None]
    assert len(believed) == 1


def test_concurrent_batches_on_shared_subjects_do_not_deadlock(graph: MemoryGraph, tenant: str) -> None:
    subjects = [f"p{i}" for i in range(20)]
    graph.record_episode(tenant_id=tenant, id="e", content="batch", occurred_at=day(0))

    def batch(seed: int) -> int:
        order = subjects[seed % 5:] + subjects[: seed % 5]
        deltas = [MemoryDelta(tenant_id=tenant, subject=s, attribute="home_city", value=f"c{seed}",
                              valid_from=day(seed), source_episode_id="e") for s in order]
        return len(graph.write_many(deltas).rejected)

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert sum(pool.map(batch, range(8))) == 0
    for subject in subjects:
        assert [f.value for f in graph.current(tenant, subject, "home_city")] == ["c7"]


operations = st.lists(
    st.tuples(st.sampled_from(["assert", "assert", "correct", "retract"]),
              st.integers(0, 2), st.integers(0, 30), st.booleans()),
    min_size=1, max_size=10,
)


def _answers(graph: MemoryGraph, tenant: str, valid: datetime, known: datetime | None = None) -> list:
    return [f.value for f in graph.as_of(tenant, "mira", "passport_deadline", valid_at=valid, known_at=known)]


def _expected(value) -> list:
    return [] if value is None else [value]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=operations, batched=st.booleans())
def test_store_matches_the_oracle(graph: MemoryGraph, sequence, batched) -> None:
    """Random assert/correct/retract sequences, one by one or as one batch, against the oracle."""
    _matches_the_oracle(graph, sequence, batched)


long_histories = st.lists(
    st.tuples(st.sampled_from(["assert", "assert", "assert", "correct", "retract"]),
              st.integers(0, 2), st.integers(0, 30), st.booleans()),
    min_size=15, max_size=40,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=long_histories, split=st.integers(1, 8))
def test_long_histories_written_in_batches_match_the_oracle(graph: MemoryGraph, sequence, split) -> None:
    """The write path reads in full only the stored versions around each delta's valid_from:
    long random histories, written in batches of ``split``, must still match the oracle."""
    _matches_the_oracle(graph, sequence, batched=False, batch=split)


def _matches_the_oracle(graph: MemoryGraph, sequence, batched: bool, batch: int = 1) -> None:
    tenant = f"p-{uuid.uuid4().hex[:10]}"
    oracle = Slot()
    deltas = []
    for op, index, start, with_value in sequence:
        eid = f"e{index}-{start}"
        graph.record_episode(tenant_id=tenant, id=eid, content=eid, occurred_at=day(start))
        deltas.append(MemoryDelta(
            tenant_id=tenant, subject="mira", attribute="passport_deadline", op=op,
            value=VALUES[index] if (op != "retract" or with_value) else None,
            valid_from=day(start), source_episode_id=eid,
        ))
    checkpoints: list[datetime] = []
    if batched:
        # One transaction: one transaction time, so only the final state is comparable.
        results = graph.write_many(deltas).results
        for delta, result in zip(deltas, results):
            assert result.ok, result.message
            oracle.apply(Statement.from_delta(delta), EPOCH)
    elif batch > 1:
        for start in range(0, len(deltas), batch):
            chunk = deltas[start:start + batch]
            results = graph.write_many(chunk).results
            now = graph.clock()
            for delta, result in zip(chunk, results):
                assert result.ok, result.message
                oracle.apply(Statement.from_delta(delta), now)
    else:
        for delta in deltas:
            graph.write(delta)
            checkpoints.append(graph.clock())
            oracle.apply(Statement.from_delta(delta), checkpoints[-1])
    for valid in range(0, 34, 3):
        assert _answers(graph, tenant, day(valid)) == _expected(oracle.value_at(day(valid)))
        for known in checkpoints[::2]:
            assert _answers(graph, tenant, day(valid), known) == _expected(oracle.value_at(day(valid), known))
    current = [f.value for f in graph.current(tenant, "mira", "passport_deadline")]
    assert current == _expected(oracle.value_at(graph.clock()))
    assert graph.doctor(tenant) == []
    graph.delete_tenant(tenant)


def test_doctor_finds_broken_rows(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="x", occurred_at=day(0))
    [original] = graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto",
                             valid_from=day(0), source_episode_id="e1").memory_ids
    assert graph.doctor(tenant) == []
    # Break the store behind SGAM's back, as a hand-written Cypher update could: an overlapping
    # copy, and an empty-interval row citing an episode that does not exist.
    with graph.store.driver.session() as session:
        session.run(
            "MATCH (s:Entity {tenant_id: $t, id: 'mira'})-[f:HOME_CITY]->(v) "
            "CREATE (s)-[g:HOME_CITY]->(v) SET g = f {.*, memory_id: $t + '-overlap'} "
            "CREATE (s)-[h:HOME_CITY]->(v) SET h = f {.*, memory_id: $t + '-empty', source_episode_id: 'gone', "
            "valid_to: f.valid_from, expired_at: f.recorded_at}",
            t=tenant,
        ).consume()
    problems = {(p["problem"], p["memory_id"], p["other"]) for p in graph.doctor(tenant)}
    assert problems == {
        ("overlapping believed versions", original, f"{tenant}-overlap"),
        ("valid_to not after valid_from", f"{tenant}-empty", None),
        ("source episode missing", f"{tenant}-empty", "gone"),
    }


@pytest.mark.parametrize("name", sorted(load_queries()))
def test_every_named_query_passes_explain(graph: MemoryGraph, name: str, request: pytest.FixtureRequest) -> None:
    plugins_for(request, load_queries()[name].text)
    plan = graph.store.explain(load_queries()[name].text)
    assert plan is not None and plan["operatorType"].startswith("ProduceResults")


def test_a_missing_apoc_function_says_how_to_install_it(graph: MemoryGraph) -> None:
    """The local server loads only apoc.create.*, so apoc.text.join is unknown on every test server
    (with or without APOC), as apoc.create.vRelationship is on a server without APOC."""
    with pytest.raises(ProvisioningError, match=r"no APOC core.*sgam neo4j up"):
        graph.store.read("RETURN apoc.text.join(['a', 'b'], ',') AS joined", {})


def test_reads_run_in_read_access_mode(graph: MemoryGraph) -> None:
    with pytest.raises(SgamError, match="(?i)write"):
        graph.store.read("CREATE (n:ShouldNotExist) RETURN n", {})
    assert graph.store.read("MATCH (n:ShouldNotExist) RETURN count(n) AS n", {})[0]["n"] == 0


class _Flaky:
    """The driver's real sessions, the first ``failures`` of whose statements fail with ``error``
    before they reach the server (a leader switch, a dropped connection)."""

    def __init__(self, session: Any, failures: int, error: Exception) -> None:
        self.session, self.failures, self.error, self.opened = session, failures, error, 0

    def __call__(self, **options: Any) -> Any:
        self.opened += 1
        real, flaky = self.session(**options), self

        class Session:
            def __enter__(self) -> Any:
                real.__enter__()
                return self

            def __exit__(self, *exc: Any) -> Any:
                return real.__exit__(*exc)

            def run(self, *args: Any, **kwargs: Any) -> Any:
                if flaky.failures:
                    flaky.failures -= 1
                    raise flaky.error
                return real.run(*args, **kwargs)

        return Session()


def _city(graph: MemoryGraph, tenant: str) -> list[str]:
    return [f.value for f in graph.current(tenant, "mira", "home_city")]


def test_a_read_that_meets_a_transient_error_is_run_again_whole(graph: MemoryGraph, tenant: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="Mira lives in Porto", occurred_at=day(0))
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto", valid_from=day(0),
                source_episode_id="e1")
    flaky = _Flaky(graph.store.driver.session, 2, neo4j_errors.SessionExpired("the leader moved"))
    monkeypatch.setattr(graph.store.driver, "session", flaky)
    assert _city(graph, tenant) == ["Porto"]
    assert flaky.opened == 3 and flaky.failures == 0


def test_an_async_read_that_meets_a_transient_error_is_run_again_whole(neo4j_connection, tenant: str) -> None:
    uri, auth = neo4j_connection

    async def scenario() -> tuple[list[str], int]:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as graph:
            await graph.record_episode(tenant_id=tenant, id="e1", content="Mira lives in Faro", occurred_at=day(0))
            await graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Faro",
                              valid_from=day(0), source_episode_id="e1")
            real, opened, failures = graph.store.driver.session, [], [2]

            def session(**options: Any) -> Any:
                opened.append(options)
                inner = real(**options)

                class Session:
                    async def __aenter__(self) -> Any:
                        await inner.__aenter__()
                        return self

                    async def __aexit__(self, *exc: Any) -> Any:
                        return await inner.__aexit__(*exc)

                    async def run(self, *args: Any, **kwargs: Any) -> Any:
                        if failures[0]:
                            failures[0] -= 1
                            raise neo4j_errors.SessionExpired("the leader moved")
                        return await inner.run(*args, **kwargs)

                return Session()

            graph.store.driver.session = session
            return [f.value for f in await graph.current(tenant, "mira", "home_city")], len(opened)

    assert asyncio.run(scenario()) == (["Faro"], 3)


def test_a_read_gives_up_after_retry_seconds_and_never_retries_a_caller_error(
        graph: MemoryGraph, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph.store, "retry_seconds", 0.5)
    flaky = _Flaky(graph.store.driver.session, 10**6, neo4j_errors.ServiceUnavailable("no server answers"))
    monkeypatch.setattr(graph.store.driver, "session", flaky)
    began = time.monotonic()
    with pytest.raises(StoreUnavailable):
        _city(graph, tenant)
    assert 0.4 < time.monotonic() - began < 3 and 2 <= flaky.opened <= 8
    refused = _Flaky(graph.store.driver.session.session, 1, neo4j_errors.ClientError("a caller's mistake"))
    monkeypatch.setattr(graph.store.driver, "session", refused)
    with pytest.raises(SgamError):
        _city(graph, tenant)
    assert refused.opened == 1


def test_bootstrap_is_recorded_and_idempotent(graph: MemoryGraph) -> None:
    assert graph.store.run(bootstrap_op(graph.schema, graph.clock)) == []
    recorded = graph.store.read("MATCH (m:Migration) RETURN m.id AS id", {})
    assert {"0001-core", "0002-fact-type-PASSPORT_DEADLINE"} <= {r["id"] for r in recorded}
    names = {r["name"] for r in graph.store.read("SHOW CONSTRAINTS YIELD name RETURN name", {})}
    assert {"sgam_entity_key", "sgam_episode_key", "sgam_fact_id_passport_deadline"} <= names
    states = {r["state"] for r in graph.store.read("SHOW INDEXES YIELD state RETURN state", {})}
    assert states == {"ONLINE"}


def test_episode_reads_name_only_known_property_keys(graph: MemoryGraph) -> None:
    """The episode reads filter on ``redacted_at``, which only forgetting a subject writes; the
    bootstrap's index on it makes the key known on every store, so the server (and Browser) does
    not warn that it does not exist on a store that never forgot anyone."""
    keys = {r["key"] for r in graph.store.read("CALL db.propertyKeys() YIELD propertyKey RETURN propertyKey AS key", {})}
    assert "redacted_at" in keys
    index = graph.store.read("SHOW INDEXES YIELD name, labelsOrTypes, properties "
                             "WHERE name = 'sgam_episode_redacted' RETURN labelsOrTypes, properties", {})
    assert index == [{"labelsOrTypes": ["Episode"], "properties": ["tenant_id", "redacted_at"]}]


def test_async_graph_writes_and_reads(neo4j_connection, tenant: str) -> None:
    uri, auth = neo4j_connection

    async def scenario() -> list:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as graph:
            await graph.record_episode(tenant_id=tenant, id="e1", content="hi", occurred_at=day(0))
            await graph.record_episode(tenant_id=tenant, id="e2", content="hi again", occurred_at=day(5))
            await graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto",
                              valid_from=day(0), source_episode_id="e1")
            await graph.write_many([MemoryDelta(tenant_id=tenant, subject="mira", attribute="home_city",
                                                value="Faro", valid_from=day(5), source_episode_id="e2")])
            now = [f.value for f in await graph.current(tenant, "mira", "home_city")]
            then = [f.value for f in await graph.as_of(tenant, "mira", "home_city", valid_at=day(1))]
            history = await graph.history(tenant, "mira", "home_city")
            return [now, then, len(history)]

    assert asyncio.run(scenario()) == [["Faro"], ["Porto"], 3]


def test_doctor_finds_cross_tenant_edges(graph: MemoryGraph, tenant: str) -> None:
    other = tenant + "-x"
    for t in (tenant, other):
        graph.record_episode(tenant_id=t, id="e1", content="x", occurred_at=day(0))
        graph.write(tenant_id=t, subject="mira", attribute="home_city", value="Porto",
                    valid_from=day(0), source_episode_id="e1")
    assert graph.doctor(tenant) == []
    with graph.store.driver.session() as session:
        session.run(
            "MATCH (a:Entity {tenant_id: $t, id: 'mira'}), (b:Entity {tenant_id: $o, id: 'mira'}) "
            "CREATE (a)-[:KNOWS]->(b)", t=tenant, o=other,
        ).consume()
    problems = [(p["problem"], p["attribute"], p["other"]) for p in graph.doctor(tenant)]
    assert problems == [("cross-tenant edge", "KNOWS", other)]


def test_schema_versions_are_stored_and_guarded(graph: MemoryGraph, neo4j_connection) -> None:
    from sgam.graph.schema import Schema
    from sgam.graph.store import Store

    stored = graph.store.read(
        "MATCH (s:SchemaVersion {name: $n, version: $v}) RETURN s.definition AS d",
        {"n": graph.schema.name, "v": graph.schema.version},
    )
    # the stored definition means this schema (one stored by an older SGAM lacks later options)
    assert len(stored) == 1 and graph.schema.same_definition(stored[0]["d"])
    changed = Schema.from_data({**graph.schema.model_dump(mode="json"),
                                "entity_types": [*graph.schema.entity_types, "Pet"]})
    uri, auth = neo4j_connection
    store = Store.connect(uri, auth, changed)
    try:
        with pytest.raises(SgamError, match="new version"):
            store.run(bootstrap_op(changed, store.clock))
    finally:
        store.close()


MEMBERS = ["ana", "ben", "cy"]
set_histories = st.lists(
    st.tuples(st.sampled_from(["assert", "assert", "retract"]), st.integers(0, 2), st.integers(0, 30)),
    min_size=10, max_size=35,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=set_histories, split=st.integers(1, 6))
def test_set_valued_histories_written_in_batches_match_the_oracle(graph: MemoryGraph, sequence, split) -> None:
    """Of a set, the write path reads the stored versions around each delta's valid_from in the
    timeline of the member it names; every member must still follow the oracle."""
    tenant = f"s-{uuid.uuid4().hex[:10]}"
    oracle = Slot(many=True)
    deltas = []
    for op, index, start in sequence:
        eid = f"e{index}-{start}"
        graph.record_episode(tenant_id=tenant, id=eid, content=eid, occurred_at=day(start))
        deltas.append(MemoryDelta(tenant_id=tenant, subject="mira", attribute="contact", op=op,
                                  value=MEMBERS[index], valid_from=day(start), source_episode_id=eid))
    for begin in range(0, len(deltas), split):
        chunk = deltas[begin:begin + split]
        results = graph.write_many(chunk).results
        for delta, result in zip(chunk, results):
            assert result.ok, result.message
            oracle.apply(Statement.from_delta(delta), graph.clock())
    for valid in range(0, 34, 2):
        held = sorted(f.value for f in graph.as_of(tenant, "mira", "contact", valid_at=day(valid)))
        assert held == sorted(oracle.value_at(day(valid))), valid


def _collector_seen(query: str) -> Any:
    """A transaction's steps that note whether the cyclic collector is on before and after its statement."""
    def steps() -> Any:
        seen = [gc.isenabled()]
        yield Cypher(query)
        seen.append(gc.isenabled())
        return seen
    return steps


@pytest.mark.parametrize("was_on", [True, False])
def test_a_write_transaction_runs_without_the_collector_and_puts_it_back(graph: MemoryGraph, was_on: bool) -> None:
    """Off from a write transaction's first statement to its commit, after a failed one too; as the
    caller had it afterwards. A read transaction leaves it alone."""
    gc.enable() if was_on else gc.disable()
    try:
        assert graph.store.run(one(InTx(_collector_seen("RETURN 1 AS one")))) == [False, False]
        assert gc.isenabled() is was_on
        with pytest.raises(SgamError, match="by zero"):
            graph.store.run(one(InTx(_collector_seen("RETURN 1 / 0 AS never"))))
        assert gc.isenabled() is was_on
        assert graph.store.run(one(InTx(_collector_seen("RETURN 1 AS one"), read=True))) == [was_on, was_on]
    finally:
        gc.enable()


def test_an_async_write_transaction_runs_without_the_collector_and_puts_it_back(neo4j_connection) -> None:
    uri, auth = neo4j_connection

    async def scenario() -> list[Any]:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as graph:
            written = await graph.store.run(one(InTx(_collector_seen("RETURN 1 AS one"))))
            after = gc.isenabled()
            with pytest.raises(SgamError, match="by zero"):
                await graph.store.run(one(InTx(_collector_seen("RETURN 1 / 0 AS never"))))
            return [written, after, gc.isenabled()]

    assert gc.isenabled()
    assert asyncio.run(scenario()) == [[False, False], True, True]

"""Deletion at every grain (graph/deletion.py) through the public API and the CLI, against the real server.

Each grain: a dry run that changes nothing, the deletion itself, the ``(:Deletion)`` record without
content, and ``doctor`` finding what a deletion must not leave. The property test for one episode
takes its oracle from the generated statements: which episodes stated each fact.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, InvalidDelta, MemoryDelta, MemoryGraph, NotFound, UnknownSubject
from sgam.cli import app
from sgam.graph import default_schema

runner = CliRunner()
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


def record(graph: MemoryGraph, tenant: str, *ids: str) -> None:
    for n, eid in enumerate(ids):
        graph.record_episode(tenant_id=tenant, id=eid, content=f"the words of {eid}", occurred_at=day(n),
                             actor="user:mira")


def say(graph: MemoryGraph, tenant: str, attribute: str, value, start: int, episode: str,
        subject: str = "mira", **extra):
    return graph.write(tenant_id=tenant, subject=subject, attribute=attribute, value=value,
                       valid_from=day(start), source_episode_id=episode, **extra)


def snapshot(graph: MemoryGraph, tenant: str) -> list[str]:
    """Every node and relationship of the tenant with all its properties, as sorted text."""
    nodes = graph.store.read("MATCH (n) WHERE n.tenant_id = $t "
                             "RETURN labels(n) AS labels, properties(n) AS props", {"t": tenant})
    rels = graph.store.read("MATCH (a)-[r]->(b) WHERE a.tenant_id = $t "
                            "RETURN type(r) AS type, properties(r) AS props, a.id AS a, "
                            "coalesce(b.id, b.key) AS b", {"t": tenant})
    return sorted(repr(sorted((k, repr(v)) for k, v in r.items())) for r in nodes + rels)


def deletions(graph: MemoryGraph, tenant: str) -> list[dict]:
    return graph.store.read("MATCH (d:Deletion {tenant_id: $t}) RETURN properties(d) AS d ORDER BY d.deleted_at",
                            {"t": tenant})


def timeline(facts) -> list[tuple]:
    return sorted((f.value, f.valid_from, f.valid_to) for f in facts)


def values_of(graph: MemoryGraph, tenant: str, prefix: str) -> list[str]:
    return [r["key"] for r in graph.store.read(
        "MATCH (v:Value {tenant_id: $t}) WHERE v.key STARTS WITH $p RETURN v.key AS key ORDER BY key",
        {"t": tenant, "p": prefix})]


@pytest.fixture
def moved(graph: MemoryGraph, tenant: str) -> MemoryGraph:
    """Lisbon from day 0 (e1), Porto from day 60 (e2), and a deadline (e1) in another slot."""
    record(graph, tenant, "e1", "e2", "e3")
    say(graph, tenant, "home_city", "Lisbon", 0, "e1")
    say(graph, tenant, "home_city", "Porto", 60, "e2")
    say(graph, tenant, "passport_deadline", "2026-07-15", 0, "e1")
    return graph


# -- one memory ------------------------------------------------------------------------------------


def test_deleting_the_current_version_leaves_a_gap_and_stays_deleted(moved: MemoryGraph, tenant: str) -> None:
    graph = moved
    [porto] = graph.current(tenant, "mira", "home_city")
    before = snapshot(graph, tenant)
    planned = graph.delete_memory(tenant, porto.memory_id, dry_run=True)
    assert planned.dry_run and planned.memory_ids == (porto.memory_id,) and planned.record_id is None
    assert planned.counts["facts"] == 1 and planned.counts["values"] == 1
    assert snapshot(graph, tenant) == before and deletions(graph, tenant) == []

    done = graph.delete_memory(tenant, porto.memory_id, actor="user:ops-anna", reason="asked by the user")
    assert done.memory_ids == planned.memory_ids and done.record_id is not None
    # The value it superseded does not come back: nothing is believed from day 60 on.
    assert graph.current(tenant, "mira", "home_city") == []
    assert timeline(graph.history(tenant, "mira", "home_city", current_only=True)) == [("Lisbon", day(0), day(60))]
    assert [f.value for f in graph.as_of(tenant, "mira", "home_city", valid_at=day(30))] == ["Lisbon"]
    assert values_of(graph, tenant, "mira|home_city|") == ["mira|home_city|str:Lisbon"]
    assert graph.current(tenant, "mira", "passport_deadline") != []
    [audit] = deletions(graph, tenant)
    d = audit["d"]
    assert (d["grain"], d["target_memory_id"], d["deleted_by"], d["reason"], d["facts"]) == \
        ("memory", porto.memory_id, "user:ops-anna", "asked by the user", 1)
    assert d["memory_ids"] == [porto.memory_id] and d["slots"] == ["mira|home_city"]
    assert "Porto" not in json.dumps({k: str(v) for k, v in d.items()})
    assert graph.doctor(tenant) == []

    # The next write rebuilds the slot's ledger from the rows that remain: Porto stays gone and
    # Lisbon still ends on day 60.
    say(graph, tenant, "home_city", "Faro", 90, "e3")
    assert timeline(graph.history(tenant, "mira", "home_city", current_only=True)) == \
        [("Faro", day(90), None), ("Lisbon", day(0), day(60))]
    assert graph.doctor(tenant) == []


def test_a_version_goes_with_its_closed_copies(moved: MemoryGraph, tenant: str) -> None:
    graph = moved
    lisbon = [f for f in graph.history(tenant, "mira", "home_city") if f.value == "Lisbon"]
    assert len(lisbon) == 2  # the open row retired by Porto, and its closed copy
    closed = next(f for f in lisbon if f.expired_at is None)
    report = graph.delete_memory(tenant, closed.memory_id)
    assert set(report.memory_ids) == {f.memory_id for f in lisbon}
    assert [f.value for f in graph.history(tenant, "mira", "home_city")] == ["Porto"]
    # Not even what the store believed before Porto arrived keeps it.
    first = min(f.recorded_at for f in lisbon)
    assert graph.as_of(tenant, "mira", "home_city", valid_at=day(30), known_at=first) == []
    assert graph.doctor(tenant) == []


def test_deleting_a_slot_takes_every_row_value_and_statement(moved: MemoryGraph, tenant: str) -> None:
    graph = moved
    say(graph, tenant, "home_city", "Porto", 70, "e3")  # more support, more statements
    before = snapshot(graph, tenant)
    planned = graph.delete_memory(tenant, subject="mira", attribute="home_city", dry_run=True)
    assert snapshot(graph, tenant) == before
    assert planned.grain == "slot" and planned.ledgers == ("mira|home_city",)
    rows = graph.history(tenant, "mira", "home_city")
    assert set(planned.memory_ids) == {f.memory_id for f in rows} and planned.counts["values"] == 2

    graph.delete_memory(tenant, subject="mira", attribute="home_city", actor="agent:retention")
    assert graph.history(tenant, "mira", "home_city") == []
    assert values_of(graph, tenant, "mira|home_city|") == []
    assert graph.store.read("MATCH (l:Ledger {tenant_id: $t, subject: 'mira', attribute: 'home_city'}) "
                            "RETURN l", {"t": tenant}) == []
    assert [f.value for f in graph.current(tenant, "mira", "passport_deadline")] == [datetime(2026, 7, 15).date()]
    # Nothing of the old statements comes back with the next write.
    say(graph, tenant, "home_city", "Faro", 10, "e3")
    assert timeline(graph.history(tenant, "mira", "home_city")) == [("Faro", day(10), None)]
    assert graph.doctor(tenant) == []


def test_deleting_a_candidate_version(graph: MemoryGraph, tenant: str) -> None:
    record(graph, tenant, "e1")
    say(graph, tenant, "birthday", "1990-04-01", 0, "e1")
    [pending] = graph.candidates(tenant, "mira")
    report = graph.delete_memory(tenant, pending.memory_id)
    assert report.candidates == (pending.memory_id,)
    assert graph.candidates(tenant, "mira") == [] and graph.doctor(tenant) == []


def test_bad_or_unknown_targets_are_errors(moved: MemoryGraph, tenant: str) -> None:
    graph = moved
    with pytest.raises(NotFound, match="m-nope"):
        graph.delete_memory(tenant, "m-nope")
    with pytest.raises(NotFound, match="shoe_size"):
        graph.delete_memory(tenant, subject="mira", attribute="shoe_size")
    with pytest.raises(InvalidDelta, match="not both"):
        graph.delete_memory(tenant, "m-1", subject="mira", attribute="home_city")
    with pytest.raises(InvalidDelta, match="not both and not neither"):
        graph.delete_memory(tenant, subject="mira")
    with pytest.raises(NotFound, match="e9"):
        graph.delete_episode(tenant, "e9", dry_run=True)
    with pytest.raises(InvalidDelta, match="actor"):
        graph.delete_episode(tenant, "e1", actor="   ")
    assert deletions(graph, tenant) == []


# -- one episode -----------------------------------------------------------------------------------


def test_deleting_an_episode_takes_what_only_it_supports(graph: MemoryGraph, tenant: str) -> None:
    record(graph, tenant, "e1", "e2", "e3")
    say(graph, tenant, "home_city", "Lisbon", 0, "e1")
    say(graph, tenant, "home_city", "Porto", 60, "e2")      # retires Lisbon's open row
    say(graph, tenant, "home_city", "Porto", 61, "e3")      # Porto has other support
    say(graph, tenant, "response_style", "concise", 1, "e2")  # e2 alone
    say(graph, tenant, "birthday", "1990-04-01", 1, "e2")     # a candidate of e2 alone
    say(graph, tenant, "holds", "acc-9", 1, "e2", subject="ada", subject_type="Customer")
    report = graph.ingest(tenant_id=tenant, id="e2", content="the words of e2", occurred_at=day(1),
                          speaker="user:mira", deltas=[{"subject": "mira", "attribute": "shoe_size", "value": 42}])
    [refused] = report.quarantined
    before = snapshot(graph, tenant)

    planned = graph.delete_episode(tenant, "e2", dry_run=True)
    assert snapshot(graph, tenant) == before
    assert planned.quarantine == (refused.id,) and planned.episodes == ("e2",)
    assert planned.entities == ("acc-9", "ada")
    assert len(planned.memory_ids) == 3 and len(planned.candidates) == 1 and planned.counts["values"] == 2

    done = graph.delete_episode(tenant, "e2", actor="user:mira", reason="forget that chat")
    assert (done.memory_ids, done.updated, done.quarantine, done.entities) == \
        (planned.memory_ids, planned.updated, planned.quarantine, planned.entities)
    [porto] = graph.current(tenant, "mira", "home_city")
    assert (porto.value, porto.source_episode_id, porto.support_episodes, porto.asserted_by) == \
        ("Porto", "e3", ("e3",), "unknown")
    assert graph.current(tenant, "mira", "response_style") == []
    assert graph.candidates(tenant, "mira") == []
    with pytest.raises(UnknownSubject):  # ada's only facts came from e2: her entity went with them
        graph.history(tenant, "ada")
    assert graph.quarantine(tenant) == []
    cited = graph.store.read(
        "MATCH (:Entity {tenant_id: $t})-[f]->() WHERE 'e2' IN [f.source_episode_id, f.expired_by_episode_id, "
        "f.confirmed_by_episode_id] + f.support_episodes RETURN f.memory_id AS m", {"t": tenant})
    assert cited == []
    left = graph.store.read("MATCH (n) WHERE n.tenant_id = $t AND (n:Episode OR n:Entity) "
                            "RETURN n.id AS id ORDER BY id", {"t": tenant})
    assert [r["id"] for r in left] == ["e1", "e3", "mira"]
    [audit] = deletions(graph, tenant)
    d = audit["d"]
    assert (d["grain"], d["target_episode_id"], d["episodes"], d["quarantine"], d["updated_facts"]) == \
        ("episode", "e2", 1, 1, len(done.updated))
    assert not any(word in json.dumps({k: str(v) for k, v in d.items()}) for word in ("concise", "acc-9 ", "Porto"))
    assert graph.doctor(tenant) == []


def test_doctor_finds_what_a_deletion_must_not_leave(graph: MemoryGraph, tenant: str) -> None:
    record(graph, tenant, "e1", "e2")
    say(graph, tenant, "home_city", "Lisbon", 0, "e1")
    say(graph, tenant, "home_city", "Porto", 60, "e2")
    [ledger] = graph.store.read("MATCH (l:Ledger {tenant_id: $t, subject: 'mira'}) RETURN l.points AS p",
                                {"t": tenant})
    graph.delete_episode(tenant, "e2")
    assert graph.doctor(tenant) == []
    # Break the store behind SGAM's back: a fact citing the deleted episode, its statements back
    # in a ledger, a value node nothing points at.
    graph.store.run_write("MATCH (:Entity {tenant_id: $t})-[f]->() WHERE f.expired_at IS NULL "
                          "SET f.support_episodes = f.support_episodes + 'e2'", {"t": tenant})
    graph.store.run_write("CREATE (:Ledger {tenant_id: $t, subject: 'mira', attribute: 'home_city', points: $p})",
                          {"t": tenant, "p": ledger["p"]})
    graph.store.run_write("CREATE (:Value {tenant_id: $t, key: 'mira|home_city|str:Porto', value: 'Porto'})",
                          {"t": tenant})
    problems = {p["problem"] for p in graph.doctor(tenant)}
    assert problems == {"fact cites a deleted episode", "ledger holds a deleted statement", "orphan value node"}


def test_async_deletion(neo4j_connection, tenant: str, graph: MemoryGraph) -> None:
    record(graph, tenant, "e1", "e2")
    say(graph, tenant, "home_city", "Lisbon", 0, "e1")
    say(graph, tenant, "response_style", "concise", 0, "e2")

    async def run() -> tuple:
        uri, auth = neo4j_connection
        async with await AsyncMemoryGraph.connect(uri, auth, bootstrap=False) as agraph:
            planned = await agraph.delete_episode(tenant, "e2", dry_run=True)
            done = await agraph.delete_episode(tenant, "e2")
            [lisbon] = await agraph.current(tenant, "mira", "home_city")
            gone = await agraph.delete_memory(tenant, lisbon.memory_id)
            return planned, done, gone

    planned, done, gone = asyncio.run(run())
    assert planned.dry_run and planned.memory_ids == done.memory_ids and len(done.memory_ids) == 1
    assert gone.grain == "memory" and graph.history(tenant, "mira") == [] and graph.doctor(tenant) == []


# -- a tenant --------------------------------------------------------------------------------------


def test_deleting_a_tenant_keeps_only_its_record(moved: MemoryGraph, tenant: str) -> None:
    graph = moved
    before = snapshot(graph, tenant)
    planned = graph.delete_tenant(tenant, dry_run=True)
    assert snapshot(graph, tenant) == before
    assert (planned.counts["facts"], planned.counts["episodes"], planned.counts["entities"]) == (4, 3, 1)
    done = graph.delete_tenant(tenant, actor="user:ops-anna", reason="contract ended")
    assert done.counts == planned.counts and done.record_id
    left = graph.store.read("MATCH (n) WHERE n.tenant_id = $t RETURN labels(n) AS l", {"t": tenant})
    assert [r["l"] for r in left] == [["Deletion"]]
    [audit] = deletions(graph, tenant)
    d = audit["d"]
    assert (d["grain"], d["status"], d["deleted_by"], d["reason"], d["facts"], d["episodes"]) == \
        ("tenant", "done", "user:ops-anna", "contract ended", 4, 3)
    assert graph.doctor(tenant) == []
    # A tenant holding nothing: nothing to delete, no record.
    assert graph.delete_tenant(tenant).empty and len(deletions(graph, tenant)) == 1
    # The tenant may be used again; what predates its deletion is found.
    record(graph, tenant, "e9")
    assert graph.doctor(tenant) == []
    graph.store.run_write("CREATE (:Entity {tenant_id: $t, id: 'ghost', created_at: $at})",
                          {"t": tenant, "at": EPOCH})
    assert [p["problem"] for p in graph.doctor(tenant)] == ["left by a tenant deletion"]


# -- the CLI ---------------------------------------------------------------------------------------


def test_cli_delete_commands(env, moved: MemoryGraph, tenant: str) -> None:
    graph = moved
    [porto] = graph.current(tenant, "mira", "home_city")
    dry = runner.invoke(app, ["delete", "memory", "-t", tenant, "--memory-id", porto.memory_id, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would delete" in dry.output and porto.memory_id in dry.output
    assert graph.current(tenant, "mira", "home_city") != []
    refused = runner.invoke(app, ["delete", "memory", "-t", tenant, "-s", "mira", "-a", "home_city"], input="n\n")
    assert refused.exit_code == 1 and graph.current(tenant, "mira", "home_city") != []
    slot = runner.invoke(app, ["delete", "memory", "-t", tenant, "-s", "mira", "-a", "home_city", "--yes",
                               "--actor", "user:ops", "--json"])
    assert slot.exit_code == 0, slot.output
    assert json.loads(slot.stdout)["grain"] == "slot" and graph.history(tenant, "mira", "home_city") == []

    episode = runner.invoke(app, ["delete", "episode", "-t", tenant, "-e", "e2", "--yes"])
    assert episode.exit_code == 0 and "recorded as" in episode.output
    missing = runner.invoke(app, ["delete", "episode", "-t", tenant, "-e", "e2", "--yes"])
    assert missing.exit_code == 1 and "no episode 'e2'" in missing.output

    tenant_dry = runner.invoke(app, ["delete", "tenant", "-t", tenant, "--dry-run"])
    assert tenant_dry.exit_code == 0 and "facts: 1" in tenant_dry.output
    gone = runner.invoke(app, ["delete", "tenant", "-t", tenant, "--yes", "--reason", "test"])
    assert gone.exit_code == 0 and "recorded as" in gone.output
    again = runner.invoke(app, ["delete", "tenant", "-t", tenant, "--yes"])
    assert again.exit_code == 1 and "holds nothing" in again.output
    doctor = runner.invoke(app, ["doctor", "-t", tenant])
    assert doctor.exit_code == 0, doctor.output
    assert [d["d"]["grain"] for d in deletions(graph, tenant)] == ["slot", "episode", "tenant"]


# -- property: deleting one episode -----------------------------------------------------------------

EPISODES = ["e0", "e1", "e2", "e3"]
SLOTS = [("p0", "home_city"), ("p0", "email"), ("p1", "home_city"), ("p1", "response_style"),
         ("p2", "email")]
# For each slot: one value, stated by a non-empty set of episodes, each at its own day.
facts = st.lists(
    st.tuples(st.sampled_from(SLOTS), st.dictionaries(st.sampled_from(EPISODES), st.integers(0, 30),
                                                      min_size=1, max_size=4)),
    min_size=1, max_size=5, unique_by=lambda f: f[0])


def rows_of(graph: MemoryGraph, tenant: str, subject: str, attribute: str | None) -> list:
    """Every row of a slot; none when the subject itself is gone (a read names it an error)."""
    try:
        return graph.history(tenant, subject, attribute)
    except UnknownSubject:
        return []


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stated=facts, victim=st.sampled_from(EPISODES), order=st.randoms(use_true_random=False))
def test_deleting_one_episode_keeps_exactly_what_others_support(graph: MemoryGraph, stated, victim, order) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    record(graph, tenant, *EPISODES)
    deltas = [MemoryDelta(tenant_id=tenant, subject=subject, attribute=attribute, value=f"{subject}-{attribute}",
                          subject_type="Person", valid_from=day(start), source_episode_id=episode)
              for (subject, attribute), said in stated for episode, start in said.items()]
    order.shuffle(deltas)
    assert not graph.write_many(deltas).rejected

    graph.delete_episode(tenant, victim)

    # The oracle, from the statements alone: a slot keeps its one fact while another episode said it.
    for (subject, attribute), said in stated:
        others = set(said) - {victim}
        if not others:
            assert rows_of(graph, tenant, subject, attribute) == [], (subject, attribute)
            continue
        believed = graph.history(tenant, subject, attribute, current_only=True)
        [fact] = believed
        assert set(fact.support_episodes) == others and fact.source_episode_id in others
        # rows decide: the surviving row keeps the interval it had (docs/temporal-semantics.md)
        assert (fact.valid_from, fact.valid_to) == (day(min(said.values())), None)
    episodes = {r["id"] for r in graph.store.read("MATCH (e:Episode {tenant_id: $t}) RETURN e.id AS id", {"t": tenant})}
    assert episodes == set(EPISODES) - {victim}
    for subject in {s for (s, _), _ in stated}:
        for fact in rows_of(graph, tenant, subject, None):
            cited = {fact.source_episode_id, *fact.support_episodes,
                     fact.expired_by_episode_id, fact.confirmed_by_episode_id} - {None}
            assert victim not in cited and fact.support_episodes and set(fact.support_episodes) <= episodes
    assert graph.doctor(tenant) == []
    graph.delete_tenant(tenant)

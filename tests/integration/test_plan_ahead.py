"""A batch planned before its locks (the lanes of ``write_many``), against a real Neo4j.

Each lane reads its batch's slots and plans the batch while another lane may hold the locks it
needs, then takes the locks and reads the slots again. The plan is kept only if the second read
is the first one (the rows, the ledgers, the applied keys); a write that landed in between makes
the batch be planned again under the locks, with the clock read there. Checked here by committing
another writer's statement exactly between the two reads, and against the same statements written
one at a time.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone

import pytest

from sgam import Episode, MemoryDelta, MemoryGraph
from sgam.graph import Status
from sgam.graph import store as store_module
from sgam.graph.schema import default_schema
from sgam.graph.steps import Statement
from sgam.graph.writes import lock_and_read_query, write_op

EPOCH = datetime(2025, 3, 1, tzinfo=timezone.utc)
SUBJECT, ATTRIBUTE = "mira", "home_city"


def day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


def say(tenant: str, value: str, start: int, episode: str, subject: str = SUBJECT) -> MemoryDelta:
    return MemoryDelta(tenant_id=tenant, subject=subject, attribute=ATTRIBUTE, value=value,
                       valid_from=day(start), source_episode_id=episode)


class Clocks:
    """Two writers' clocks on one timeline, one microsecond apart per reading, each remembering
    what it gave."""

    def __init__(self) -> None:
        self.ticks = itertools.count(1)
        self.given: dict[str, list[datetime]] = {"ours": [], "theirs": []}

    def of(self, who: str) -> Callable[[], datetime]:
        def clock() -> datetime:
            self.given[who].append(datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=next(self.ticks)))
            return self.given[who][-1]
        return clock


@pytest.fixture
def tenant(shared_graph: MemoryGraph) -> Iterator[str]:
    name = f"ahead-{uuid.uuid4().hex[:10]}"
    shared_graph.record_episodes([Episode(tenant_id=name, id=e, content=f"episode {e}", occurred_at=EPOCH)
                                  for e in ("e0", "e1", "e2")])
    yield name
    shared_graph.delete_tenant(name)


@pytest.fixture
def writers(neo4j_connection) -> Iterator[tuple[MemoryGraph, MemoryGraph, Clocks]]:
    uri, auth = neo4j_connection
    clocks = Clocks()
    ours = MemoryGraph.connect(uri, auth, schema=default_schema(), bootstrap=False, clock=clocks.of("ours"))
    theirs = MemoryGraph.connect(uri, auth, schema=default_schema(), bootstrap=False, clock=clocks.of("theirs"))
    yield ours, theirs, clocks
    ours.close()
    theirs.close()


def planned_ahead(graph: MemoryGraph, deltas: list[MemoryDelta]):
    return graph.store.run(write_op(deltas, graph.store.schema, graph.store.clock, ahead=True))


def between_the_reads(monkeypatch: pytest.MonkeyPatch, graph: MemoryGraph, write: Callable[[], object]) -> list[str]:
    """Run ``write`` (another writer's transaction, committed) just before the next lock step,
    that is after the batch was read and planned; returns the statements sent, first lines."""
    lock = lock_and_read_query(graph.store.schema.fact_types())
    run, sent = store_module._run, []
    state = {"done": False, "inside": False}

    def interleaved(tx, statement: Statement):
        if not state["inside"]:  # the other writer's own statements pass straight through
            if statement.query == lock and not state["done"]:
                state["done"] = state["inside"] = True
                try:
                    write()
                finally:
                    state["inside"] = False
            sent.append("lock" if statement.query == lock else statement.query.split()[1])
        return run(tx, statement)

    monkeypatch.setattr(store_module, "_run", interleaved)
    return sent


def believed(graph: MemoryGraph, tenant: str, subject: str = SUBJECT) -> list[tuple]:
    rows = graph.history(tenant, subject, ATTRIBUTE)
    return sorted((r.value, r.valid_from, r.valid_to) for r in rows
                  if r.status is Status.CONFIRMED and r.expired_at is None)


def assert_ordered(graph: MemoryGraph, tenant: str) -> None:
    """No row retired before it was recorded, and at every recorded instant at most one value
    believed for any valid instant (checked at each row's start)."""
    rows = graph.history(tenant, SUBJECT, ATTRIBUTE)
    assert [r.memory_id for r in rows if r.expired_at is not None and r.expired_at < r.recorded_at] == []
    for known in sorted({r.recorded_at for r in rows}):
        at = [r for r in rows if r.status is Status.CONFIRMED and r.believed_at(known)]
        for r in at:
            holding = [o.value for o in at if o.valid_from <= r.valid_from
                       and (o.valid_to is None or r.valid_from < o.valid_to)]
            assert len(holding) == 1, f"known at {known}: {holding} from {r.valid_from}"
    assert graph.doctor(tenant) == []


def one_at_a_time(graph: MemoryGraph, deltas: list[MemoryDelta]) -> list[tuple]:
    """The same statements written one at a time into a fresh tenant: the reference history."""
    tenant = f"ahead-ref-{uuid.uuid4().hex[:10]}"
    graph.record_episodes([Episode(tenant_id=tenant, id=e, content=f"episode {e}", occurred_at=EPOCH)
                           for e in ("e0", "e1", "e2")])
    try:
        for d in deltas:
            assert graph.write(d.model_copy(update={"tenant_id": tenant})).ok
        return believed(graph, tenant)
    finally:
        graph.delete_tenant(tenant)


def test_a_plan_made_before_the_lock_is_kept_when_nothing_changed(writers, tenant: str) -> None:
    ours, _, clocks = writers
    assert ours.write(say(tenant, "Lisbon", 0, "e0")).ok
    before = len(clocks.given["ours"])
    result = planned_ahead(ours, [say(tenant, "Porto", 10, "e1"), say(tenant, "Faro", 20, "e2")])
    assert [r.outcome for r in result.results] == ["changed", "changed"]
    # One reading of the clock, before the lock: the plan was kept, and its rows carry that instant.
    [read] = clocks.given["ours"][before:]
    rows = ours.history(tenant, SUBJECT, ATTRIBUTE)
    assert {r.recorded_at for r in rows if r.expired_at is None} >= {read}
    assert {r.expired_at for r in rows if r.expired_at is not None} == {read}
    assert believed(ours, tenant) == [("Faro", day(20), None), ("Lisbon", day(0), day(10)),
                                      ("Porto", day(10), day(20))]
    assert_ordered(ours, tenant)


def test_a_write_between_the_read_and_the_lock_makes_the_batch_planned_again(
        writers, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs, clocks = writers
    first, between, batch = say(tenant, "Lisbon", 0, "e0"), say(tenant, "Faro", 5, "e2"), say(tenant, "Porto", 10, "e1")
    assert ours.write(first).ok
    sent = between_the_reads(monkeypatch, ours, lambda: theirs.write(between))
    before = len(clocks.given["ours"])
    result = planned_ahead(ours, [batch])
    assert result.results[0].outcome == "changed"
    assert sent[:3] == ["()", "$subjects", "lock"]  # the check, the read ahead, the lock step
    ours_read = clocks.given["ours"][before:]
    assert believed(ours, tenant) == one_at_a_time(ours, [first, between, batch]) == [
        ("Faro", day(5), day(10)), ("Lisbon", day(0), day(5)), ("Porto", day(10), None)]
    assert_ordered(ours, tenant)
    # Read twice: before the lock for the plan that was dropped, and under the lock for the one kept.
    planned, kept = ours_read
    assert clocks.given["theirs"][-1] < kept
    assert planned not in {r.recorded_at for r in ours.history(tenant, SUBJECT, ATTRIBUTE)}


def test_a_write_between_the_reads_of_another_subject_leaves_the_plan_kept(
        writers, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second read covers the batch's own subjects only: a write about someone else changes
    nothing the plan rests on."""
    ours, theirs, clocks = writers
    assert ours.write(say(tenant, "Lisbon", 0, "e0")).ok
    between_the_reads(monkeypatch, ours, lambda: theirs.write(say(tenant, "Rome", 3, "e2", subject="noor")))
    before = len(clocks.given["ours"])
    planned_ahead(ours, [say(tenant, "Porto", 10, "e1")])
    assert len(clocks.given["ours"][before:]) == 1
    assert believed(ours, tenant) == [("Lisbon", day(0), day(10)), ("Porto", day(10), None)]
    assert believed(ours, tenant, "noor") == [("Rome", day(3), None)]
    assert_ordered(ours, tenant)


@pytest.mark.parametrize("change", ["a new subject", "a retraction", "a repeat"])
def test_every_kind_of_change_between_the_reads_is_seen(
        writers, tenant: str, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """Whatever the other writer did to the slot, the batch ends as if written after it."""
    ours, theirs, clocks = writers
    first = say(tenant, "Lisbon", 0, "e0")
    if change != "a new subject":
        assert ours.write(first).ok
    between = {"a new subject": first,
               "a retraction": MemoryDelta(tenant_id=tenant, subject=SUBJECT, attribute=ATTRIBUTE, value="Lisbon",
                                           op="retract", valid_from=day(4), source_episode_id="e2"),
               "a repeat": say(tenant, "Lisbon", 0, "e2")}[change]
    batch = [say(tenant, "Porto", 10, "e1"), say(tenant, "Lisbon", 12, "e1")]
    between_the_reads(monkeypatch, ours, lambda: theirs.write(between))
    before = len(clocks.given["ours"])
    result = planned_ahead(ours, batch)
    assert not result.rejected
    readings = len(clocks.given["ours"][before:])
    history = ([] if change == "a new subject" else [first]) + [between] + batch
    assert believed(ours, tenant) == one_at_a_time(ours, history)
    assert_ordered(ours, tenant)
    assert readings == 2  # planned again under the lock

"""What one batch stores: the believed runs of its statements, not the steps of reconciling them
one by one (docs/temporal-semantics.md, "Transaction time").

Reconciling a batch delta by delta would create a version that a later statement of the same batch
cuts short at once: retired by the transaction that created it, never believed at any instant. A
batch writes its copy over the shorter interval instead (the statement stays in the slot's
ledger): changes in valid-time order store what the same changes written one at a time, latest
first, store; in any order, a version never believed is kept only where a written row names it as
the version it superseded.

The oracle is the temporal contract for asserts of distinct values at distinct instants: the value
at x is the one of the latest assert at or before x, so the believed rows are ``[t_i, t_i+1)`` of
the i-th assert in valid-time order, the last one open, and no row revises another (a revision is a
retired version of the same value). Which version a row supersedes is fixed when the row is written
(rows are immutable), so it is compared only where the arrival is in valid-time order.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgam import Episode, MemoryDelta, MemoryGraph
from sgam.graph import Fact

EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
SAID_AT = datetime(2024, 6, 1, tzinfo=timezone.utc)
CITIES = ("Lisbon", "Rome", "Porto", "Oslo", "Lima", "Kyiv")


def _tenant(graph: MemoryGraph, episodes: int) -> str:
    tenant = f"b-{uuid.uuid4().hex[:12]}"
    graph.record_episodes([Episode(tenant_id=tenant, id=f"e{i}", content=f"episode {i}", occurred_at=SAID_AT,
                                   actor="user:mira") for i in range(episodes)])
    return tenant


def _assert(tenant: str, city: str, day: int, episode: int) -> MemoryDelta:
    return MemoryDelta(tenant_id=tenant, subject="mira", attribute="home_city", value=city,
                       valid_from=EPOCH + timedelta(days=day), source_episode_id=f"e{episode}",
                       asserted_by="user:mira", subject_type="Person")


def _history(graph: MemoryGraph, tenant: str) -> list[Fact]:
    return graph.history(tenant, "mira", "home_city")


def _stored(rows: list[Fact]) -> list[tuple]:
    """Every stored row of the slot (retired ones too), as (valid_from, valid_to, value, episode,
    still believed, the value of the version it revises)."""
    by_id = {r.memory_id: r for r in rows}

    def value_of(memory_id: str | None) -> str | None:
        return None if memory_id is None else by_id[memory_id].value

    return sorted((r.valid_from, r.valid_to, r.value, r.source_episode_id, r.expired_at is None,
                   value_of(r.revises_memory_id)) for r in rows)


def _expected(changes: list[tuple[str, int, int]]) -> list[tuple]:
    ordered = sorted(changes, key=lambda c: c[1])
    rows = []
    for i, (city, day, episode) in enumerate(ordered):
        end = EPOCH + timedelta(days=ordered[i + 1][1]) if i + 1 < len(ordered) else None
        rows.append((EPOCH + timedelta(days=day), end, city, f"e{episode}", True, None))
    return sorted(rows)


@st.composite
def changes(draw) -> list[tuple[str, int, int]]:
    """Asserts of distinct cities from distinct days, each from its own episode, in arrival order."""
    count = draw(st.integers(min_value=1, max_value=len(CITIES)))
    cities = draw(st.permutations(CITIES))[:count]
    days = draw(st.lists(st.integers(min_value=0, max_value=60), min_size=count, max_size=count, unique=True))
    return [(city, day, i) for i, (city, day) in enumerate(zip(cities, days))]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arrival=changes())
def test_one_batch_stores_the_believed_runs(graph: MemoryGraph, arrival: list[tuple[str, int, int]]) -> None:
    """In valid-time order, one batch stores exactly the believed runs, as writing the changes one
    at a time latest first does. In any order it believes exactly them, every row a result names is
    stored, and a version retired by the batch that wrote it is stored only when a row of the batch
    names it as the version it superseded."""
    in_order, as_arrived, backwards = (_tenant(graph, len(arrival)) for _ in range(3))
    try:
        for tenant, changes_ in ((in_order, sorted(arrival, key=lambda c: c[1])), (as_arrived, arrival)):
            result = graph.write_many([_assert(tenant, *change) for change in changes_])
            assert not result.rejected, result.rejected[0].message
            rows = _history(graph, tenant)
            stored = {r.memory_id for r in rows}
            for r in result.results:
                assert set(r.memory_ids) <= stored, (changes_, r)
            superseded = {r.supersedes_memory_id for r in rows}
            assert all(r.expired_at is None or r.memory_id in superseded for r in rows), changes_
            believed = [entry for entry in _stored(rows) if entry[4]]
            assert [entry[:5] for entry in believed] == [entry[:5] for entry in _expected(arrival)], changes_
        assert _stored(_history(graph, in_order)) == _expected(arrival)
        # the same changes one at a time, latest first: each is written over its final interval at once
        for change in sorted(arrival, key=lambda c: c[1], reverse=True):
            assert graph.write(_assert(backwards, *change)).ok
        assert _stored(_history(graph, backwards)) == _stored(_history(graph, in_order))
    finally:
        for tenant in (in_order, as_arrived, backwards):
            graph.delete_tenant(tenant)


def test_a_change_later_in_the_batch_cuts_the_version_it_follows(graph: MemoryGraph) -> None:
    """Lisbon from March, then Rome from June, in one batch: two rows, none retired, and the
    Lisbon delta's result names the Lisbon row that is stored. One at a time, the Lisbon row that
    stood open until Rome arrived is kept, retired, with its copy revising it."""
    together, apart = _tenant(graph, 2), _tenant(graph, 2)
    try:
        result = graph.write_many([_assert(together, "Lisbon", 60, 0), _assert(together, "Rome", 152, 1)])
        rows = {r.memory_id: r for r in _history(graph, together)}
        assert sorted((r.value, r.valid_to is None, r.expired_at is None) for r in rows.values()) == [
            ("Lisbon", False, True), ("Rome", True, True)]
        lisbon, rome = result.results
        assert len(lisbon.memory_ids) == 1 and rows[lisbon.memory_ids[0]].value == "Lisbon"
        assert rows[lisbon.memory_ids[0]].revises_memory_id is None
        assert all(m in rows for m in rome.memory_ids)
        assert rows[next(m for m in rome.memory_ids if rows[m].value == "Rome")].supersedes_memory_id == \
            lisbon.memory_ids[0]

        for delta in (_assert(apart, "Lisbon", 60, 0), _assert(apart, "Rome", 152, 1)):
            assert graph.write(delta).ok
        kept = _history(graph, apart)
        retired = [r for r in kept if r.expired_at is not None]
        assert [(r.value, r.valid_to) for r in retired] == [("Lisbon", None)]
        assert any(r.revises_memory_id == retired[0].memory_id for r in kept)
        # believed now, both ways: the same two versions
        believed = lambda t: sorted((r.valid_from, r.valid_to, r.value)  # noqa: E731
                                    for r in graph.history(t, "mira", "home_city", current_only=True))
        assert believed(together) == believed(apart)
    finally:
        graph.delete_tenant(together)
        graph.delete_tenant(apart)

"""Stores written before ledgers existed: the bootstrap backfill and the write path rebuild a
slot's ledger from its believed rows, idempotently, and later writes follow the change-point
model from there (docs/temporal-semantics.md; README "What a fact is")."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from sgam import MemoryDelta, MemoryGraph
from sgam.graph.reconcile import Point, believed_runs
from sgam.graph.writes import backfill_steps

pytestmark = pytest.mark.integration


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def believed(graph: MemoryGraph, tenant: str, subject: str, attribute: str) -> list[tuple]:
    return sorted((f.valid_from, f.valid_to, f.value) for f in graph.history(tenant, subject, attribute)
                  if f.expired_at is None)


def ledgers(graph: MemoryGraph, tenant: str) -> dict[tuple[str, str], list[str]]:
    rows = graph.store.read("MATCH (l:Ledger {tenant_id: $t}) RETURN l.subject AS s, l.attribute AS a, "
                            "l.points AS points", {"t": tenant})
    return {(r["s"], r["a"]): sorted(r["points"]) for r in rows}


def write(graph: MemoryGraph, tenant: str, subject: str, attribute: str, value: str, at: datetime,
          op: str = "assert", **extra) -> str:
    return graph.write(MemoryDelta(tenant_id=tenant, subject=subject, attribute=attribute, value=value,
                                   valid_from=at, source_episode_id="e1", op=op, **extra)).outcome


@pytest.fixture
def legacy(graph: MemoryGraph, tenant: str) -> MemoryGraph:
    """A tenant whose rows were written, and whose ledgers are then gone, as in an older store."""
    graph.record_episode(tenant_id=tenant, id="e1", content="history", occurred_at=utc(2026, 1, 1))
    write(graph, tenant, "mira", "home_city", "Porto", utc(2025, 1, 1))
    write(graph, tenant, "mira", "home_city", "Porto", utc(2025, 2, 1))  # folded into the run
    write(graph, tenant, "mira", "home_city", "Lisbon", utc(2025, 3, 1))
    write(graph, tenant, "mira", "home_city", None, utc(2025, 5, 1), op="retract")
    for member, start in (("a@x.org", utc(2025, 1, 1)), ("b@x.org", utc(2025, 2, 1))):
        write(graph, tenant, "mira", "contact", member, start)
    write(graph, tenant, "mira", "contact", "a@x.org", utc(2025, 4, 1), op="retract")
    graph.store.run_write("MATCH (l:Ledger {tenant_id: $t}) DETACH DELETE l", {"t": tenant})
    return graph


def backfill(graph: MemoryGraph, tenant: str) -> int:
    made, after = 0, ""
    while after is not None:
        n, after = graph.store.transact(
            lambda: backfill_steps(graph.schema, after, 2, graph.clock(), tenant))  # noqa: B023
        made += n
    return made


def test_backfill_rebuilds_each_slot_from_its_rows_once(legacy: MemoryGraph, tenant: str) -> None:
    rows = {a: believed(legacy, tenant, "mira", a) for a in ("home_city", "contact")}
    assert backfill(legacy, tenant) == 2
    first = ledgers(legacy, tenant)
    assert set(first) == {("mira", "home_city"), ("mira", "contact")}
    for attribute, many in (("home_city", False), ("contact", True)):
        runs = believed_runs([Point.from_json(p) for p in first[("mira", attribute)]], many)
        assert sorted((r.start, r.end) for r in runs) == [(s, e) for s, e, _ in rows[attribute]]
    assert backfill(legacy, tenant) == 0  # idempotent: every slot has its ledger now
    assert ledgers(legacy, tenant) == first
    assert {a: believed(legacy, tenant, "mira", a) for a in rows} == rows


@pytest.mark.parametrize("rebuilt_by", ["backfill", "write"])
def test_after_the_rebuild_writes_follow_the_change_point_model(legacy: MemoryGraph, tenant: str,
                                                                rebuilt_by: str) -> None:
    if rebuilt_by == "backfill":
        backfill(legacy, tenant)
    # A backdated Braga from 1 February ends at the next change point, Lisbon's start.
    assert write(legacy, tenant, "mira", "home_city", "Braga", utc(2025, 2, 15)) == "changed"
    assert believed(legacy, tenant, "mira", "home_city") == [
        (utc(2025, 1, 1), utc(2025, 2, 15), "Porto"), (utc(2025, 2, 15), utc(2025, 3, 1), "Braga"),
        (utc(2025, 3, 1), utc(2025, 5, 1), "Lisbon")]
    # The end at 1 May came back as a change point: a backdated Faro does not run past it.
    write(legacy, tenant, "mira", "home_city", "Faro", utc(2025, 4, 1))
    assert believed(legacy, tenant, "mira", "home_city")[-1] == (utc(2025, 4, 1), utc(2025, 5, 1), "Faro")
    # The set member's end came back too.
    write(legacy, tenant, "mira", "contact", "a@x.org", utc(2025, 3, 1))
    assert [r for r in believed(legacy, tenant, "mira", "contact") if r[2] == "a@x.org"] == [
        (utc(2025, 1, 1), utc(2025, 4, 1), "a@x.org")]
    assert legacy.doctor(tenant) == []


def test_correct_on_a_set_names_the_wrong_member(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="contacts", occurred_at=utc(2026, 1, 1))
    write(graph, tenant, "mira", "contact", "a@x.org", utc(2025, 1, 1))
    write(graph, tenant, "mira", "contact", "c@x.org", utc(2025, 1, 1))
    assert write(graph, tenant, "mira", "contact", "b@x.org", utc(2025, 6, 1), op="correct",
                 replaces="a@x.org") == "corrected"
    assert believed(graph, tenant, "mira", "contact") == [
        (utc(2025, 1, 1), None, "b@x.org"), (utc(2025, 1, 1), None, "c@x.org")]
    before_correction = graph.history(tenant, "mira", "contact")
    old = next(f for f in before_correction if f.value == "a@x.org")
    assert old.expired_at is not None  # retired in transaction time, still in history
    last = max(f.recorded_at for f in before_correction if f.value == "c@x.org")
    known = graph.as_of(tenant, "mira", "contact", valid_at=utc(2025, 2, 1), known_at=last)
    assert sorted(f.value for f in known) == ["a@x.org", "c@x.org"]
    from sgam.graph import InvalidDelta
    with pytest.raises(InvalidDelta, match="replaces"):
        write(graph, tenant, "mira", "contact", "d@x.org", utc(2025, 6, 1), op="correct")

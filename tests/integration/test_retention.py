"""Retention purge removes exactly what the policy says, and nothing else."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sgam import MemoryDelta, MemoryGraph


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def count(graph: MemoryGraph, query: str, tenant: str) -> int:
    return graph.store.read(query, {"t": tenant})[0]["n"]


def test_purge_removes_exactly_the_expired_facts(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="call", content="Called Ada.", occurred_at=utc(2026, 3, 1))
    graph.record_episode(tenant_id=tenant, id="crm", content="Ada's address.", occurred_at=utc(2026, 3, 1))
    result = graph.write_many([
        # session retention (30 days): expires
        MemoryDelta(tenant_id=tenant, subject="ada", subject_type="Customer", attribute="last_contacted_at",
                    value="2026-03-01T10:00:00+00:00", valid_from=utc(2026, 3, 1), source_episode_id="call"),
        # permanent: stays, even from an old episode
        MemoryDelta(tenant_id=tenant, subject="ada", attribute="address", value="1 Road",
                    valid_from=utc(2026, 3, 1), source_episode_id="crm"),
        # operational (365 days): not expired 40 days on
        MemoryDelta(tenant_id=tenant, subject="mira", attribute="passport_deadline", value="2026-07-15",
                    valid_from=utc(2026, 3, 1), source_episode_id="crm"),
    ])
    assert not result.rejected
    later = graph.clock() + timedelta(days=40)
    nothing = graph.purge(tenant, now=graph.clock() + timedelta(days=1))
    assert nothing.total_facts == 0 and nothing.episodes == 0

    seen: list[tuple[int, int]] = []
    report = graph.purge(tenant, now=later, on_progress=lambda done, total: seen.append((done, total)))
    assert report.facts == {"session": 1, "operational": 0}
    assert report.values == 1 and report.episodes == 1
    assert seen[-1] == (1, 1)
    assert graph.history(tenant, "ada", "last_contacted_at") == []
    assert [f.value for f in graph.current(tenant, "ada", "address")] == ["1 Road"]
    assert [str(f.value) for f in graph.current(tenant, "mira", "passport_deadline")] == ["2026-07-15"]
    # The episode only the expired fact cited is gone; the one still cited stays.
    episodes = {r["id"] for r in graph.store.read(
        "MATCH (e:Episode {tenant_id: $t}) RETURN e.id AS id", {"t": tenant})}
    assert episodes == {"crm"}
    assert count(graph, "MATCH (v:Value {tenant_id: $t}) WHERE v.attribute = 'last_contacted_at' "
                        "RETURN count(v) AS n", tenant) == 0
    runs = graph.store.read("MATCH (r:PurgeRun {tenant_id: $t}) RETURN r.policy AS policy, r.facts AS facts",
                            {"t": tenant})
    assert runs == [{"policy": "session", "facts": 1}]
    assert graph.doctor(tenant) == []
    again = graph.purge(tenant, now=later)
    assert again.total_facts == 0

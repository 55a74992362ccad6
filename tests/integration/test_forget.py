"""forget_subject: zero residue, redaction of shared episodes, and no resurrection from old episodes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sgam import Conflict, ForgottenSubject, MemoryDelta, MemoryGraph, NotFound


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.fixture
def seeded(graph: MemoryGraph, tenant: str) -> MemoryGraph:
    episodes = [
        ("e1", "Mira: my passport deadline is 2026-07-15.", utc(2026, 5, 20)),
        ("e2", "Mira: it is now 2026-06-30.", utc(2026, 6, 10)),
        ("crm", "Ada opened account acc-1.", utc(2026, 1, 5)),
        ("both", "Mira and Ada both prefer email.", utc(2026, 2, 1)),
    ]
    for eid, text, when in episodes:
        graph.record_episode(tenant_id=tenant, id=eid, content=text, occurred_at=when)
    result = graph.write_many([
        MemoryDelta(tenant_id=tenant, subject="mira", attribute="passport_deadline", value="2026-07-15",
                    valid_from=utc(2026, 5, 20), source_episode_id="e1"),
        MemoryDelta(tenant_id=tenant, subject="mira", attribute="passport_deadline", value="2026-06-30",
                    valid_from=utc(2026, 6, 10), source_episode_id="e2"),
        MemoryDelta(tenant_id=tenant, subject="mira", attribute="email", subject_type="Person",
                    value="mira@example.org", valid_from=utc(2026, 2, 1), source_episode_id="both"),
        MemoryDelta(tenant_id=tenant, subject="ada", attribute="email", subject_type="Customer",
                    value="ada@example.org", valid_from=utc(2026, 2, 1), source_episode_id="both"),
        MemoryDelta(tenant_id=tenant, subject="ada", attribute="holds", value="acc-1",
                    valid_from=utc(2026, 1, 5), source_episode_id="crm"),
        MemoryDelta(tenant_id=tenant, subject="acc-1", attribute="covered_by", value="pol-1",
                    valid_from=utc(2026, 1, 5), source_episode_id="crm"),
    ])
    assert not result.rejected
    return graph


def test_forget_leaves_zero_residue_and_keeps_others(seeded: MemoryGraph, tenant: str) -> None:
    assert seeded.residue(tenant, "mira") != []
    report = seeded.forget_subject(tenant, "mira")
    assert set(report.episodes_deleted) == {"e1", "e2"}
    assert report.episodes_redacted == ("both",)
    assert seeded.residue(tenant, "mira") == []
    with pytest.raises(ForgottenSubject, match="'mira'.*was forgotten"):
        seeded.history(tenant, "mira")
    episodes = {r["id"]: r["content"] for r in seeded.store.read(
        "MATCH (e:Episode {tenant_id: $t}) RETURN e.id AS id, e.content AS content", {"t": tenant})}
    assert set(episodes) == {"crm", "both"} and "Mira" not in episodes["both"]
    # Ada's fact from the shared episode keeps its (redacted) source: the store stays sound.
    assert [f.value for f in seeded.current(tenant, "ada", "email")] == ["ada@example.org"]
    assert seeded.doctor(tenant) == []


def test_an_old_episode_cannot_bring_the_subject_back(seeded: MemoryGraph, tenant: str) -> None:
    seeded.forget_subject(tenant, "mira")
    seeded.record_episode(tenant_id=tenant, id="e1", content="Mira: my passport deadline is 2026-07-15.",
                          occurred_at=utc(2026, 5, 20))
    with pytest.raises(Conflict, match="forgotten"):
        seeded.write(tenant_id=tenant, subject="mira", attribute="passport_deadline", value="2026-07-15",
                     valid_from=utc(2026, 5, 20), source_episode_id="e1")
    assert seeded.residue(tenant, "mira") == []
    # A new conversation after the erasure may introduce the subject again, deliberately.
    later = seeded.clock() + timedelta(minutes=1)
    seeded.record_episode(tenant_id=tenant, id="e9", content="Hi, I'm Mira, nice to meet you.", occurred_at=later)
    seeded.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Faro",
                 valid_from=later, source_episode_id="e9")
    assert [f.value for f in seeded.history(tenant, "mira")] == ["Faro"]


def test_forgetting_a_target_removes_relation_facts_pointing_at_it(seeded: MemoryGraph, tenant: str) -> None:
    seeded.forget_subject(tenant, "acc-1")
    assert seeded.residue(tenant, "acc-1") == []
    assert seeded.traverse(tenant, "ada", ["holds", "covered_by"]) == []   # ada is stored: an empty answer
    assert seeded.history(tenant, "ada", "holds") == []


def test_forgetting_an_unknown_subject_says_so(graph: MemoryGraph, tenant: str) -> None:
    with pytest.raises(NotFound, match="nobody"):
        graph.forget_subject(tenant, "nobody")


@pytest.mark.parametrize("offset, allowed", [(timedelta(microseconds=-1), False), (timedelta(0), True),
                                             (timedelta(microseconds=1), True)])
def test_the_erasure_instant_is_compared_to_the_microsecond(seeded: MemoryGraph, tenant: str,
                                                            offset: timedelta, allowed: bool) -> None:
    """An episode one microsecond before the erasure cannot bring the subject back; one at or after
    it may, by ``write`` and ``write_many`` (the episode's time is read back as text and parsed there)."""
    seeded.forget_subject(tenant, "mira")
    [stone] = seeded.store.read("MATCH (t:Tombstone {tenant_id: $t, subject: 'mira'}) RETURN t.forgotten_at AS at",
                                {"t": tenant})
    at = stone["at"].to_native().astimezone(timezone.utc) + offset
    seeded.record_episode(tenant_id=tenant, id="e-edge", content=f"Mira again at {at.isoformat()}", occurred_at=at)
    delta = MemoryDelta(tenant_id=tenant, subject="mira", attribute="home_city", value="Faro",
                        valid_from=at, source_episode_id="e-edge")
    outcome = seeded.write_many([delta])
    assert (not outcome.rejected) is allowed, outcome.rejected
    if allowed:
        assert [f.value for f in seeded.history(tenant, "mira")] == ["Faro"]
    else:
        assert "forgotten" in str(outcome.rejected[0].error)
        with pytest.raises(Conflict, match="forgotten"):
            seeded.write(delta)

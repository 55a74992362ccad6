"""The temporal semantics against a real Neo4j: the seed scenario and the named edge cases."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from sgam import MemoryDelta, MemoryGraph, UnknownAttribute, UnknownSubject, UnknownTenant
from sgam.demo import naive_text_memory


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def episode(graph: MemoryGraph, tenant: str, eid: str, when: datetime, content: str = "said",
            actor: str = "user:mira") -> None:
    graph.record_episode(tenant_id=tenant, id=eid, content=content, occurred_at=when, actor=actor)


def write(graph: MemoryGraph, tenant: str, eid: str, value, when: datetime,
          attribute: str = "passport_deadline", op: str = "assert", subject: str = "mira"):
    return graph.write(tenant_id=tenant, subject=subject, attribute=attribute, value=value,
                       valid_from=when, source_episode_id=eid, asserted_by="user:mira", op=op)


def values(facts) -> list:
    return [f.value for f in facts]


def test_seed_scenario(graph: MemoryGraph, tenant: str) -> None:
    e1 = "I prefer concise answers. My passport deadline is 2026-07-15."
    e2 = "Correction: my passport deadline is now 2026-06-30."
    episode(graph, tenant, "e1", utc(2026, 5, 20), e1)
    episode(graph, tenant, "e2", utc(2026, 6, 10), e2)
    write(graph, tenant, "e1", "concise", utc(2026, 5, 20), attribute="response_style")
    write(graph, tenant, "e1", "2026-07-15", utc(2026, 5, 20))
    write(graph, tenant, "e2", "2026-06-30", utc(2026, 6, 10))

    stored = [{"id": "e1", "content": e1, "occurred_at": utc(2026, 5, 20)},
              {"id": "e2", "content": e2, "occurred_at": utc(2026, 6, 10)}]
    assert naive_text_memory(stored, "What is Mira's passport deadline?")["id"] == "e1"

    [now] = graph.current(tenant, "mira", "passport_deadline")
    assert now.value == date(2026, 6, 30) and now.source_episode_id == "e2"
    [then] = graph.as_of(tenant, "mira", "passport_deadline", valid_at=utc(2026, 6, 2))
    assert then.value == date(2026, 7, 15) and then.source_episode_id == "e1"
    assert values(graph.current(tenant, "mira", "response_style")) == ["concise"]

    provenance = graph.provenance(tenant, "mira", now.memory_id)
    assert provenance is not None and provenance.episode["content"] == e2
    assert [f.value for f in provenance.superseded] == [date(2026, 7, 15)]
    old = graph.provenance(tenant, "mira", provenance.superseded[0].memory_id)
    assert [f.memory_id for f in old.superseded_by] == [now.memory_id]


def test_backdated_assert_does_not_close_the_newer_version(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e1", utc(2026, 3, 1))
    episode(graph, tenant, "e0", utc(2026, 1, 1))
    write(graph, tenant, "e1", "Porto", utc(2026, 3, 1), attribute="home_city")
    result = write(graph, tenant, "e0", "Lisbon", utc(2026, 1, 1), attribute="home_city")
    assert result.outcome == "created"
    assert values(graph.current(tenant, "mira", "home_city")) == ["Porto"]
    assert values(graph.as_of(tenant, "mira", "home_city", valid_at=utc(2026, 2, 1))) == ["Lisbon"]
    assert graph.as_of(tenant, "mira", "home_city", valid_at=utc(2025, 12, 31)) == []
    for fact in graph.history(tenant, "mira", "home_city"):
        assert fact.valid_to is None or fact.valid_to > fact.valid_from
    [lisbon] = [f for f in graph.history(tenant, "mira", "home_city") if f.value == "Lisbon"]
    assert lisbon.valid_to == utc(2026, 3, 1)


def test_correction_keeps_the_old_belief_for_known_at(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e3", utc(2026, 3, 2))
    episode(graph, tenant, "e4", utc(2026, 6, 20))
    write(graph, tenant, "e3", "Lisbon", utc(2026, 3, 2), attribute="home_city")
    before = graph.clock()
    result = write(graph, tenant, "e4", "Porto", utc(2026, 3, 2), attribute="home_city", op="correct")
    assert result.outcome == "corrected"
    april = utc(2026, 4, 1)
    assert values(graph.as_of(tenant, "mira", "home_city", valid_at=april)) == ["Porto"]
    assert values(graph.as_of(tenant, "mira", "home_city", valid_at=april, known_at=before)) == ["Lisbon"]
    assert values(graph.current(tenant, "mira", "home_city")) == ["Porto"]


def test_retraction_ends_validity_without_successor(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e1", utc(2026, 1, 1))
    episode(graph, tenant, "e2", utc(2026, 5, 1))
    write(graph, tenant, "e1", "Lisbon", utc(2026, 1, 1), attribute="home_city")
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", valid_from=utc(2026, 5, 1),
                source_episode_id="e2", op="retract")
    assert graph.current(tenant, "mira", "home_city") == []
    assert values(graph.as_of(tenant, "mira", "home_city", valid_at=utc(2026, 4, 1))) == ["Lisbon"]


def test_reassert_and_replay_add_support_not_versions(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e1", utc(2026, 1, 1))
    episode(graph, tenant, "e2", utc(2026, 2, 1))
    write(graph, tenant, "e1", "concise", utc(2026, 1, 1), attribute="response_style")
    again = write(graph, tenant, "e2", "concise", utc(2026, 2, 1), attribute="response_style")
    replayed = write(graph, tenant, "e2", "concise", utc(2026, 2, 1), attribute="response_style")
    assert (again.outcome, replayed.outcome) == ("supported", "unchanged")
    [fact] = graph.history(tenant, "mira", "response_style")
    assert fact.support_count == 2 and set(fact.support_episodes) == {"e1", "e2"}


def test_replay_of_a_retired_version_changes_nothing(graph: MemoryGraph, tenant: str) -> None:
    """The write path reads retired rows only for subjects a batch's episode already mentions:
    a replay arriving after its version was replaced must still be recognised, alone or in a
    batch with first-time deltas of other subjects."""
    for n, month in ((1, 1), (2, 3), (3, 5)):
        episode(graph, tenant, f"e{n}", utc(2026, month, 1))
    write(graph, tenant, "e1", "Berlin", utc(2026, 1, 1), attribute="home_city")
    write(graph, tenant, "e2", "Lisbon", utc(2026, 3, 1), attribute="home_city")
    write(graph, tenant, "e3", "Porto", utc(2026, 2, 1), attribute="home_city", op="correct")
    before = [(f.memory_id, f.valid_to, f.expired_at) for f in graph.history(tenant, "mira", "home_city")]
    replayed = graph.write_many([
        MemoryDelta(tenant_id=tenant, subject="mira", attribute="home_city", value="Berlin",
                    valid_from=utc(2026, 1, 1), source_episode_id="e1", asserted_by="user:mira"),
        MemoryDelta(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto",
                    valid_from=utc(2026, 2, 1), source_episode_id="e3", asserted_by="user:mira",
                    op="correct"),
        MemoryDelta(tenant_id=tenant, subject="noor", attribute="home_city", value="Riga",
                    valid_from=utc(2026, 1, 1), source_episode_id="e1", asserted_by="user:noor"),
    ])
    assert [r.outcome for r in replayed.results] == ["unchanged", "unchanged", "created"]
    after = [(f.memory_id, f.valid_to, f.expired_at) for f in graph.history(tenant, "mira", "home_city")]
    assert after == before
    assert values(graph.current(tenant, "mira", "home_city")) == ["Lisbon"]
    # The same value from an episode that never mentioned mira is a new statement, not a replay.
    episode(graph, tenant, "e4", utc(2026, 6, 1))
    again = write(graph, tenant, "e4", "Berlin", utc(2026, 1, 1), attribute="home_city")
    assert again.outcome != "unchanged"


def test_set_valued_attribute_members_are_independent(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e1", utc(2026, 1, 1))
    episode(graph, tenant, "e2", utc(2026, 3, 1))
    write(graph, tenant, "e1", "ana", utc(2026, 1, 1), attribute="contact")
    write(graph, tenant, "e1", "ben", utc(2026, 1, 1), attribute="contact")
    write(graph, tenant, "e2", "ben", utc(2026, 3, 1), attribute="contact", op="retract")
    write(graph, tenant, "e2", "cy", utc(2026, 3, 1), attribute="contact")
    assert sorted(values(graph.current(tenant, "mira", "contact"))) == ["ana", "cy"]
    assert sorted(values(graph.as_of(tenant, "mira", "contact", valid_at=utc(2026, 2, 1)))) == ["ana", "ben"]


def test_relation_traversal_every_hop_valid_at_t(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "crm-1", utc(2026, 1, 5), actor="tool:crm")
    episode(graph, tenant, "crm-2", utc(2026, 4, 1), actor="tool:crm")
    episode(graph, tenant, "crm-3", utc(2026, 6, 1), actor="tool:crm")
    graph.write_many([
        MemoryDelta(tenant_id=tenant, subject="ada", attribute="holds", value="acc-1",
                    valid_from=utc(2026, 1, 5), source_episode_id="crm-1"),
        MemoryDelta(tenant_id=tenant, subject="acc-1", attribute="covered_by", value="pol-basic",
                    valid_from=utc(2026, 1, 5), source_episode_id="crm-1"),
        MemoryDelta(tenant_id=tenant, subject="acc-1", attribute="covered_by", value="pol-plus",
                    valid_from=utc(2026, 4, 1), source_episode_id="crm-2"),
        MemoryDelta(tenant_id=tenant, subject="ada", attribute="holds", value="acc-1",
                    valid_from=utc(2026, 6, 1), source_episode_id="crm-3", op="retract"),
    ])
    paths = lambda at: [p.entities for p in graph.traverse(tenant, "ada", ["holds", "covered_by"], valid_at=at)]  # noqa: E731
    assert paths(utc(2026, 2, 1)) == [("ada", "acc-1", "pol-basic")]
    assert paths(utc(2026, 5, 1)) == [("ada", "acc-1", "pol-plus")]
    # The account is still covered in July, but Ada no longer holds it: no path.
    assert paths(utc(2026, 7, 1)) == []
    assert paths(utc(2025, 12, 1)) == []


def test_tenants_do_not_see_each_other(graph: MemoryGraph, tenant: str) -> None:
    other = tenant + "-b"
    for t, city in ((tenant, "Porto"), (other, "Oslo")):
        episode(graph, t, "e1", utc(2026, 1, 1))
        write(graph, t, "e1", city, utc(2026, 1, 1), attribute="home_city")
    assert values(graph.current(tenant, "mira", "home_city")) == ["Porto"]
    assert values(graph.current(other, "mira", "home_city")) == ["Oslo"]
    assert values(graph.history(other, "mira")) == ["Oslo"]


def test_future_valid_from_within_tolerance_is_not_current_yet(graph: MemoryGraph, tenant: str) -> None:
    soon = graph.clock() + timedelta(hours=6)
    episode(graph, tenant, "e1", utc(2026, 1, 1))
    write(graph, tenant, "e1", "Braga", soon, attribute="home_city")
    assert graph.current(tenant, "mira", "home_city") == []
    assert values(graph.as_of(tenant, "mira", "home_city", valid_at=soon)) == ["Braga"]


@pytest.mark.parametrize("attribute", ["passport_deadline", "contact"])
def test_empty_history_is_an_empty_answer(graph: MemoryGraph, tenant: str, attribute: str) -> None:
    # a stored subject with no fact of the attribute: an empty answer; a name that names nothing
    # (tenant, subject, attribute) is an error, so that a typo never looks like an answer
    with pytest.raises(UnknownTenant, match=f"tenant {tenant!r} holds nothing"):
        graph.current(tenant, "nobody", attribute)
    episode(graph, tenant, "e1", utc(2026, 1, 1))
    with pytest.raises(UnknownSubject, match="no subject 'nobody'"):
        graph.history(tenant, "nobody", attribute)
    write(graph, tenant, "e1", "Porto", utc(2026, 1, 1), attribute="home_city", subject="nobody")
    assert graph.current(tenant, "nobody", attribute) == []
    assert graph.history(tenant, "nobody", attribute) == []
    with pytest.raises(UnknownAttribute, match="unknown attribute 'pasport_deadline'.*passport_deadline"):
        graph.current(tenant, "nobody", "pasport_deadline")


def believed(graph: MemoryGraph, tenant: str, attribute: str) -> list[tuple]:
    return sorted((f.valid_from, f.valid_to, f.value) for f in graph.history(tenant, "mira", attribute)
                  if f.expired_at is None)


def test_a_backdated_assert_ends_at_a_later_restatement_of_the_value_it_interrupts(
        graph: MemoryGraph, tenant: str) -> None:
    """DESIGN: A from Jan 1, A again from Mar 1, then a late B from Feb 1: the Mar 1 statement
    said A held on Mar 1, so B ends there; the order of arrival does not matter."""
    episode(graph, tenant, "e1", utc(2026, 3, 1))
    for when in (utc(2026, 1, 1), utc(2026, 3, 1)):
        write(graph, tenant, "e1", "A-city", when, attribute="home_city")
    assert write(graph, tenant, "e1", "B-city", utc(2026, 2, 1), attribute="home_city").outcome == "changed"
    assert believed(graph, tenant, "home_city") == [
        (utc(2026, 1, 1), utc(2026, 2, 1), "A-city"), (utc(2026, 2, 1), utc(2026, 3, 1), "B-city"),
        (utc(2026, 3, 1), None, "A-city")]


def test_correct_replaces_the_change_point_in_force_and_keeps_the_old_belief(
        graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e1", utc(2026, 3, 1))
    write(graph, tenant, "e1", "Lisbon", utc(2026, 1, 1), attribute="home_city")
    write(graph, tenant, "e1", "Lisbon", utc(2026, 3, 1), attribute="home_city")
    before = graph.clock()
    assert write(graph, tenant, "e1", "Porto", utc(2026, 2, 1), attribute="home_city",
                 op="correct").outcome == "corrected"
    # Jan 1's Lisbon was never true; Mar 1's Lisbon was said on its own and stands.
    assert believed(graph, tenant, "home_city") == [
        (utc(2026, 1, 1), utc(2026, 3, 1), "Porto"), (utc(2026, 3, 1), None, "Lisbon")]
    old = graph.as_of(tenant, "mira", "home_city", valid_at=utc(2026, 2, 1), known_at=before)
    assert values(old) == ["Lisbon"]


def test_an_interval_holds_only_inside_it_and_an_end_meets_a_start(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e1", utc(2026, 6, 1))
    write(graph, tenant, "e1", "Lisbon", utc(2026, 1, 1), attribute="home_city")
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Paris",
                valid_from=utc(2026, 5, 1), valid_to=utc(2026, 5, 10), source_episode_id="e1")
    assert believed(graph, tenant, "home_city") == [
        (utc(2026, 1, 1), utc(2026, 5, 1), "Lisbon"), (utc(2026, 5, 1), utc(2026, 5, 10), "Paris"),
        (utc(2026, 5, 10), None, "Lisbon")]
    # A retract of Lisbon at Jun 1 and Lisbon again from Jun 1 meet: Lisbon goes on.
    write(graph, tenant, "e1", "Lisbon", utc(2026, 6, 1), attribute="home_city", op="retract")
    write(graph, tenant, "e1", "Lisbon", utc(2026, 6, 1), attribute="home_city")
    assert believed(graph, tenant, "home_city")[-1] == (utc(2026, 5, 10), None, "Lisbon")
    # An interval retract clears just its interval.
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", op="retract",
                valid_from=utc(2026, 2, 1), valid_to=utc(2026, 3, 1), source_episode_id="e1")
    assert believed(graph, tenant, "home_city")[:2] == [
        (utc(2026, 1, 1), utc(2026, 2, 1), "Lisbon"), (utc(2026, 3, 1), utc(2026, 5, 1), "Lisbon")]
    assert graph.doctor(tenant) == []

"""Conflict policies through the real Neo4j (docs/temporal-semantics.md, "Conflict policy").

For each ranked policy, every arrival order and batching of a generated set of statements leaves
the history :mod:`sgam.bench.oracle` derives from the set; held disagreements follow the oracle's
candidates. Then one readable example per policy.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgam import Episode, MemoryDelta, MemoryGraph
from sgam.graph import Fact, Schema, Status
from sgam.bench.oracle import ASSERT, CONFIRM, CORRECT, RETRACT, Slot, Statement, held, policy_rank

EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
SOURCES = ["tool:crm", "user:{subject}", "agent:*"]
ACTORS = ("tool:crm", "user:mira", "agent:a", "agent:b")
CITIES = ("Lisbon", "Rome", "Porto")
MEMBERS = ("ana", "ben", "cy")
EPISODES = ("e0", "e1")
SETTINGS = settings(max_examples=40, deadline=None, report_multiple_bugs=False,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
# attribute -> (policy, cardinality)
ATTRIBUTES: dict[str, tuple[dict[str, Any], str]] = {
    "city_by_confidence": ({"conflict": "confidence"}, "one"),
    "city_by_source": ({"conflict": "source_priority", "sources": SOURCES}, "one"),
    "friends_by_source": ({"conflict": "source_priority", "sources": SOURCES}, "many"),
    "city_held": ({"conflict": "latest", "disagreement": "candidate"}, "one"),
}


def _schema() -> Schema:
    attributes = {name: {"value_type": "string", "subject_types": ["Person"], "cardinality": many, **policy}
                  for name, (policy, many) in ATTRIBUTES.items()}
    data = {"version": 1, "entity_types": ["Person"], "attributes": attributes}
    # Named by its definition: a changed test schema is a new schema, never a refused old version.
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
    return Schema.from_data({"name": f"conflict-policy-test-{digest}", **data})


SCHEMA = _schema()


@pytest.fixture(scope="module")
def ranked(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[MemoryGraph]:
    with MemoryGraph.connect(*neo4j_connection, schema=SCHEMA) as graph:
        yield graph


def day(n: float) -> datetime:
    return EPOCH + timedelta(days=n)


def _tenant(graph: MemoryGraph) -> str:
    tenant = f"p-{uuid.uuid4().hex[:12]}"
    graph.record_episodes([Episode(tenant_id=tenant, id=e, content=f"episode {e}", occurred_at=day(200),
                                   actor="user:mira") for e in (*EPISODES, "c", "c0", "c1")])
    return tenant


def _delta(tenant: str, attribute: str, s: Statement) -> MemoryDelta:
    return MemoryDelta(tenant_id=tenant, subject="mira", subject_type="Person", attribute=attribute,
                       value=s.value, valid_from=s.valid_from, valid_to=s.valid_to, op=s.op,
                       source_episode_id=s.episode, asserted_by=s.asserted_by, confidence=s.confidence,
                       replaces=s.replaces)


def _runs(rows: list[Fact]) -> list[tuple]:
    return sorted(((r.valid_from, r.valid_to, r.value) for r in rows
                   if r.expired_at is None and r.status is Status.CONFIRMED), key=lambda run: (run[0], run[2]))


@st.composite
def statements(draw: Any, many: bool) -> list[Statement]:
    said: dict[tuple, Statement] = {}
    for _ in range(draw(st.integers(1, 7))):
        op = draw(st.sampled_from([ASSERT, ASSERT, ASSERT, CORRECT, RETRACT]))
        value = draw(st.sampled_from(MEMBERS if many else CITIES))
        if op == RETRACT and not many and draw(st.booleans()):
            value = None
        start = draw(st.integers(0, 3))
        until = draw(st.integers(start + 1, 4)) if op != CORRECT and draw(st.integers(0, 3)) == 0 else None
        replaces = draw(st.sampled_from([m for m in MEMBERS if m != value])) if op == CORRECT and many else None
        s = Statement(op, value, day(start), day(until) if until else None, draw(st.sampled_from(EPISODES)),
                      draw(st.sampled_from([0.4, 0.9])), replaces, draw(st.sampled_from(ACTORS)))
        said.setdefault(s.key, s)
    return list(said.values())


@SETTINGS
@given(attribute=st.sampled_from(["city_by_confidence", "city_by_source", "friends_by_source"]), data=st.data())
def test_every_arrival_order_and_batching_gives_the_oracles_history(ranked: MemoryGraph, attribute: str,
                                                                     data: Any) -> None:
    policy, cardinality = ATTRIBUTES[attribute]
    many = cardinality == "many"
    said = data.draw(statements(many))
    oracle = Slot(many=many, rank=policy_rank(policy["conflict"], tuple(policy.get("sources", ())), "mira"))
    for s in said:
        oracle.apply(s, day(300))
    expected = sorted(oracle.runs(), key=lambda run: (run[0], run[2]))
    tenant = _tenant(ranked)
    try:
        arrival = data.draw(st.permutations(said))
        for s in arrival:                               # one at a time
            assert ranked.write(_delta(tenant, attribute, s)).ok
        assert _runs(ranked.history(tenant, "mira", attribute)) == expected, arrival
        other = _tenant(ranked)
        try:                                            # another order, in random batches
            arrival = data.draw(st.permutations(said))
            cuts = sorted(data.draw(st.lists(st.integers(1, max(1, len(arrival) - 1)), max_size=2, unique=True)))
            for begin, end in zip([0, *cuts], [*cuts, len(arrival)]):
                result = ranked.write_many([_delta(other, attribute, s) for s in arrival[begin:end]])
                assert not result.rejected, result.rejected[0].message
            assert _runs(ranked.history(other, "mira", attribute)) == expected, arrival
        finally:
            ranked.delete_tenant(other)
    finally:
        ranked.delete_tenant(tenant)


@SETTINGS
@given(said=statements(False), confirmed=st.lists(st.sampled_from(CITIES), max_size=2, unique=True),
       data=st.data())
def test_held_disagreements_do_not_depend_on_arrival_order_or_batching(ranked: MemoryGraph, said: list[Statement],
                                                                       confirmed: list[str], data: Any) -> None:
    said = [*said, *(Statement(CONFIRM, v, day(9), episode=f"c{i}", asserted_by="user:mira")
                     for i, v in enumerate(confirmed))]
    timeline, pending = held(said)
    expected = sorted(timeline.runs(), key=lambda run: (run[0], run[2]))
    candidates = {v: (first.valid_from, first.valid_to) for v, (first, _) in pending.items()}
    tenant, other = _tenant(ranked), _tenant(ranked)
    try:
        arrival = data.draw(st.permutations(said))
        for s in arrival:                               # one at a time
            assert ranked.write(_delta(tenant, "city_held", s)).ok
        arrival = data.draw(st.permutations(said))      # another order, in random batches
        cuts = sorted(data.draw(st.lists(st.integers(1, max(1, len(arrival) - 1)), max_size=2, unique=True)))
        for begin, end in zip([0, *cuts], [*cuts, len(arrival)]):
            result = ranked.write_many([_delta(other, "city_held", s) for s in arrival[begin:end]])
            assert not result.rejected, result.rejected[0].message
        for t in (tenant, other):
            assert _runs(ranked.history(t, "mira", "city_held")) == expected, arrival
            shown = {c.value: (c.valid_from, c.valid_to) for c in ranked.candidates(t, "mira", "city_held")}
            assert shown == candidates, arrival
    finally:
        ranked.delete_tenant(tenant)
        ranked.delete_tenant(other)


# -- one example per policy ---------------------------------------------------------------------------


def _say(graph: MemoryGraph, tenant: str, attribute: str, value: str, start: float, by: str,
         confidence: float = 1.0, episode: str = "e0", op: str = "assert") -> Any:
    return graph.write(MemoryDelta(tenant_id=tenant, subject="mira", subject_type="Person", attribute=attribute,
                                   value=value, valid_from=day(start), source_episode_id=episode, op=op,
                                   asserted_by=by, confidence=confidence))


def test_a_crm_value_beats_an_agents_later_guess_in_either_order(ranked: MemoryGraph) -> None:
    for first in ("tool:crm", "agent:a"):
        tenant = _tenant(ranked)
        try:
            said = {"tool:crm": ("Lisbon", 0, "e0"), "agent:a": ("Rome", 5, "e1")}
            for by in (first, *(a for a in said if a != first)):
                value, start, episode = said[by]
                assert _say(ranked, tenant, "city_by_source", value, start, by, episode=episode).ok
            assert [f.value for f in ranked.current(tenant, "mira", "city_by_source")] == ["Lisbon"]
            assert _runs(ranked.history(tenant, "mira", "city_by_source")) == [(day(0), None, "Lisbon")]
            # the subject outranks the agent, not the CRM
            assert _say(ranked, tenant, "city_by_source", "Porto", 6, "user:mira", episode="e1").ok
            assert [f.value for f in ranked.current(tenant, "mira", "city_by_source")] == ["Lisbon"]
        finally:
            ranked.delete_tenant(tenant)


def test_a_confident_value_beats_a_later_less_confident_one_for_the_same_window(ranked: MemoryGraph) -> None:
    tenant = _tenant(ranked)
    try:
        assert _say(ranked, tenant, "city_by_confidence", "Lisbon", 0, "agent:a", 0.9).ok
        result = _say(ranked, tenant, "city_by_confidence", "Rome", 2, "agent:b", 0.4, episode="e1")
        assert result.ok
        assert [f.value for f in ranked.as_of(tenant, "mira", "city_by_confidence", valid_at=day(3))] == ["Lisbon"]
        # a 0.4 statement before the 0.9 one still holds until it
        assert _say(ranked, tenant, "city_by_confidence", "Porto", -2, "agent:b", 0.4, episode="e1").ok
        assert _runs(ranked.history(tenant, "mira", "city_by_confidence")) == [
            (day(-2), day(0), "Porto"), (day(0), None, "Lisbon")]
    finally:
        ranked.delete_tenant(tenant)


def test_a_disagreeing_agent_is_held_as_a_candidate_that_confirm_accepts(ranked: MemoryGraph) -> None:
    tenant = _tenant(ranked)
    try:
        assert _say(ranked, tenant, "city_held", "Lisbon", 0, "user:mira").ok
        held = _say(ranked, tenant, "city_held", "Rome", 2, "agent:a", episode="e1")
        assert held.outcome == "candidate" and "disagrees" in held.message
        assert [f.value for f in ranked.current(tenant, "mira", "city_held")] == ["Lisbon"]
        assert [c.value for c in ranked.candidates(tenant, "mira")] == ["Rome"]
        confirmed = ranked.confirm(tenant, "mira", "city_held", value="Rome", episode="c", actor="user:mira")
        assert confirmed.outcome == "promoted"
        assert _runs(ranked.history(tenant, "mira", "city_held")) == [
            (day(0), day(2), "Lisbon"), (day(2), None, "Rome")]
        # the source of the value in force changes its own mind directly
        assert _say(ranked, tenant, "city_held", "Porto", 4, "agent:a", episode="e1").outcome == "changed"
    finally:
        ranked.delete_tenant(tenant)

"""Candidates through the real store: recurrence thresholds, sensitive values, confirmation.

Uses the default schema's ``export_format`` (requires 3 distinct episodes), ``birthday``
(sensitive, confirmed by the subject only) and ``tax_id`` (sensitive, the customer or
``agent:support``).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, Conflict, MemoryDelta, MemoryGraph, NotAllowed, NotFound, UnknownSubject
from sgam.cli import app
from sgam.graph import Status, default_schema
from sgam.bench.oracle import Slot, Statement

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


def episodes(graph: MemoryGraph, tenant: str, *ids: str, actor: str = "user:mira") -> None:
    for n, eid in enumerate(ids):
        graph.record_episode(tenant_id=tenant, id=eid, content=f"episode {eid}", occurred_at=day(n),
                             actor=actor)


def say(graph: MemoryGraph, tenant: str, attribute: str, value, start: int, episode: str, **extra):
    return graph.write(tenant_id=tenant, subject="mira", attribute=attribute, value=value,
                       valid_from=day(start), source_episode_id=episode, **extra)


def values(facts) -> list:
    return [(f.value, f.status.value) for f in facts]


def test_threshold_is_reached_by_the_nth_distinct_episode_not_by_replays(graph: MemoryGraph, tenant: str) -> None:
    episodes(graph, tenant, "e1", "e2", "e3")
    assert say(graph, tenant, "export_format", "csv", 1, "e1").outcome == "candidate"
    assert say(graph, tenant, "export_format", "csv", 1, "e1").outcome == "unchanged"   # replay
    assert say(graph, tenant, "export_format", "csv", 2, "e1").outcome == "candidate"   # same episode
    assert say(graph, tenant, "export_format", "csv", 3, "e2").outcome == "candidate"
    assert graph.current(tenant, "mira", "export_format") == []
    [pending] = graph.current(tenant, "mira", "export_format", include_candidates=True)
    assert (pending.value, pending.status, pending.support_episodes) == ("csv", Status.CANDIDATE, ("e1", "e2"))
    [listed] = graph.query("candidates", tenant=tenant, subject="mira", attribute=None)
    assert (listed["value"], listed["episodes"], listed["support_count"]) == ("csv", 2, 3)

    result = say(graph, tenant, "export_format", "csv", 4, "e3")
    assert result.outcome == "promoted", result.message
    [fact] = graph.current(tenant, "mira", "export_format")
    assert (fact.value, fact.status, fact.valid_from) == ("csv", Status.CONFIRMED, day(1))
    assert fact.support_episodes == ("e1", "e2", "e3") and fact.confirmed_by == "recurrence"
    assert graph.candidates(tenant) == []
    assert say(graph, tenant, "export_format", "csv", 4, "e3").outcome == "unchanged"
    assert graph.doctor(tenant) == []


def test_ingested_habit_needs_three_conversations(graph: MemoryGraph, tenant: str) -> None:
    """Issue 4's consolidation through the ingest pipeline: a re-sent message is one episode."""
    said = "Can I get that as a CSV export?"
    delta = [{"subject": "mira", "attribute": "export_format", "value": "csv"}]

    def message(n: int, session: str):
        return graph.ingest(tenant_id=tenant, speaker="user:mira", content=said, occurred_at=day(n),
                            session_id=session, deltas=delta)

    assert message(1, "s1").outcomes["candidate"] == 1
    assert message(1, "s1").outcomes["candidate"] == 0        # the same message again: deduplicated
    message(5, "s2")
    assert graph.current(tenant, "mira", "export_format") == []
    assert message(9, "s3").outcomes["promoted"] == 1
    [fact] = graph.current(tenant, "mira", "export_format")
    assert (fact.value, fact.valid_from, len(fact.support_episodes)) == ("csv", day(1), 3)


def test_sensitive_value_waits_for_an_allowed_confirmer(graph: MemoryGraph, tenant: str) -> None:
    episodes(graph, tenant, "e1", "e2", "e3", "e4")
    say(graph, tenant, "birthday", "1990-01-02", 1, "e1", asserted_by="agent:extractor")
    say(graph, tenant, "birthday", "1990-01-02", 2, "e2", asserted_by="agent:extractor")
    say(graph, tenant, "birthday", "1990-01-02", 3, "e3", asserted_by="agent:extractor")
    assert graph.current(tenant, "mira", "birthday") == []   # recurrence never promotes it
    assert graph.as_of(tenant, "mira", "birthday", valid_at=day(5)) == []
    assert values(graph.as_of(tenant, "mira", "birthday", valid_at=day(5), include_candidates=True)) \
        == [(date(1990, 1, 2), "candidate")]
    before = graph.history(tenant, "mira", "birthday")

    with pytest.raises(NotAllowed, match=r"agent:support.*allowed confirmers: user:mira"):
        graph.confirm(tenant, "mira", "birthday", actor="agent:support", episode="e4")
    assert graph.history(tenant, "mira", "birthday") == before
    with pytest.raises(NotFound, match="1985-05-05"):
        graph.confirm(tenant, "mira", "birthday", "1985-05-05", actor="user:mira", episode="e4")

    result = graph.confirm(tenant, "mira", "birthday", actor="user:mira", episode="e4")
    assert result.outcome == "promoted", result.message
    [fact] = graph.current(tenant, "mira", "birthday")
    assert (fact.value, fact.valid_from, fact.confirmed_by, fact.confirmed_by_episode_id) == (
        date(1990, 1, 2), day(1), "user:mira", "e4")
    assert graph.confirm(tenant, "mira", "birthday", actor="user:mira", episode="e4").outcome == "unchanged"


def test_support_agent_may_confirm_a_tax_id(graph: MemoryGraph, tenant: str) -> None:
    episodes(graph, tenant, "e1", "e2", actor="agent:support")
    graph.write(tenant_id=tenant, subject="c1", attribute="tax_id", value="de123", valid_from=day(1),
                source_episode_id="e1", asserted_by="tool:ocr")
    with pytest.raises(NotAllowed):
        graph.confirm(tenant, "c1", "tax_id", "DE123", actor="agent:sales", episode="e2")
    assert graph.confirm(tenant, "c1", "tax_id", "DE123", actor="agent:support", episode="e2").outcome == "promoted"
    assert [f.value for f in graph.current(tenant, "c1", "tax_id")] == ["DE123"]


def test_a_candidate_never_cuts_the_confirmed_version(graph: MemoryGraph, tenant: str) -> None:
    episodes(graph, tenant, "e1", "e2", "e3", "e4", "e5")
    say(graph, tenant, "export_format", "csv", 1, "e1")
    [csv_id] = say(graph, tenant, "export_format", "csv", 1, "e2", op="confirm").memory_ids
    known_before = graph.clock()
    assert say(graph, tenant, "export_format", "xlsx", 10, "e3").outcome == "candidate"
    assert say(graph, tenant, "export_format", "xlsx", 12, "e4").outcome == "candidate"
    [fact] = graph.current(tenant, "mira", "export_format")
    assert (fact.memory_id, fact.valid_to) == (csv_id, None)
    assert [f.value for f in graph.as_of(tenant, "mira", "export_format", valid_at=day(20))] == ["csv"]
    assert graph.doctor(tenant) == []    # a pending candidate may overlap the confirmed version

    result = graph.confirm(tenant, "mira", "export_format", "xlsx", actor="agent:assistant", episode="e5")
    assert result.outcome == "promoted"
    [now] = graph.current(tenant, "mira", "export_format")
    assert (now.value, now.valid_from, now.confirmed_by) == ("xlsx", day(10), "agent:assistant")
    assert [f.value for f in graph.as_of(tenant, "mira", "export_format", valid_at=day(5))] == ["csv"]
    assert [f.value for f in graph.as_of(tenant, "mira", "export_format", valid_at=day(11))] == ["xlsx"]
    assert [f.value for f in graph.as_of(tenant, "mira", "export_format", valid_at=day(11),
                                         known_at=known_before)] == ["csv"]
    [closed] = [f for f in graph.history(tenant, "mira", "export_format")
                if f.value == "csv" and f.expired_at is None]
    assert closed.valid_to == day(10) and now.supersedes_memory_id == closed.memory_id
    assert graph.doctor(tenant) == []


def test_retract_and_correct_a_candidate(graph: MemoryGraph, tenant: str) -> None:
    episodes(graph, tenant, "e1", "e2", "e3", "e4")
    say(graph, tenant, "export_format", "csv", 1, "e1")
    say(graph, tenant, "export_format", "xlsx", 2, "e2")
    with pytest.raises(Conflict, match="several candidate values"):
        graph.confirm(tenant, "mira", "export_format", actor="user:mira", episode="e4")
    assert say(graph, tenant, "export_format", "xlsx", 3, "e3", op="retract").outcome == "withdrawn"
    assert [f.value for f in graph.candidates(tenant)] == ["csv"]
    assert say(graph, tenant, "export_format", "pdf", 3, "e3", op="correct").outcome == "candidate"
    assert [f.value for f in graph.candidates(tenant)] == ["pdf"]    # the correction withdrew csv
    assert graph.current(tenant, "mira", "export_format") == []
    kinds = {(f.value, f.status.value, f.expired_at is None) for f in graph.history(tenant, "mira", "export_format")}
    assert kinds == {("csv", "candidate", False), ("xlsx", "candidate", False), ("pdf", "candidate", True)}


def test_cli_confirm_and_candidates_query(env, graph: MemoryGraph, tenant: str) -> None:
    episodes(graph, tenant, "e1")
    say(graph, tenant, "birthday", "1990-01-02", 1, "e1", asserted_by="agent:extractor")
    runner = CliRunner()
    listed = runner.invoke(app, ["query", "candidates", "-t", tenant, "--json"])
    assert listed.exit_code == 0, listed.output
    [row] = json.loads(listed.stdout)
    assert (row["value"], row["episodes"], row["asserted_by"]) == ("1990-01-02", 1, "agent:extractor")
    refused = runner.invoke(app, ["confirm", "-t", tenant, "-s", "mira", "-a", "birthday",
                                  "--actor", "agent:support"])
    assert refused.exit_code == 1 and "may not confirm" in refused.output
    done = runner.invoke(app, ["confirm", "-t", tenant, "-s", "mira", "-a", "birthday",
                               "1990-01-02", "--actor", "user:mira"])
    assert done.exit_code == 0 and "promoted" in done.output, done.output
    assert [f.value for f in graph.current(tenant, "mira", "birthday")] == [date(1990, 1, 2)]


def test_async_confirm_and_include_candidates(neo4j_connection, tenant: str) -> None:
    uri, auth = neo4j_connection

    async def scenario() -> list:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as graph:
            for eid in ("e1", "e2"):
                await graph.record_episode(tenant_id=tenant, id=eid, content=eid, occurred_at=day(1))
            await graph.write(tenant_id=tenant, subject="mira", attribute="birthday",
                              value="1990-01-02", valid_from=day(1), source_episode_id="e1")
            hidden = await graph.current(tenant, "mira", "birthday")
            shown = await graph.current(tenant, "mira", "birthday", include_candidates=True)
            pending = await graph.candidates(tenant, "mira")
            outcome = (await graph.confirm(tenant, "mira", "birthday", actor="user:mira",
                                           episode="e2")).outcome
            then = await graph.as_of(tenant, "mira", "birthday", valid_at=day(2))
            return [hidden, values(shown), len(pending), outcome, values(then)]

    assert asyncio.run(scenario()) == [[], [(date(1990, 1, 2), "candidate")], 1, "promoted",
                                       [(date(1990, 1, 2), "confirmed")]]


ATTRIBUTES = {
    "export_format": ["csv", "xlsx", "pdf"],
    "birthday": [date(1990, 1, 2), date(1985, 5, 5), date(2000, 12, 31)],
}
operations = st.lists(
    st.tuples(st.sampled_from(["assert", "assert", "assert", "correct", "retract", "confirm"]),
              st.integers(0, 2), st.integers(0, 30), st.booleans(), st.integers(0, 2), st.booleans()),
    min_size=1, max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(attribute=st.sampled_from(sorted(ATTRIBUTES)), sequence=operations, batched=st.booleans())
def test_candidates_in_the_store_match_the_oracle(graph: MemoryGraph, attribute, sequence, batched) -> None:
    """Random gated sequences, one by one or as one batch, against the oracle."""
    tenant = f"c-{uuid.uuid4().hex[:10]}"
    spec = graph.schema.attribute(attribute)
    oracle = Slot(requires=spec.requires, sensitive=spec.sensitive)
    deltas = []
    for op, index, start, with_value, episode_no, allowed in sequence:
        eid = f"e{index}-{start}-{episode_no}"
        graph.record_episode(tenant_id=tenant, id=eid, content=eid, occurred_at=day(start))
        deltas.append(MemoryDelta(
            tenant_id=tenant, subject="mira", attribute=attribute, op=op,
            value=ATTRIBUTES[attribute][index] if (op not in ("retract", "confirm") or with_value) else None,
            valid_from=day(start), source_episode_id=eid,
            asserted_by="user:mira" if allowed else "agent:guess",
        ))
    refusals = (Conflict, NotFound, NotAllowed)

    def expect(delta: MemoryDelta, now: datetime):
        try:
            oracle.apply(Statement.from_delta(delta), now, delta.asserted_by == "user:mira")
        except refusals as exc:
            return type(exc)
        return None

    if batched:
        for delta, result in zip(deltas, graph.write_many(deltas).results):
            refused = expect(delta, EPOCH)
            assert (type(result.error) if result.error else None) == refused, result.message
    else:
        for delta in deltas:
            try:
                graph.write(delta)
                got = None
            except refusals as exc:
                got = type(exc)
            assert got == expect(delta, graph.clock())
    for valid in range(0, 34, 3):
        try:
            answers = [f.value for f in graph.as_of(tenant, "mira", attribute, valid_at=day(valid))]
        except UnknownSubject:   # every delta was refused: nothing was ever stored about mira
            answers = []
        expected = oracle.value_at(day(valid))
        assert answers == ([] if expected is None else [expected])
    pending = {f.value: (f.valid_from, len(f.support_episodes)) for f in graph.candidates(tenant)}
    assert pending == oracle.pending()
    assert graph.doctor(tenant) == []
    graph.delete_tenant(tenant)

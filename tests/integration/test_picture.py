"""The `picture` query (Neo4j Browser's time-and-belief picture) against the temporal rules.

Each fact row of a subject is drawn as an APOC virtual relationship typed by its state at valid
time T as believed at transaction time K. From docs/temporal-semantics.md ("believed at K is
recorded_at <= K < expired_at; valid at T is valid_from <= T < valid_to"), a row recorded by K is

* RETIRED if it is no longer believed at K;
* otherwise FUTURE if T is before its valid_from, PAST if its valid window ended by T, else CURRENT.

The oracle (sgam.bench.oracle, written from the same page) gives the believed runs after each write; the
picture's believed rows must be exactly those runs, each in the state the rules above give it.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgam import MemoryGraph
from sgam.graph.models import Episode, MemoryDelta
from sgam.bench.oracle import ASSERT, CORRECT, RETRACT, Slot, Statement

SUBJECT, ATTRIBUTE = "mira", "home_city"
CITIES = ("Lisbon", "Porto", "Faro")
EPISODES = tuple(f"e{i}" for i in range(6))
# Whole days around today, so some statements start in the future and the default valid_at (now)
# sees all four states.
TODAY = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
DAYS = range(-3, 4)


def day(offset: int) -> datetime:
    return TODAY + timedelta(days=offset)


def expected_state(valid_from: datetime, valid_to: datetime | None, valid_at: datetime) -> str:
    """The state of a row believed at K, from its valid window and T (the module docstring)."""
    if valid_at < valid_from:
        return "FUTURE"
    if valid_to is not None and valid_to <= valid_at:
        return "PAST"
    return "CURRENT"


def picture(graph: MemoryGraph, tenant: str, valid_at: datetime | None,
            known_at: datetime | None) -> list[dict[str, Any]]:
    return graph.query("picture", tenant=tenant, subject=SUBJECT, valid_at=valid_at, known_at=known_at,
                       principal=None)


def _as_utc(value: Any) -> datetime | None:
    return None if value is None else value.to_native().astimezone(timezone.utc)


def _check_picture(rows: list[dict[str, Any]], believed: list[tuple], ever_believed: set[tuple],
                   valid_at: datetime) -> None:
    drawn = []
    for row in rows:
        fact = row["fact"]
        # The relationship Browser draws is typed by the state, and carries it and its caption.
        assert fact.type == row["state"] == fact["state"], row
        assert "→" in fact["caption"], fact["caption"]
        run = (_as_utc(row["valid_from"]), _as_utc(row["valid_to"]), row["value"])
        if row["state"] == "RETIRED":
            assert run in ever_believed, (run, "retired, but never believed")
        else:
            assert row["state"] == expected_state(run[0], run[1], valid_at), (run, row["state"], valid_at)
            drawn.append(run)
    assert sorted(drawn, key=repr) == sorted(believed, key=repr)


STATEMENTS = st.tuples(
    st.sampled_from([ASSERT, ASSERT, CORRECT, RETRACT]), st.sampled_from((*CITIES, None)),
    st.sampled_from(DAYS), st.none() | st.integers(1, 3), st.sampled_from(EPISODES),
).filter(lambda t: t[0] == RETRACT or t[1] is not None).map(
    lambda t: Statement(op=t[0], value=t[1], valid_from=day(t[2]), episode=t[4],
                        valid_to=None if t[3] is None or t[0] == CORRECT else day(t[2] + t[3])))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=st.lists(STATEMENTS, min_size=1, max_size=5),
       probes=st.lists(st.sampled_from((None, *DAYS)), min_size=1, max_size=3, unique=True))
def test_each_fact_is_drawn_in_its_state(apoc: None, shared_graph: MemoryGraph,
                                         history: list[Statement], probes: list[int | None]) -> None:
    graph = shared_graph
    tenant = f"p-{uuid.uuid4().hex[:12]}"
    graph.record_episodes([Episode(tenant_id=tenant, id=e, content=f"episode {e}", occurred_at=day(-30),
                                   actor="user:mira") for e in EPISODES])
    oracle = Slot()
    checkpoints: list[datetime] = []
    try:
        for statement in history:
            graph.write(MemoryDelta(tenant_id=tenant, subject=SUBJECT, attribute=ATTRIBUTE,
                                    value=statement.value, valid_from=statement.valid_from,
                                    valid_to=statement.valid_to, source_episode_id=statement.episode,
                                    op=statement.op, subject_type="Person"))
            # The write is committed: its transaction time is before this clock reading.
            checkpoints.append(graph.clock())
            oracle.apply(statement, checkpoints[-1])
        ever = {run for known in checkpoints for run in oracle.runs(known_at=known)}
        for offset in probes:
            valid_at = None if offset is None else day(offset)
            for known_at in (*checkpoints, None):
                rows = picture(graph, tenant, valid_at, known_at)
                believed = oracle.runs(known_at=known_at)
                # T defaults to the query's now: no row starts or ends between it and this reading.
                _check_picture(rows, believed, ever, valid_at or graph.clock())
    finally:
        graph.delete_tenant(tenant)


def test_a_correction_is_retired_and_a_scheduled_move_is_future(apoc: None, shared_graph: MemoryGraph,
                                                                 tenant: str) -> None:
    """The issue's example: Lisbon corrected to Porto is drawn RETIRED, Porto CURRENT; a move to
    Faro next week FUTURE; and Porto read after that move is PAST."""
    graph = shared_graph
    graph.record_episodes([Episode(tenant_id=tenant, id=e, content=e, occurred_at=day(-30), actor="user:mira")
                           for e in ("e3", "e4", "e5")])
    graph.write(MemoryDelta(tenant_id=tenant, subject=SUBJECT, attribute=ATTRIBUTE, value="Lisbon",
                            valid_from=day(-20), source_episode_id="e3", subject_type="Person"))
    before = graph.clock()
    graph.write(MemoryDelta(tenant_id=tenant, subject=SUBJECT, attribute=ATTRIBUTE, value="Porto",
                            valid_from=day(-20), source_episode_id="e4", op=CORRECT))
    graph.write(MemoryDelta(tenant_id=tenant, subject=SUBJECT, attribute=ATTRIBUTE, value="Faro",
                            valid_from=day(7), source_episode_id="e5"))

    def states(valid_at: datetime | None, known_at: datetime | None = None) -> set[tuple[str, str]]:
        return {(r["value"], r["state"]) for r in picture(graph, tenant, valid_at, known_at)}

    # Porto's open-ended row was retired when Faro closed it at day 7: its closed copy is believed.
    assert states(None) == {("Lisbon", "RETIRED"), ("Porto", "RETIRED"), ("Porto", "CURRENT"),
                            ("Faro", "FUTURE")}
    assert states(day(8)) == {("Lisbon", "RETIRED"), ("Porto", "RETIRED"), ("Porto", "PAST"),
                              ("Faro", "CURRENT")}
    # As believed before the correction: Lisbon was current, nothing else was recorded yet.
    assert states(None, before) == {("Lisbon", "CURRENT")}
    # Captions are the valid interval: dates only, a start's year only when it is not valid_at's,
    # an end's only when it is not the start's; an open end is a bare arrow.
    captions = {r["value"]: r["fact"]["caption"] for r in picture(graph, tenant, day(8), None)
                if r["state"] != "RETIRED"}
    start = day(-20).strftime("%m-%d" if day(-20).year == day(8).year else "%Y-%m-%d")
    end = day(7).strftime("%m-%d" if day(7).year == day(-20).year else "%Y-%m-%d")
    assert captions["Porto"] == f"{start}→{end}"
    assert captions["Faro"] == day(7).strftime("%m-%d" if day(7).year == day(8).year else "%Y-%m-%d") + "→"
    a_year_on = picture(graph, tenant, day(8 + 366), None)
    assert {r["fact"]["caption"] for r in a_year_on if r["value"] == "Faro"} == {day(7).strftime("%Y-%m-%d") + "→"}

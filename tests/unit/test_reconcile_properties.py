"""Property tests: random assert/correct/retract(/confirm) sequences, shuffled, against the oracle.

The candidate variants run the same sequences on attributes that need N distinct episodes or a
confirmation (``requires`` / ``sensitive``), with a few episodes per value so recurrences happen.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sgam.graph import Conflict, Fact, MemoryDelta, NotAllowed, NotFound, Schema, Status, default_schema, reconcile
from sgam.graph.reconcile import Point, apply_plan, believed_runs
from sgam.bench.oracle import Slot, Statement

SCHEMA = default_schema()
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
VALUES = [date(2026, 7, 15), date(2026, 6, 30), date(2026, 8, 1)]
MEMBERS = ["ana", "ben", "cy"]


def day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


ops = st.lists(
    st.tuples(
        st.sampled_from(["assert", "assert", "correct", "retract"]),
        st.integers(0, 2),
        st.integers(0, 30),
        st.booleans(),
    ),
    min_size=1,
    max_size=14,
)


def check_invariant(rows: list[Fact], many: bool) -> None:
    for row in rows:
        assert row.valid_to is None or row.valid_to > row.valid_from, row
    believed = [r for r in rows if r.expired_at is None and r.status is Status.CONFIRMED]
    groups: dict[str, list[Fact]] = {}
    for row in believed:
        groups.setdefault(row.value_key if many else "", []).append(row)
    for group in groups.values():
        group.sort(key=lambda r: r.valid_from)
        for before, after in zip(group, group[1:]):
            assert before.valid_to is not None and before.valid_to <= after.valid_from, (before, after)
            if before.valid_to == after.valid_from:
                assert before.value_key != after.value_key, "adjacent equal versions must merge"


def gated_schema(requires: int, sensitive: bool) -> Schema:
    """The default schema with passport_deadline and contact turned into candidate attributes."""
    attributes = dict(SCHEMA.attributes)
    for name in ("passport_deadline", "contact"):
        attributes[name] = attributes[name].model_copy(
            update={"requires": requires, "sensitive": sensitive, "confirmers": ("user:{subject}",)})
    return SCHEMA.model_copy(update={"attributes": attributes})


def run(sequence, attribute: str, values: list, schema: Schema = SCHEMA,
        ) -> tuple[list[Fact], Slot, list[datetime]]:
    many = attribute == "contact"
    spec = schema.attribute(attribute)
    rows: list[Fact] = []
    points: list[Point] = []  # the slot's ledger, kept beside its rows as the store keeps it
    oracle = Slot(many=many, requires=spec.requires, sensitive=spec.sensitive)
    times: list[datetime] = []
    for step, (op, index, start, with_value, *extra) in enumerate(sequence):
        episode_no, allowed = extra or (0, True)
        now = day(100 + step)
        times.append(now)
        value = values[index]
        if op == "correct" and many:
            op = "assert"
        send_value = value if (op not in ("retract", "confirm") or with_value or many) else None
        delta = MemoryDelta(
            tenant_id="t1", subject="mira", attribute=attribute, value=send_value,
            valid_from=day(start), source_episode_id=f"e{index}-{start}-{episode_no}", op=op,
            asserted_by="user:mira" if allowed else "agent:guess",
        )
        refused = None
        try:
            oracle.apply(Statement.from_delta(delta), now, allowed)
        except (Conflict, NotFound, NotAllowed) as exc:
            refused = type(exc)
        if refused is not None:
            with pytest.raises(refused):
                reconcile(rows, delta, schema, now, statements=points)
            continue
        plan = reconcile(rows, delta, schema, now, statements=points)
        rows = apply_plan(rows, plan)
        points = [*points, *plan.statements]
        check_invariant(rows, many)
        check_derived(rows, points, plan.create, many, exact=not spec.gated)
    return rows, oracle, times


def check_derived(rows: list[Fact], points: list[Point], created: tuple[dict, ...], many: bool,
                  exact: bool) -> None:
    """A delta planned against the rows before it (only the part of the timeline it can change is
    derived again) leaves the rows that the slot's statements derive as a whole: the same runs with
    the same support; and a new version of a single-valued slot names, as superseded, the version
    of another value that ends where it starts. (A confirm of a value already confirmed supports its
    row without being a statement: with candidates, the row's keys hold the run's and maybe more.)"""
    believed = [r for r in rows if r.expired_at is None and r.status is Status.CONFIRMED]
    stored = {(r.valid_from, r.valid_to, r.value_key): frozenset(r.delta_keys) for r in believed}
    derived = {(run.start, run.end, run.value_key): frozenset(k for p in run.support for k in p.supporting_keys)
               for run in believed_runs(points, many)}
    assert len(stored) == len(believed) and stored.keys() == derived.keys(), (stored, derived)
    for interval, keys in derived.items():
        assert keys == stored[interval] if exact else keys <= stored[interval], (interval, keys, stored[interval])
    if many:
        return
    # A pending candidate is not a version (it is believed nowhere until promoted): only the new
    # confirmed rows name what they supersede.
    for props in (p for p in created if p["status"] == Status.CONFIRMED.value):
        before = [r.memory_id for r in believed if r.valid_to == props["valid_from"] and r.value_key != props["value_key"]]
        if before:
            assert props["supersedes_memory_id"] == before[0]


def believed_value(rows: list[Fact], valid_at: datetime, known_at: datetime | None):
    live = [
        r for r in rows
        if r.status is Status.CONFIRMED and r.valid_at(valid_at) and (r.expired_at is None if known_at is None else r.believed_at(known_at))
    ]
    return live


@settings(max_examples=300, deadline=None)
@given(sequence=ops, replay=st.booleans())
def test_cardinality_one_matches_oracle(sequence, replay):
    if replay:
        sequence = sequence + sequence[: len(sequence) // 2]
    rows, oracle, times = run(sequence, "passport_deadline", VALUES)
    for valid in range(0, 34, 3):
        live = believed_value(rows, day(valid), None)
        assert len(live) <= 1
        got = live[0].value if live else None
        assert got == oracle.value_at(day(valid)), (valid, rows)
        for known in times[:: max(1, len(times) // 4)]:
            live = believed_value(rows, day(valid), known)
            assert len(live) <= 1
            assert (live[0].value if live else None) == oracle.value_at(day(valid), known)


@settings(max_examples=200, deadline=None)
@given(sequence=ops)
def test_set_valued_members_match_oracle(sequence):
    rows, oracle, times = run(sequence, "contact", MEMBERS)
    for member in MEMBERS:
        for valid in range(0, 34, 3):
            live = [r for r in believed_value(rows, day(valid), None) if r.value == member]
            assert len(live) <= 1
            assert bool(live) == (member in oracle.value_at(day(valid)))


gated_ops = st.lists(
    st.tuples(
        st.sampled_from(["assert", "assert", "assert", "correct", "retract", "confirm"]),
        st.integers(0, 2),
        st.integers(0, 30),
        st.booleans(),
        st.integers(0, 2),
        st.booleans(),
    ),
    min_size=1,
    max_size=16,
)


def pending_rows(rows: list[Fact]) -> dict:
    pending = [r for r in rows if r.expired_at is None and r.status is Status.CANDIDATE]
    out = {r.value: (r.valid_from, len(r.support_episodes)) for r in pending}
    assert len(out) == len(pending), "one pending candidate per value"
    return out


@settings(max_examples=300, deadline=None)
@given(sequence=gated_ops, requires=st.integers(2, 3), sensitive=st.booleans(), replay=st.booleans())
# Found by hypothesis: a value promoted, retracted from day 1, and another value proposed from day 1
# (its candidate starts where the believed version ends, and names nothing as superseded).
@example(sequence=[("assert", 0, 0, False, 0, False)] * 6 + [
    ("assert", 0, 0, False, 1, False), ("retract", 0, 1, False, 0, False), ("assert", 1, 1, False, 0, False)],
    requires=2, sensitive=False, replay=False)
def test_candidates_match_oracle(sequence, requires, sensitive, replay):
    if replay:
        sequence = sequence + sequence[: len(sequence) // 2]
    rows, oracle, times = run(sequence, "passport_deadline", VALUES, gated_schema(requires, sensitive))
    assert pending_rows(rows) == oracle.pending()
    for valid in range(0, 34, 3):
        live = believed_value(rows, day(valid), None)
        assert len(live) <= 1
        assert (live[0].value if live else None) == oracle.value_at(day(valid)), (valid, rows)
        for known in times[:: max(1, len(times) // 4)]:
            live = believed_value(rows, day(valid), known)
            assert len(live) <= 1
            assert (live[0].value if live else None) == oracle.value_at(day(valid), known)


@settings(max_examples=150, deadline=None)
@given(sequence=gated_ops, requires=st.integers(2, 3), sensitive=st.booleans())
def test_candidate_members_match_oracle(sequence, requires, sensitive):
    rows, oracle, _ = run(sequence, "contact", MEMBERS, gated_schema(requires, sensitive))
    assert pending_rows(rows) == oracle.pending()
    for member in MEMBERS:
        for valid in range(0, 34, 3):
            live = [r for r in believed_value(rows, day(valid), None) if r.value == member]
            assert len(live) <= 1
            assert bool(live) == (member in oracle.value_at(day(valid)))


def test_candidate_is_promoted_by_the_nth_distinct_episode_not_by_a_replay():
    schema = gated_schema(3, False)
    rows: list[Fact] = []
    outcomes = []
    for step, (episode, start) in enumerate([("a", 1), ("a", 1), ("a", 4), ("b", 6), ("b", 6), ("c", 9)]):
        delta = MemoryDelta(tenant_id="t1", subject="mira", attribute="passport_deadline",
                            value=VALUES[0], valid_from=day(start), source_episode_id=episode)
        plan = reconcile(rows, delta, schema, day(100 + step))
        outcomes.append(plan.outcome)
        rows = apply_plan(rows, plan)
    assert outcomes == ["candidate", "unchanged", "candidate", "candidate", "unchanged", "promoted"]
    [confirmed] = [r for r in rows if r.expired_at is None]
    assert confirmed.status is Status.CONFIRMED and confirmed.valid_from == day(1)
    assert confirmed.support_episodes == ("a", "b", "c") and confirmed.confirmed_by == "recurrence"


points = st.builds(
    Point,
    at=st.datetimes(timezones=st.just(timezone.utc)),
    op=st.sampled_from(["assert", "retract", "correct", "confirm"]),
    value=st.one_of(st.none(), st.text(), st.integers(), st.floats(allow_nan=False)),
    value_key=st.text(), key=st.text(min_size=1), episode=st.text(), asserted_by=st.text(),
    confidence=st.floats(0, 1),
    until=st.one_of(st.none(), st.datetimes(timezones=st.just(timezone.utc))),
    replaces_key=st.text(), support=st.integers(1, 5),
    episodes=st.lists(st.text(), max_size=3).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(ledger=st.lists(points, max_size=6))
def test_a_ledger_decoded_in_one_pass_gives_each_entry_as_decoded_alone(ledger):
    entries = [p.to_json() for p in ledger]
    assert Point.many_from_json(entries) == [Point.from_json(e) for e in entries] == ledger

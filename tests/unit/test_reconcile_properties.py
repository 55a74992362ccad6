"""Property tests: random assert/correct/retract sequences, shuffled, against the oracle."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgam.graph import Conflict, Fact, MemoryDelta, default_schema, reconcile
from sgam.graph.reconcile import apply_plan
from tests.oracle import Oracle

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
    believed = [r for r in rows if r.expired_at is None]
    groups: dict[str, list[Fact]] = {}
    for row in believed:
        groups.setdefault(row.value_key if many else "", []).append(row)
    for group in groups.values():
        group.sort(key=lambda r: r.valid_from)
        for before, after in zip(group, group[1:]):
            assert before.valid_to is not None and before.valid_to <= after.valid_from, (before, after)
            if before.valid_to == after.valid_from:
                assert before.value_key != after.value_key, "adjacent equal versions must merge"


def run(sequence, attribute: str, values: list) -> tuple[list[Fact], dict, list[datetime]]:
    many = attribute == "contact"
    rows: list[Fact] = []
    oracles: dict = {}
    times: list[datetime] = []
    for step, (op, index, start, with_value) in enumerate(sequence):
        now = day(100 + step)
        times.append(now)
        value = values[index]
        if op == "correct" and many:
            op = "assert"
        send_value = value if (op != "retract" or with_value or many) else None
        delta = MemoryDelta(
            tenant_id="t1", subject="mira", attribute=attribute, value=send_value,
            valid_from=day(start), source_episode_id=f"e{index}-{start}", op=op,
        )
        oracle = oracles.setdefault(value if many else None, Oracle())
        expected_value = True if many else send_value
        conflict = False
        try:
            oracle.apply(op, expected_value, day(start), delta.source_episode_id, now)
        except Conflict:
            conflict = True
        if conflict:
            with pytest.raises(Conflict):
                reconcile(rows, delta, SCHEMA, now)
            continue
        rows = apply_plan(rows, reconcile(rows, delta, SCHEMA, now))
        check_invariant(rows, many)
    return rows, oracles, times


def believed_value(rows: list[Fact], valid_at: datetime, known_at: datetime | None):
    live = [
        r for r in rows
        if r.valid_at(valid_at) and (r.expired_at is None if known_at is None else r.believed_at(known_at))
    ]
    return live


@settings(max_examples=300, deadline=None)
@given(sequence=ops, replay=st.booleans())
def test_cardinality_one_matches_oracle(sequence, replay):
    if replay:
        sequence = sequence + sequence[: len(sequence) // 2]
    rows, oracles, times = run(sequence, "passport_deadline", VALUES)
    oracle = oracles.get(None, Oracle())
    for valid in range(0, 34, 3):
        live = believed_value(rows, day(valid), None)
        assert len(live) <= 1
        got = live[0].value if live else None
        assert got == oracle.value(day(valid)), (valid, rows)
        for known in times[:: max(1, len(times) // 4)]:
            live = believed_value(rows, day(valid), known)
            assert len(live) <= 1
            assert (live[0].value if live else None) == oracle.value(day(valid), known)


@settings(max_examples=200, deadline=None)
@given(sequence=ops)
def test_set_valued_members_match_oracle(sequence):
    rows, oracles, times = run(sequence, "contact", MEMBERS)
    for member in MEMBERS:
        oracle = oracles.get(member, Oracle())
        for valid in range(0, 34, 3):
            live = [r for r in believed_value(rows, day(valid), None) if r.value == member]
            assert len(live) <= 1
            assert (True if live else None) == oracle.value(day(valid))

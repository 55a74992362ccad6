"""Property test of the import's temporal mapping, without a database: any Graphiti timeline of one
slot (edges with valid_at / invalid_at, plus edges expired without invalid_at), read in any order,
imported through the pure reconciliation, answers every as_of exactly as Graphiti's edges say."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from sgam.graph import default_schema, reconcile
from sgam.graph.models import Fact
from sgam.graph.reconcile import Point, apply_plan
from sgam.ingest.graphiti.importer import GraphitiImportReport, GraphitiMapping, _Importer, plan_edges

SCHEMA = default_schema()
MAPPING = GraphitiMapping.from_data({"edges": {"LIVES_IN": "home_city"}}).check(SCHEMA)
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
CITIES = ["Porto", "Lisbon", "Braga"]


def day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


segment = st.tuples(st.integers(1, 20), st.sampled_from(CITIES), st.integers(0, 2))
never = st.tuples(st.integers(0, 120), st.sampled_from(CITIES))


def edge(city: str, start: datetime, end: datetime | None, expired: bool = False) -> dict:
    node = {"uuid": str(uuid.uuid4()), "name": "Mira", "labels": ["Entity", "Person"]}
    return {"edge": {"uuid": str(uuid.uuid4()), "name": "LIVES_IN", "fact": f"Mira lives in {city}",
                     "valid_at": start, "invalid_at": end, "episodes": [], "group_id": "g",
                     "expired_at": day(300) if expired else None},
            "source": node, "target": {"uuid": str(uuid.uuid4()), "name": city, "labels": ["Entity"]}}


def timeline(segments: list[tuple[int, str, int]]) -> list[tuple[datetime, datetime | None, str]]:
    """Consecutive intervals: each lasts ``length`` days, then a gap of ``gap`` days; the last is open."""
    out, start = [], 0
    for i, (length, city, gap) in enumerate(segments):
        end = None if i == len(segments) - 1 else start + length
        out.append((day(start), day(end) if end is not None else None, city))
        start = (end or start) + gap
    return out


def apply(rows: list[Fact], points: list[Point], deltas: list, step: int) -> tuple[list[Fact], list[Point]]:
    """The rows and statements of the slot after ``deltas`` (the store keeps both)."""
    for i, delta in enumerate(deltas):
        plan = reconcile(rows, delta, SCHEMA, day(1000 + step * 100 + i), statements=points)
        rows = apply_plan(rows, plan)
        points = [*points, *plan.statements]
    return rows, points


@settings(max_examples=60, deadline=None)
@given(st.lists(segment, min_size=1, max_size=6), st.lists(never, max_size=3), st.randoms())
def test_any_graphiti_timeline_imports_exactly(segments, nevers, rnd) -> None:
    intervals = timeline(segments)
    rows_in = [edge(city, s, e) for s, e, city in intervals] + [edge(c, day(t), None, True) for t, c in nevers]
    rnd.shuffle(rows_in)
    report = GraphitiImportReport("t1", dry_run=False)
    importer = _Importer(SCHEMA, MAPPING, "t1", report)
    planned = plan_edges(importer, rows_in)
    assert report.problems == [] and not report.unmapped
    deltas = [p.delta for p in planned]
    rows, points = apply([], [], deltas, 0)
    for t in range(0, 130):
        expected = [city for s, e, city in intervals if s <= day(t) and (e is None or day(t) < e)]
        got = [r.value for r in rows if r.expired_at is None and r.valid_at(day(t))]
        assert got == expected, (t, intervals, nevers)
    again, _ = apply(rows, points, deltas, 1)  # a re-import changes nothing
    assert sorted(r.memory_id for r in again) == sorted(r.memory_id for r in rows)
    assert [r.expired_at for r in sorted(again, key=lambda r: r.memory_id)] == \
        [r.expired_at for r in sorted(rows, key=lambda r: r.memory_id)]


MANY = GraphitiMapping.from_data({"edges": {"KNOWS": "contact"}}).check(SCHEMA)
member = st.tuples(st.integers(0, 100), st.one_of(st.none(), st.integers(1, 60)), st.booleans())


@settings(max_examples=40, deadline=None)
@given(st.lists(member, min_size=1, max_size=6), st.randoms())
def test_set_valued_members_import_independently(members, rnd) -> None:
    rows_in = []
    for i, (start, length, expired) in enumerate(members):
        end = day(start + length) if length is not None else None
        row = edge(f"friend-{i}", day(start), end, expired and end is None)
        row["edge"]["name"] = "KNOWS"
        rows_in.append(row)
    rnd.shuffle(rows_in)
    report = GraphitiImportReport("t1", dry_run=False)
    planned = plan_edges(_Importer(SCHEMA, MANY, "t1", report), rows_in)
    rows, _ = apply([], [], [p.delta for p in planned], 0)
    for t in range(0, 170, 3):
        expected = sorted(f"friend-{i}" for i, (s, n, x) in enumerate(members)
                          if s <= t and (n is None and not x or n is not None and t < s + n))
        got = sorted(r.value for r in rows if r.expired_at is None and r.valid_at(day(t)))
        assert got == expected, (t, members)

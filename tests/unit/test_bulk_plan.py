"""The bulk import's planning on compact keys (no Neo4j): chunks of whole subjects in the order
``write_many`` would meet them, the checks that run before any write, and the one-byte outcomes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgam.graph import InvalidDelta, MemoryDelta, SchemaViolation, default_schema
from sgam.graph.bulk import MISSING_EPISODES, ImportPlan, ImportResult, Outcomes, _pack, plan_steps
from sgam.graph.steps import scripted
from sgam.graph.writes import DeltaResult

AT = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _delta(subject: str, attribute: str = "email", value: object = "a@b.c", episode: str = "ep-1",
           subject_type: str = "Person") -> MemoryDelta:
    return MemoryDelta(tenant_id="t", subject=subject, attribute=attribute, value=value, valid_from=AT,
                       source_episode_id=episode, subject_type=subject_type)


def _plan(deltas, chunk_size: int, missing=()) -> tuple[ImportPlan, list]:
    """Drive ``plan_steps`` with an answer for every read (``missing``: episode ids to report)."""
    return scripted(plan_steps(deltas, default_schema(), chunk_size),
                    lambda statement: [{"id": i} for i in statement.params["ids"] if i in missing])


@given(st.lists(st.integers(0, 12), max_size=80), st.integers(1, 10))
def test_pack_groups_whole_subjects_in_first_seen_order(subjects: list[int], chunk_size: int) -> None:
    from array import array

    first_seen = list(dict.fromkeys(subjects))
    order, bounds = _pack(array("i", subjects), array("i", first_seen), 13, chunk_size)
    expected = [i for s in first_seen for i, t in enumerate(subjects) if t == s]
    assert list(order) == expected  # grouped, subjects first-seen, each one's deltas in arrival order
    assert bounds[0] == 0 and bounds[-1] == len(subjects) and list(bounds) == sorted(set(bounds))
    for start, stop in zip(bounds, bounds[1:]):
        chunk = [subjects[i] for i in order[start:stop]]
        # a chunk never splits a subject, and exceeds chunk_size only when one subject does
        assert all(subjects.count(s) == chunk.count(s) for s in set(chunk))
        assert len(chunk) <= chunk_size or len(set(chunk)) == 1


def test_plan_keeps_positions_and_reads_each_slices_episodes() -> None:
    deltas = [_delta("p-1"), _delta("p-2", episode="ep-2"), _delta("p-1", "home_city", "Oslo"),
              _delta("p-3", episode="ep-3"), _delta("p-2", "home_city", "Rome", episode="ep-2")]
    plan, reads = _plan(deltas, chunk_size=3)
    assert plan.tenants == ("t",) and plan.total == 5
    assert [list(c) for c in plan.chunks()] == [[0, 2], [1, 4, 3]]  # p-1 whole; then p-2 and p-3
    assert [r.query for r in reads] == [MISSING_EPISODES] * 2
    assert [r.params["ids"] for r in reads] == [["ep-1", "ep-2"], ["ep-2", "ep-3"]]


def test_plan_raises_on_the_first_bad_delta_missing_episode_or_type_clash() -> None:
    good = [_delta("p-1"), _delta("p-2")]
    with pytest.raises(SchemaViolation, match="delta 2: .*no_such"):
        _plan([*good, _delta("p-3", "no_such")], chunk_size=2)
    with pytest.raises(InvalidDelta, match="'ep-9'.*tenant 't'.*record the episodes first"):
        _plan([*good, _delta("p-3", episode="ep-9")], chunk_size=2, missing={"ep-9"})
    # acc-1 is first an Account (a target of holds), then named as a Customer subject
    clash = [_delta("c-1", "holds", "acc-1", subject_type="Customer"),
             _delta("acc-1", "email", subject_type="Customer")]
    with pytest.raises(SchemaViolation, match="delta 1: subject 'acc-1'.*delta 0 made it a .* \\(target\\)"):
        _plan(clash, chunk_size=10)
    with pytest.raises(InvalidDelta, match="chunk_size"):
        _plan(good, chunk_size=0)


def test_outcomes_are_one_byte_a_delta_and_read_as_results() -> None:
    outcomes = Outcomes(4)
    outcomes.record([DeltaResult(2, "created", ("m-1",)), DeltaResult(0, "unchanged")])
    outcomes.record([DeltaResult(1, "created"), DeltaResult(3, "superseded")])
    result = ImportResult(outcomes)
    assert [r.outcome for r in result.results] == ["unchanged", "created", "created", "superseded"]
    assert result.results[-1] == DeltaResult(3, "superseded") and result.results[1:3][0].index == 1
    assert result.count("created") == 2 and result.count("rejected") == 0
    assert result.written == 3 and result.rejected == ()
    assert len(outcomes.codes) == 4  # bytes, not objects
    with pytest.raises(IndexError, match="out of range"):
        result.results[4]

"""What an import does about an unfinished one in its tenants (``bulk.decide``), and the stream
fingerprint that tells a re-run of the same stream from a different one (no Neo4j)."""

from __future__ import annotations

import gc
import sys
import threading
from array import array
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgam.graph import Conflict, MemoryDelta, default_schema
from sgam.graph.errors import SgamError
from sgam.graph.bulk import Decision, check_steps, decide, prepared_ahead
from sgam.graph.handoffs import HANDOFF_INTERVAL, collector_paused, prompt_handoffs
from sgam.graph.steps import scripted

AT = datetime(2025, 1, 1, tzinfo=timezone.utc)
SCHEMA = default_schema()


def _record(tenant: str, *runs: dict[str, Any], entities: bool = False, tombstones: bool = False,
            later: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"tenant": tenant, "entities": entities, "tombstones": tombstones, "runs": list(runs),
            "later": list(later)}


def _run(fingerprint: str = "100:aa", run_id: str = "import-1", status: str = "running",
         tenants: tuple[str, ...] = ("t",)) -> dict[str, Any]:
    return {"id": run_id, "fingerprint": fingerprint, "status": status, "tenants": list(tenants),
            "chunks": 10, "chunks_done": 3, "deltas": 100, "deltas_done": 30, "chunk_size": 10,
            "outcome_names": ["created"], "outcome_counts": [30], "started_at": "2026-05-01T10:00:00Z"}


def test_empty_tenants_start_afresh_and_occupied_ones_are_refused() -> None:
    assert decide("100:aa", ["t", "u"], [_record("t"), _record("u")], "resume") == Decision()
    for busy in (_record("u", entities=True), _record("u", tombstones=True)):
        with pytest.raises(Conflict, match="'u' already hold entities or facts.*write_many"):
            decide("100:aa", ["t", "u"], [_record("t"), busy], "undo")


def test_the_same_stream_resumes_and_a_different_one_is_refused_naming_the_choice() -> None:
    run = _run()
    assert decide("100:aa", ["t"], [_record("t", run, entities=True)], "resume") == Decision(resume=run)
    with pytest.raises(Conflict) as refused:
        decide("50:bb", ["t"], [_record("t", run, entities=True)], "resume")
    message = str(refused.value)
    for part in ("'t'", "'import-1'", "started 2026-05-01T10:00:00Z", "3 of 10 chunks", "30 of 100 deltas",
                 "different stream", "(50 deltas", "re-run import_history with that run's stream",
                 "on_unfinished='undo'", "episodes stay"):
        assert part in message, (part, message)


def test_undo_removes_the_unfinished_run_whatever_the_stream() -> None:
    run = _run()
    for fingerprint in ("100:aa", "50:bb"):
        decision = decide(fingerprint, ["t"], [_record("t", run, entities=True)], "undo")
        assert decision == Decision(undo=((run, ("t",)),))


def test_a_run_being_undone_is_undone_to_the_end_even_for_the_same_stream() -> None:
    run = _run(status="undoing")
    assert decide("100:aa", ["t"], [_record("t", run, entities=True)], "resume") == \
        Decision(undo=((run, ("t",)),))


def test_a_tenant_written_to_after_the_run_stopped_is_refused_either_way() -> None:
    run = _run()
    for option in ("resume", "undo"):
        with pytest.raises(Conflict, match="'t'.*'import-1'.*'p-9' were written later.*neither is done.*"
                                           "delete_tenant"):
            decide("100:aa", ["t"], [_record("t", run, entities=True, later=("p-9",))], option)  # type: ignore[arg-type]
        with pytest.raises(Conflict, match="'t'.*'import-1'.*forgotten"):
            decide("100:aa", ["t"], [_record("t", run, entities=True, tombstones=True)], option)  # type: ignore[arg-type]


def test_a_run_over_several_tenants_resumes_only_where_every_marker_is_left() -> None:
    run = _run(tenants=("t", "u"))
    both = [_record("t", run, entities=True), _record("u", run, entities=True)]
    assert decide("100:aa", ["t", "u"], both, "resume") == Decision(resume=run)
    # the stream of tenant t only, while the run also wrote into u (read as the run's other tenant)
    with pytest.raises(Conflict, match="different stream"):
        decide("60:cc", ["t"], both, "resume")
    assert decide("60:cc", ["t"], both, "undo") == Decision(undo=((run, ("t", "u")),))
    # u was deleted since: its marker is gone, so the run cannot resume, and an undo leaves u alone
    gone = [_record("t", run, entities=True), _record("u")]
    with pytest.raises(Conflict, match="marker is gone from tenant\\(s\\) 'u'"):
        decide("100:aa", ["t", "u"], gone, "resume")
    assert decide("100:aa", ["t", "u"], gone, "undo") == Decision(undo=((run, ("t",)),))


def test_two_unfinished_runs_are_not_guessed_between() -> None:
    first, second = _run(), _run("100:aa", "import-2")
    with pytest.raises(Conflict, match="other unfinished run.*'import-2'"):
        decide("100:aa", ["t"], [_record("t", first, second, entities=True)], "resume")


# A stream as (subject, attribute, value, day, episode, confidence); its identity by the
# documented definition of a statement (tenant, subject, attribute, op, value, valid_from,
# episode), confidence left out.
_ITEM = st.tuples(st.sampled_from(["p-1", "p-2", "p-3"]),
                  st.sampled_from([("email", "a@b.c"), ("email", "x@y.z"), ("home_city", "Oslo")]),
                  st.integers(0, 3), st.sampled_from(["ep-1", "ep-2"]), st.sampled_from([0.5, 1.0]))


def _deltas(items: list[tuple]) -> list[MemoryDelta]:
    return [MemoryDelta(tenant_id="t", subject=subject, attribute=attribute, value=value,
                        valid_from=AT + timedelta(days=day), source_episode_id=episode, confidence=confidence,
                        subject_type="Person")
            for subject, (attribute, value), day, episode, confidence in items]


def _fingerprint(items: list[tuple], chunk_size: int) -> str:
    checked, _ = scripted(check_steps(_deltas(items), SCHEMA, chunk_size), lambda _: [])  # all recorded
    return checked.fingerprint


@settings(max_examples=60, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=12), st.lists(_ITEM, min_size=1, max_size=12),
       st.integers(1, 5), st.integers(1, 5))
def test_the_fingerprint_is_the_same_exactly_for_the_same_statements_in_the_same_order(
        first: list[tuple], second: list[tuple], size_a: int, size_b: int) -> None:
    def identity(items: list[tuple]) -> list[tuple]:
        return [item[:4] for item in items]

    assert _fingerprint(first, size_a) == _fingerprint(first, size_b)  # not the chunking
    assert _fingerprint(first, size_a).startswith(f"{len(first)}:")
    assert (_fingerprint(first, size_a) == _fingerprint(second, size_b)) == (identity(first) == identity(second))
    if identity(first) != identity(first[::-1]):  # the order counts: chunks are packed in it
        assert _fingerprint(first, size_a) != _fingerprint(first[::-1], size_a)


class _Counted(list):  # type: ignore[type-arg]
    """A stream that records from which thread each delta was read."""

    def __init__(self, items: list[MemoryDelta]) -> None:
        super().__init__(items)
        self.readers: set[str] = set()

    def __getitem__(self, index: Any) -> Any:
        self.readers.add(threading.current_thread().name)
        return super().__getitem__(index)


def test_chunks_are_prepared_in_order_one_ahead_of_the_writer() -> None:
    deltas = _Counted(_deltas([(f"p{i % 4}", ("home_city", f"City {i}"), i, "e1", 0.9) for i in range(10)]))
    chunks = [array("q", [0, 4, 8]), array("q", [1, 5]), array("q", [2, 3, 6, 7, 9])]
    seen = []
    for chunk, ready, planned in prepared_ahead(deltas, chunks, SCHEMA):
        assert planned is None  # no plan asked for
        seen.append((list(chunk), [p.index for p in ready], [p.delta for p in ready]))
    assert deltas.readers and all(name.startswith("sgam-import") for name in deltas.readers)
    assert seen == [(list(c), list(c), [deltas[i] for i in c]) for c in chunks]


def test_a_bad_delta_raises_when_its_chunk_is_asked_for_not_before() -> None:
    deltas = _deltas([("p1", ("home_city", "Porto"), 0, "e1", 0.9), ("p2", ("home_city", "Faro"), 1, "e1", 0.9)])
    deltas[1] = deltas[1].model_copy(update={"attribute": "no_such_attribute"})
    ahead = prepared_ahead(deltas, [array("q", [0]), array("q", [1])], SCHEMA)
    chunk, ready, _ = next(ahead)
    assert [p.index for p in ready] == [0]
    with pytest.raises(SgamError, match="delta 1: .*no_such_attribute"):
        next(ahead)


# The interpreter keeps the switch interval in whole microseconds: compared to within 2 us.
def test_the_switch_interval_is_short_while_a_worker_plans_ahead_and_restored_after() -> None:
    before = sys.getswitchinterval()
    deltas = _deltas([(f"p{i}", ("home_city", f"City {i}"), i, "e1", 0.9) for i in range(4)])
    ahead = prepared_ahead(deltas, [array("q", [0, 1]), array("q", [2, 3])], SCHEMA)
    next(ahead)
    assert sys.getswitchinterval() == pytest.approx(min(HANDOFF_INTERVAL, before), abs=2e-6)
    assert list(ahead)  # the second chunk; then the generator ends
    assert sys.getswitchinterval() == pytest.approx(before, abs=2e-6)
    abandoned = prepared_ahead(deltas, [array("q", [0]), array("q", [1])], SCHEMA)
    next(abandoned)
    abandoned.close()  # an import that fails midway closes it
    assert sys.getswitchinterval() == pytest.approx(before, abs=2e-6)


def test_overlapping_imports_restore_the_interval_found_before_the_first() -> None:
    before = sys.getswitchinterval()
    with prompt_handoffs():
        with prompt_handoffs():
            assert sys.getswitchinterval() == pytest.approx(min(HANDOFF_INTERVAL, before), abs=2e-6)
        assert sys.getswitchinterval() == pytest.approx(min(HANDOFF_INTERVAL, before), abs=2e-6)
    assert sys.getswitchinterval() == pytest.approx(before, abs=2e-6)
    with pytest.raises(RuntimeError), prompt_handoffs():
        raise RuntimeError("a failed chunk")
    assert sys.getswitchinterval() == pytest.approx(before, abs=2e-6)
    sys.setswitchinterval(HANDOFF_INTERVAL / 2)  # already shorter: left as it is
    try:
        with prompt_handoffs():
            assert sys.getswitchinterval() == pytest.approx(HANDOFF_INTERVAL / 2, abs=2e-6)
    finally:
        sys.setswitchinterval(before)


def test_the_collector_stays_paused_until_the_last_planning_thread_leaves() -> None:
    """An import's worker and main thread can both plan at once: the first to leave must not switch
    the collector back on under the other (it did, as a toggle without a count)."""
    assert gc.isenabled()
    entered, leave, left = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        with collector_paused():
            entered.set()
            leave.wait(5)
        left.set()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert entered.wait(5)
        with collector_paused():
            leave.set()
            assert left.wait(5)  # the worker's block is over, this one is not
            assert not gc.isenabled()
        assert gc.isenabled()
    finally:
        leave.set()
        thread.join(5)
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a refused batch")
    assert gc.isenabled()
    gc.disable()  # off before: left off
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()

"""Concurrent writers against a real Neo4j: transaction time stays ordered, retries stay invisible.

16 writers state 30 values each about one slot (threads sharing a graph, threads with a graph
each, 16 processes), and threads send overlapping ``write_many`` batches over shared subjects.
Afterwards, from the stored rows and through the public reads:

- no row was retired before it was recorded, and no valid interval is empty (and ``doctor``,
  which checks both, is clean);
- at every instant of transaction time that matters, each valid instant has at most one value;
- the believed timeline is the one the same statements give when written one at a time, sorted,
  into a fresh tenant (docs/temporal-semantics.md: history depends on the set of statements,
  not on their arrival order or on how many writers sent them).

Deadlocks and other transient errors are re-run by the driver, counted on the store
(``MemoryGraph.retries``) and printed by ``sgam replay`` / ``sgam ingest``; never raised.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from neo4j.exceptions import TransientError
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, Episode, Fact, MemoryDelta, MemoryGraph
from sgam.cli import app
from sgam.graph import store as store_module
from sgam.graph.handoffs import HANDOFF_INTERVAL
from sgam.graph.schema import default_schema
from sgam.graph.store import Retries
from sgam.graph.steps import Statement
from tests.integration.concurrency_writer import SPAWN_TIMEOUT_S, process_writer

EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)
SUBJECT, ATTRIBUTE = "mira", "home_city"  # single-valued, applied at once (no candidates)
CITIES = ("Lisbon", "Porto", "Faro", "Braga")  # few values, so runs repeat them
WRITERS, EACH = 16, 30
# The processes and the threads with a graph each send the first 15 of each writer's statements:
# 16 interpreters starting at once cost most of a process run on a small machine.
FEWER = 15
DAYS = WRITERS * EACH // 2  # every valid_from is stated twice, mostly by two different writers


def day(n: float) -> datetime:
    return EPOCH + timedelta(days=n)


Timeline = list[tuple[str, datetime, datetime | None]]


# -- the plans ---------------------------------------------------------------------------------

def slot_plan(tenant: str, each: int = EACH) -> list[list[MemoryDelta]]:
    """Each writer's first ``each`` of 30 asserts on one slot, in the order that writer sends them.

    The 480 statements cover 240 days twice each, shuffled: instants collide between writers
    (with equal or different values), each writer jumps back and forth in valid time (most
    statements are backdated behind one it sent before), and four values repeat everywhere.
    """
    rng = random.Random(20260601)
    days = list(range(DAYS)) * 2
    rng.shuffle(days)
    return [[MemoryDelta(tenant_id=tenant, subject=SUBJECT, attribute=ATTRIBUTE, value=rng.choice(CITIES),
                         valid_from=day(days[w * EACH + j]), source_episode_id=f"w{w}")
             for j in range(each)]
            for w in range(WRITERS)]


BATCH_SUBJECTS = tuple(f"p{i}" for i in range(6))
BATCH_ATTRIBUTES = {"home_city": CITIES, "response_style": ("concise", "detailed", "bullet points")}
BATCH_WRITERS, BATCH_EACH, BATCH_SIZE = 4, 40, 10


def batch_plan(tenant: str) -> list[list[MemoryDelta]]:
    """Each thread's deltas for ``write_many``: 12 slots (6 subjects, 2 attributes) shared by every
    thread, in a different order per thread, so batches of 10 overlap in subjects and slots."""
    rng = random.Random(20260602)
    slots = [(s, a) for s in BATCH_SUBJECTS for a in BATCH_ATTRIBUTES]
    plans = []
    for w in range(BATCH_WRITERS):
        deltas = []
        for j in range(BATCH_EACH):
            subject, attribute = slots[(j + 3 * w) % len(slots)]
            deltas.append(MemoryDelta(
                tenant_id=tenant, subject=subject, attribute=attribute,
                value=rng.choice(BATCH_ATTRIBUTES[attribute]), valid_from=day(rng.randrange(40)),
                source_episode_id=f"w{w}"))
        plans.append(deltas[::-1] if w % 2 else deltas)
    return plans


def record_writers(graph: MemoryGraph, tenant: str, writers: int) -> None:
    graph.record_episodes([_episode(tenant, w) for w in range(writers)])


def _episode(tenant: str, w: int) -> Episode:
    return Episode(tenant_id=tenant, id=f"w{w}", content=f"writer {w} speaking", occurred_at=EPOCH,
                   actor=f"agent:w{w}")


def one_at_a_time(graph: MemoryGraph, tenant: str, plans: Sequence[Sequence[MemoryDelta]]) -> None:
    """The reference: every statement written alone, in sorted order, by one writer."""
    record_writers(graph, tenant, len(plans))
    statements = [d for plan in plans for d in plan]
    statements.sort(key=lambda d: (d.subject, d.attribute, d.valid_from, str(d.value), d.source_episode_id))
    for delta in statements:
        graph.write(delta)


# -- what must hold afterwards -----------------------------------------------------------------

def believed(rows: Sequence[Fact]) -> Timeline:
    return sorted((str(r.value), r.valid_from, r.valid_to) for r in rows
                  if r.expired_at is None and r.status.value == "confirmed")


def believed_at(rows: Sequence[Fact], known_at: datetime) -> list[Fact]:
    """The rows believed at ``known_at``: recorded at or before it and not yet retired."""
    return [r for r in rows if r.recorded_at <= known_at and (r.expired_at is None or known_at < r.expired_at)]


def transaction_instants(rows: Sequence[Fact]) -> list[datetime]:
    """Every recorded_at and expired_at, the points between consecutive ones, and one on each side."""
    marks = sorted({r.recorded_at for r in rows} | {r.expired_at for r in rows if r.expired_at is not None})
    between = [a + (b - a) / 2 for a, b in pairwise(marks)]
    return sorted([marks[0] - timedelta(seconds=1), *marks, *between, marks[-1] + timedelta(seconds=1)])


def overlaps(rows: Sequence[Fact]) -> list[tuple[Fact, Fact]]:
    """Pairs of confirmed rows whose valid intervals overlap (so some valid instant has two values)."""
    ordered = sorted((r for r in rows if r.status.value == "confirmed"), key=lambda r: r.valid_from)
    return [(a, b) for a, b in pairwise(ordered) if a.valid_to is None or b.valid_from < a.valid_to]


def show(row: Fact) -> str:
    return (f"{row.value!r} valid [{row.valid_from:%Y-%m-%d}, "
            f"{'open' if row.valid_to is None else f'{row.valid_to:%Y-%m-%d}'}) recorded {row.recorded_at.isoformat()}"
            f" expired {row.expired_at.isoformat() if row.expired_at else None}")


def slot_problems(graph: MemoryGraph, tenant: str, subject: str, attribute: str,
                  probes: Sequence[datetime], samples: int) -> list[str]:
    """Every broken invariant of one slot, described (an empty list when it is sound)."""
    rows = graph.history(tenant, subject, attribute)
    backwards = [r for r in rows if r.expired_at is not None and r.expired_at < r.recorded_at]
    empty = [r for r in rows if r.valid_to is not None and r.valid_to <= r.valid_from]
    problems = [f"{subject}.{attribute}: {len(broken)} of {len(rows)} rows {what}, e.g. {show(broken[0])}"
                for broken, what in ((backwards, "retired before they were recorded"),
                                     (empty, "with an empty valid interval")) if broken]
    instants = transaction_instants(rows)
    double = [(k, pair) for k in instants for pair in overlaps(believed_at(rows, k))]
    for known_at, (a, b) in double[:3]:
        # The public read at that instant, inside both rows' valid intervals.
        answers = graph.as_of(tenant, subject, attribute, valid_at=b.valid_from, known_at=known_at)
        problems.append(f"{subject}.{attribute}: as_of(valid_at={b.valid_from:%Y-%m-%d}, known_at="
                        f"{known_at.isoformat()}) gave {[f.value for f in answers]}: {show(a)} / {show(b)}")
    if len(double) > 3:
        problems.append(f"{subject}.{attribute}: {len(double) - 3} more instants believe two values at once")
    # The public read agrees with the rows, and gives at most one value, at ``samples`` instants.
    wrong = 0
    for known_at in instants[::max(1, len(instants) // samples)]:
        held = believed_at(rows, known_at)
        for valid_at in probes:
            answers = graph.as_of(tenant, subject, attribute, valid_at=valid_at, known_at=known_at)
            expected = sorted(str(r.value) for r in held
                              if r.valid_from <= valid_at and (r.valid_to is None or valid_at < r.valid_to))
            if len(answers) > 1 or sorted(str(f.value) for f in answers) != expected:
                wrong += 1
                if wrong > 3:
                    continue
                problems.append(f"{subject}.{attribute}: as_of(valid_at={valid_at:%Y-%m-%d}, known_at="
                                f"{known_at.isoformat()}) gave {[f.value for f in answers]}; the rows believed then "
                                f"say {expected}, and at most one value may hold")
    if wrong > 3:
        problems.append(f"{subject}.{attribute}: {wrong - 3} more sampled as_of answers wrong")
    return problems


# Valid instants asked at sampled transaction instants (the rows are checked at every instant).
SLOT_PROBES = ([day(0.5), day(37.5), day(120.5), day(DAYS - 0.5), day(DAYS + 30)], 40)
BATCH_PROBES = ([day(0.5), day(19.5), day(39.5), day(60)], 8)


def assert_sound(graph: MemoryGraph, tenant: str, slots: Sequence[tuple[str, str]],
                 reference: dict[tuple[str, str], Timeline],
                 probes: tuple[list[datetime], int]) -> None:
    found = Counter(f"doctor: {p['problem']}" for p in graph.doctor(tenant))
    problems = [f"{kind} ({n} rows)" for kind, n in sorted(found.items())]
    for subject, attribute in slots:
        timeline = believed(graph.history(tenant, subject, attribute))
        expected = reference[(subject, attribute)]
        if timeline != expected:
            differ = sorted(set(timeline) ^ set(expected), key=lambda run: run[1])
            problems.append(f"{subject}.{attribute}: the believed timeline ({len(timeline)} runs) differs "
                            f"from the one-at-a-time reference ({len(expected)} runs), first at "
                            + ", ".join(f"{v!r} [{a:%Y-%m-%d}, {'open' if b is None else f'{b:%Y-%m-%d}'})"
                                        for v, a, b in differ[:2]))
        problems += slot_problems(graph, tenant, subject, attribute, *probes)
    assert problems == [], f"{len(problems)} problems:\n" + "\n".join(problems[:12])


def run_all(work: Callable[[int], Any], n: int) -> list[Any]:
    """Run ``work(0..n-1)`` on n threads, released together; every exception is re-raised here."""
    start = threading.Barrier(n)

    def released(i: int) -> Any:
        start.wait(timeout=60)
        return work(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(released, i) for i in range(n)]
        return [f.result() for f in futures]  # a retried deadlock must never arrive here as an error


# -- fixtures ----------------------------------------------------------------------------------

@pytest.fixture
def fresh(shared_graph: MemoryGraph) -> Iterator[Callable[[], str]]:
    """New tenants, removed again afterwards."""
    made: list[str] = []

    def make() -> str:
        made.append(f"t-{uuid.uuid4().hex[:12]}")
        return made[-1]

    yield make
    for tenant in made:
        shared_graph.delete_tenant(tenant)


@pytest.fixture(scope="module")
def slot_reference(shared_graph: MemoryGraph) -> Iterator[Callable[[int], dict[tuple[str, str], Timeline]]]:
    """``reference(each)``: the believed timeline of ``slot_plan(each)`` written one at a time."""
    made: dict[int, tuple[str, dict[tuple[str, str], Timeline]]] = {}

    def reference(each: int) -> dict[tuple[str, str], Timeline]:
        if each not in made:
            tenant = f"t-{uuid.uuid4().hex[:12]}"
            one_at_a_time(shared_graph, tenant, slot_plan(tenant, each))
            made[each] = tenant, {(SUBJECT, ATTRIBUTE): believed(shared_graph.history(tenant, SUBJECT, ATTRIBUTE))}
            # The reference itself, written by one writer, keeps every invariant.
            assert slot_problems(shared_graph, tenant, SUBJECT, ATTRIBUTE, *SLOT_PROBES) == []
        return made[each][1]

    yield reference
    for tenant, _ in made.values():
        shared_graph.delete_tenant(tenant)


@pytest.fixture(scope="module")
def batch_reference(shared_graph: MemoryGraph) -> Iterator[dict[tuple[str, str], Timeline]]:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    one_at_a_time(shared_graph, tenant, batch_plan(tenant))
    reference = {(s, a): believed(shared_graph.history(tenant, s, a))
                 for s in BATCH_SUBJECTS for a in BATCH_ATTRIBUTES}
    yield reference
    shared_graph.delete_tenant(tenant)


def connect(neo4j_connection: tuple[str, tuple[str, str]]) -> MemoryGraph:
    uri, auth = neo4j_connection
    return MemoryGraph.connect(uri, auth, schema=default_schema(), bootstrap=False)


# -- 16 writers on one slot --------------------------------------------------------------------

def test_threads_sharing_a_graph_leave_a_sound_history(
        shared_graph: MemoryGraph, fresh: Callable[[], str], slot_reference) -> None:
    tenant = fresh()
    plans = slot_plan(tenant)
    record_writers(shared_graph, tenant, WRITERS)
    outcomes = run_all(lambda w: [shared_graph.write(d).outcome for d in plans[w]], WRITERS)
    assert sum(len(o) for o in outcomes) == WRITERS * EACH
    assert_sound(shared_graph, tenant, [(SUBJECT, ATTRIBUTE)], slot_reference(EACH), SLOT_PROBES)


def test_threads_with_a_graph_each_leave_a_sound_history(
        neo4j_connection, shared_graph: MemoryGraph, fresh: Callable[[], str], slot_reference) -> None:
    tenant = fresh()
    plans = slot_plan(tenant, FEWER)
    record_writers(shared_graph, tenant, WRITERS)
    graphs = [connect(neo4j_connection) for _ in range(WRITERS)]
    try:
        outcomes = run_all(lambda w: [graphs[w].write(d).outcome for d in plans[w]], WRITERS)
    finally:
        for graph in graphs:
            graph.close()
    assert sum(len(o) for o in outcomes) == WRITERS * FEWER
    assert_sound(shared_graph, tenant, [(SUBJECT, ATTRIBUTE)], slot_reference(FEWER), SLOT_PROBES)


def test_processes_leave_a_sound_history(
        neo4j_connection, shared_graph: MemoryGraph, fresh: Callable[[], str], slot_reference) -> None:
    uri, auth = neo4j_connection
    tenant = fresh()
    plans = slot_plan(tenant, FEWER)
    record_writers(shared_graph, tenant, WRITERS)
    # A fork server imports the writer's module once and forks each writer from it: 16 fresh
    # interpreters importing sgam side by side took most of this test on two cores. Each writer is
    # still a process of its own with its own driver and connections.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.integration.concurrency_writer"])
    start, results = context.Barrier(WRITERS), context.Queue()
    processes = [context.Process(target=process_writer, args=(uri, auth, plans[w], start, results, w))
                 for w in range(WRITERS)]
    for process in processes:
        process.start()
    try:
        reports = sorted(results.get(timeout=SPAWN_TIMEOUT_S) for _ in processes)
    finally:
        for process in processes:
            process.join(timeout=SPAWN_TIMEOUT_S)
            if process.is_alive():
                process.kill()
    assert [(w, error) for w, _, error, _ in reports] == [(w, None) for w in range(WRITERS)]
    assert [len(outcomes) for _, outcomes, _, _ in reports] == [FEWER] * WRITERS
    assert all(p.exitcode == 0 for p in processes)
    assert_sound(shared_graph, tenant, [(SUBJECT, ATTRIBUTE)], slot_reference(FEWER), SLOT_PROBES)


# -- overlapping write_many batches ------------------------------------------------------------

def test_overlapping_write_many_batches_leave_a_sound_history(
        shared_graph: MemoryGraph, fresh: Callable[[], str], batch_reference) -> None:
    tenant = fresh()
    plans = batch_plan(tenant)
    record_writers(shared_graph, tenant, BATCH_WRITERS)
    results = run_all(lambda w: shared_graph.write_many(plans[w], batch_size=BATCH_SIZE), BATCH_WRITERS)
    assert [r.rejected for r in results] == [()] * BATCH_WRITERS
    assert [len(r.results) for r in results] == [BATCH_EACH] * BATCH_WRITERS
    slots = [(s, a) for s in BATCH_SUBJECTS for a in BATCH_ATTRIBUTES]
    assert_sound(shared_graph, tenant, slots, batch_reference, BATCH_PROBES)


def crossing_plan(tenant: str, n: int = 24) -> list[MemoryDelta]:
    """Deltas whose relation targets are other lanes' subjects: customer i holds accounts i and
    i+1, and each account is itself a subject (covered_by a policy), all of them new."""
    deltas = []
    for i in range(n):
        for account in (i, (i + 1) % n):
            deltas.append(MemoryDelta(tenant_id=tenant, subject=f"c{i}", attribute="holds", value=f"a{account}",
                                      valid_from=day(i), source_episode_id=f"w{i % 4}"))
        deltas.append(MemoryDelta(tenant_id=tenant, subject=f"a{i}", attribute="covered_by", value=f"p{i % 3}",
                                  valid_from=day(i), source_episode_id=f"w{(i + 1) % 4}"))
    return deltas


def test_write_many_lanes_crossing_subjects_and_targets_never_deadlock(
        neo4j_connection, shared_graph: MemoryGraph, fresh: Callable[[], str]) -> None:
    """Lanes split by subject share relation targets (each lane's new subjects are the others'
    targets): a batch takes all its entity locks in one sorted pass, so no deadlock is retried,
    and the lanes write what one lane writes. While the lanes run, the interpreter hands the GIL
    over within graph.handoffs' interval (read by the clock each batch asks), and after them the
    interval is the caller's again."""
    lanes, one = fresh(), fresh()
    for tenant in (lanes, one):
        record_writers(shared_graph, tenant, 4)
    intervals: list[float] = []

    def clock() -> datetime:
        intervals.append(sys.getswitchinterval())
        return datetime.now(timezone.utc)

    before = sys.getswitchinterval()
    uri, auth = neo4j_connection
    graph = MemoryGraph.connect(uri, auth, schema=default_schema(), bootstrap=False, clock=clock)
    try:
        for _ in range(3):
            result = graph.write_many(crossing_plan(lanes), batch_size=4, workers=4)
            assert result.rejected == ()
        retries = graph.retries
    finally:
        graph.close()
    for _ in range(3):
        shared_graph.write_many(crossing_plan(one), batch_size=4)
    assert retries == Retries(0, 0)
    assert intervals and max(intervals) <= min(HANDOFF_INTERVAL, before) + 2e-6  # whole microseconds
    assert sys.getswitchinterval() == pytest.approx(before, abs=2e-6)

    def held(tenant: str) -> list[tuple[str, str, str]]:
        return sorted((r["s"], r["a"], r["o"]) for r in shared_graph.store.read(
            "MATCH (s:Entity {tenant_id: $tenant})-[f]->(o:Entity) WHERE f.memory_id IS NOT NULL "
            "AND f.expired_at IS NULL RETURN s.id AS s, f.attribute AS a, o.id AS o", {"tenant": tenant}))

    assert held(lanes) == held(one) and len(held(one)) == 3 * 24
    mentions = "MATCH (:Episode {tenant_id: $tenant})-[m:MENTIONS]->() RETURN count(m) AS n"
    assert shared_graph.store.read(mentions, {"tenant": lanes}) == shared_graph.store.read(mentions, {"tenant": one})


# -- doctor ------------------------------------------------------------------------------------

def test_doctor_finds_a_row_retired_before_it_was_recorded(shared_graph: MemoryGraph,
                                                          fresh: Callable[[], str]) -> None:
    tenant = fresh()
    graph = shared_graph
    graph.record_episode(tenant_id=tenant, id="e1", content="x", occurred_at=EPOCH)
    graph.write(tenant_id=tenant, subject=SUBJECT, attribute=ATTRIBUTE, value="Porto", valid_from=day(0),
                source_episode_id="e1")
    assert graph.doctor(tenant) == []
    # Rows as a writer with a stale clock leaves them: retired a second before they were recorded,
    # and one whose valid interval ends a day before it starts.
    graph.store.run_write(
        "MATCH (s:Entity {tenant_id: $t, id: $s})-[f:HOME_CITY]->(v) "
        "CREATE (s)-[g:HOME_CITY]->(v) SET g = f {.*, memory_id: $t + '-backwards', "
        "  expired_at: f.recorded_at - duration('PT1S')} "
        "CREATE (s)-[h:HOME_CITY]->(v) SET h = f {.*, memory_id: $t + '-inverted', "
        "  valid_to: f.valid_from - duration('P1D')}",
        {"t": tenant, "s": SUBJECT})
    problems = sorted((p["problem"], p["subject"], p["attribute"], p["memory_id"]) for p in graph.doctor(tenant))
    assert problems == [
        ("expired before recorded", SUBJECT, ATTRIBUTE, f"{tenant}-backwards"),
        ("valid_to not after valid_from", SUBJECT, ATTRIBUTE, f"{tenant}-inverted"),
    ]


# -- deadlocks and transient errors ------------------------------------------------------------

LOCK = "MATCH (e:Entity {tenant_id: $tenant, id: $id}) SET e.locked_by = $by RETURN e.id AS id"


def crossing(tenant: str, first: str, second: str, both_hold_one: threading.Barrier,
             attempts: list[int]) -> Callable[[], Iterator[Statement]]:
    """Steps that lock ``first`` then ``second``; on the first attempt they wait in between until
    the other writer holds its first lock, so two of them in opposite order deadlock."""
    def steps() -> Any:
        attempts.append(1)
        yield Statement(LOCK, {"tenant": tenant, "id": first, "by": first})
        if len(attempts) == 1:
            both_hold_one.wait(timeout=30)
        yield Statement(LOCK, {"tenant": tenant, "id": second, "by": first})
        return len(attempts)

    return steps


def make_subjects(graph: MemoryGraph, tenant: str) -> None:
    graph.store.run_write("UNWIND ['a', 'b'] AS id CREATE (:Entity {tenant_id: $tenant, id: id, type: 'Person'})",
                          {"tenant": tenant})


def test_a_deadlock_is_retried_counted_and_not_raised(neo4j_connection, shared_graph: MemoryGraph,
                                                       fresh: Callable[[], str]) -> None:
    tenant = fresh()
    make_subjects(shared_graph, tenant)
    graph = connect(neo4j_connection)
    both_hold_one = threading.Barrier(2)
    attempts: list[list[int]] = [[], []]
    orders = [("a", "b"), ("b", "a")]
    try:
        assert graph.retries == Retries(0, 0)
        calls = run_all(lambda i: graph.store.transact(
            crossing(tenant, *orders[i], both_hold_one, attempts[i])), 2)
        retries = graph.retries
    finally:
        graph.close()
    # Neo4j broke the deadlock by failing one transaction; the driver ran it again, and it passed.
    assert max(calls) >= 2, f"no transaction was retried: {calls}"
    assert retries == Retries(sum(1 for c in calls if c > 1), sum(c - 1 for c in calls))
    # Both transactions committed whole, one after the other: the later one set both subjects.
    locked_by = shared_graph.store.read(
        "MATCH (e:Entity {tenant_id: $tenant}) RETURN e.locked_by AS by", {"tenant": tenant})
    assert len(locked_by) == 2 and len({r["by"] for r in locked_by}) == 1 and locked_by[0]["by"] in "ab"


def test_the_async_store_counts_its_retries(neo4j_connection, shared_graph: MemoryGraph,
                                            fresh: Callable[[], str]) -> None:
    uri, auth = neo4j_connection
    tenant = fresh()
    make_subjects(shared_graph, tenant)
    both_hold_one = threading.Barrier(2)
    attempts: list[list[int]] = [[], []]
    orders = [("a", "b"), ("b", "a")]

    async def writer(i: int) -> tuple[int, Retries]:
        # Each writer on its own event loop (a thread each): the barrier inside the steps blocks.
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema(),
                                                  bootstrap=False) as graph:
            assert graph.retries == Retries(0, 0)
            calls = await graph.store.transact(crossing(tenant, *orders[i], both_hold_one, attempts[i]))
            return calls, graph.retries

    outcomes = run_all(lambda i: asyncio.run(writer(i)), 2)
    assert max(calls for calls, _ in outcomes) >= 2
    for calls, retries in outcomes:
        assert retries == (Retries(1, calls - 1) if calls > 1 else Retries(0, 0))


runner = CliRunner()


@pytest.fixture
def one_transient_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first write transaction fails once with a transient error, as a deadlock victim does;
    the driver runs it again (the store's own attempt counting is left as it is)."""
    attempts = store_module._Attempts.__init__
    failed: list[int] = []

    def with_one_failure(self: Any, work: Callable[[Any], Any]) -> None:
        def flaky(tx: Any) -> Any:
            if not failed:
                failed.append(1)
                raise TransientError("forced deadlock for the test")
            return work(tx)

        attempts(self, flaky)

    monkeypatch.setattr(store_module._Attempts, "__init__", with_one_failure)


def replay_file(tenant: str, path: Path) -> Path:
    lines = [{"tenant_id": tenant, "id": f"e{i}", "occurred_at": f"2026-05-2{i}T09:00:00Z",
              "actor": "user:mira", "content": f"I live in {city}.",
              "deltas": [{"subject": SUBJECT, "attribute": ATTRIBUTE, "value": city}]}
             for i, city in enumerate(("Porto", "Faro"))]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def test_replay_reports_retried_transactions(env, one_transient_error, shared_graph: MemoryGraph,
                                             fresh: Callable[[], str], tmp_path: Path) -> None:
    tenant = fresh()
    result = runner.invoke(app, ["replay", str(replay_file(tenant, tmp_path / "r.jsonl"))])
    assert result.exit_code == 0, result.output
    assert "2 written" in result.output
    assert "1 transaction(s) retried after transient errors" in result.output
    assert "1 extra attempt(s); all completed" in result.output
    assert [f.value for f in shared_graph.current(tenant, SUBJECT, ATTRIBUTE)] == ["Faro"]


def test_replay_json_reports_no_retries_when_there_were_none(env, shared_graph: MemoryGraph,
                                                             fresh: Callable[[], str], tmp_path: Path) -> None:
    tenant = fresh()
    result = runner.invoke(app, ["replay", str(replay_file(tenant, tmp_path / "r.jsonl")), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["retries"] == {"transactions": 0, "attempts": 0}
    plain = runner.invoke(app, ["replay", str(replay_file(tenant, tmp_path / "r.jsonl"))])
    assert plain.exit_code == 0 and "retried" not in plain.output


def test_ingest_reports_retried_transactions(env, one_transient_error, shared_graph: MemoryGraph,
                                             fresh: Callable[[], str], tmp_path: Path) -> None:
    tenant = fresh()
    path = tmp_path / "messages.jsonl"
    path.write_text(json.dumps({"speaker": "user:mira", "text": "I moved.", "occurred_at": "2026-05-20T09:00:00Z",
                                "deltas": [{"subject": SUBJECT, "attribute": ATTRIBUTE, "value": "Braga"}]}) + "\n",
                    encoding="utf-8")
    result = runner.invoke(app, ["ingest", str(path), "-t", tenant])
    assert result.exit_code == 0, result.output
    assert "1 facts written" in result.output
    assert "1 transaction(s) retried after transient errors" in result.output
    as_json = runner.invoke(app, ["ingest", str(path), "-t", tenant, "--json"])
    assert json.loads(as_json.output)["retries"] == {"transactions": 0, "attempts": 0}
    assert [f.value for f in shared_graph.current(tenant, SUBJECT, ATTRIBUTE)] == ["Braga"]

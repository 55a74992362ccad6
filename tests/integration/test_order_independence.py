"""Order independence through the real Neo4j: the believed history of a slot depends only on the set
of statements (docs/temporal-semantics.md), never on arrival order, batching or the write path.

Each example is a set of statements about one slot (a single-valued attribute, a set-valued
attribute's members, or a relation) from small alphabets, so equal instants, ties, repeated values
and backdating are common; some statements arrive twice. Every path writes them into a fresh tenant
in its own arrival order: ``graph.write`` one at a time, ``graph.write_many`` with random batch
boundaries, ``graph.import_history``, and ``sgam replay`` of a JSONL file. The believed rows read
back (``history``, ``as_of``, ``current``) must form the timeline :mod:`sgam.bench.oracle` derives from the
set; after each write, the rows believed at that transaction time must form the oracle's snapshot.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import Episode, MemoryDelta, MemoryGraph
from sgam.cli import app
from sgam.graph import Fact, Status
from sgam.graph.schema import value_key
from sgam.graph.writes import prepare
from sgam.bench.oracle import ASSERT, CORRECT, RETRACT, Slot, Statement

EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
DAYS = 4                                   # valid_from in EPOCH + 0..3 days: collisions are common
EPISODES = ("e0", "e1")
ACTOR = "user:mira"
SAID_AT = datetime(2024, 6, 1, tzinfo=timezone.utc)
SETTINGS = settings(max_examples=100, deadline=None, report_multiple_bugs=False, suppress_health_check=[HealthCheck.function_scoped_fixture])


def day(n: float) -> datetime:
    return EPOCH + timedelta(days=n)


@dataclass(frozen=True)
class Kind:
    """A slot of the default schema: a non-gated attribute, its subject and a small value alphabet."""

    attribute: str
    subject: str
    subject_type: str
    values: tuple[str, ...]
    many: bool


KINDS = {
    "one": Kind("home_city", "mira", "Person", ("Lisbon", "Rome", "Porto"), many=False),
    "set": Kind("contact", "mira", "Person", ("ana", "ben", "cy"), many=True),
    "relation": Kind("holds", "c1", "Customer", ("acc-1", "acc-2", "acc-3"), many=True),
}


@dataclass(frozen=True)
class Scenario:
    """A set of statements about one slot, and the ways it arrives."""

    kind: str
    arrival: tuple[Statement, ...]          # every statement at least once, some twice
    cuts: tuple[int, ...] = ()              # write_many batch boundaries (indices into arrival)
    probes: tuple[tuple[int, float], ...] = ((-1, 0.5),)   # (after write i, valid day) for as_of

    def describe(self) -> str:
        lines = [f"{KINDS[self.kind].attribute}, in arrival order:"]
        for s in self.arrival:
            span = (f"[{s.valid_from:%b %d %Y}, {s.valid_to:%b %d %Y})" if s.valid_to
                    else f"from {s.valid_from:%b %d %Y}")
            extra = f" replaces {s.replaces}" if s.replaces else ""
            lines.append(f"  {s.op} {s.value}{extra} {span} ({s.episode}, confidence {s.confidence})")
        return "\n".join(lines)


@st.composite
def statement(draw: Callable, kind: Kind) -> Statement:
    op = draw(st.sampled_from([ASSERT, ASSERT, ASSERT, CORRECT, RETRACT, RETRACT]))
    value = draw(st.sampled_from(kind.values))
    if op == RETRACT and not kind.many and draw(st.booleans()):
        value = None
    start = draw(st.integers(0, DAYS - 1))
    end = None
    if op != CORRECT and draw(st.integers(0, 3)) == 0:
        end = day(draw(st.integers(start + 1, DAYS)))
    replaces = None
    if op == CORRECT and kind.many:
        replaces = draw(st.sampled_from([v for v in kind.values if v != value]))
    return Statement(op, value, day(start), end, draw(st.sampled_from(EPISODES)),
                     draw(st.sampled_from([0.6, 0.9])), replaces, ACTOR)


@st.composite
def scenarios(draw: Callable) -> Scenario:
    name = draw(st.sampled_from(sorted(KINDS)))
    drawn = draw(st.lists(statement(KINDS[name]), min_size=1, max_size=8))
    # one statement per idempotency key: the first arrival of a key decides its confidence
    unique = list({s.key: s for s in reversed(drawn)}.values())
    arrival = list(draw(st.permutations(unique)))
    for again in draw(st.lists(st.sampled_from(unique), max_size=2)):
        arrival.insert(draw(st.integers(arrival.index(again) + 1, len(arrival))), again)
    cuts = draw(st.lists(st.integers(1, len(arrival) - 1), max_size=3, unique=True)) if len(arrival) > 1 else []
    probes = draw(st.lists(st.tuples(st.integers(0, len(arrival) - 1),
                                     st.sampled_from([0, 0.5, 1.5, 2, 3.5, 9])), min_size=1, max_size=3))
    return Scenario(name, tuple(arrival), tuple(sorted(cuts)), tuple(probes))


def _say(op: str, value: str, start: datetime, episode: str = "e0") -> Statement:
    return Statement(op, value, start, episode=episode, asserted_by=ACTOR)


def _issue(arrival: list[Statement]) -> Scenario:
    return Scenario("one", tuple(arrival), cuts=(2,), probes=((1, 30), (len(arrival) - 1, 60)))


# The issue: asserted in this order, the store said Lisbon today; sorted by valid_from, Rome.
LISBON_ROME = _issue([_say(ASSERT, "Lisbon", datetime(2020, 1, 1, tzinfo=timezone.utc), "e0"),
                      _say(ASSERT, "Rome", datetime(2020, 2, 11, tzinfo=timezone.utc), "e1"),
                      _say(ASSERT, "Rome", datetime(2020, 1, 3, tzinfo=timezone.utc), "e0"),
                      _say(ASSERT, "Lisbon", datetime(2020, 1, 4, tzinfo=timezone.utc), "e1")])
# A from Jan 1, A again from Mar 1, then a late B from Feb 1: A, B, A.
LATE_B = _issue([_say(ASSERT, "Lisbon", datetime(2024, 1, 1, tzinfo=timezone.utc), "e0"),
                 _say(ASSERT, "Lisbon", datetime(2024, 3, 1, tzinfo=timezone.utc), "e1"),
                 _say(ASSERT, "Rome", datetime(2024, 2, 1, tzinfo=timezone.utc), "e0")])


# -- writing ------------------------------------------------------------------------------------------


def _tenant(graph: MemoryGraph) -> str:
    tenant = f"o-{uuid.uuid4().hex[:12]}"
    graph.record_episodes([_episode(tenant, e) for e in EPISODES])
    return tenant


def _episode(tenant: str, episode: str) -> Episode:
    return Episode(tenant_id=tenant, id=episode, content=f"episode {episode}", occurred_at=SAID_AT, actor=ACTOR)


def _delta(tenant: str, kind: Kind, s: Statement) -> MemoryDelta:
    return MemoryDelta(tenant_id=tenant, subject=kind.subject, attribute=kind.attribute, value=s.value,
                       valid_from=s.valid_from, valid_to=s.valid_to, source_episode_id=s.episode, op=s.op,
                       asserted_by=s.asserted_by, confidence=s.confidence, subject_type=kind.subject_type,
                       replaces=s.replaces)


def _oracle(kind: Kind) -> Slot:
    return Slot(many=kind.many)


# -- reading back -------------------------------------------------------------------------------------


def _runs(rows: list[Fact], known_at: datetime | None = None) -> list[tuple]:
    believed = [r for r in rows if r.status is Status.CONFIRMED
                and (r.expired_at is None if known_at is None else r.believed_at(known_at))]
    return sorted(((r.valid_from, r.valid_to, r.value) for r in believed),
                  key=lambda run: (run[0], value_key(run[2])))


def _show(runs: list[tuple]) -> str:
    return " ".join(f"{value}[{start:%b %d %Y}, {f'{end:%b %d %Y}' if end else 'open'})"
                    for start, end, value in runs) or "nothing"


def _held(facts: list[Fact], kind: Kind):
    values = [f.value for f in facts]
    if kind.many:
        return frozenset(values)
    assert len(values) <= 1, values
    return values[0] if values else None


def _check(graph: MemoryGraph, tenant: str, scenario: Scenario, oracle: Slot,
           checkpoints: list[datetime]) -> None:
    """The rows believed now and at each checkpoint, as_of at the probes, and current."""
    kind = KINDS[scenario.kind]
    story = scenario.describe()
    rows = graph.history(tenant, kind.subject, kind.attribute)
    _check_pointers(rows, story)
    got, expected = _runs(rows), oracle.runs()
    assert got == expected, f"{story}\nstore:  {_show(got)}\noracle: {_show(expected)}"
    for k, known in enumerate(checkpoints):
        got, expected = _runs(rows, known), oracle.runs(known_at=known)
        assert got == expected, f"{story}\nbelieved after write {k}\nstore:  {_show(got)}\noracle: {_show(expected)}"
    for k, valid in scenario.probes:
        known = checkpoints[min(k, len(checkpoints) - 1)] if k >= 0 else None
        answer = graph.as_of(tenant, kind.subject, kind.attribute, valid_at=day(valid), known_at=known)
        assert _held(answer, kind) == oracle.value_at(day(valid), known), f"{story}\nas_of {valid} known {known}"
    now = graph.current(tenant, kind.subject, kind.attribute)
    assert _held(now, kind) == oracle.value_at(graph.clock()), story


def _check_pointers(rows: list[Fact], story: str) -> None:
    """Every version a stored row names (the one it revises, the one it supersedes) is stored: a
    slot's rows point within the slot."""
    stored = {r.memory_id for r in rows}
    for r in rows:
        for named in (r.revises_memory_id, r.supersedes_memory_id):
            assert named is None or named in stored, f"{story}\n{r.memory_id} names {named}, which is not stored"


def _run(graph: MemoryGraph, scenario: Scenario, write: Callable[[str, Kind, Slot], list[datetime]]) -> None:
    kind = KINDS[scenario.kind]
    tenant = _tenant(graph)
    try:
        oracle = _oracle(kind)
        checkpoints = write(tenant, kind, oracle)
        _check(graph, tenant, scenario, oracle, checkpoints)
    finally:
        graph.delete_tenant(tenant)


# -- the four paths -----------------------------------------------------------------------------------


@SETTINGS
@given(scenario=scenarios())
@example(scenario=LISBON_ROME)
@example(scenario=LATE_B)
def test_one_write_at_a_time(graph: MemoryGraph, scenario: Scenario) -> None:
    def write(tenant: str, kind: Kind, oracle: Slot) -> list[datetime]:
        checkpoints = []
        for s in scenario.arrival:
            result = graph.write(_delta(tenant, kind, s))
            assert result.ok, f"{scenario.describe()}\n{result.message}"
            checkpoints.append(graph.clock())
            oracle.apply(s, checkpoints[-1])
        return checkpoints

    _run(graph, scenario, write)


@SETTINGS
@given(scenario=scenarios())
@example(scenario=LISBON_ROME)
@example(scenario=LATE_B)
def test_write_many_in_random_batches(graph: MemoryGraph, scenario: Scenario) -> None:
    def write(tenant: str, kind: Kind, oracle: Slot) -> list[datetime]:
        checkpoints = []
        bounds = [0, *scenario.cuts, len(scenario.arrival)]
        named: set[str] = set()
        for begin, end in zip(bounds, bounds[1:]):
            batch = scenario.arrival[begin:end]
            result = graph.write_many([_delta(tenant, kind, s) for s in batch])
            assert not result.rejected, f"{scenario.describe()}\n{result.rejected[0].message}"
            named.update(m for r in result.results for m in r.memory_ids)
            checkpoints.append(graph.clock())
            for s in batch:
                oracle.apply(s, checkpoints[-1])
        # every row a result names was written (none stands for a row left out of its batch)
        stored = {r.memory_id for r in graph.history(tenant, kind.subject, kind.attribute)}
        assert named <= stored, f"{scenario.describe()}\nnamed but not stored: {sorted(named - stored)}"
        return checkpoints

    _run(graph, scenario, write)


@SETTINGS
@given(scenario=scenarios())
@example(scenario=LISBON_ROME)
@example(scenario=LATE_B)
def test_import_history_into_an_empty_tenant(graph: MemoryGraph, scenario: Scenario) -> None:
    def write(tenant: str, kind: Kind, oracle: Slot) -> list[datetime]:
        before = graph.clock()
        result = graph.import_history([_delta(tenant, kind, s) for s in scenario.arrival])
        assert not result.rejected, f"{scenario.describe()}\n{result.rejected[0].message}"
        after = graph.clock()
        for s in scenario.arrival:
            oracle.apply(s, after)
        return [before, after]

    _run(graph, scenario, write)


@settings(SETTINGS, max_examples=25)
@given(scenario=scenarios(), data=st.data())
@example(scenario=LATE_B, data=None)
def test_import_history_with_a_writer_between_its_chunks(graph: MemoryGraph, scenario: Scenario, data) -> None:
    """The import plans each chunk ahead, as if its subjects held nothing; here another writer
    gives the slot's subject facts after that plan was made (between the import's first chunk, a
    filler subject, and the slot's chunk). Under the chunk's locks the import reads them and
    plans again: the slot holds what the set of all statements says."""
    kind = KINDS[scenario.kind]
    arrival = scenario.arrival
    split = data.draw(st.integers(1, max(1, len(arrival) - 1)), label="written first") if data else 1
    first, imported = arrival[:split], arrival[split:]

    def write(tenant: str, kind: Kind, oracle: Slot) -> list[datetime]:
        filler = MemoryDelta(tenant_id=tenant, subject="zed", subject_type="Person", attribute="home_city",
                             value="Oslo", valid_from=day(0), source_episode_id=EPISODES[0], asserted_by=ACTOR)
        between: list[datetime] = []

        def after_chunk(done: int, total: int) -> None:
            if not between:  # after the filler's chunk: the slot's chunk is planned (or being planned)
                result = graph.write_many([_delta(tenant, kind, s) for s in first])
                assert not result.rejected, f"{scenario.describe()}\n{result.rejected[0].message}"
                between.append(graph.clock())

        result = graph.import_history([filler, *(_delta(tenant, kind, s) for s in imported)], chunk_size=1,
                                      on_progress=after_chunk)
        assert not result.rejected, f"{scenario.describe()}\n{result.rejected[0].message}"
        assert between, "the writer never ran"
        after = graph.clock()
        for s in first:
            oracle.apply(s, between[0])
        for s in imported:
            oracle.apply(s, after)
        return [between[0], after]

    _run(graph, scenario, write)


def _jsonl(tenant: str, kind: Kind, arrival: tuple[Statement, ...]) -> str:
    lines = []
    for s in arrival:
        delta = {"subject": kind.subject, "attribute": kind.attribute, "op": s.op,
                 "valid_from": s.valid_from.isoformat(), "confidence": s.confidence,
                 "subject_type": kind.subject_type}
        delta |= {k: v for k, v in (("value", s.value), ("replaces", s.replaces),
                                    ("valid_to", s.valid_to and s.valid_to.isoformat())) if v is not None}
        lines.append(json.dumps({"tenant_id": tenant, "id": s.episode, "occurred_at": SAID_AT.isoformat(),
                                 "actor": ACTOR, "content": f"episode {s.episode}", "deltas": [delta]}))
    return "\n".join(lines) + "\n"


@SETTINGS
@given(scenario=scenarios())
@example(scenario=LISBON_ROME)
@example(scenario=LATE_B)
def test_sgam_replay_of_a_jsonl_file(env, graph: MemoryGraph, tmp_path: Path, scenario: Scenario) -> None:
    def write(tenant: str, kind: Kind, oracle: Slot) -> list[datetime]:
        path = tmp_path / f"{tenant}.jsonl"
        path.write_text(_jsonl(tenant, kind, scenario.arrival), encoding="utf-8")
        result = CliRunner().invoke(app, ["replay", str(path), "--json"])
        assert result.exit_code == 0, f"{scenario.describe()}\n{result.output}"
        assert json.loads(result.stdout)["rejected"] == 0, result.stdout
        after = graph.clock()
        for s in scenario.arrival:
            oracle.apply(s, after)
        return [after]

    _run(graph, scenario, write)


# -- the import keeps what write_many keeps ------------------------------------------------------------

LEDGER = "MATCH (l:Ledger {tenant_id: $tenant}) RETURN l.attribute AS attribute, l.subject AS subject, l.points AS points"


def _kept(graph: MemoryGraph, tenant: str, kind: Kind, deltas: list[MemoryDelta]) -> tuple[list[tuple], list[tuple]]:
    """Every stored row (retired ones too) with its provenance, and the ledgers, each statement's
    idempotency key (which hashes the tenant in) replaced by its position in ``deltas``."""
    positions = {p.key: f"#{p.index}" for p in prepare(deltas, graph.schema)[0]}

    def plain(text: str) -> str:
        for key, position in positions.items():
            text = text.replace(key, position)
        return text

    rows = sorted((r.valid_from, str(r.valid_to), value_key(r.value), r.status.value, r.op.value, r.source_episode_id,
                   r.support_count, tuple(sorted(r.support_episodes)), tuple(sorted(map(plain, r.delta_keys))),
                   r.expired_at is None, r.expired_by_episode_id or "", plain(r.expired_by_delta_key or ""))
                  for r in graph.history(tenant, kind.subject, kind.attribute))
    ledgers = sorted((r["subject"], r["attribute"], tuple(sorted(plain(json.dumps(json.loads(p), sort_keys=True))
                                                                  for p in r["points"])))
                     for r in graph.store.read(LEDGER, {"tenant": tenant}))
    return rows, ledgers


@settings(SETTINGS, max_examples=40)
@given(scenario=scenarios())
@example(scenario=LATE_B)
def test_import_history_stores_what_one_write_many_batch_stores(graph: MemoryGraph, scenario: Scenario) -> None:
    """Rows (retired ones too), provenance and ledgers: the import writes each chunk as one
    write_many batch would, so the same statements in one batch store the same."""
    kind = KINDS[scenario.kind]
    batch, imported = _tenant(graph), _tenant(graph)
    try:
        into_batch = [_delta(batch, kind, s) for s in scenario.arrival]
        into_import = [_delta(imported, kind, s) for s in scenario.arrival]
        written = graph.write_many(into_batch)
        assert not written.rejected, f"{scenario.describe()}\n{written.rejected[0].message}"
        result = graph.import_history(into_import)
        assert [r.outcome for r in result.results] == [r.outcome for r in written.results], scenario.describe()
        assert _kept(graph, imported, kind, into_import) == _kept(graph, batch, kind, into_batch), scenario.describe()
    finally:
        graph.delete_tenant(batch)
        graph.delete_tenant(imported)

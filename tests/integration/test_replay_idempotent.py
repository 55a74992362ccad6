"""`sgam replay` of the same file a second time is an exact no-op, refusals included.

The first run records every refused delta (a quarantine entry keyed by the delta's idempotency
key); the second reports each line unchanged, refused as before (with the stored reason) or
invalid as before, and the whole tenant reads back identical: every fact row with every property
(memory ids and recorded_at included), episodes, entities, values, mentions and quarantine.
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import MemoryGraph
from sgam.cli import app
from sgam.ingest.replay import INVALID, REFUSED_AS_BEFORE, UNCHANGED, replay

runner = CliRunner()

# Nodes of a tenant, by label: what a replay may touch. Ledger is the write path's per-slot
# statement log (docs/temporal-semantics.md); a label with no nodes reads as empty.
LABELS = ("Entity", "Value", "Episode", "Quarantine", "Tombstone", "PurgeRun", "Ledger")


def _line(tenant: str, eid: str, day: int, actor: str, content: str, *deltas: dict[str, Any],
          **extra: Any) -> str:
    return json.dumps({"tenant_id": tenant, "id": eid, "occurred_at": f"2026-01-{day:02d}T09:00:00Z",
                       "actor": actor, "content": content, "deltas": list(deltas), **extra})


def scenario(tenant: str) -> list[str]:
    """The file of the test, one entry a line (line numbers in comments)."""
    return [
        # 1: good
        _line(tenant, "e1", 1, "user:mira", "I like concise answers.",
              {"subject": "mira", "attribute": "response_style", "value": "concise"}),
        # 2: confirm before any candidate exists: NotFound (line 4 opens the candidate)
        _line(tenant, "e2", 2, "user:mira", "Yes, that is my birthday.",
              {"subject": "mira", "attribute": "birthday", "op": "confirm"}),
        # 3: cites episode e8, which line 8 records (a chunk records its episodes before its deltas)
        _line(tenant, "e3", 3, "agent:crm", "Kim prefers terse replies.",
              {"subject": "kim", "attribute": "response_style", "value": "terse",
               "source_episode_id": "e8"}),
        # 4: opens the birthday candidate (sensitive: waits for mira's confirmation)
        _line(tenant, "e4", 4, "agent:hr", "HR file: Mira was born on 1990-04-01.",
              {"subject": "mira", "attribute": "birthday", "value": "1990-04-01"}),
        # 5: the same line as 1
        _line(tenant, "e1", 1, "user:mira", "I like concise answers.",
              {"subject": "mira", "attribute": "response_style", "value": "concise"}),
        # 6: the same line as 2, now that the candidate exists: it follows line 2's verdict
        _line(tenant, "e2", 2, "user:mira", "Yes, that is my birthday.",
              {"subject": "mira", "attribute": "birthday", "op": "confirm"}),
        # 7: another good one, a change
        _line(tenant, "e7", 7, "user:mira", "Actually, detailed answers please.",
              {"subject": "mira", "attribute": "response_style", "value": "detailed"}),
        # 8: type clash: vip is for a Customer, and line 3 made kim a Person
        _line(tenant, "e8", 8, "agent:crm", "Kim is a VIP customer.",
              {"subject": "kim", "attribute": "vip", "value": True}),
        # 9: good
        _line(tenant, "e9", 9, "agent:crm", "Kim lives in Oslo.",
              {"subject": "kim", "attribute": "home_city", "value": "Oslo"}),
        # 10: schema: unknown attribute (about a subject that exists nowhere else)
        _line(tenant, "e10", 10, "agent:crm", "Ghost wears size 42.",
              {"subject": "ghost", "attribute": "shoe_size", "value": 42}),
        # 11: schema: a value that is not a date
        _line(tenant, "e11", 11, "user:mira", "My passport deadline is soon.",
              {"subject": "mira", "attribute": "passport_deadline", "value": "soon"}),
        # 12: schema: a session-retention attribute on two-type subjects without subject_type
        _line(tenant, "e12", 12, "agent:crm", "Called Kim.",
              {"subject": "kim", "attribute": "last_contacted_at", "value": "2026-01-12T09:00:00Z"}),
        # 13: not JSON
        "{not json",
        # 14: a naive time
        json.dumps({"tenant_id": tenant, "id": "e14", "occurred_at": "2026-01-14T09:00:00",
                    "content": "naive", "deltas": []}),
        # 15: episode id e7 again with other content
        _line(tenant, "e7", 15, "user:mira", "Something else entirely.",
              {"subject": "mira", "attribute": "home_city", "value": "Porto"}),
    ]


def snapshot(graph: MemoryGraph, tenant: str, *, entity_updated_at: bool = False) -> str:
    """Everything stored for ``tenant`` as canonical JSON: each node with its labels and
    properties, each relationship with its type, ends and properties (element ids left out)."""
    nodes: list[Any] = []
    rels: list[Any] = []
    for label in LABELS:
        nodes += graph.store.read(
            f"MATCH (n:{label} {{tenant_id: $t}}) RETURN labels(n) AS labels, properties(n) AS props",
            {"t": tenant})
        rels += graph.store.read(
            f"MATCH (a:{label} {{tenant_id: $t}})-[r]->(b) RETURN type(r) AS type, "
            "[labels(a), coalesce(a.id, a.key, a.subject)] AS start, "
            "[labels(b), coalesce(b.id, b.key, b.subject)] AS end, properties(r) AS props",
            {"t": tenant})
    if not entity_updated_at:
        for node in nodes:
            if "Entity" in node["labels"]:
                node["props"].pop("updated_at", None)
    rows = sorted(json.dumps(x, sort_keys=True, default=str) for x in nodes + rels)
    return "\n".join(rows)


def quarantine(graph: MemoryGraph, tenant: str) -> dict[int, dict[str, Any]]:
    rows = graph.store.read("MATCH (q:Quarantine {tenant_id: $t}) RETURN properties(q) AS p", {"t": tenant})
    return {r["p"]["line"]: r["p"] for r in rows}


def run_cli(path: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["replay", str(path), "--json"])
    assert result.exit_code == 2, result.output
    return json.loads(result.stdout)


@pytest.fixture
def replayed(env, graph: MemoryGraph, tenant: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(scenario(tenant)) + "\n", encoding="utf-8")
    return path, run_cli(path)


def test_the_first_run_applies_good_lines_and_records_each_refusal(
        replayed: tuple[Path, dict[str, Any]], graph: MemoryGraph, tenant: str) -> None:
    _, first = replayed
    errors = {e["line"]: e for e in first["errors"]}
    assert {n: e["status"] for n, e in errors.items()} == {
        2: "refused", 6: REFUSED_AS_BEFORE, 8: "refused", 10: "refused", 11: "refused",
        12: "refused", 13: INVALID, 14: INVALID, 15: INVALID}
    assert errors[6]["first_line"] == 2 and "no candidate" in errors[6]["error"]
    assert (first["refused"], first["refused_as_before"], first["invalid"]) == (5, 1, 3)
    # Line 6 did not promote the candidate line 4 opened, and line 5 wrote nothing new.
    assert [f.value for f in graph.current(tenant, "mira", "response_style")] == ["detailed"]
    assert graph.current(tenant, "mira", "birthday") == []
    assert [str(f.value) for f in graph.candidates(tenant, "mira", "birthday")] == ["1990-04-01"]
    assert [f.value for f in graph.current(tenant, "kim", "response_style")] == ["terse"]
    recorded = quarantine(graph, tenant)
    assert set(recorded) == {2, 8, 10, 11, 12}
    assert {n: r["error"] for n, r in recorded.items()} == {
        2: "NotFound", 8: "SchemaViolation", 10: "SchemaViolation", 11: "InvalidDelta",
        12: "SchemaViolation"}
    assert all(r["extractor"] == "replay" and r["status"] == "open" and r["delta_key"] for r in recorded.values())
    assert recorded[12]["retention_policy"] == "session"
    listed = runner.invoke(app, ["quarantine", "list", "-t", tenant, "--json"])
    assert listed.exit_code == 0 and sorted(r["line"] for r in json.loads(listed.stdout)) == [2, 8, 10, 11, 12]


def test_a_second_replay_changes_nothing_and_says_so(
        replayed: tuple[Path, dict[str, Any]], graph: MemoryGraph, tenant: str) -> None:
    path, first = replayed
    before = snapshot(graph, tenant)
    second = run_cli(path)
    assert snapshot(graph, tenant) == before
    assert second["written"] == 0 and second["refused"] == 0
    assert set(second["line_status"]) <= {UNCHANGED, REFUSED_AS_BEFORE, INVALID}
    assert second["line_status"] == {UNCHANGED: 6, REFUSED_AS_BEFORE: 6, INVALID: 3}
    errors = {e["line"]: e for e in second["errors"]}
    assert {n for n, e in errors.items() if e["status"] == INVALID} == {13, 14, 15}
    assert {n for n, e in errors.items() if e["status"] == REFUSED_AS_BEFORE} == {2, 6, 8, 10, 11, 12}
    assert errors[6]["first_line"] == 2
    first_errors = {e["line"]: e["error"] for e in first["errors"]}
    assert all(errors[n]["error"] == first_errors[n] for n in errors)
    # A third run is the second again.
    assert run_cli(path) == second
    assert snapshot(graph, tenant) == before


def test_a_second_replay_leaves_entity_timestamps_alone(
        replayed: tuple[Path, dict[str, Any]], graph: MemoryGraph, tenant: str) -> None:
    path, _ = replayed
    before = snapshot(graph, tenant, entity_updated_at=True)
    run_cli(path)
    assert snapshot(graph, tenant, entity_updated_at=True) == before


def test_a_refusal_stands_with_its_stored_reason_when_the_state_now_differs(graph: MemoryGraph,
                                                                             tenant: str) -> None:
    """Line by line (one line a chunk), line 3 comes before line 8 records the episode it cites:
    refused. Replayed whole, e8 exists and kim is a Customer since line 8: a fresh look would
    now refuse line 3 for a type clash, or accept it; it is refused as before, for the stored reason."""
    first = replay(graph.store, scenario(tenant), chunk_lines=1)
    assert first.line_status[3] == "refused" and first.line_status[8] == "written"
    before = snapshot(graph, tenant)
    second = replay(graph.store, scenario(tenant))
    assert snapshot(graph, tenant) == before
    [error] = [e for e in second.errors if e.number == 3]
    assert error.status == REFUSED_AS_BEFORE and "not a recorded episode" in error.message
    assert second.written == 0 and second.refused == 0
    assert [f.value for f in graph.current(tenant, "kim", "vip")] == [True]


def test_an_applied_refusal_is_unchanged_afterwards(graph: MemoryGraph, tenant: str) -> None:
    """`sgam quarantine replay` may write a recorded refusal (here, once the candidate exists);
    it resolves the entry, and a replay then finds the statement applied."""
    lines = scenario(tenant)[:4]
    replay(graph.store, lines)
    resolved = graph.replay_quarantine(tenant, [])
    [entry] = [e for e in graph.quarantine(tenant, status="resolved")]
    assert entry.line == 2 and resolved.resolved == [entry.id]
    assert [str(f.value) for f in graph.current(tenant, "mira", "birthday")] == ["1990-04-01"]
    before = snapshot(graph, tenant)
    again = replay(graph.store, lines)
    assert again.line_status[2] == UNCHANGED and again.written == 0
    assert snapshot(graph, tenant) == before


def test_an_atomic_replay_fails_on_a_recorded_refusal_and_records_nothing(
        env, graph: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(scenario(tenant)[:2]) + "\n", encoding="utf-8")
    atomic = runner.invoke(app, ["replay", str(path), "--atomic"])
    assert atomic.exit_code == 1 and "no candidate" in atomic.output
    assert quarantine(graph, tenant) == {}
    run_cli(path)
    again = runner.invoke(app, ["replay", str(path), "--atomic"])
    assert again.exit_code == 1 and "refused as before (at line 2)" in again.output


def test_a_retract_that_did_nothing_does_nothing_when_replayed(graph: MemoryGraph, tenant: str) -> None:
    """Found by the property test below: the retract finds nothing to retract, the assert after it
    opens a candidate; replayed, the retract would withdraw that candidate."""
    lines = [_line(tenant, "e1", 1, "user:ann", "Not born on April 1st, and born on April 1st.",
                   {"subject": "ann", "attribute": "birthday", "op": "retract", "value": "1990-04-01"},
                   {"subject": "ann", "attribute": "birthday", "value": "1990-04-01"})]
    replay(graph.store, lines)
    before = snapshot(graph, tenant)
    again = replay(graph.store, lines)
    assert snapshot(graph, tenant) == before and again.written == 0


def test_a_relation_to_itself_cannot_give_two_types(graph: MemoryGraph, tenant: str) -> None:
    """Found by the property test below: ``holds`` needs a Customer subject and an Account target;
    acc-1 holding acc-1 was accepted (acc-1 became a Customer), and its replay is refused."""
    lines = [_line(tenant, "e1", 1, "agent:crm", "acc-1 holds itself.",
                   {"subject": "acc-1", "attribute": "holds", "value": "acc-1"})]
    first = replay(graph.store, lines)
    before = snapshot(graph, tenant)
    again = replay(graph.store, lines)
    assert snapshot(graph, tenant) == before and again.refused == 0
    assert first.refused == 1  # one entity cannot be both


def test_forget_removes_refusal_records_and_a_replay_after_it_keeps_them_out(
        replayed: tuple[Path, dict[str, Any]], graph: MemoryGraph, tenant: str) -> None:
    path, _ = replayed
    assert graph.residue(tenant, "ghost") != []
    graph.forget_subject(tenant, "ghost")  # known only from its refused line 10
    graph.forget_subject(tenant, "mira")
    assert graph.residue(tenant, "ghost") == [] and graph.residue(tenant, "mira") == []
    assert set(quarantine(graph, tenant)) == {8, 12}  # kim's
    # Replaying the old file: mira's deltas are refused (her episodes occurred before the
    # forget), and their records keep nothing of her.
    third = run_cli(path)
    assert {e["line"] for e in third["errors"] if e["status"] == "refused"} == {1, 2, 4, 7, 10, 11}
    assert graph.residue(tenant, "mira") == [] and graph.residue(tenant, "ghost") == []
    redacted = [r for r in quarantine(graph, tenant).values() if r["candidate"] == "null"]
    assert {r["line"] for r in redacted} == {1, 2, 4, 7, 10, 11}
    assert all(r["subjects"] == [] and "mira" not in r["reason"] for r in redacted)
    before = snapshot(graph, tenant)
    fourth = run_cli(path)
    assert fourth["written"] == 0 and fourth["refused"] == 0
    assert snapshot(graph, tenant) == before


def test_purge_removes_refusal_records_of_an_expired_class(
        replayed: tuple[Path, dict[str, Any]], graph: MemoryGraph, tenant: str) -> None:
    report = graph.purge(tenant, now=graph.clock() + timedelta(days=40))
    assert report.refusals == 1
    assert set(quarantine(graph, tenant)) == {2, 8, 10, 11}
    runs = graph.store.read("MATCH (r:PurgeRun {tenant_id: $t}) RETURN r.policy AS policy, "
                            "r.refusals AS refusals", {"t": tenant})
    assert {"policy": "session", "refusals": 1} in runs


# -- any file, twice -----------------------------------------------------------------------------

SUBJECTS = ("ann", "bob", "acc-1")
ATTRIBUTES = {  # attribute -> values (None: a retract or confirm without one)
    "response_style": ["concise", "detailed", None],
    "contact": ["bob", "cyd"],
    "export_format": ["csv", "pdf", None],
    "birthday": ["1990-04-01", "1991-05-02", None],
    "vip": [True, False],
    "holds": ["acc-1", "acc-2"],
    "shoe_size": [42],
}
ACTORS = ("user:ann", "user:bob", "agent:hr")
# A retract with no visible effect is still kept as a statement (docs/temporal-semantics.md), so
# its replay is recognised (test_a_retract_that_did_nothing_does_nothing_when_replayed).
OPS = ("assert", "assert", "correct", "retract", "confirm")


@st.composite
def delta(draw: st.DrawFn, episodes: int) -> dict[str, Any]:
    attribute = draw(st.sampled_from(sorted(ATTRIBUTES)))
    subject = draw(st.sampled_from(SUBJECTS))
    out: dict[str, Any] = {"subject": subject, "attribute": attribute, "op": draw(st.sampled_from(OPS))}
    # No relation from an entity to itself (test_a_relation_to_itself_cannot_give_two_types).
    value = draw(st.sampled_from([v for v in ATTRIBUTES[attribute] if v != subject]))
    if value is not None:
        out["value"] = value
    if draw(st.booleans()):
        out["valid_from"] = f"2026-02-{draw(st.integers(1, 6)):02d}T00:00:00Z"
    if draw(st.integers(0, 5)) == 0:
        out["source_episode_id"] = f"e{draw(st.integers(0, episodes))}"
    return out


@st.composite
def files(draw: st.DrawFn) -> list[tuple[int, str, int, list[dict[str, Any]]]]:
    """Lines as (episode number, actor, day, deltas). An episode number stands for one episode
    (its actor and day follow from it), so lines repeating it repeat the episode; one line in ten
    gives it another day, hence other content: an id clash."""
    n = draw(st.integers(1, 8))
    lines = []
    for _ in range(n):
        number = draw(st.integers(0, n))
        day = draw(st.integers(1, 6)) if draw(st.integers(0, 9)) == 0 else number % 6 + 1
        lines.append((number, ACTORS[number % len(ACTORS)], day,
                      draw(st.lists(delta(n), min_size=0, max_size=3))))
    return lines


def render(tenant: str, lines: list[tuple[int, str, int, list[dict[str, Any]]]]) -> list[str]:
    return [json.dumps({"tenant_id": tenant, "id": f"e{number}", "actor": actor,
                        "occurred_at": f"2026-02-{day:02d}T00:00:00Z",
                        "content": f"episode {number} on day {day}", "deltas": deltas})
            for number, actor, day, deltas in lines]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=files(), chunks=st.tuples(st.integers(1, 4), st.integers(1, 4)))
# A retract applied while its target did not exist yet; replayed once the target exists, the
# repeated statement must not gain the MENTIONS link it never had.
@example(lines=[(1, "user:bob", 2, [{"subject": "acc-1", "attribute": "holds", "op": "retract", "value": "acc-2"}]),
                (0, "user:ann", 1, []),
                (0, "user:ann", 1, [{"subject": "acc-1", "attribute": "holds", "op": "assert", "value": "acc-2",
                                     "source_episode_id": "e0"}])],
         chunks=(1, 1))
# A retract of a value not held names its target without creating it; a later line gives that id
# another type. Repeated, the retract is already applied: unchanged, not refused for the new type.
@example(lines=[(0, "user:ann", 1, [{"subject": "ann", "attribute": "holds", "op": "retract", "value": "acc-1",
                                     "source_episode_id": "e0"}]),
                (0, "user:ann", 1, [{"subject": "acc-1", "attribute": "holds", "op": "assert", "value": "acc-2"}])],
         chunks=(1, 1))
def test_replaying_any_file_twice_leaves_the_state_identical(
        graph: MemoryGraph, lines: list[tuple[int, str, int, list[dict[str, Any]]]],
        chunks: tuple[int, int]) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    text = render(tenant, lines)
    try:
        first = replay(graph.store, text, chunk_lines=chunks[0])
        before = snapshot(graph, tenant)
        second = replay(graph.store, text, chunk_lines=chunks[1])
        assert snapshot(graph, tenant) == before
        assert set(second.line_status.values()) <= {UNCHANGED, REFUSED_AS_BEFORE, INVALID}
        assert {n for n, s in second.line_status.items() if s == INVALID} == \
            {n for n, s in first.line_status.items() if s == INVALID}
        assert second.written == 0 and second.refused == 0
        for status in sorted(set(first.line_status.values())):
            event(f"first run: a line {status}")
        for status in sorted(set(second.line_status.values())):
            event(f"second run: a line {status}")
    finally:
        graph.delete_tenant(tenant)

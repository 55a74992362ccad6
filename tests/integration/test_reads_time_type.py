"""Reads that understand time and type, against the real Neo4j: memory_type filters on every read
(API, named queries, CLI, context), the time a question names in context(), and each context
line's age. Expected answers come from the seed below and the default schema's memory types."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, MemoryGraph
from sgam.cli import app
from sgam.graph.errors import SchemaViolation, SgamError

ASKED = datetime(2026, 12, 1, 15, 0, tzinfo=timezone.utc)
# default.yaml: response_style is a preference, passport_deadline task_state, home_city profile
KNOWN_TYPES = "compliance_note, preference, profile, relation, task_state"


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.fixture
def seeded(graph: MemoryGraph, tenant: str) -> str:
    """Mira lived in Lisbon from 2024-01-01 and in Porto from 2025-03-01; likes concise answers
    (from 2024-01-01); her passport deadline is 2026-06-30 (stated 2025-03-01)."""
    graph.record_episode(tenant_id=tenant, id="e1", content="I live in Lisbon and like concise answers.",
                         occurred_at=utc(2024, 1, 1), actor="user:mira")
    graph.record_episode(tenant_id=tenant, id="e2", content="I moved to Porto; passport deadline 2026-06-30.",
                         occurred_at=utc(2025, 3, 1), actor="user:mira")
    common = dict(tenant_id=tenant, subject="mira", asserted_by="user:mira")
    graph.write(**common, subject_name="Mira", attribute="home_city", value="Lisbon",
                valid_from=utc(2024, 1, 1), source_episode_id="e1")
    graph.write(**common, attribute="response_style", value="concise", valid_from=utc(2024, 1, 1),
                source_episode_id="e1")
    graph.write(**common, attribute="home_city", value="Porto", valid_from=utc(2025, 3, 1),
                source_episode_id="e2")
    graph.write(**common, attribute="passport_deadline", value="2026-06-30", valid_from=utc(2025, 3, 1),
                source_episode_id="e2")
    return tenant


def attrs(facts: list) -> list[tuple[str, str]]:
    return sorted((f.attribute, str(f.value)) for f in facts)


# -- memory_type filters ---------------------------------------------------------------------

def test_current_as_of_and_history_filter_by_memory_type(graph: MemoryGraph, seeded: str) -> None:
    t = seeded
    assert attrs(graph.current(t, "mira", memory_types="preference")) == [("response_style", "concise")]
    assert attrs(graph.current(t, "mira", memory_types=["preference", "task_state"])) == [
        ("passport_deadline", "2026-06-30"), ("response_style", "concise")]
    assert attrs(graph.current(t, "mira")) == [
        ("home_city", "Porto"), ("passport_deadline", "2026-06-30"), ("response_style", "concise")]
    assert attrs(graph.as_of(t, "mira", valid_at="2024-06-01", memory_types="profile")) == [("home_city", "Lisbon")]
    assert attrs(graph.history(t, "mira", memory_types=("profile",), current_only=True)) == [
        ("home_city", "Lisbon"), ("home_city", "Porto")]
    assert all(f.memory_type == "task_state" for f in graph.history(t, "mira", memory_types="task_state"))
    # the named queries take the list too (comma-separated text as the CLI passes it)
    rows = graph.query("current", tenant=t, subject="mira", memory_types="task_state,preference")
    assert sorted(r["attribute"] for r in rows) == ["passport_deadline", "response_style"]
    rows = graph.query("changes", tenant=t, since="2000-01-01", until="2100-01-01", memory_types=["preference"])
    assert {r["attribute"] for r in rows} == {"response_style"}


def test_async_reads_filter_by_memory_type(neo4j_connection: tuple[str, tuple[str, str]], seeded: str) -> None:
    async def scenario() -> list:
        async with await AsyncMemoryGraph.connect(*neo4j_connection, bootstrap=False) as agraph:
            return await agraph.current(seeded, "mira", memory_types="preference")

    assert attrs(asyncio.run(scenario())) == [("response_style", "concise")]


@pytest.mark.parametrize("bad", ["preferences", ["profile", "tasks"], [], "", 3])
def test_an_unknown_memory_type_is_an_error_listing_the_known(graph: MemoryGraph, seeded: str, bad: object) -> None:
    with pytest.raises(SchemaViolation) as caught:
        graph.current(seeded, "mira", memory_types=bad)  # type: ignore[arg-type]
    assert KNOWN_TYPES in str(caught.value)
    if bad in ("preferences", ["profile", "tasks"]):
        assert ("'preferences'" if bad == "preferences" else "'tasks'") in str(caught.value)
    with pytest.raises(SchemaViolation):
        graph.query("as-of", tenant=seeded, subject="mira", valid_at="2025-01-01", memory_types="nope")
    with pytest.raises(SchemaViolation):
        graph.context(seeded, "What is Mira's home city?", subjects=["mira"], memory_types="nope")


def test_context_keeps_only_the_asked_memory_types(graph: MemoryGraph, seeded: str) -> None:
    ctx = graph.context(seeded, "What should I know about Mira?", subjects=["mira"], memory_types="task_state",
                        expand=False)
    assert [(f.attribute, str(f.value)) for f in ctx.facts] == [("passport_deadline", "2026-06-30")]
    assert ctx.memory_types == ("task_state",) and "memory types task_state" in ctx.text
    everything = graph.context(seeded, "What should I know about Mira?", subjects=["mira"], expand=False)
    assert len(everything.facts) == 3 and everything.memory_types is None


@pytest.fixture
def cli(env: None) -> Iterator[CliRunner]:
    yield CliRunner()


def test_cli_memory_type_on_query_and_context(cli: CliRunner, seeded: str) -> None:
    out = cli.invoke(app, ["query", "current", "-t", seeded, "-s", "mira", "--memory-type", "preference",
                           "--memory-type", "task_state", "--json"])
    assert out.exit_code == 0, out.output
    assert sorted(r["attribute"] for r in json.loads(out.stdout)) == ["passport_deadline", "response_style"]
    bad = cli.invoke(app, ["query", "current", "-t", seeded, "-s", "mira", "--memory-type", "nope"])
    assert bad.exit_code == 1 and "unknown memory type 'nope'" in bad.output and KNOWN_TYPES in bad.output
    # a query that returns no typed facts does not take the option: an error, not ignored
    traverse = cli.invoke(app, ["query", "traverse", "-t", seeded, "-s", "mira", "--relations", "holds",
                                "--memory-type", "relation"])
    assert traverse.exit_code == 1 and "memory_types" in traverse.output
    ctx = cli.invoke(app, ["context", "-t", seeded, "-s", "mira", "--no-expand", "--json",
                           "--memory-type", "profile", "--asked-at", "2026-12-01T15:00:00Z",
                           "What was Mira's home city in 2024?"])
    assert ctx.exit_code == 0, ctx.output
    data = json.loads(ctx.stdout)
    assert [(f["attribute"], f["value"]) for f in data["facts"]] == [("home_city", "Lisbon")]
    assert data["valid_window"] == ["2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"]
    assert data["time_phrase"] == "in 2024"


# -- the time a question names ---------------------------------------------------------------

@pytest.mark.parametrize(("question", "expected", "window"), [
    ("What was Mira's home city in 2024?", ["Lisbon"], (utc(2024, 1, 1), utc(2025, 1, 1))),
    ("What was Mira's home city in 2025?", ["Lisbon", "Porto"], (utc(2025, 1, 1), utc(2026, 1, 1))),
    ("What was Mira's home city last June?", ["Porto"], (utc(2026, 6, 1), utc(2026, 7, 1))),
    ("What was Mira's home city before 2025?", ["Lisbon"], (utc(2025, 1, 1) - timedelta(microseconds=1), utc(2025, 1, 1))),
    ("What was Mira's home city two weeks ago?", ["Porto"], (utc(2026, 11, 17), utc(2026, 11, 18))),
    ("What was Mira's home city as of March 3rd 2025?", ["Porto"], (utc(2025, 3, 3), utc(2025, 3, 4))),
])
def test_context_reads_the_window_the_question_names(graph: MemoryGraph, seeded: str, question: str,
                                                     expected: list[str], window: tuple[datetime, datetime]) -> None:
    ctx = graph.context(seeded, question, subjects=["mira"], asked_at=ASKED, expand=False)
    assert sorted(str(f.value) for f in ctx.facts) == expected
    assert ctx.valid_window == window and not ctx.current
    assert ctx.time_phrase and ctx.time_phrase in question.lower()
    assert any(ctx.time_phrase in note and "read as" in note for note in ctx.notes)
    assert window[0] <= ctx.as_of < window[1]


def test_an_unclear_time_is_a_note_and_the_context_answers_for_the_asked_time(graph: MemoryGraph, seeded: str) -> None:
    ctx = graph.context(seeded, "What was Mira's home city recently?", subjects=["mira"], asked_at=ASKED,
                        expand=False)
    assert [str(f.value) for f in ctx.facts] == ["Porto"]
    assert ctx.valid_window is None and ctx.as_of == ASKED
    assert any('"recently" is vague' in note for note in ctx.notes)
    tie = graph.context(seeded, "What is Mira's home city in June?", subjects=["mira"], asked_at=ASKED, expand=False)
    assert tie.valid_window is None and any("equally near" in note for note in tie.notes)


def test_an_explicit_valid_at_wins_over_the_question(graph: MemoryGraph, seeded: str) -> None:
    ctx = graph.context(seeded, "What was Mira's home city in 2024?", subjects=["mira"],
                        valid_at="2026-01-01", expand=False)
    assert [str(f.value) for f in ctx.facts] == ["Porto"]
    assert ctx.valid_window is None and ctx.time_phrase is None
    assert not any("from the question" in note for note in ctx.notes)


def test_a_question_without_a_time_reads_now(graph: MemoryGraph, seeded: str) -> None:
    ctx = graph.context(seeded, "What is Mira's home city?", subjects=["mira"], expand=False)
    assert [str(f.value) for f in ctx.facts] == ["Porto"] and ctx.current and ctx.valid_window is None


def test_a_bad_asked_at_is_a_clear_error(graph: MemoryGraph, seeded: str) -> None:
    with pytest.raises(SgamError, match="asked_at"):
        graph.context(seeded, "What was it last June?", subjects=["mira"], asked_at="last tuesday")


# -- how old each fact is --------------------------------------------------------------------

def test_every_context_line_says_how_old_the_fact_is(neo4j_connection: tuple[str, tuple[str, str]],
                                                     seeded: str) -> None:
    later = datetime.now(timezone.utc) + timedelta(days=10, hours=1)   # the store's clock, ten days on
    with MemoryGraph.connect(*neo4j_connection, clock=lambda: later, bootstrap=False) as graph:
        ctx = graph.context(seeded, "What should I know about Mira?", subjects=["mira"], expand=None)
    lines = {f.attribute: f.line for f in ctx.facts}
    assert "(since 2025-03-01, " in lines["home_city"] and "; confirmed 10 days ago)" in lines["home_city"]
    assert "(since 2024-01-01, " in lines["response_style"]
    assert all("confirmed 10 days ago" in line for line in lines.values())
    assert all("confirmed" in e.line for e in ctx.evidence if e.kind == "fact")
    assert ctx.tokens <= ctx.budget_tokens

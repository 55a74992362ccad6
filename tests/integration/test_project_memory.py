"""Project and coding-agent memory: the project-memory schema, its event rules, the demo history
and the analyst queries, against a real Neo4j.

The expected answers are read off the demo history (sgam/resources/project-demo.jsonl) by hand:
which tasks were opened when, and what happened to each afterwards.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import date, datetime, timezone

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sgam import MemoryGraph, UnknownSubject
from sgam import demo as demo_module
from sgam.cli import app
from sgam.graph.errors import SchemaViolation
from sgam.graph.models import Episode, EpisodeKind
from sgam.graph.schema import default_schema, load_schema
from sgam.graph.codec import native
from sgam.ingest.extractors.events import EventMapper


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def project_graph(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[MemoryGraph]:
    uri, auth = neo4j_connection
    graph = MemoryGraph.connect(uri, auth, schema=load_schema("project-memory"))
    yield graph
    graph.close()


@pytest.fixture
def history(project_graph: MemoryGraph, tenant: str) -> dict[str, list[dict]]:
    out = io.StringIO()
    answers = demo_module.run_project(project_graph, Console(file=out, width=200), tenant)
    answers["printed"] = out.getvalue()  # type: ignore[assignment]
    yield answers
    project_graph.delete_tenant(tenant)


def rows(graph: MemoryGraph, name: str, tenant: str, **params) -> list[dict]:
    return [{k: native(v) for k, v in r.items()} for r in graph.query(name, tenant=tenant, **params)]


def test_rules_fit_the_schema_and_not_the_default() -> None:
    rules = demo_module.project_rules()
    EventMapper(rules, schema=load_schema("project-memory"))  # checks every rule
    with pytest.raises(SchemaViolation, match="task_opened"):
        rules.check(default_schema())


def test_demo_answers(history: dict, project_graph: MemoryGraph, tenant: str) -> None:
    assert "25 project events" in history["printed"] and "0 quarantined" in history["printed"]
    open_now = [(r["task"], r["status"], r["owner"], native(r["due"])) for r in history["open_tasks"]]
    # task-ledger was done on 03-10; the docs task was reassigned to user:ana on 03-12
    assert open_now == [("task-bulk", "blocked", "agent:coder", date(2026, 3, 31)),
                        ("task-docs", "todo", "user:ana", date(2026, 4, 10)),
                        ("task-otel", "in_progress", "user:ana", date(2026, 4, 30))]
    superseded = [(r["decision"], r["superseded"], r["superseded_summary"], native(r["since"]))
                  for r in history["decisions_superseded"]]
    assert superseded == [("dec-store-2", "dec-store-1", "Store facts as rows in PostgreSQL", utc(2026, 2, 1, 11)),
                          ("dec-fmt-2", "dec-fmt-1", "Format Python with black", utc(2026, 3, 1, 10))]
    assert history["decisions_superseded"][1]["reason"].startswith("One tool instead of three")
    mistakes = [(r["mistake"], r["lesson"], r["episode"]) for r in history["mistakes_to_avoid"]]
    assert mistakes == [("mis-suite", "Run only the test files you changed, with -x -q", "p20"),
                        ("mis-mock", "Test against a real Neo4j; never mock the store", "p10")]


def test_open_tasks_at_a_past_instant(history: dict, project_graph: MemoryGraph, tenant: str) -> None:
    at = lambda t: [(r["task"], r["status"], r["owner"]) for r in rows(  # noqa: E731
        project_graph, "open-tasks", tenant, project="sgam", valid_at=t)]
    assert at(utc(2026, 2, 3, 8)) == []
    assert at(utc(2026, 2, 12)) == [("task-ledger", "in_progress", "agent:coder")]
    assert at(utc(2026, 3, 4)) == [("task-ledger", "in_progress", "agent:coder"),
                                   ("task-bulk", "todo", "agent:coder"),
                                   ("task-docs", "todo", "agent:writer"),
                                   ("task-otel", "todo", "user:ana")]
    assert rows(project_graph, "open-tasks", tenant, project="nope") == []


def test_relations_tools_tickets_and_artifacts(history: dict, project_graph: MemoryGraph, tenant: str) -> None:
    tools = project_graph.current(tenant, "sgam", "uses_tool")
    assert [f.value for f in tools] == ["tool-ruff"]  # black was dropped on 03-01
    assert [f.value for f in project_graph.as_of(tenant, "sgam", "uses_tool", valid_at=utc(2026, 2, 1))] == ["tool-black"]
    assert [f.value for f in project_graph.current(tenant, "tool-black", "tool_status")] == ["deprecated"]
    assert [f.value for f in project_graph.current(tenant, "tkt-7", "ticket_status")] == ["resolved"]
    assert [f.value for f in project_graph.current(tenant, "tkt-9", "ticket_status")] == ["open"]
    assert [f.value for f in project_graph.current(tenant, "task-ledger", "produced")] == ["pr-41"]
    assert sorted(f.value for f in project_graph.current(tenant, "sgam", "follows")) == ["conv-cypher", "conv-errors"]
    assert sorted(f.value for f in project_graph.current(tenant, "sgam", "decided")) == [
        "dec-fmt-1", "dec-fmt-2", "dec-store-1", "dec-store-2"]


def test_a_bad_project_event_is_quarantined(project_graph: MemoryGraph, tenant: str) -> None:
    mapper = EventMapper(demo_module.project_rules(), schema=project_graph.schema)
    bad = Episode(tenant_id=tenant, id="bad", occurred_at=utc(2026, 3, 1), kind=EpisodeKind.EVENT,
                  actor="tool:tracker", content=json.dumps({"type": "task_opened", "task_id": "t1"}))
    report = project_graph.ingest(bad, extractors=[mapper], remember=True)
    assert [e.reason for e in report.quarantined] and "project_id" in report.quarantined[0].reason
    with pytest.raises(UnknownSubject):  # the refused event stored nothing about t1
        project_graph.current(tenant, "t1")
    project_graph.delete_tenant(tenant)


def test_queries_on_a_tenant_without_project_memory(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="I live in Porto", occurred_at=utc(2026, 1, 1),
                         actor="user:mira")
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto",
                valid_from=utc(2026, 1, 1), source_episode_id="e1", asserted_by="user:mira")
    for name in ("open-tasks", "decisions-superseded", "mistakes-to-avoid"):
        assert graph.query(name, tenant=tenant, project=None) == []


def test_cli_demo_project(env: None, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_module, "PROJECT_TENANT", tenant)
    result = CliRunner().invoke(app, ["demo", "--project"])
    assert result.exit_code == 0, result.output
    # the tables wrap at the runner's width: look for short cells only
    assert "0 quarantined" in result.output and "in_progress" in result.output
    assert "blocked" in result.output and "p20" in result.output and "p10" in result.output

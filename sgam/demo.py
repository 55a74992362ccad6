"""The demo: the seed example and a customer -> account -> policy history, answered side by side.

A naive text memory (the stored episode texts, answered from the best keyword match) returns the
stale statement; SGAM returns the current value and can still answer for a past date, or for what
it believed before a correction arrived.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.resources import as_file, files
from typing import Any

from rich.console import Console
from rich.table import Table

from sgam.graph.models import Episode, EpisodeKind, Fact, utcnow
from sgam.ingest.replay import ReplaySummary, replay

from .api import MemoryGraph

TENANT = "demo"
_TOKEN = re.compile(r"[a-z0-9]+")


def _utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Answer:
    system: str
    answer: str
    evidence: str


def naive_text_memory(episodes: list[dict[str, Any]], question: str) -> dict[str, Any]:
    """The baseline: the stored episode sharing most words with the question (ties: oldest first).

    It has no notion of which statement is current, which is the failure SGAM exists to fix.
    """
    words = set(_TOKEN.findall(question.lower()))
    ordered = sorted(episodes, key=lambda e: e["occurred_at"])
    return max(ordered, key=lambda e: len(words & set(_TOKEN.findall(e["content"].lower()))))


def _load(graph: MemoryGraph, resource: str) -> ReplaySummary:
    lines = (files("sgam") / "resources" / resource).read_text(encoding="utf-8").splitlines()
    return replay(graph.store, lines)


def _one(facts: list[Fact]) -> Fact | None:
    return facts[0] if facts else None


def _fmt(fact: Fact | None) -> tuple[str, str]:
    if fact is None:
        return "(nothing)", ""
    return str(fact.value), f"{fact.source_episode_id}, asserted by {fact.asserted_by}"


def _episodes(graph: MemoryGraph) -> list[dict[str, Any]]:
    return graph.store.read(
        "MATCH (e:Episode {tenant_id: $tenant}) RETURN e.id AS id, e.content AS content, "
        "e.occurred_at AS occurred_at ORDER BY e.occurred_at",
        {"tenant": TENANT},
    )


def run(graph: MemoryGraph, console: Console) -> dict[str, str]:
    """Reset the ``demo`` tenant, replay the demo episodes and print the comparison."""
    graph.delete_tenant(TENANT)
    first = _load(graph, "demo.jsonl")
    believed_before_correction = utcnow()
    second = _load(graph, "demo-correction.jsonl")
    console.print(
        f"Replayed {first.lines + second.lines} episodes: "
        f"{first.written + second.written} writes, {first.unchanged + second.unchanged} unchanged, "
        f"{first.rejected + second.rejected} rejected.\n"
    )
    episodes = _episodes(graph)
    answers: dict[str, str] = {}

    question = "What is Mira's passport deadline?"
    naive = naive_text_memory(episodes, question)
    rows = [
        Answer("naive text memory (best match)", _deadline(naive["content"]),
               f"{naive['id']}: \"{naive['content']}\""),
        Answer("SGAM current", *_fmt(_one(graph.current(TENANT, "mira", "passport_deadline")))),
        Answer("SGAM as of 2026-06-02", *_fmt(_one(graph.as_of(
            TENANT, "mira", "passport_deadline", valid_at=_utc(2026, 6, 2))))),
    ]
    _table(console, question, rows)
    answers.update(naive=rows[0].answer, current=rows[1].answer, as_of=rows[2].answer)

    question = "Where did Mira live in April 2026?"
    rows = [
        Answer("SGAM as of 2026-04-01", *_fmt(_one(graph.as_of(
            TENANT, "mira", "home_city", valid_at=_utc(2026, 4, 1))))),
        Answer("SGAM as of 2026-04-01, as believed before e4 was recorded", *_fmt(_one(graph.as_of(
            TENANT, "mira", "home_city", valid_at=_utc(2026, 4, 1), known_at=believed_before_correction)))),
    ]
    _table(console, question, rows)
    answers.update(city=rows[0].answer, city_before_correction=rows[1].answer)

    question = "Which policy covers Ada's account?"
    rows = [
        Answer(f"SGAM traverse {label}", " -> ".join(p.entities) if p else "(nothing)",
               ", ".join(f.source_episode_id for f in p.facts) if p else "")
        for label, p in (
            ("now", _first(graph.traverse(TENANT, "cust-ada", ["holds", "covered_by"]))),
            ("on 2026-02-01", _first(graph.traverse(
                TENANT, "cust-ada", ["holds", "covered_by"], valid_at=_utc(2026, 2, 1)))),
        )
    ]
    _table(console, question, rows)
    answers.update(policy_now=rows[0].answer, policy_february=rows[1].answer)
    return answers


def _first(items: list[Any]) -> Any:
    return items[0] if items else None


def _deadline(text: str) -> str:
    found = re.findall(r"\d{4}-\d{2}-\d{2}", text)
    return found[-1] if found else "(no date stated)"


def _table(console: Console, question: str, rows: list[Answer]) -> None:
    table = Table(title=question, title_justify="left", show_lines=False)
    table.add_column("memory")
    table.add_column("answer", style="bold")
    table.add_column("evidence")
    for row in rows:
        table.add_row(row.system, row.answer, row.evidence)
    console.print(table)
    console.print()


BROWSER_QUERY = """\
MATCH p = (c:Customer {tenant_id: 'demo'})-[:HOLDS|COVERED_BY*1..2]->(x)
WHERE all(f IN relationships(p) WHERE f.expired_at IS NULL
          AND f.valid_from <= datetime() AND (f.valid_to IS NULL OR datetime() < f.valid_to))
OPTIONAL MATCH (x)-[a]->(v:Value)
WHERE a.expired_at IS NULL AND a.valid_from <= datetime() AND (a.valid_to IS NULL OR datetime() < a.valid_to)
RETURN p, a, v"""


# -- project and coding-agent memory (`sgam demo --project`) --------------------------------------

PROJECT_TENANT = "demo-project"
PROJECT_SCHEMA = "project-memory"


def project_rules() -> Any:
    """The shipped project event rules (``graph/schemas/project-events.yaml``)."""
    from sgam.ingest.extractors.events import load_event_rules

    with as_file(files("sgam.graph") / "schemas" / "project-events.yaml") as path:
        return load_event_rules(path)


def project_episodes(tenant: str) -> list[Episode]:
    """The demo project history (``sgam/resources/project-demo.jsonl``) as event episodes of ``tenant``."""
    text = (files("sgam") / "resources" / "project-demo.jsonl").read_text(encoding="utf-8")
    return [Episode(tenant_id=tenant, id=line["id"], occurred_at=line["occurred_at"], actor=line["actor"],
                    kind=EpisodeKind.EVENT, content=json.dumps(line["event"]))
            for line in map(json.loads, filter(lambda s: s.strip() and not s.startswith("#"),
                                               text.splitlines()))]


def run_project(graph: MemoryGraph, console: Console, tenant: str = PROJECT_TENANT) -> dict[str, list[Any]]:
    """Reset ``tenant``, ingest the project history through the event rules and print what an
    agent starting on the project would ask. ``graph`` must use the project-memory schema."""
    from sgam.ingest.extractors.events import EventMapper

    graph.delete_tenant(tenant)
    mapper = EventMapper(project_rules(), schema=graph.schema)
    episodes = project_episodes(tenant)
    reports = [graph.ingest(e, extractors=[mapper], remember=True) for e in episodes]
    quarantined = [entry for r in reports for entry in r.quarantined]
    console.print(f"Ingested {len(episodes)} project events: "
                  f"{sum(sum(r.outcomes.values()) for r in reports)} writes, {len(quarantined)} quarantined.\n")
    answers = {
        "open_tasks": graph.query("open-tasks", tenant=tenant, project="sgam"),
        "decisions_superseded": graph.query("decisions-superseded", tenant=tenant, project="sgam"),
        "mistakes_to_avoid": graph.query("mistakes-to-avoid", tenant=tenant, project="sgam"),
    }
    _rows(console, "What is still open in sgam? (sgam query open-tasks)", answers["open_tasks"],
          ("task", "title", "status", "owner", "due"))
    _rows(console, "Which decisions replaced earlier ones, and why? (sgam query decisions-superseded)",
          answers["decisions_superseded"], ("superseded_title", "title", "reason", "since"))
    _rows(console, "Which mistakes must not be repeated? (sgam query mistakes-to-avoid)",
          answers["mistakes_to_avoid"], ("title", "lesson", "episode"))
    return answers


def _rows(console: Console, question: str, records: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
    table = Table(title=question, title_justify="left")
    for column in columns:
        table.add_column(column)
    for record in records:
        table.add_row(*(str(record[c])[:10] if c in ("since", "due") else str(record[c]) for c in columns))
    console.print(table)
    console.print()

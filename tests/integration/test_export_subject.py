"""Subject access export (graph/subject_access.py) through the public API and the CLI.

A subject is given every kind of thing the store can hold about it (facts with history, a fact
of another subject pointing at it, episodes, a candidate, a quarantine entry, a deletion record),
next to another subject with its own; the export must hold each of the first and none of the second.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sgam import MemoryGraph, NotFound
from sgam.cli import app
from sgam.graph.schema import Schema

runner = CliRunner()
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)

SCHEMA = Schema.from_data({
    "name": "subject-export-test",
    "version": 1,
    "entity_types": ["Person"],
    "attributes": {
        "home_city": {"value_type": "string", "subject_types": ["Person"]},
        "knows": {"value_type": "entity", "target": "Person", "cardinality": "many", "subject_types": ["Person"]},
        "hobby": {"value_type": "string", "requires": 2, "subject_types": ["Person"]},
        "diagnosis": {"value_type": "string", "subject_types": ["Person"], "visibility": "private",
                      "readers": ["subject"]},
    },
})


def day(n: int) -> datetime:
    return EPOCH + timedelta(days=n)


@pytest.fixture
def people(neo4j_connection) -> Iterator[MemoryGraph]:
    uri, auth = neo4j_connection
    with MemoryGraph.connect(uri, auth, schema=SCHEMA) as graph:
        yield graph


def build(graph: MemoryGraph, tenant: str) -> None:
    """mira: moved (a retired row), a candidate, a private fact, bo knows her, a refused delta, a
    deleted slot. bo and cy have their own facts and episodes."""
    said = [("e1", "mira lives in Lisbon"), ("e2", "mira moved to Porto"), ("e3", "bo knows mira"),
            ("e4", "mira plays chess"), ("e5", "mira's diagnosis"), ("e6", "bo lives in Oslo, cy in Rome"),
            ("e7", "mira's secret hobby")]
    for n, (eid, text) in enumerate(said):
        graph.record_episode(tenant_id=tenant, id=eid, content=text, occurred_at=day(n), actor="user:mira")

    def write(subject: str, attribute: str, value: str, start: int, episode: str) -> None:
        graph.write(tenant_id=tenant, subject=subject, attribute=attribute, value=value,
                    valid_from=day(start), source_episode_id=episode)

    write("mira", "home_city", "Lisbon", 0, "e1")
    write("mira", "home_city", "Porto", 1, "e2")
    write("bo", "knows", "mira", 2, "e3")
    write("mira", "hobby", "chess", 3, "e4")
    write("mira", "diagnosis", "flu", 4, "e5")
    write("bo", "home_city", "Oslo", 5, "e6")
    write("cy", "home_city", "Rome", 5, "e6")
    report = graph.ingest(tenant_id=tenant, id="e7", content="mira's secret hobby", occurred_at=day(6),
                          speaker="user:mira", extractors=[],
                          deltas=[{"subject": "mira", "attribute": "shoe_size", "value": 38}])
    assert len(report.quarantined) == 1
    graph.delete_memory(tenant, subject="mira", attribute="hobby", actor="user:ops", dry_run=True)


def test_export_holds_everything_about_the_subject_and_nothing_else(people: MemoryGraph, tenant: str) -> None:
    graph = people
    build(graph, tenant)
    data = graph.export_subject(tenant, "mira", principal="*")
    assert json.loads(json.dumps(data)) == data  # JSON-ready as it is

    assert (data["tenant_id"], data["subject"], data["entity"]["id"]) == (tenant, "mira", "mira")
    facts = {(f["attribute"], f["value"], f.get("expired_at") is None) for f in data["facts"]}
    assert facts == {("home_city", "Lisbon", False), ("home_city", "Lisbon", True), ("home_city", "Porto", True),
                     ("hobby", "chess", True), ("diagnosis", "flu", True)}
    lisbon = next(f for f in data["facts"] if f["value"] == "Lisbon" and f.get("expired_at"))
    assert lisbon["source_episode_id"] == "e1" and lisbon["asserted_by"] == "unknown"
    assert lisbon["recorded_at"] and lisbon["expired_by_episode_id"] == "e2"
    assert [c["value"] for c in data["candidates"]] == ["chess"]
    assert [(f["from"], f["attribute"], f["value"]) for f in data["facts_pointing_here"]] == [("bo", "knows", "mira")]
    assert {e["id"] for e in data["episodes"]} == {"e1", "e2", "e3", "e4", "e5", "e7"}
    assert next(e for e in data["episodes"] if e["id"] == "e2")["content"] == "mira moved to Porto"
    assert set(data["statements"]) == {"home_city", "diagnosis"}  # the candidate is no statement yet
    assert [p["v"] for p in data["statements"]["home_city"]] == ["Lisbon", "Porto"]
    [refused] = data["quarantine"]
    assert refused["episode_id"] == "e7" and "shoe_size" in refused["candidate"]
    assert data["deletions"] == [] and data["tombstone"] is None

    text = json.dumps(data)
    for other in ("Oslo", "Rome", '"e6"', '"cy"'):
        assert other not in text


def test_private_facts_reach_only_their_readers(people: MemoryGraph, tenant: str) -> None:
    graph = people
    build(graph, tenant)
    shared = graph.export_subject(tenant, "mira")
    own = graph.export_subject(tenant, "mira", principal="user:mira")
    assert "flu" not in json.dumps(shared) and "e5" not in {e["id"] for e in shared["episodes"]}
    assert "diagnosis" not in shared["statements"]
    assert [f["value"] for f in own["facts"] if f["attribute"] == "diagnosis"] == ["flu"]


def test_deletion_records_and_unknown_subjects(people: MemoryGraph, tenant: str) -> None:
    graph = people
    build(graph, tenant)
    graph.delete_memory(tenant, subject="mira", attribute="hobby", actor="user:ops")
    [record] = graph.export_subject(tenant, "mira", principal="*")["deletions"]
    assert (record["grain"], record["target_subject"], record["deleted_by"]) == ("slot", "mira", "user:ops")
    with pytest.raises(NotFound, match="nobody"):
        graph.export_subject(tenant, "nobody")


def test_cli_export_subject(env, people: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    build(people, tenant)
    out = tmp_path / "mira.json"
    result = runner.invoke(app, ["export-subject", "-t", tenant, "-s", "mira", "--out", str(out),
                                 "--principal", "*"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert len(data["facts"]) == 5 and data["facts_pointing_here"][0]["from"] == "bo"
    printed = runner.invoke(app, ["export-subject", "-t", tenant, "-s", "bo"])
    assert printed.exit_code == 0 and json.loads(printed.stdout)["subject"] == "bo"
    missing = runner.invoke(app, ["export-subject", "-t", tenant, "-s", "nobody", "--out", str(tmp_path / "x.json")])
    assert missing.exit_code == 1 and "nobody" in missing.output and not (tmp_path / "x.json").exists()

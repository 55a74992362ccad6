"""The extraction trail of accepted writes, its privacy and erasure, and `sgam rebuild` (issue 17
part 1). Real Neo4j; the model endpoint is the loopback replay server of tests/llm_replay.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, InvalidDelta, MemoryGraph
from sgam.cli import app
from sgam.cli.tables import table_rows
from sgam.graph.steps import Statement, Write, one
from sgam.ingest import episodes as ep
from sgam.ingest.extractors.events import EventMapper, load_event_rules
from sgam.ingest.extractors.llm import OpenAICompatibleExtractor
from tests.integration.test_ingest_e2e import candidate, completion
from tests.llm_replay import Replay, server  # noqa: F401 (a fixture)

runner = CliRunner()


@pytest.fixture
def clean(graph: MemoryGraph, tenant: str) -> Iterator[str]:
    yield tenant
    graph.delete_tenant(tenant)
    graph.delete_tenant(f"{tenant}-r")


def model(server: Replay) -> OpenAICompatibleExtractor:
    return OpenAICompatibleExtractor(server.url, "gpt-4o-mini", timeout=5, max_retries=0, sleep=lambda _: None)


def trails(graph: MemoryGraph, tenant: str) -> list[dict[str, Any]]:
    return graph.store.read("MATCH (x:Extraction {tenant_id: $tenant}) RETURN properties(x) AS x ORDER BY x.id",
                            {"tenant": tenant})


EVENTS = [
    {"type": "contact_preference_changed", "customer_id": "cust-bo", "channel": "sms",
     "occurred_at": "2026-02-01T00:00:00Z"},
    {"type": "address_changed", "customer_id": "cust-bo", "address": "1 Quay St, Porto",
     "occurred_at": "2026-02-02T00:00:00Z"},
    {"type": "contact_preference_changed", "customer_id": "cust-bo", "channel": "email",
     "occurred_at": "2026-03-01T00:00:00Z"},
]


def test_an_event_write_keeps_its_trail_and_provenance_shows_it(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    report = graph.ingest(ep.event(tenant, EVENTS[0]), remember=True)
    [memory_id] = report.memory_ids
    prov = graph.provenance(tenant, memory_id)
    assert prov is not None
    [trail] = prov.trail
    assert (trail["extractor"], trail["version"], trail["model"]) == ("events", "rules-v1", None)
    [entry] = trail["deltas"]
    assert entry["attribute"] == "contact_preference" and entry["value"] == "sms"
    assert entry["outcome"] == "created" and entry["memory_ids"] == [memory_id]
    assert entry["evidence"] is None and entry["decision"] is None
    # Processing the episode again keeps one trail.
    graph.ingest(ep.event(tenant, EVENTS[0]), remember=True)
    assert len(trails(graph, tenant)) == 1


def test_a_model_write_keeps_evidence_compared_value_decision_and_model(
        env: None, graph: MemoryGraph, clean: str, server: Replay) -> None:
    tenant = clean
    first = "Hi, this is mira. My passport deadline is July 15, 2026."
    again = "mira again: the consulate moved my passport deadline to June 30, 2026."
    server.script += [
        completion(candidate("My passport deadline is July 15, 2026.", "passport_deadline", "2026-07-15")),
        completion(candidate("moved my passport deadline to June 30, 2026", "passport_deadline", "2026-06-30",
                             decision="change", compared_with="2026-07-15")),
    ]
    for at, text in (("2026-05-20T09:00:00Z", first), ("2026-06-10T14:30:00Z", again)):
        done = graph.ingest(ep.message(tenant, text, speaker="user:mira", occurred_at=at),
                            extractors=[model(server)], remember=True)
    [memory_id] = [m for m in done.memory_ids
                   if graph.provenance(tenant, m).fact.value.isoformat() == "2026-06-30"]  # type: ignore[union-attr]
    prov = graph.provenance(tenant, memory_id)
    assert prov is not None
    [trail] = prov.trail
    assert trail["extractor"] == "openai-compatible:gpt-4o-mini" and trail["model"] == "gpt-4o-mini"
    [entry] = trail["deltas"]
    assert entry["evidence"] == ["moved my passport deadline to June 30, 2026"]
    assert entry["compared_with"] == "2026-07-15" and entry["decision"] == "change"
    assert memory_id in entry["memory_ids"]
    # `sgam query provenance` shows it: all of it in --json, one line per entry in the table.
    shown = runner.invoke(app, ["query", "provenance", "-t", tenant, "--memory-id", memory_id, "--json"])
    assert shown.exit_code == 0, shown.output
    [row] = json.loads(shown.stdout)
    [stored] = row["trail"]
    assert json.loads(stored["deltas"])[0]["decision"] == "change"
    table = runner.invoke(app, ["query", "provenance", "-t", tenant, "--memory-id", memory_id])
    assert table.exit_code == 0, table.output
    assert "trail" in table.output
    columns, [line] = table_rows("provenance", [row])
    assert line[columns.index("trail")].startswith(
        'openai-compatible:gpt-4o-mini gpt-4o-mini: change passport_deadline="2026-06-30" (stored: "2026-07-15") '
        "evidence 'moved my passport deadline to June 30, 2026' -> ")


def test_a_private_quote_is_shown_to_readers_only_and_forget_leaves_no_trail(
        graph: MemoryGraph, clean: str, server: Replay) -> None:
    tenant = clean
    text = "This is cust-ada: please use email, and my birthday is 1990-03-04."
    said = {"subject": "cust-ada", "subject_type": "Customer", "compared_with": None, "decision": "new"}
    server.script.append(completion(
        {**said, "evidence": ["please use email"], "attribute": "contact_preference",
         "delta": {"value": "email", "op": "assert", "valid_from": None}},
        {**said, "evidence": ["my birthday is 1990-03-04"], "attribute": "date_of_birth",
         "delta": {"value": "1990-03-04", "op": "assert", "valid_from": None}}))
    graph.ingest(ep.message(tenant, text, speaker="user:cust-ada", occurred_at="2026-05-20T09:00:00Z"),
                 extractors=[model(server)], remember=True)
    [public] = graph.current(tenant, "cust-ada", "contact_preference", principal="agent:other")
    [stored] = trails(graph, tenant)
    assert stored["x"]["visible_to"] and "agent:kyc" in stored["x"]["visible_to"]
    assert "1990-03-04" in stored["x"]["deltas"]
    # The public fact's trail quotes the private birthday's episode: a non-reader sees neither.
    outsider = graph.provenance(tenant, public.memory_id, principal="agent:other")
    assert outsider is not None and outsider.episode is None and outsider.trail == ()
    reader = graph.provenance(tenant, public.memory_id, principal="agent:kyc")
    assert reader is not None and reader.trail[0]["deltas"][0]["evidence"] == ["please use email"]
    graph.forget_subject(tenant, "cust-ada")
    assert trails(graph, tenant) == []
    assert graph.residue(tenant, "cust-ada", forgotten=True) == []


def test_the_residue_check_finds_a_trail_the_forget_missed(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    graph.ingest(ep.event(tenant, EVENTS[1]), remember=True)
    [kept] = trails(graph, tenant)
    graph.forget_subject(tenant, "cust-bo")
    assert trails(graph, tenant) == [] and graph.residue(tenant, "cust-bo", forgotten=True) == []
    # A trail the erasure did not remove (as the code before the trail's erasure would leave it).
    graph.store.run(one(Write(Statement(
        "CREATE (x:Extraction) SET x = $props", {"props": {**kept["x"], "id": "x-left"}}))))
    findings = graph.residue(tenant, "cust-bo", forgotten=True)
    assert {(f["where"], f["id"]) for f in findings} == {("node Extraction", "x-left")}


def rebuilt_slots(report: Any) -> dict[str, list[str]]:
    return {kind: [f"{c.subject}.{c.attribute}" for c in getattr(report, kind)]
            for kind in ("added", "changed", "missing")}


def test_rebuild_with_the_same_extractor_reports_no_difference(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    for event in EVENTS:
        graph.ingest(ep.event(tenant, event), remember=True)
    before = graph.store.read("MATCH (n {tenant_id: $t}) RETURN count(n) AS n", {"t": tenant})
    report = graph.rebuild(tenant, into=f"{tenant}-r")
    assert report.episodes == 3 and report.same == 2 and not report.differs, report
    assert graph.current(f"{tenant}-r", "cust-bo", "contact_preference")[0].value == "email"
    assert len(trails(graph, f"{tenant}-r")) == 3
    assert graph.store.read("MATCH (n {tenant_id: $t}) RETURN count(n) AS n", {"t": tenant}) == before
    # A tenant that holds memory is refused.
    with pytest.raises(InvalidDelta, match="already holds memory"):
        graph.rebuild(tenant, into=f"{tenant}-r")


def test_rebuild_with_another_event_mapping_reports_the_difference_and_a_dry_run_writes_nothing(
        graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    for event in EVENTS:
        graph.ingest(ep.event(tenant, event), remember=True)
    rules = load_event_rules()
    # The new mapping records every channel as phone and drops the address rule's delta.
    changed = rules.model_copy(update={"events": {
        **rules.events,
        "contact_preference_changed": rules.events["contact_preference_changed"].model_copy(update={"deltas": (
            rules.events["contact_preference_changed"].deltas[0].model_copy(update={"value": "phone"}),)}),
        "address_changed": rules.events["address_changed"].model_copy(update={"deltas": ()}),
    }})
    mapper = EventMapper(changed, schema=graph.schema)
    before = graph.store.read("MATCH (n) WHERE n.tenant_id STARTS WITH $t RETURN count(n) AS n", {"t": tenant})
    dry = graph.rebuild(tenant, [mapper], dry_run=True)
    assert dry.dry_run and rebuilt_slots(dry) == {
        "added": [], "changed": ["cust-bo.contact_preference"], "missing": ["cust-bo.address"]}
    [change] = dry.changed
    assert sorted(row[0] for row in change.before) == ["email", "sms"]
    assert {row[0] for row in change.after} == {"phone"}
    assert graph.store.read("MATCH (n) WHERE n.tenant_id STARTS WITH $t RETURN count(n) AS n",
                            {"t": tenant}) == before
    real = graph.rebuild(tenant, [mapper], into=f"{tenant}-r")
    assert rebuilt_slots(real) == rebuilt_slots(dry) and not real.dry_run
    assert graph.current(f"{tenant}-r", "cust-bo", "contact_preference")[0].value == "phone"


def test_sgam_rebuild_reports_as_json_and_text(env, graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    for event in EVENTS:
        graph.ingest(ep.event(tenant, event), remember=True)
    dry = runner.invoke(app, ["rebuild", "-t", tenant, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    data = json.loads(dry.stdout)
    assert data["dry_run"] and data["episodes"] == 3 and data["same"] == 2 and data["changed"] == []
    text = runner.invoke(app, ["rebuild", "-t", tenant, "--into", f"{tenant}-r"])
    assert text.exit_code == 0, text.output
    assert "no difference" in text.output
    missing = runner.invoke(app, ["rebuild", "-t", tenant])
    assert missing.exit_code != 0 and "--into" in missing.output


def test_the_async_graph_rebuilds_and_shows_the_trail(graph: MemoryGraph, clean: str,
                                                      neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    tenant = clean
    report = graph.ingest(ep.event(tenant, EVENTS[0]), remember=True)
    uri, auth = neo4j_connection

    async def scenario() -> tuple[Any, Any]:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=graph.schema) as agraph:
            return (await agraph.provenance(tenant, report.memory_ids[0]),
                    await agraph.rebuild(tenant, dry_run=True))

    prov, rebuilt = asyncio.run(scenario())
    assert prov.trail[0]["extractor"] == "events" and prov.trail[0]["deltas"][0]["value"] == "sms"
    assert rebuilt.dry_run and rebuilt.same == 1 and not rebuilt.differs


def test_deleting_the_episode_deletes_its_trail(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    kept = graph.ingest(ep.event(tenant, EVENTS[0]), remember=True)
    gone = graph.ingest(ep.event(tenant, EVENTS[1]), remember=True)
    assert len(trails(graph, tenant)) == 2
    graph.delete_episode(tenant, gone.episode_id)
    assert [t["x"]["episode_id"] for t in trails(graph, tenant)] == [kept.episode_id]


def test_a_retention_purge_takes_the_trail_with_the_episode(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    graph.ingest(ep.event(tenant, {"type": "ticket_closed", "customer_id": "cust-bo",
                                         "closed_at": graph.clock().isoformat()}, occurred_at=graph.clock()),
                 remember=True)
    assert len(trails(graph, tenant)) == 1
    report = graph.purge(tenant, now=graph.clock() + timedelta(days=40))
    assert report.episodes == 1 and trails(graph, tenant) == []

"""`sgam import-graphiti`: a Graphiti graph written with graphiti-core's own save functions (no LLM)
into the test Neo4j, imported, and read back with current / as_of / provenance."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sgam import MemoryGraph, UnknownTenant
from sgam.cli import app
from sgam.graph.ddl import bootstrap_op
from sgam.graph.errors import SchemaViolation
from sgam.ingest.graphiti.env import load_graphiti
from sgam.ingest.graphiti.importer import GraphitiMapping

load_graphiti()

from graphiti_core.edges import EntityEdge, EpisodicEdge  # noqa: E402
from graphiti_core.embedder.client import EmbedderClient  # noqa: E402
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode  # noqa: E402

MAPPING = Path(__file__).resolve().parents[2] / "graph" / "schemas" / "graphiti-mapping.yaml"
runner = CliRunner()


def at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=timezone.utc)


class HashEmbedder(EmbedderClient):
    """A tiny deterministic embedder: 8 numbers from a hash of the text."""

    async def create(self, input_data):  # type: ignore[no-untyped-def]
        text = input_data[0] if isinstance(input_data, list) else str(input_data)
        digest = hashlib.sha256(str(text).encode()).digest()
        return [b / 255 for b in digest[:8]]

    async def create_batch(self, input_data_list):  # type: ignore[no-untyped-def]
        return [await self.create([t]) for t in input_data_list]


@dataclass
class Written:
    group: str
    episodes: dict[str, EpisodicNode] = field(default_factory=dict)
    edges: dict[str, EntityEdge] = field(default_factory=dict)


async def _write(uri: str, auth: tuple[str, str], group: str) -> Written:
    from graphiti_core.driver.neo4j_driver import Neo4jDriver

    driver = Neo4jDriver(uri, auth[0], auth[1])
    if driver._init_task is not None:  # its own index build, started because a loop is running
        await driver._init_task
    embedder = HashEmbedder()
    out = Written(group)

    def episode(key: str, day: str, content: str, source: EpisodeType = EpisodeType.message) -> EpisodicNode:
        node = EpisodicNode(name=key, group_id=group, source=source, source_description="chat",
                            content=content, valid_at=at(day), created_at=at(day))
        out.episodes[key] = node
        return node

    e1 = episode("e1", "2026-01-10", "Mira: I live in Porto. (Not Braga, that was a mistake.)")
    e2 = episode("e2", "2026-03-01", "Mira: I moved to Lisbon today. I like it there.")
    e3 = episode("e3", "2026-04-01", "Mira: my passport must be renewed by 2026-07-15.")
    e4 = episode("e4", "2026-05-01", '{"customer": "C-17", "account": "A-9"}', EpisodeType.json)

    def entity(name: str, *labels: str) -> EntityNode:
        return EntityNode(name=name, group_id=group, labels=["Entity", *labels], summary="",
                          created_at=at("2026-01-10"))

    mira, porto, lisbon, braga = entity("Mira", "Person"), entity("Porto"), entity("Lisbon"), entity("Braga")
    deadline, c17, a9 = entity("2026-07-15"), entity("C-17", "Customer"), entity("A-9", "Account")
    email, acme = entity("email"), entity("Acme Corp")
    nodes = [mira, porto, lisbon, braga, deadline, c17, a9, email, acme]

    def edge(key: str, name: str, source: EntityNode, target: EntityNode, episodes: list[EpisodicNode],
             valid: str | None, invalid: str | None = None, expired: str | None = None) -> EntityEdge:
        made = EntityEdge(source_node_uuid=source.uuid, target_node_uuid=target.uuid, name=name,
                          group_id=group, fact=f"{source.name} {name} {target.name}",
                          episodes=[e.uuid for e in episodes], created_at=at("2026-05-02"),
                          valid_at=at(valid) if valid else None,
                          invalid_at=at(invalid) if invalid else None,
                          expired_at=at(expired) if expired else None)
        out.edges[key] = made
        return made

    edges = [
        edge("porto", "LIVES_IN", mira, porto, [e1, e2], "2026-01-10", "2026-03-01", "2026-05-02"),
        edge("lisbon", "LIVES_IN", mira, lisbon, [e2], "2026-03-01"),
        edge("braga", "LIVES_IN", mira, braga, [e1], "2026-01-10", expired="2026-05-02"),
        edge("deadline", "MUST_RENEW_PASSPORT_BY", mira, deadline, [e3], "2026-04-01"),
        edge("holds", "ACCOUNT_HELD_BY", a9, c17, [e4], "2026-05-01"),
        edge("contact", "PREFERS_CONTACT", c17, email, [], "2026-05-01"),
        edge("likes", "LIKES", mira, lisbon, [e2], "2026-03-01"),
        edge("works1", "WORKS_AT", mira, acme, [e2], None),
        edge("works2", "WORKS_AT", c17, acme, [e4], None),
    ]
    try:
        for n in nodes:
            await n.generate_name_embedding(embedder)
            await n.save(driver)
        for ep in out.episodes.values():
            ep.entity_edges = [e.uuid for e in edges if ep.uuid in e.episodes]
            await ep.save(driver)
        for e in edges:
            await e.generate_embedding(embedder)
            await e.save(driver)
            for ep_uuid in e.episodes:
                for target in (e.source_node_uuid, e.target_node_uuid):
                    await EpisodicEdge(source_node_uuid=ep_uuid, target_node_uuid=target, group_id=group,
                                       created_at=at("2026-05-02")).save(driver)
    finally:
        await driver.close()
    return out


async def _graphiti_counts(uri: str, auth: tuple[str, str], group: str) -> tuple[int, int, list[str]]:
    """What Graphiti's own readers see of its group: entities, fact edges, a fulltext search."""
    from graphiti_core.driver.neo4j_driver import Neo4jDriver
    from graphiti_core.search.search_filters import SearchFilters
    from graphiti_core.search.search_utils import node_fulltext_search

    driver = Neo4jDriver(uri, auth[0], auth[1])
    try:
        if driver._init_task is not None:
            await driver._init_task
        nodes = await EntityNode.get_by_group_ids(driver, [group])
        edges = await EntityEdge.get_by_group_ids(driver, [group])
        found = await node_fulltext_search(driver, "Mira", SearchFilters(), group_ids=[group], limit=10)
        return len(nodes), len(edges), sorted(n.name for n in found)
    finally:
        await driver.close()


@pytest.fixture(scope="module")
def written(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[Written]:
    uri, auth = neo4j_connection
    yield asyncio.run(_write(uri, auth, f"g-{uuid.uuid4().hex[:10]}"))


def _eid(written: Written, key: str) -> str:
    return f"graphiti-{written.episodes[key].uuid}"


def test_import_answers_current_as_of_and_provenance(graph: MemoryGraph, tenant: str, written: Written) -> None:
    report = graph.import_graphiti(MAPPING, tenant, group_ids=[written.group])

    assert report.problems == []
    assert dict(report.unmapped) == {"LIKES": 1, "WORKS_AT": 2}
    assert report.edges_read == 9 and report.episodes_read == 4
    assert report.episodes["created"] == 5  # four Episodic nodes + one for the edge without episodes
    assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Lisbon"]
    assert [f.value for f in graph.as_of(tenant, "mira", "home_city", valid_at=at("2026-02-15"))] == ["Porto"]
    assert [f.value for f in graph.as_of(tenant, "mira", "home_city", valid_at=at("2026-03-01"))] == ["Lisbon"]
    assert graph.as_of(tenant, "mira", "home_city", valid_at=at("2026-01-01")) == []
    assert [f.value for f in graph.current(tenant, "mira", "passport_deadline")] == [date(2026, 7, 15)]
    assert [f.value for f in graph.current(tenant, "c-17", "holds")] == ["a-9"]
    assert [f.value for f in graph.current(tenant, "c-17", "contact_preference")] == ["email"]

    lisbon = graph.current(tenant, "mira", "home_city")[0]
    assert lisbon.asserted_by == f"graphiti-edge:{written.edges['lisbon'].uuid}"
    prov = graph.provenance(tenant, "mira", lisbon.memory_id)
    assert prov is not None and prov.episode is not None
    assert prov.episode["id"] == _eid(written, "e2")
    assert prov.episode["content"] == written.episodes["e2"].content
    assert [f.value for f in prov.superseded] == ["Porto"] or prov.superseded == ()

    contact = graph.current(tenant, "c-17", "contact_preference")[0]
    assert contact.source_episode_id == f"graphiti-edge-{written.edges['contact'].uuid}"

    # Graphiti found the Braga edge never true: no statement, listed as skipped.
    assert [f for f in graph.history(tenant, "mira", "home_city") if f.value == "Braga"] == []
    assert [s["uuid"] for s in report.skipped] == [str(written.edges["braga"].uuid)]
    assert graph.doctor(tenant) == []


def test_round_trip_and_reimport_changes_nothing(graph: MemoryGraph, tenant: str, written: Written) -> None:
    graph.import_graphiti(MAPPING, tenant, group_ids=[written.group])
    subjects = {"mira": ["home_city", "passport_deadline"], "c-17": ["holds", "contact_preference"]}

    def believed() -> set[tuple]:
        return {(f.subject, f.attribute, str(f.value), f.valid_from, f.valid_to, f.source_episode_id)
                for s, attrs in subjects.items() for a in attrs
                for f in graph.history(tenant, s, a) if f.expired_at is None}

    def rows() -> list[tuple]:
        return sorted((f.memory_id, f.expired_at, f.support_count) for s, attrs in subjects.items()
                      for a in attrs for f in graph.history(tenant, s, a))

    e = written.edges
    expected = {
        ("mira", "home_city", "Porto", at("2026-01-10"), at("2026-03-01"), _eid(written, "e1")),
        ("mira", "home_city", "Lisbon", at("2026-03-01"), None, _eid(written, "e2")),
        ("mira", "passport_deadline", "2026-07-15", at("2026-04-01"), None, _eid(written, "e3")),
        ("c-17", "holds", "a-9", at("2026-05-01"), None, _eid(written, "e4")),
        ("c-17", "contact_preference", "email", at("2026-05-01"), None, f"graphiti-edge-{e['contact'].uuid}"),
    }
    assert believed() == expected  # one believed fact per mapped, still-believed Graphiti edge
    before = rows()

    again = graph.import_graphiti(MAPPING, tenant, group_ids=[written.group])
    assert set(again.outcomes) == {"unchanged"} and again.written == 0
    assert set(again.episodes) == {"existing"}
    assert rows() == before and believed() == expected


def test_dry_run_writes_nothing(graph: MemoryGraph, tenant: str, written: Written) -> None:
    report = graph.import_graphiti(MAPPING, tenant, group_ids=[written.group], dry_run=True)
    assert report.deltas == 6 and report.episodes["planned"] == 5
    with pytest.raises(UnknownTenant):   # not even an episode
        graph.current(tenant, "mira")
    assert graph.query("residue", tenant=tenant, subject="mira") == []


def test_both_models_share_one_database(graph: MemoryGraph, tenant: str, written: Written,
                                       neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    uri, auth = neo4j_connection
    before = asyncio.run(_graphiti_counts(uri, auth, written.group))
    graph.import_graphiti(MAPPING, tenant, group_ids=[written.group])
    graph.store.run(bootstrap_op(graph.schema, graph.clock))  # SGAM's constraints and indexes next to Graphiti's 31
    assert asyncio.run(_graphiti_counts(uri, auth, written.group)) == before == (9, 9, ["Mira"])
    sgam_entities = graph.store.read(
        "MATCH (e:Entity {tenant_id: $t}) RETURN count(e) AS n, count(e.uuid) AS uuids, "
        "count(e.group_id) AS groups", {"t": tenant})[0]
    assert sgam_entities["n"] >= 3 and sgam_entities["uuids"] == 0 and sgam_entities["groups"] == 0
    assert graph.doctor(tenant) == []


def test_mapping_errors_name_the_element(graph: MemoryGraph, tmp_path: Path) -> None:
    with pytest.raises(SchemaViolation, match="shoe_size.*knows: .*home_city"):
        GraphitiMapping.from_data({"edges": {"WEARS": "shoe_size"}}).check(graph.schema)
    with pytest.raises(SchemaViolation, match="id_rule 'nickname'"):
        GraphitiMapping.from_data({"entities": {"id_rule": "nickname"}, "edges": {}})
    with pytest.raises(SchemaViolation, match="unknown entity type 'Robot'"):
        GraphitiMapping.from_data({"entities": {"types": {"Bot": "Robot"}}, "edges": {}}).check(graph.schema)
    with pytest.raises(SchemaViolation, match="value 'target'"):
        GraphitiMapping.from_data({"edges": {"LIVES_IN": {"attribute": "home_city", "value": "target"}}}
                                  ).check(graph.schema)


def test_cli_import_graphiti(env: None, graph: MemoryGraph, tenant: str, written: Written) -> None:
    args = ["import-graphiti", "--mapping", str(MAPPING), "--tenant", tenant, "--group-id", written.group]
    dry = runner.invoke(app, [*args, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["deltas"] == 6
    with pytest.raises(UnknownTenant):
        graph.current(tenant, "mira")
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    assert "LIKES" in done.output and "WORKS_AT" in done.output
    assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Lisbon"]
    bad = runner.invoke(app, ["import-graphiti", "--mapping", str(MAPPING), "--tenant", "bad tenant"])
    assert bad.exit_code == 1 and "tenant_id" in bad.output

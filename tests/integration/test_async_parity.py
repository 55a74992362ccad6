"""The async graph runs the same operations as the sync one (they share every operation of
``graph/steps``): the same sequence on twin tenants gives the same reports, against the real server."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from sgam import AsyncMemoryGraph, Episode, MemoryDelta, MemoryGraph
from sgam.graph.schema import default_schema
from sgam.graph.store import Store

MAPPING = Path(__file__).resolve().parents[2] / "graph" / "schemas" / "graphiti-mapping.yaml"
DAY = datetime(2026, 3, 1, tzinfo=timezone.utc)


def _seed(tenant: str) -> tuple[list[dict[str, Any]], list[MemoryDelta]]:
    episodes = [{"tenant_id": tenant, "id": "call", "content": "Called Ada about Mira.", "occurred_at": DAY},
                {"tenant_id": tenant, "id": "crm", "content": "Mira's passport and Ada's address.",
                 "occurred_at": DAY}]
    deltas = [
        MemoryDelta(tenant_id=tenant, subject="ada", subject_type="Customer", attribute="last_contacted_at",
                    value="2026-03-01T10:00:00+00:00", valid_from=DAY, source_episode_id="call"),
        MemoryDelta(tenant_id=tenant, subject="ada", attribute="address", value="1 Road", valid_from=DAY,
                    source_episode_id="crm"),
        MemoryDelta(tenant_id=tenant, subject="mira", attribute="passport_deadline", value="2026-07-15",
                    valid_from=DAY, source_episode_id="crm"),
    ]
    return episodes, deltas


def _plain(report: Any, tenant: str) -> Any:
    """A report with what differs between twin tenants by design (names, ids, times) left out."""
    data = dataclasses.asdict(report) if dataclasses.is_dataclass(report) else report
    drop = {"tenant_id", "tenant", "now", "at", "record_id", "target", "forgotten_at", "id", "merge_id", "merged_at",
            "split_at"}
    if isinstance(data, dict):
        return {k: _plain(v, tenant) for k, v in data.items() if k not in drop}
    if isinstance(data, list):
        return [_plain(v, tenant) for v in data]
    return data


def _bars(figure: Any) -> int:
    """How many fact bars a timeline figure draws (each a Rectangle with its memory_id as gid)."""
    return sum(1 for axes in figure.axes for patch in axes.patches if patch.get_gid())


def _twin(tenant: str) -> MemoryDelta:
    """A second Ada, for the entity resolution calls."""
    return MemoryDelta(tenant_id=tenant, subject="ada-lovelace", subject_type="Customer", subject_name="Ada Lovelace",
                       attribute="address", value="2 Road", valid_from=DAY, source_episode_id="crm")


def _likely(candidates: list[Any]) -> list[tuple[str, str]]:
    """The pairs of candidate merges with strong evidence (full-text scores vary with the index)."""
    return [(c.a, c.b) for c in candidates if c.score >= 0.5]


def _sync_run(graph: MemoryGraph, tenant: str) -> dict[str, Any]:
    episodes, deltas = _seed(tenant)
    graph.record_episode(**episodes[0])
    outcomes = graph.record_episodes([Episode(**e) for e in episodes])
    written = graph.write_many(deltas)
    later = graph.clock() + timedelta(days=40)
    return {
        "recorded": outcomes,
        "written": [r.outcome for r in written.results],
        "schema": graph.apply_schema(graph.schema, dry_run=True).status,
        "networkx": sorted(graph.to_networkx(tenant, hops=1).nodes),
        "timeline": _bars(graph.timeline(tenant, "ada", "address")),
        "purge": _plain(graph.purge(tenant, now=later), tenant),
        "forget_dry": _plain(graph.forget_subject(tenant, "mira", dry_run=True), tenant),
        "forget": _plain(graph.forget_subject(tenant, "mira", actor="test"), tenant),
        "residue": graph.residue(tenant, "mira", forgotten=True),
        "twin": graph.write(_twin(tenant)).outcome,
        "alias": graph.add_alias(tenant, "ada", "Ada L", actor="test"),
        "candidates": _likely(graph.merge_candidates(tenant)),
        "merge_dry": _plain(graph.merge_entities(tenant, "ada", "ada-lovelace", dry_run=True), tenant),
        "merge": _plain(graph.merge_entities(tenant, "ada", "ada-lovelace", actor="test", reason="one"), tenant),
        "split": _plain(graph.split_entities(tenant, "ada", "ada-lovelace", actor="test"), tenant),
        "merges": _plain(graph.merges(tenant), tenant),
        "graphiti": _plain(graph.import_graphiti(MAPPING, tenant, group_ids=["none-" + tenant], dry_run=True),
                           tenant),
        "delete_dry": _plain(graph.delete_tenant(tenant, dry_run=True, actor="test"), tenant),
        "delete": _plain(graph.delete_tenant(tenant, actor="test"), tenant),
        "after": graph.store.read("MATCH (e:Entity {tenant_id: $t}) RETURN count(e) AS n", {"t": tenant}),
    }


async def _async_run(graph: AsyncMemoryGraph, tenant: str) -> dict[str, Any]:
    episodes, deltas = _seed(tenant)
    await graph.record_episode(**episodes[0])
    outcomes = await graph.record_episodes([Episode(**e) for e in episodes])
    written = await graph.write_many(deltas)
    later = graph.clock() + timedelta(days=40)
    return {
        "recorded": outcomes,
        "written": [r.outcome for r in written.results],
        "schema": (await graph.apply_schema(graph.schema, dry_run=True)).status,
        "networkx": sorted((await graph.to_networkx(tenant, hops=1)).nodes),
        "timeline": _bars(await graph.timeline(tenant, "ada", "address")),
        "purge": _plain(await graph.purge(tenant, now=later), tenant),
        "forget_dry": _plain(await graph.forget_subject(tenant, "mira", dry_run=True), tenant),
        "forget": _plain(await graph.forget_subject(tenant, "mira", actor="test"), tenant),
        "residue": await graph.residue(tenant, "mira", forgotten=True),
        "twin": (await graph.write(_twin(tenant))).outcome,
        "alias": await graph.add_alias(tenant, "ada", "Ada L", actor="test"),
        "candidates": _likely(await graph.merge_candidates(tenant)),
        "merge_dry": _plain(await graph.merge_entities(tenant, "ada", "ada-lovelace", dry_run=True), tenant),
        "merge": _plain(await graph.merge_entities(tenant, "ada", "ada-lovelace", actor="test", reason="one"),
                        tenant),
        "split": _plain(await graph.split_entities(tenant, "ada", "ada-lovelace", actor="test"), tenant),
        "merges": _plain(await graph.merges(tenant), tenant),
        "graphiti": _plain(await graph.import_graphiti(MAPPING, tenant, group_ids=["none-" + tenant],
                                                       dry_run=True), tenant),
        "delete_dry": _plain(await graph.delete_tenant(tenant, dry_run=True, actor="test"), tenant),
        "delete": _plain(await graph.delete_tenant(tenant, actor="test"), tenant),
        "after": await graph.store.read("MATCH (e:Entity {tenant_id: $t}) RETURN count(e) AS n", {"t": tenant}),
    }


def test_the_async_graph_gives_the_sync_graph_s_reports(graph: MemoryGraph, tenant: str, neo4j_connection,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("networkx")
    pytest.importorskip("matplotlib")
    uri, auth = neo4j_connection
    expected = _sync_run(graph, tenant)

    def no_sync_driver(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("AsyncMemoryGraph.connect opened a sync driver")

    monkeypatch.setattr(Store, "connect", no_sync_driver)

    async def scenario() -> dict[str, Any]:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as agraph:
            return await _async_run(agraph, tenant + "-a")

    got = asyncio.run(scenario())
    assert expected["recorded"] == {"call": "existing", "crm": "created"} and expected["timeline"] == 1
    assert expected["written"] == ["created", "created", "created"]
    assert expected["purge"]["facts"] == {"session": 1, "operational": 0}
    assert expected["forget"]["facts"] > 0 and expected["residue"] == []
    assert expected["twin"] == "created" and expected["alias"] == {"ada l": []}
    assert ("ada", "ada-lovelace") in expected["candidates"]
    assert expected["merge"]["conflicts"] and expected["merge"]["created"] > 0 and not expected["merge"]["dry_run"]
    assert expected["merge_dry"]["dry_run"] and expected["split"]["split"]
    assert [m["status"] for m in expected["merges"]] == ["split"]
    assert expected["delete"]["counts"]["entities"] > 0 and expected["after"] == [{"n": 0}]
    assert got == expected


def test_async_explain_and_schema_apply(neo4j_connection) -> None:
    uri, auth = neo4j_connection

    async def scenario() -> tuple[Any, str]:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as agraph:
            plan = await agraph.store.explain("MATCH (e:Entity {tenant_id: 'x'}) RETURN e")
            return plan, (await agraph.apply_schema(default_schema())).status

    plan, status = asyncio.run(scenario())
    assert plan["operatorType"].startswith("ProduceResults") and status == "unchanged"

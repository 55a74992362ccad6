"""Graphiti as a benchmark system: the MiniLM embedder seam, scale_probe at a small size, and that
Graphiti's graph and SGAM's share one database without changing each other's answers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("graphiti_core")
pytest.importorskip("sentence_transformers")

from sgam.bench import graphiti as bench_graphiti  # noqa: E402
from sgam.bench.replay import NONE, SIZES, SimClock, START, answer_sgam, generate, load_sgam  # noqa: E402

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _count(session: bench_graphiti.GraphitiSession, group: str) -> int:
    records, _, _ = session.run(session.driver.execute_query(
        "MATCH (n {group_id: $g}) RETURN count(n) AS n", g=group))
    return int(records[0]["n"])


def test_minilm_embedder_client() -> None:
    client = bench_graphiti.MiniLMEmbedder()
    import asyncio

    one = asyncio.run(client.create(input_data=["Mira's home city is Lisbon"]))
    batch = asyncio.run(client.create_batch(["a", "b"]))
    assert len(one) == 384 and len(batch) == 2 and len(batch[0]) == 384
    with pytest.raises(bench_graphiti.GraphitiUnavailable, match="token ids"):
        asyncio.run(client.create(input_data=[[1, 2, 3]]))


def test_scale_probe_small(neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    uri, auth = neo4j_connection
    rows, questions = [], []
    for i in range(6):
        for attribute, values in (("home_city", ("Berlin", "Lisbon", "Oslo")),
                                  ("employer", ("Acme", "Globex"))):
            starts = [T0 + timedelta(days=100 * k) for k in range(len(values))]
            for k, value in enumerate(values):
                end = starts[k + 1] if k + 1 < len(values) else None
                rows.append({"subject": f"subject-{i}", "attribute": attribute,
                             "value": f"{value}-{i}", "valid_from": starts[k], "valid_to": end})
            questions.append({"subject": f"subject-{i}", "attribute": attribute, "as_of": None})
            questions.append({"subject": f"subject-{i}", "attribute": attribute,
                              "as_of": starts[0] + timedelta(days=10)})
    group = "scale-probe-test"
    result = bench_graphiti.scale_probe(uri, auth, rows, questions, group_id=group)

    assert set(result) == {"rows", "load_s", "search_p50_ms", "search_p95_ms", "search_p99_ms",
                           "accuracy"}
    assert result["rows"] == len(rows) == 30
    assert result["load_s"] > 0
    assert 0 < result["search_p50_ms"] <= result["search_p95_ms"] <= result["search_p99_ms"]
    # with the as-of filter the value at the date is the only candidate edge of the slot
    assert 0.5 <= result["accuracy"] <= 1.0
    session = bench_graphiti.GraphitiSession(uri, auth)
    try:
        assert _count(session, group) == 0                      # the group was deleted afterwards
    finally:
        session.close()


def test_scale_probe_rejects_bad_input(neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    uri, auth = neo4j_connection
    with pytest.raises(bench_graphiti.GraphitiUnavailable, match="group_id"):
        bench_graphiti.scale_probe(uri, auth, [], [], group_id="bad group!")
    with pytest.raises(bench_graphiti.GraphitiUnavailable, match=r"row 0 lacks \['valid_to'\]"):
        bench_graphiti.scale_probe(uri, auth, [{"subject": "s", "attribute": "a", "value": 1,
                                                "valid_from": T0}], [], group_id="ok-group")


def test_graphiti_and_sgam_share_a_database(neo4j_connection: tuple[str, tuple[str, str]],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphiti's answers are the same with SGAM's data beside them, and SGAM's answers are exact
    with Graphiti's graph and indexes beside them (both use the label Entity)."""
    from sgam.api import MemoryGraph

    uri, auth = neo4j_connection
    # Smoke's two tenants with three persons each, not six: 66 episodes at seed 5 instead of 150
    # (Graphiti's load is most of this test), still with erased persons and every question type.
    monkeypatch.setitem(SIZES, "smoke", {**SIZES["smoke"], "persons": 3})
    world = generate("smoke", 5, "coexist")
    questions = world.questions[::4]
    session = bench_graphiti.GraphitiSession(uri, auth)
    replay = bench_graphiti.GraphitiReplay(session)
    clock = SimClock(START)
    graph = MemoryGraph.connect(uri, auth, clock=clock)
    try:
        load = replay.load(world)
        assert load["graphiti_indexes"]["fulltext"] == 4
        # an erased person's facts and episodes are gone from Graphiti's graph
        erased = [(bench_graphiti.group_for(t), world.persons[s])
                  for t, subjects in world.erased.items() for s in subjects]
        assert erased
        for group, name in erased:
            records, _, _ = session.run(session.driver.execute_query(
                "OPTIONAL MATCH ()-[e:RELATES_TO {group_id: $g}]->() WHERE e.fact STARTS WITH $p "
                "WITH count(e) AS facts OPTIONAL MATCH (ep:Episodic {group_id: $g}) "
                "WHERE ep.content CONTAINS $p RETURN facts, count(ep) AS episodes",
                g=group, p=f"{name}'s"))
            assert (records[0]["facts"], records[0]["episodes"]) == (0, 0), name
        alone = [(replay.answer(q, False), replay.answer(q, True)) for q in questions]
        load_sgam(graph, clock, world)
        clock.now = datetime.now(timezone.utc)
        beside = [(replay.answer(q, False), replay.answer(q, True)) for q in questions]
        assert beside == alone
        assert any(a != NONE for a, _ in alone)
        # SGAM exact, and its entity search sees only its own tenant's entities
        assert [answer_sgam(graph, q) for q in questions] == [q.gold for q in questions]
        tenant = world.tenants[0]
        found = graph.store.read(
            "CALL db.index.fulltext.queryNodes('sgam_entity_name', $text) YIELD node "
            "WHERE node.tenant_id = $t RETURN count(node) AS n, "
            "count(node.group_id) AS graphiti", {"text": "alex OR mira OR sam", "t": tenant})[0]
        assert found["graphiti"] == 0
        # Graphiti's entity nodes carry no tenant_id, SGAM's no group_id
        counts = graph.store.read(
            "MATCH (n:Entity) RETURN count(n.group_id IS NOT NULL AND n.tenant_id IS NOT NULL "
            "OR NULL) AS both", {})[0]
        assert counts["both"] == 0
    finally:
        remaining = replay.delete()
        session.close()
        for tenant in world.tenants:
            graph.delete_tenant(tenant)
        graph.close()
    assert all(n == 0 for n in remaining.values())

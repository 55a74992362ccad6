"""Vector expansion is exact per tenant: a small tenant sharing the database (and so the vector
indexes) with a large one whose thousands of near-identical vectors crowd the nearest neighbours
still gets its true top k of episodes, entities and statements.

The oracle is the specification of the score, Neo4j's cosine similarity ``(1 + cos) / 2``,
computed with numpy over the small tenant's own vectors (stored as 32-bit floats). Vectors are
synthetic (no model needed); the small tenant's nodes are written through the public API, so
every one of them passes the queries' other filters, and the large tenant's are bare nodes in the
same indexes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sgam import MemoryGraph
from sgam.queries.context import MAX_FETCH, OVERFETCH

np = pytest.importorskip("numpy")

DIMENSIONS = 384
SMALL = 30                                    # episodes, entities and statements of the small tenant
CROWD = {"Episode": MAX_FETCH + 400, "Entity": 1200, "Value": 1200}   # the large tenant's
WHEN = datetime(2026, 1, 1, tzinfo=timezone.utc)
LATER = WHEN + timedelta(days=30)

SET_VECTORS = {
    "Episode": "MATCH (n:Episode {tenant_id: $tenant, id: row.id})",
    "Entity": "MATCH (n:Entity {tenant_id: $tenant, id: row.id})",
    "Value": "MATCH (:Entity {tenant_id: $tenant, id: row.id})-[f]->(n:Value) WHERE f.memory_id IS NOT NULL",
}
CROWD_NODES = """
UNWIND $rows AS row
CALL (row) {
  CREATE (n:$($label) {tenant_id: $tenant, id: row.id, key: row.id, content: 'crowd', name: 'crowd',
                       occurred_at: $when})
  WITH n CALL db.create.setNodeVectorProperty(n, 'embedding', row.vector)
} IN TRANSACTIONS OF 500 ROWS
"""


def unit(rows: Any) -> Any:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


CENTRE = unit(np.random.default_rng(16).normal(size=DIMENSIONS))


def set_vectors(graph: MemoryGraph, tenant: str, label: str, vectors: dict[str, Any]) -> None:
    graph.store.run_write(f"UNWIND $rows AS row {SET_VECTORS[label]} "
                          "CALL db.create.setNodeVectorProperty(n, 'embedding', row.vector)",
                          {"tenant": tenant, "rows": [{"id": i, "vector": v.tolist()} for i, v in vectors.items()]})


@pytest.fixture(scope="module")
def crowd(shared_graph: MemoryGraph) -> Iterator[str]:
    """The large tenant: thousands of vectors of each kind, all within a hair of CENTRE."""
    tenant = f"crowd-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(1)
    with shared_graph.store.driver.session(database=shared_graph.store.database) as session:
        for label, count in CROWD.items():
            vectors = unit(CENTRE + 0.02 * rng.normal(size=(count, DIMENSIONS)))
            session.run(CROWD_NODES, label=label, tenant=tenant, when=WHEN,
                        rows=[{"id": f"c{i}", "vector": v.tolist()} for i, v in enumerate(vectors)]).consume()
    yield tenant
    with shared_graph.store.driver.session(database=shared_graph.store.database) as session:
        for label in CROWD:
            session.run("MATCH (n:$($label) {tenant_id: $tenant}) CALL (n) { DETACH DELETE n } "
                        "IN TRANSACTIONS OF 1000 ROWS", label=label, tenant=tenant).consume()


@pytest.fixture(scope="module")
def small(shared_graph: MemoryGraph) -> Iterator[str]:
    """The small tenant: SMALL episodes, and SMALL people with one statement each."""
    tenant = f"small-{uuid.uuid4().hex[:8]}"
    for i in range(SMALL):
        shared_graph.record_episode(tenant_id=tenant, id=f"e{i}", content=f"episode {i}", occurred_at=WHEN)
        shared_graph.write(tenant_id=tenant, subject=f"p{i}", subject_name=f"Person {i}",
                           attribute="response_style", value=f"style {i}", valid_from=WHEN,
                           source_episode_id=f"e{i}")
    yield tenant
    shared_graph.delete_tenant(tenant)


def score(vectors: Any, query: Any) -> Any:
    """Neo4j's cosine similarity, (1 + cos) / 2, over the vectors as stored (32-bit floats)."""
    stored = unit(vectors.astype(np.float32).astype(np.float64))
    return (1 + stored @ unit(query)) / 2


def assert_true_top_k(hits: list[tuple[str, float]], mine: dict[str, Any], query: Any, k: int) -> None:
    """``hits`` (id, score) are a true top k: each score is that item's, and they are the k best."""
    ids = list(mine)
    oracle = dict(zip(ids, score(np.array([mine[i] for i in ids]), query)))
    best = sorted(oracle.values(), reverse=True)[:k]
    assert len(hits) == len(best), (hits, best)
    for (item, got), want in zip(hits, best):
        assert got == pytest.approx(oracle[item], abs=1e-5), item
        assert got == pytest.approx(want, abs=1e-5), (hits, best)


def small_vectors(seed: int, near: float) -> tuple[dict[str, dict[str, Any]], Any]:
    """The small tenant's vectors of each kind and a query, all near CENTRE (so the crowd is
    nearer the query than most of them); ``near`` scales how far the small tenant's lie."""
    rng = np.random.default_rng(seed)
    query = unit(CENTRE + 0.01 * rng.normal(size=DIMENSIONS))
    kinds = {}
    for label, prefix in (("Episode", "e"), ("Entity", "p"), ("Value", "p")):
        spread = near * rng.uniform(0.2, 1.0, size=(SMALL, 1))
        vectors = unit(CENTRE + spread * rng.normal(size=(SMALL, DIMENSIONS)))
        kinds[label] = {f"{prefix}{i}": vectors[i] for i in range(SMALL)}
    return kinds, query


def knn(graph: MemoryGraph, name: str, tenant: str, query: Any, k: int, **extra: Any) -> dict[str, Any]:
    [row] = graph.query(name, tenant=tenant, vector=query.tolist(), k=k, min_score=0.0, valid_at=LATER,
                        principal="*", **extra)
    return row


def hit_ids(name: str, row: dict[str, Any]) -> list[tuple[str, float]]:
    if name.startswith("knn-statements"):
        return [(h["fact"]["subject"], h["score"]) for h in row["hits"]]
    return [(h["id"], h["score"]) for h in row["hits"]]


KINDS = [("knn-episodes", "Episode"), ("knn-entities", "Entity"), ("knn-statements", "Value")]


def test_the_crowd_does_crowd_the_vector_index_out(shared_graph: MemoryGraph, crowd: str, small: str) -> None:
    """Without the exact search the small tenant would come short: the index's nearest of all
    tenants are the crowd's (for episodes even the widest fetch, MAX_FETCH)."""
    kinds, query = small_vectors(7, 0.2)
    k = 5
    for label, vectors in kinds.items():
        set_vectors(shared_graph, small, label, vectors)
    for name, label in KINDS:
        fetch = MAX_FETCH if label == "Episode" else k * OVERFETCH
        assert len(knn(shared_graph, name, small, query, k, fetch=fetch)["hits"]) < k, name
        row = knn(shared_graph, f"{name}-exact", small, query, k, exact_limit=SMALL)
        assert row["exact"] and row["scanned"] == SMALL
        assert_true_top_k(hit_ids(name, row), kinds[label], query, k)
    found, ctx = context_episodes(shared_graph, small, query, k, limit=0)
    assert found == oracle_episodes(kinds, query, k)
    assert any(note.startswith(f"knn-episodes: the {MAX_FETCH} nearest") for note in ctx.notes), ctx.notes


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), near=st.floats(0.01, 0.5), k=st.integers(1, 12))
def test_a_small_tenant_beside_a_large_one_gets_its_true_top_k(
        shared_graph: MemoryGraph, crowd: str, small: str, seed: int, near: float, k: int) -> None:
    kinds, query = small_vectors(seed, near)
    for label, vectors in kinds.items():
        set_vectors(shared_graph, small, label, vectors)
    for name, label in KINDS:
        row = knn(shared_graph, f"{name}-exact", small, query, k, exact_limit=5000)
        assert row["exact"]
        assert_true_top_k(hit_ids(name, row), kinds[label], query, k)
    # the context's vector evidence is the same top k, by the exact path and (exact_limit=0) by
    # the vector index, widened and, when the crowd defeats it, the tenant scored whole
    for limit in (5000, 0):
        assert context_episodes(shared_graph, small, query, k, limit)[0] == oracle_episodes(kinds, query, k)


def context_episodes(graph: MemoryGraph, tenant: str, query: Any, k: int, limit: int) -> tuple[set[str], Any]:
    """The episodes the context found by vector, and the context."""
    ctx = graph.context(tenant, "which style?", subjects=[], budget_tokens=100_000, k=k,
                        question_vector=query.tolist(), min_score=0.0, valid_at=LATER, principal="*",
                        exact_limit=limit)
    return {e.id for e in ctx.evidence if e.kind == "episode" and "vector" in e.sources}, ctx


def oracle_episodes(kinds: dict[str, dict[str, Any]], query: Any, k: int) -> set[str]:
    ids = list(kinds["Episode"])
    oracle = score(np.array([kinds["Episode"][i] for i in ids]), query)
    return {ids[i] for i in np.argsort(-oracle)[:k]}

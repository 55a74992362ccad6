"""``SgamStore`` against LangGraph's ``BaseStore`` contract, on the real store. langgraph ships no
store conformance tests, so the oracle is its reference implementation, ``InMemoryStore``: the same
random operations on both give the same items, search results and namespaces."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from sgam.api import MemoryGraph
from sgam.graph.errors import InvalidDelta
from sgam.integrations.langgraph import SgamStore, store_schema


@pytest.fixture(scope="module")
def graph(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[MemoryGraph]:
    uri, auth = neo4j_connection
    connected = MemoryGraph.connect(uri, auth, schema=store_schema())
    yield connected
    connected.close()


def fresh(graph: MemoryGraph) -> SgamStore:
    return SgamStore(graph, f"t-{uuid.uuid4().hex[:12]}")


NAMESPACES = [("memories", "u1"), ("memories", "u2"), ("memories", "u1", "notes"), ("docs",)]
KEYS = ["k1", "k2", "k3"]
VALUES = st.fixed_dictionaries({"kind": st.sampled_from(["fact", "note"]), "n": st.integers(0, 3),
                                "text": st.sampled_from(["likes tea", "Tea at five", "runs daily"])})
OPS = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), VALUES),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), st.none()),
)


def snapshot(store: BaseStore) -> tuple[object, ...]:
    gets = tuple((ns, k, getattr(store.get(ns, k), "value", None)) for ns in NAMESPACES for k in KEYS)
    searches = tuple(
        sorted((i.namespace, i.key, json.dumps(i.value, sort_keys=True)) for i in store.search(prefix, filter=flt, limit=100))
        for prefix in [("memories",), ("memories", "u1"), ("docs",), ()]
        for flt in [None, {"kind": "note"}, {"kind": "fact", "n": 2}])
    spaces = (listed(store), listed(store, prefix=("memories",)), listed(store, suffix=("notes",)),
              listed(store, max_depth=1), listed(store, prefix=("memories", "*")))
    return gets, searches, spaces


def listed(store: BaseStore, **conditions: object) -> list[tuple[str, ...]]:
    """``list_namespaces``, sorted. InMemoryStore also lists a namespace once named by a get or a
    delete that left no item in it; a namespace of the contract holds items (in it, or under it
    when max_depth cut it short), so such empty ones are dropped."""
    def holds(ns: tuple[str, ...]) -> bool:
        under = store.search(ns, limit=1000)
        return any(i.namespace == ns or "max_depth" in conditions for i in under)

    return sorted(ns for ns in store.list_namespaces(limit=100, **conditions) if holds(ns))  # type: ignore[arg-type]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=10))
def test_the_same_operations_give_what_the_reference_store_gives(graph: MemoryGraph,
                                                                  ops: list[tuple[str, tuple[str, ...], str, dict | None]]) -> None:
    mine, reference = fresh(graph), InMemoryStore()
    for kind, namespace, key, value in ops:
        for store in (mine, reference):
            store.put(namespace, key, value) if kind == "put" else store.delete(namespace, key)
    assert snapshot(mine) == snapshot(reference)


def test_items_keep_their_creation_time_and_history(graph: MemoryGraph) -> None:
    store = fresh(graph)
    assert store.get(("memories", "u1"), "k1") is None
    store.put(("memories", "u1"), "k1", {"text": "likes tea"})
    first = store.get(("memories", "u1"), "k1")
    store.put(("memories", "u1"), "k1", {"text": "likes coffee"})
    second = store.get(("memories", "u1"), "k1")
    assert second.value == {"text": "likes coffee"} and second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    store.delete(("memories", "u1"), "k1")
    store.delete(("memories", "u1"), "k1")   # a second delete is a no-op
    assert store.get(("memories", "u1"), "k1") is None
    subject = graph.store.read("MATCH (s:Entity {tenant_id: $t}) RETURN s.id AS id", {"t": store.tenant})[0]["id"]
    versions = graph.history(store.tenant, subject, "store_item")
    assert sum('"likes tea"' in f.value for f in versions) >= 1 and sum('"likes coffee"' in f.value for f in versions) >= 1


def test_search_by_query_ranks_by_matching_words(graph: MemoryGraph) -> None:
    store = fresh(graph)
    store.put(("m",), "a", {"text": "tea at five"})
    store.put(("m",), "b", {"text": "coffee at nine"})
    store.put(("m",), "c", {"text": "green tea at five"})
    found = store.search(("m",), query="green tea", limit=10)
    assert [i.key for i in found] == ["c", "a"] and found[0].score == 1.0 and found[1].score == 0.5
    assert [i.key for i in store.search(("m",), query="tea", limit=1, offset=1)] in (["a"], ["c"])


def test_async_methods_and_tenants(graph: MemoryGraph) -> None:
    store, other = fresh(graph), fresh(graph)

    async def run() -> None:
        await store.aput(("memories", "u1"), "k", {"text": "x"})
        assert (await store.aget(("memories", "u1"), "k")).value == {"text": "x"}
        assert [i.key for i in await store.asearch(("memories",))] == ["k"]
        assert await store.alist_namespaces() == [("memories", "u1")]
        assert await other.alist_namespaces() == [] and await other.aget(("memories", "u1"), "k") is None
        await store.adelete(("memories", "u1"), "k")
        assert await store.aget(("memories", "u1"), "k") is None

    asyncio.run(run())


def test_a_value_too_big_for_one_fact_is_refused(graph: MemoryGraph) -> None:
    store = fresh(graph)
    with pytest.raises(InvalidDelta, match="7000-byte"):
        store.put(("m",), "big", {"text": "x" * 8000})


def test_a_graph_without_the_store_schema_is_refused(shared_graph: MemoryGraph) -> None:
    with pytest.raises(InvalidDelta, match="store_schema"):
        SgamStore(shared_graph, "t1")

"""``SgamStore`` against LangGraph's ``BaseStore`` contract, on the real store. langgraph ships no
store conformance tests, so the oracle is its reference implementation, ``InMemoryStore``: the same
random operations on both give the same items, search results and namespaces. Each test runs on a
store over a ``MemoryGraph`` and on one over an ``AsyncMemoryGraph`` (whose ops are its async ones,
run on the graph's event loop in a thread of its own)."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from sgam.api import AsyncMemoryGraph, MemoryGraph
from sgam.graph.errors import InvalidDelta
from sgam.integrations.langgraph import SgamStore, store_schema


@pytest.fixture(scope="module")
def graph(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[MemoryGraph]:
    uri, auth = neo4j_connection
    connected = MemoryGraph.connect(uri, auth, schema=store_schema())
    yield connected
    connected.close()


@pytest.fixture(scope="module")
def async_graph(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[tuple[asyncio.AbstractEventLoop,
                                                                                 AsyncMemoryGraph]]:
    """An ``AsyncMemoryGraph`` on an event loop running in a thread of its own."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    uri, auth = neo4j_connection
    connected = asyncio.run_coroutine_threadsafe(
        AsyncMemoryGraph.connect(uri, auth, schema=store_schema(), bootstrap=False), loop).result()
    yield loop, connected
    asyncio.run_coroutine_threadsafe(connected.close(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


Fresh = Callable[[], SgamStore]


@pytest.fixture(params=["MemoryGraph", "AsyncMemoryGraph"])
def fresh(request: pytest.FixtureRequest, graph: MemoryGraph) -> Fresh:
    """Makes a store in a fresh tenant, over the sync graph or, made on its loop, the async one."""
    if request.param == "MemoryGraph":
        return lambda: SgamStore(graph, f"t-{uuid.uuid4().hex[:12]}")
    loop, agraph = request.getfixturevalue("async_graph")

    async def made() -> SgamStore:
        return SgamStore(agraph, f"t-{uuid.uuid4().hex[:12]}")

    return lambda: asyncio.run_coroutine_threadsafe(made(), loop).result()


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
def test_the_same_operations_give_what_the_reference_store_gives(fresh: Fresh,
                                                                  ops: list[tuple[str, tuple[str, ...], str, dict | None]]) -> None:
    mine, reference = fresh(), InMemoryStore()
    for kind, namespace, key, value in ops:
        for store in (mine, reference):
            store.put(namespace, key, value) if kind == "put" else store.delete(namespace, key)
    assert snapshot(mine) == snapshot(reference)


def test_items_keep_their_creation_time_and_history(graph: MemoryGraph, fresh: Fresh) -> None:
    store = fresh()
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


def test_search_by_query_ranks_by_matching_words(fresh: Fresh) -> None:
    store = fresh()
    store.put(("m",), "a", {"text": "tea at five"})
    store.put(("m",), "b", {"text": "coffee at nine"})
    store.put(("m",), "c", {"text": "green tea at five"})
    found = store.search(("m",), query="green tea", limit=10)
    assert [i.key for i in found] == ["c", "a"] and found[0].score == 1.0 and found[1].score == 0.5
    assert [i.key for i in store.search(("m",), query="tea", limit=1, offset=1)] in (["a"], ["c"])


def test_async_methods_and_tenants(fresh: Fresh, request: pytest.FixtureRequest) -> None:
    store, other = fresh(), fresh()

    async def run() -> None:
        await store.aput(("memories", "u1"), "k", {"text": "x"})
        assert (await store.aget(("memories", "u1"), "k")).value == {"text": "x"}
        assert [i.key for i in await store.asearch(("memories",))] == ["k"]
        assert await store.alist_namespaces() == [("memories", "u1")]
        assert await other.alist_namespaces() == [] and await other.aget(("memories", "u1"), "k") is None
        await store.adelete(("memories", "u1"), "k")
        assert await store.aget(("memories", "u1"), "k") is None

    if isinstance(store.graph, MemoryGraph):
        asyncio.run(run())
    else:   # on the async graph's own loop: no thread in between
        asyncio.run_coroutine_threadsafe(run(), request.getfixturevalue("async_graph")[0]).result()


def test_a_sync_call_on_the_loop_of_its_async_graph_is_refused(neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    async def run() -> None:
        agraph = await AsyncMemoryGraph.connect(*neo4j_connection, schema=store_schema(), bootstrap=False)
        try:
            store = SgamStore(agraph, f"t-{uuid.uuid4().hex[:12]}")
            with pytest.raises(InvalidDelta, match="async methods"):
                store.put(("m",), "k", {"text": "x"})   # would block the loop it needs
            await store.aput(("m",), "k", {"text": "x"})
            assert (await store.aget(("m",), "k")).value == {"text": "x"}
        finally:
            await agraph.close()

    asyncio.run(run())


def test_a_value_too_big_for_one_fact_is_refused(fresh: Fresh) -> None:
    store = fresh()
    with pytest.raises(InvalidDelta, match="7000-byte"):
        store.put(("m",), "big", {"text": "x" * 8000})


def test_a_graph_without_the_store_schema_is_refused(shared_graph: MemoryGraph) -> None:
    with pytest.raises(InvalidDelta, match="store_schema"):
        SgamStore(shared_graph, "t1")

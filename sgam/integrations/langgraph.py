"""A LangGraph long-term store on SGAM: :class:`SgamStore` implements LangGraph's ``BaseStore``.

The store works in one tenant. An item ``(namespace, key)`` is one subject (an id derived from
both), its ``store_item`` fact holds the item as JSON: a ``put`` writes a new version, a delete
retracts it, so what an agent stored and overwrote stays in the item's history. ``search`` matches
a namespace prefix and exact ``filter`` values; a ``query`` ranks items by the share of its words
their text contains (no vector index: ``index`` is ignored). TTLs are not supported.

Connect the graph with this module's schema (:func:`store_schema`)::

    graph = MemoryGraph.connect(schema=store_schema())
    store = SgamStore(graph, tenant="acme")

For an async agent, an :class:`~sgam.api.AsyncMemoryGraph` (``await AsyncMemoryGraph.connect(
schema=store_schema())``) runs ``aget``, ``aput``, ``asearch``... on the async driver, with no
thread per call.

Needs the ``langgraph`` extra.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Generator, Iterable
from datetime import datetime
from importlib.resources import files
from typing import Any

import yaml
from langgraph.store.base import (
    BaseStore, GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchItem, SearchOp,
)

from sgam.api import AsyncMemoryGraph, MemoryGraph
from sgam.graph.errors import Conflict, InvalidDelta, NotFound, SgamError
from sgam.graph.schema import Schema, quote_identifier
from sgam.graph.codec import native

ATTRIBUTE = "store_item"
ENTITY_TYPE = "StoreItem"

# The items believed now and valid now; a LangGraph store has no valid time of its own.
CURRENT_ITEMS = """
MATCH (s:Entity {tenant_id: $tenant})-[f:%s]->()
WHERE ($ids IS NULL OR s.id IN $ids) AND f.expired_at IS NULL AND f.status = 'confirmed'
  AND f.valid_from <= datetime() AND (f.valid_to IS NULL OR datetime() < f.valid_to)
RETURN s.id AS id, f.value AS document, f.recorded_at AS updated_at
"""


def current_items_query(schema: Schema) -> str:
    """:data:`CURRENT_ITEMS` for the relationship type ``schema`` gives the items' attribute."""
    return CURRENT_ITEMS % quote_identifier(schema.rel_type(ATTRIBUTE))


def store_schema() -> Schema:
    """The schema a graph serving :class:`SgamStore` is connected with."""
    text = (files(__package__) / "langgraph-store.yaml").read_text(encoding="utf-8")
    return Schema.from_data(yaml.safe_load(text), origin="langgraph-store.yaml")


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """The subject id of an item: a digest, since namespace labels and keys may hold any text."""
    return "lg-" + hashlib.sha256(json.dumps([list(namespace), key]).encode("utf-8")).hexdigest()[:40]


# An op is a generator that yields the graph calls it needs, each as (method, keyword arguments),
# and is sent their answers: one logic for both graphs, driven by :meth:`SgamStore.batch` on a
# MemoryGraph and awaited by :meth:`SgamStore.abatch` on an AsyncMemoryGraph.
Call = tuple[str, dict[str, Any]]
Steps = Generator[Call, Any, Any]
READ = "read"
"""The call that reads a query (``read`` of the store its tenant lives on); every other call is the graph's own method."""


def _method(graph: MemoryGraph | AsyncMemoryGraph, name: str) -> Any:
    if name != READ:
        return getattr(graph, name)
    # The read goes to the store of the server its tenant is placed on (sgam.placement).
    if isinstance(graph, AsyncMemoryGraph):
        return lambda query, params: _aread(graph, query, params)
    return lambda query, params: _read(graph, query, params)


def _read(graph: MemoryGraph, query: str, params: dict[str, Any]) -> Any:
    return graph.targets.of([params["tenant"]]).read(query, params)


async def _aread(graph: AsyncMemoryGraph, query: str, params: dict[str, Any]) -> Any:
    store = await graph.targets.of([params["tenant"]])
    return await store.read(query, params)


class SgamStore(BaseStore):
    """LangGraph's ``BaseStore`` on a :class:`~sgam.api.MemoryGraph` or an
    :class:`~sgam.api.AsyncMemoryGraph`, in ``tenant``; writes are stated by ``actor``.

    On a ``MemoryGraph`` the sync methods run directly and the async ones in a worker thread; on
    an ``AsyncMemoryGraph`` the async methods run on it directly and the sync ones (a sync node of
    an async LangGraph runs in a worker thread) hand their ops to the event loop the store was
    made on."""

    def __init__(self, graph: MemoryGraph | AsyncMemoryGraph, tenant: str, *,
                 actor: str = "agent:langgraph") -> None:
        if ATTRIBUTE not in graph.schema.attributes:
            raise InvalidDelta(f"SgamStore needs a graph whose schema has the {ATTRIBUTE!r} attribute: "
                               "connect it with schema=store_schema()")
        self.graph = graph
        self.tenant = tenant
        self.actor = actor
        self._current = current_items_query(graph.schema)
        self._loop: asyncio.AbstractEventLoop | None = None
        if isinstance(graph, AsyncMemoryGraph):
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                pass   # made outside a loop: only the async methods can run

    # -- BaseStore ----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        graph = self.graph
        if isinstance(graph, MemoryGraph):
            return [self._run(self._one(op), graph) for op in ops]
        ops = list(ops)
        if self._loop is None or _running_on(self._loop):
            raise InvalidDelta("SgamStore on an AsyncMemoryGraph runs a sync method only from a thread "
                               "other than its event loop's (make the store inside the loop): use "
                               "the async methods (aget, aput, asearch, ...) there, or give it a MemoryGraph")
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        graph = self.graph
        if isinstance(graph, MemoryGraph):
            # A blocking graph runs in a worker thread: one op list at a time, in order.
            return await asyncio.to_thread(self.batch, list(ops))
        return [await self._arun(self._one(op), graph) for op in ops]

    @staticmethod
    def _run(steps: Steps, graph: MemoryGraph) -> Any:
        try:
            name, kwargs = next(steps)
            while True:
                try:
                    answer = _method(graph, name)(**kwargs)
                except SgamError as exc:   # the op may expect it (a concurrent delete)
                    name, kwargs = steps.throw(exc)
                else:
                    name, kwargs = steps.send(answer)
        except StopIteration as done:
            return done.value

    @staticmethod
    async def _arun(steps: Steps, graph: AsyncMemoryGraph) -> Any:
        try:
            name, kwargs = next(steps)
            while True:
                try:
                    answer = await _method(graph, name)(**kwargs)
                except SgamError as exc:
                    name, kwargs = steps.throw(exc)
                else:
                    name, kwargs = steps.send(answer)
        except StopIteration as done:
            return done.value

    def _one(self, op: Op) -> Steps:
        if isinstance(op, GetOp):
            found = yield from self._items([item_id(op.namespace, op.key)])
            return found[0] if found else None
        if isinstance(op, PutOp):
            yield from self._put(op)
            return None
        if isinstance(op, SearchOp):
            return (yield from self._search(op))
        if isinstance(op, ListNamespacesOp):
            return (yield from self._namespaces(op))
        raise InvalidDelta(f"SgamStore cannot run {type(op).__name__}")

    # -- the ops ------------------------------------------------------------------------------

    def _items(self, ids: list[str] | None) -> Generator[Call, Any, list[Item]]:
        rows = yield READ, {"query": self._current, "params": {"tenant": self.tenant, "ids": ids}}
        items = []
        for row in rows:
            document = json.loads(row["document"])
            items.append(Item(value=document["value"], key=document["key"], namespace=tuple(document["namespace"]),
                              created_at=datetime.fromisoformat(document["created_at"]),
                              updated_at=native(row["updated_at"])))
        return items

    def _put(self, op: PutOp) -> Steps:
        subject = item_id(op.namespace, op.key)
        now = self.graph.clock()
        if op.value is None:
            yield from self._delete(subject, now)
            return
        existing = yield from self._items([subject])
        created = existing[0].created_at if existing else now
        document = json.dumps({"namespace": list(op.namespace), "key": op.key, "value": op.value,
                               "created_at": created.isoformat()}, ensure_ascii=False)
        if existing and existing[0].value == op.value:
            return   # the same value again: nothing to record
        episode = yield "record_episode", dict(tenant_id=self.tenant, content=document, occurred_at=now,
                                               kind="tool_result", actor=self.actor)
        yield "write", dict(tenant_id=self.tenant, subject=subject, subject_type=ENTITY_TYPE, attribute=ATTRIBUTE,
                            value=document, valid_from=now, source_episode_id=episode.id, asserted_by=self.actor)

    def _delete(self, subject: str, now: datetime) -> Steps:
        existing = yield from self._items([subject])
        if not existing:
            return   # deleting what is not there is a no-op, as BaseStore documents
        episode = yield "record_episode", dict(tenant_id=self.tenant, occurred_at=now, kind="tool_result",
                                               actor=self.actor, content=f"delete store item {subject}")
        try:
            yield "write", dict(tenant_id=self.tenant, subject=subject, attribute=ATTRIBUTE, op="retract",
                                valid_from=now, source_episode_id=episode.id, asserted_by=self.actor)
        except (Conflict, NotFound):
            pass   # deleted concurrently

    def _search(self, op: SearchOp) -> Generator[Call, Any, list[SearchItem]]:
        prefix = tuple(op.namespace_prefix)
        words = [w for w in (op.query or "").lower().split() if w]
        found = []
        for item in (yield from self._items(None)):
            if item.namespace[:len(prefix)] != prefix:
                continue
            if op.filter and any(item.value.get(k) != v for k, v in op.filter.items()):
                continue
            text = json.dumps(item.value, ensure_ascii=False).lower()
            score = sum(w in text for w in words) / len(words) if words else None
            if words and not score:
                continue
            found.append(SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score))
        found.sort(key=lambda i: (-(i.score or 0.0), -i.updated_at.timestamp(), i.namespace, i.key))
        return found[op.offset:op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> Generator[Call, Any, list[tuple[str, ...]]]:
        spaces = {item.namespace for item in (yield from self._items(None))}
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            spaces = {ns for ns in spaces if _matches(ns, path, condition.match_type)}
        if op.max_depth is not None:
            spaces = {ns[:op.max_depth] for ns in spaces}
        return sorted(spaces)[op.offset:op.offset + op.limit]


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _matches(namespace: tuple[str, ...], path: tuple[str, ...], kind: str) -> bool:
    """A namespace against a prefix or suffix path, where ``*`` matches any one label."""
    if len(path) > len(namespace):
        return False
    part = namespace[:len(path)] if kind == "prefix" else namespace[len(namespace) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part))

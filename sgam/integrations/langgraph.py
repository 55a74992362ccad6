"""A LangGraph long-term store on SGAM: :class:`SgamStore` implements LangGraph's ``BaseStore``.

The store works in one tenant. An item ``(namespace, key)`` is one subject (an id derived from
both), its ``store_item`` fact holds the item as JSON: a ``put`` writes a new version, a delete
retracts it, so what an agent stored and overwrote stays in the item's history. ``search`` matches
a namespace prefix and exact ``filter`` values; a ``query`` ranks items by the share of its words
their text contains (no vector index: ``index`` is ignored). TTLs are not supported.

Connect the graph with this module's schema (:func:`store_schema`)::

    graph = MemoryGraph.connect(schema=store_schema())
    store = SgamStore(graph, tenant="acme")

Needs the ``langgraph`` extra.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable
from datetime import datetime
from importlib.resources import files

import yaml
from langgraph.store.base import (
    BaseStore, GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchItem, SearchOp,
)

from sgam.api import MemoryGraph
from sgam.graph.errors import Conflict, InvalidDelta, NotFound
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


def store_schema() -> Schema:
    """The schema a graph serving :class:`SgamStore` is connected with."""
    text = (files(__package__) / "langgraph-store.yaml").read_text(encoding="utf-8")
    return Schema.from_data(yaml.safe_load(text), origin="langgraph-store.yaml")


def item_id(namespace: tuple[str, ...], key: str) -> str:
    """The subject id of an item: a digest, since namespace labels and keys may hold any text."""
    return "lg-" + hashlib.sha256(json.dumps([list(namespace), key]).encode("utf-8")).hexdigest()[:40]


class SgamStore(BaseStore):
    """LangGraph's ``BaseStore`` on a :class:`~sgam.api.MemoryGraph`, in ``tenant``; writes are
    stated by ``actor``."""

    def __init__(self, graph: MemoryGraph, tenant: str, *, actor: str = "agent:langgraph") -> None:
        if ATTRIBUTE not in graph.schema.attributes:
            raise InvalidDelta(f"SgamStore needs a graph whose schema has the {ATTRIBUTE!r} attribute: "
                               "connect it with schema=store_schema()")
        self.graph = graph
        self.tenant = tenant
        self.actor = actor
        self._current = CURRENT_ITEMS % quote_identifier(graph.schema.rel_type(ATTRIBUTE))

    # -- BaseStore ----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The blocking graph in a worker thread: one op list at a time, in order.
        ops = list(ops)
        return await asyncio.to_thread(self.batch, ops)

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self._items([item_id(op.namespace, op.key)])
            return found[0] if found else None
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise InvalidDelta(f"SgamStore cannot run {type(op).__name__}")

    # -- the ops ------------------------------------------------------------------------------

    def _items(self, ids: list[str] | None) -> list[Item]:
        rows = self.graph.store.read(self._current, {"tenant": self.tenant, "ids": ids})
        items = []
        for row in rows:
            document = json.loads(row["document"])
            items.append(Item(value=document["value"], key=document["key"], namespace=tuple(document["namespace"]),
                              created_at=datetime.fromisoformat(document["created_at"]),
                              updated_at=native(row["updated_at"])))
        return items

    def _put(self, op: PutOp) -> None:
        subject = item_id(op.namespace, op.key)
        now = self.graph.clock()
        if op.value is None:
            self._delete(subject, now)
            return
        existing = self._items([subject])
        created = existing[0].created_at if existing else now
        document = json.dumps({"namespace": list(op.namespace), "key": op.key, "value": op.value,
                               "created_at": created.isoformat()}, ensure_ascii=False)
        if existing and existing[0].value == op.value:
            return   # the same value again: nothing to record
        episode = self.graph.record_episode(tenant_id=self.tenant, content=document, occurred_at=now,
                                            kind="tool_result", actor=self.actor)
        self.graph.write(tenant_id=self.tenant, subject=subject, subject_type=ENTITY_TYPE, attribute=ATTRIBUTE,
                         value=document, valid_from=now, source_episode_id=episode.id, asserted_by=self.actor)

    def _delete(self, subject: str, now: datetime) -> None:
        existing = self._items([subject])
        if not existing:
            return   # deleting what is not there is a no-op, as BaseStore documents
        episode = self.graph.record_episode(tenant_id=self.tenant, occurred_at=now, kind="tool_result",
                                            actor=self.actor, content=f"delete store item {subject}")
        try:
            self.graph.write(tenant_id=self.tenant, subject=subject, attribute=ATTRIBUTE, op="retract",
                             valid_from=now, source_episode_id=episode.id, asserted_by=self.actor)
        except (Conflict, NotFound):
            pass   # deleted concurrently

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        words = [w for w in (op.query or "").lower().split() if w]
        found = []
        for item in self._items(None):
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

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = {item.namespace for item in self._items(None)}
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            spaces = {ns for ns in spaces if _matches(ns, path, condition.match_type)}
        if op.max_depth is not None:
            spaces = {ns[:op.max_depth] for ns in spaces}
        return sorted(spaces)[op.offset:op.offset + op.limit]


def _matches(namespace: tuple[str, ...], path: tuple[str, ...], kind: str) -> bool:
    """A namespace against a prefix or suffix path, where ``*`` matches any one label."""
    if len(path) > len(namespace):
        return False
    part = namespace[:len(path)] if kind == "prefix" else namespace[len(namespace) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part))

"""The operations behind both surfaces, on the public :class:`~sgam.api.AsyncMemoryGraph` API.

:meth:`Service.call` is the one entry point: it checks the key's scope, validates the arguments
with the operation's request model and runs it with the tenant and principal of the key. Reads pass
the key's principal, so private attributes are filtered exactly as the Python API filters them;
writes are stated by it (the episode's actor, the confirming actor).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from sgam.api import AsyncMemoryGraph
from sgam.graph.errors import InvalidDelta, NotFound, validation_problems
from sgam.graph.models import Fact
from sgam.graph.schema import Schema
from sgam.graph.writes import DeltaResult
from sgam.ingest.episodes import episode_from_fields
from sgam.ingest.pipeline import StructuredDeltas, validate
from sgam.settings import Settings

from . import requests as rq
from .coalesce import Coalescer
from .keys import Identity, key_hash, resolve
from .tools import describe_schema

log = logging.getLogger("sgam.service")

MAX_CACHED_KEYS = 10_000
Handler = Callable[["Service", Identity, Any], Awaitable[Any]]


class Service:
    """One connected graph serving many keys; the tenant of every call comes from its key."""

    def __init__(self, graph: AsyncMemoryGraph, settings: Settings | None = None, *,
                 key_cache_seconds: float = 0.0, coalesce_reads: bool = False) -> None:
        self.graph = graph
        # `current` reads that arrive together go as one statement (:mod:`.coalesce`).
        self.coalescer = Coalescer(graph) if coalesce_reads else None
        self.settings = settings or Settings()
        self.key_cache_seconds = key_cache_seconds
        self._keys: dict[str, tuple[float, Identity]] = {}
        self._resolving: dict[str, asyncio.Future[Identity]] = {}

    @classmethod
    async def open(cls, settings: Settings | None = None, schema: Schema | None = None, *,
                   key_cache_seconds: float = 0.0, coalesce_reads: bool = False) -> Service:
        """Connect (``NEO4J_*`` or the local server) under ``schema`` (default: the shipped one)."""
        settings = settings or Settings()
        return cls(await AsyncMemoryGraph.connect(settings=settings, schema=schema), settings,
                   key_cache_seconds=key_cache_seconds, coalesce_reads=coalesce_reads)

    async def close(self) -> None:
        await self.graph.close()

    async def identify(self, key: str | None) -> Identity:
        """The key's identity. A key found valid is remembered for ``key_cache_seconds`` (by its
        hash), saving a round trip per request; a revocation then takes effect within that time."""
        if not self.key_cache_seconds or not key:
            return await resolve(self.graph.store, key)
        digest = key_hash(key)
        cached = self._keys.get(digest)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        # One store read for all the requests that miss at once: every client of a key misses
        # together when its entry expires, and under load more arrive while the read is out.
        pending = self._resolving.get(digest)
        if pending is None:
            pending = self._resolving[digest] = asyncio.ensure_future(self._resolve(key, digest))
            pending.add_done_callback(lambda done: self._resolved(digest, done))
        return await asyncio.shield(pending)

    async def _resolve(self, key: str, digest: str) -> Identity:
        identity = await resolve(self.graph.store, key)
        now = time.monotonic()
        if len(self._keys) >= MAX_CACHED_KEYS:
            self._keys = {d: c for d, c in self._keys.items() if c[0] > now}
        self._keys[digest] = (now + self.key_cache_seconds, identity)
        return identity

    def _resolved(self, digest: str, done: asyncio.Future[Identity]) -> None:
        self._resolving.pop(digest, None)
        if not done.cancelled():
            done.exception()   # retrieved: a refusal whose every waiter went away is not an error to log

    async def call(self, identity: Identity, name: str, arguments: Any) -> Any:
        """Run operation ``name`` for ``identity``; JSON-ready data, or an :class:`SgamError`."""
        operation = rq.BY_NAME.get(name)
        if operation is None:
            raise NotFound(f"no operation {name!r}; known: {', '.join(rq.BY_NAME)}")
        identity.require(operation.scope, name)
        return await self.run(identity, operation, parse(operation.model, arguments))

    async def run(self, identity: Identity, operation: rq.Operation, request: Any) -> Any:
        """Run ``operation`` with a validated ``request`` (its scope already checked)."""
        started = time.perf_counter()
        try:
            return to_jsonable_python(await HANDLERS[operation.name](self, identity, request))
        finally:
            # Which operation, whose key, how long: never a value, a subject or a question.
            log.info("%s key=%s %.1f ms", operation.name, identity.key_id, (time.perf_counter() - started) * 1000)


def parse(model: type[BaseModel], arguments: Any) -> Any:
    """``arguments`` as ``model``; :class:`InvalidDelta` naming each wrong field."""
    try:
        return model.model_validate(arguments if arguments is not None else {})
    except ValidationError as exc:
        raise InvalidDelta(f"invalid arguments: {validation_problems(exc)}") from None


def parse_json(model: type[BaseModel], body: bytes) -> Any:
    """A JSON document (an empty one stands for ``{}``) as ``model``, decoded and checked in one
    pass; :class:`InvalidDelta` naming each wrong field, as :func:`parse` does."""
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as exc:
        raise InvalidDelta(f"invalid arguments: {validation_problems(exc)}") from None


def _facts(facts: list[Fact]) -> dict[str, Any]:
    return {"facts": [f.model_dump(mode="json") for f in facts]}


def _result(result: DeltaResult) -> dict[str, Any]:
    return {"outcome": result.outcome, "memory_ids": list(result.memory_ids), "message": result.message}


async def _remember(service: Service, who: Identity, r: rq.RememberIn) -> dict[str, Any]:
    graph = service.graph
    episode = episode_from_fields({
        "tenant_id": who.tenant, "id": r.episode_id, "content": r.content, "kind": r.kind,
        "occurred_at": r.occurred_at or graph.clock(), "actor": who.principal, "session_id": r.session_id})
    deltas = [d.model_dump(exclude_none=True) for d in r.deltas]
    _check_deltas(graph, episode, deltas)
    report = await graph.ingest(episode, deltas=deltas, remember=r.extract, strict=True)
    return {"episode_id": report.episode_id, "recorded": report.recorded, "queued": report.queued,
            "written": report.written, "outcomes": dict(report.outcomes), "memory_ids": list(report.memory_ids),
            "quarantined": [{"id": e.id, "reason": e.reason} for e in report.quarantined]}


def _check_deltas(graph: AsyncMemoryGraph, episode: Any, deltas: list[dict[str, Any]]) -> None:
    """Refuse a bad fact before anything is recorded, so a refused call stores nothing (a strict
    ingest alone would keep the episode): the pipeline's own validation, then the schema's
    names, subject types and value types."""
    valid, refused = validate(episode, [(StructuredDeltas.name, d) for d in deltas])
    if refused:
        raise InvalidDelta(f"{refused[0].reason}; nothing was recorded")
    for index, (_, _, delta) in enumerate(valid):
        try:
            graph.schema.subject_type_for(delta.attribute, delta.subject_type)
            for value in (delta.value, delta.replaces):
                if value is not None:
                    graph.schema.coerce(delta.attribute, value)
        except (InvalidDelta, ValueError) as exc:
            raise InvalidDelta(f"deltas[{index}]: {exc}; nothing was recorded") from None


async def _current(service: Service, who: Identity, r: rq.CurrentIn) -> dict[str, Any]:
    read = service.graph.current if service.coalescer is None else service.coalescer.current
    return _facts(await read(
        who.tenant, r.subject, r.attribute, principal=who.principal,
        include_candidates=r.include_candidates, memory_types=r.memory_types))


async def _as_of(service: Service, who: Identity, r: rq.AsOfIn) -> dict[str, Any]:
    return _facts(await service.graph.as_of(
        who.tenant, r.subject, r.attribute, valid_at=r.valid_at, known_at=r.known_at,
        principal=who.principal, include_candidates=r.include_candidates, memory_types=r.memory_types))


async def _history(service: Service, who: Identity, r: rq.HistoryIn) -> dict[str, Any]:
    return _facts(await service.graph.history(who.tenant, r.subject, r.attribute, current_only=r.current_only,
                                              principal=who.principal, memory_types=r.memory_types))


async def _provenance(service: Service, who: Identity, r: rq.ProvenanceIn) -> Any:
    found = await service.graph.provenance(who.tenant, memory_id=r.memory_id, principal=who.principal)
    if found is None:
        raise NotFound(f"no fact version {r.memory_id!r} that this key may read")
    return found


async def _traverse(service: Service, who: Identity, r: rq.TraverseIn) -> dict[str, Any]:
    return {"paths": await service.graph.traverse(who.tenant, r.subject, r.relations, valid_at=r.valid_at,
                                                  known_at=r.known_at, principal=who.principal)}


async def _context(service: Service, who: Identity, r: rq.ContextIn) -> dict[str, Any]:
    context = await service.graph.context(who.tenant, r.question, subjects=r.subjects, valid_at=r.valid_at,
                                          budget_tokens=r.budget_tokens, principal=who.principal,
                                          memory_types=r.memory_types)
    return context.model_dump(mode="json")


async def _confirm(service: Service, who: Identity, r: rq.ConfirmIn) -> dict[str, Any]:
    return _result(await service.graph.confirm(who.tenant, r.subject, r.attribute, r.value,
                                               actor=who.principal, episode=r.episode_id))


async def _retract(service: Service, who: Identity, r: rq.RetractIn) -> dict[str, Any]:
    return _result(await service.graph.write(
        tenant_id=who.tenant, subject=r.subject, attribute=r.attribute, value=r.value, op="retract",
        source_episode_id=r.episode_id, valid_from=r.valid_from or service.graph.clock(),
        asserted_by=who.principal))


async def _forget(service: Service, who: Identity, r: rq.ForgetIn) -> Any:
    return await service.graph.forget_subject(who.tenant, r.subject, dry_run=r.dry_run, actor=who.principal,
                                              reason=r.reason)


async def _candidates(service: Service, who: Identity, r: rq.CandidatesIn) -> dict[str, Any]:
    return _facts(await service.graph.candidates(who.tenant, r.subject, r.attribute, principal=who.principal))


async def _quarantine(service: Service, who: Identity, r: rq.QuarantineIn) -> dict[str, Any]:
    entries = await service.graph.quarantine(who.tenant, status=None if r.status == "all" else r.status,
                                             principal=who.principal)
    return {"entries": entries}


async def _schema(service: Service, who: Identity, r: rq.SchemaIn) -> dict[str, Any]:
    return describe_schema(service.graph.schema)


HANDLERS: dict[str, Handler] = {
    "remember": _remember, "current": _current, "as_of": _as_of, "history": _history,
    "provenance": _provenance, "traverse": _traverse, "context": _context, "confirm": _confirm,
    "retract": _retract, "forget": _forget, "candidates": _candidates, "quarantine": _quarantine,
    "schema": _schema,
}

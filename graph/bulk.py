"""Bulk import: load a whole history of deltas into tenants that hold no facts yet.

``write_many`` reads the stored rows of every slot a batch touches, under subject locks, in
batches of a few thousand deltas. A tenant that is still empty has nothing to read, so a whole
history can go in larger transactions: the deltas are grouped by subject (each subject's deltas
keep their order), subjects are packed into chunks of about ``chunk_size`` deltas, and each chunk
runs the ordinary write transaction (``writes.write_steps``: the same ``reconcile`` / ``apply_plan``
in memory, the same rows) and links the chunk's episodes to its entities. Since a chunk holds
every delta of its subjects, the result is the one ``write_many`` gives for the same stream.

Memory stays bounded for any length of history: the stream is a ``Sequence`` read twice by
index, so it can build each ``MemoryDelta`` on access. The first pass (:func:`plan_steps`)
validates it slice by slice (schema, entity types across the whole stream, recorded episodes)
and keeps only what planning needs, as numbers: each delta's subject and each entity's type (a
few bytes a delta, plus one dictionary entry per entity). The second pass prepares and writes one
chunk at a time. Per-delta outcomes come back one byte each (:class:`ImportResult`).

Everything is checked before the first write; if a chunk still fails, the facts, values and
entities already imported are removed again, so the tenant is as empty as before (its episodes stay).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import overload

from .errors import Conflict, InvalidDelta, SchemaViolation
from .models import MemoryDelta
from .schema import Schema
from .writes import BatchResult, DeltaResult, Records, Statement, WriteSteps, _entities_of, _Prepared, \
    mentions_of, prepare, write_steps

DEFAULT_CHUNK = 20_000

# A tenant qualifies when it has no entities (facts hang off entities) and no tombstones.
OCCUPIED = """
UNWIND $tenants AS t
CALL (t) { MATCH (e:Entity {tenant_id: t}) RETURN count(e) > 0 AS entities LIMIT 1 }
CALL (t) { MATCH (x:Tombstone {tenant_id: t}) RETURN count(x) > 0 AS tombstones LIMIT 1 }
RETURN t AS tenant, entities, tombstones
"""

# The episode ids of one slice of the stream that are not recorded. The index hint keeps each row
# a seek (see ``writes.CHECK_STORED``: a plan cached on near-empty labels scans otherwise).
MISSING_EPISODES = """
UNWIND $ids AS id
OPTIONAL MATCH (x:Episode {tenant_id: $tenant, id: id})
  USING INDEX x:Episode(tenant_id, id)
WITH id, x WHERE x IS NULL
RETURN id
"""

# A chunk's links, in its own transaction. MERGE, not CREATE: a relation target can be named by
# one episode from subjects in different chunks, and the pairs are deduplicated per chunk only.
MERGE_MENTIONS = """
UNWIND $mentions AS m
MATCH (ep:Episode {tenant_id: m.tenant_id, id: m.episode})
  USING INDEX ep:Episode(tenant_id, id)
MATCH (e:Entity {tenant_id: m.tenant_id, id: m.entity})
  USING INDEX e:Entity(tenant_id, id)
MERGE (ep)-[:MENTIONS]->(e)
"""

# Undo of a failed import: the tenant had no entities or values before it started.
UNDO = tuple(
    f"MATCH (n:{label} {{tenant_id: $tenant}}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS"
    for label in ("Value", "Entity", "Ledger")
)

_ROLES = ("subject", "target")


@dataclass(frozen=True)
class ImportPlan:
    """A validated stream packed into chunks of whole subjects, as positions in the stream.

    ``order`` holds every position once, grouped by subject (subjects in the order they first
    appear, each one's deltas in arrival order); chunk ``k`` is ``order[bounds[k]:bounds[k + 1]]``.
    """

    tenants: tuple[str, ...]
    total: int
    order: array
    bounds: tuple[int, ...]

    def chunks(self) -> Iterator[array]:
        for start, stop in zip(self.bounds, self.bounds[1:]):
            yield self.order[start:stop]

    @property
    def chunk_count(self) -> int:
        return max(len(self.bounds) - 1, 0)


class _Entities:
    """Every entity of the stream once, numbered, with the type the first delta naming it gave."""

    def __init__(self) -> None:
        self.numbers: dict[str, dict[str, int]] = {}  # tenant -> entity id -> number
        self.type_names: list[str] = []
        self.type_of = array("H")
        self.first = array("q")  # the delta that first named it
        self.role = array("B")  # ... and as what (an index into _ROLES)
        self.is_subject = bytearray()
        self.subject_order = array("i")  # subjects, in the order they first appear as one

    def _type_code(self, name: str) -> int:
        try:
            return self.type_names.index(name)
        except ValueError:
            self.type_names.append(name)
            return len(self.type_names) - 1

    def add(self, item: _Prepared) -> int:
        """Check ``item``'s entities against their first type; returns its subject's number."""
        tenant = item.delta.tenant_id
        numbers = self.numbers.setdefault(tenant, {})
        subject = -1
        for role, (entity_id, wanted) in enumerate(zip(_entities_of(item), (item.subject_type, item.target_type))):
            code = self._type_code(wanted)  # type: ignore[arg-type]
            number = numbers.get(entity_id)
            if number is None:
                number = numbers[entity_id] = len(self.type_of)
                self.type_of.append(code)
                self.first.append(item.index)
                self.role.append(role)
                self.is_subject.append(0)
            elif self.type_of[number] != code:
                raise SchemaViolation(
                    f"delta {item.index}: {_ROLES[role]} {entity_id!r} of tenant {tenant!r} must be a "
                    f"{wanted} for attribute {item.delta.attribute!r}, but delta {self.first[number]} "
                    f"made it a {self.type_names[self.type_of[number]]} ({_ROLES[self.role[number]]})"
                )
            if role == 0:
                subject = number
                if not self.is_subject[number]:
                    self.is_subject[number] = 1
                    self.subject_order.append(number)
        return subject


def check_chunk_size(chunk_size: object) -> int:
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise InvalidDelta(f"chunk_size must be a positive whole number, got {chunk_size!r}")
    return chunk_size


def prepare_all(deltas: Sequence[MemoryDelta], indices: Iterable[int], schema: Schema) -> list[_Prepared]:
    """``writes.prepare`` for the deltas at ``indices``; raises on the first bad one, naming its position."""
    ready, rejected = prepare(deltas, schema, indices)
    if rejected:
        first = rejected[0]
        raise type(first.error)(f"delta {first.index}: {first.message}")  # type: ignore[misc]
    return ready


def plan_steps(deltas: Sequence[MemoryDelta], schema: Schema,
               chunk_size: int = DEFAULT_CHUNK) -> Generator[Statement, Records, ImportPlan]:
    """Validate ``deltas`` slice by slice and pack them into chunks; raises on the first bad delta.

    A statement generator (like ``writes.write_steps``): it yields one read per tenant and slice,
    the slice's episode ids that are not recorded. Nothing of a delta is kept but its subject's
    number, so a lazy ``Sequence`` is never held in full.
    """
    check_chunk_size(chunk_size)
    total = len(deltas)
    entities = _Entities()
    subjects = array("i")  # per delta, its subject's number
    tenants: set[str] = set()
    for start in range(0, total, chunk_size):
        episodes: dict[str, set[str]] = {}
        for item in prepare_all(deltas, range(start, min(start + chunk_size, total)), schema):
            subjects.append(entities.add(item))
            episodes.setdefault(item.delta.tenant_id, set()).add(item.delta.source_episode_id)
        for tenant in sorted(episodes):
            records = yield Statement(MISSING_EPISODES, {"tenant": tenant, "ids": sorted(episodes[tenant])})
            error = missing_error(tenant, [r["id"] for r in records])
            if error is not None:
                raise error
        tenants.update(episodes)
    order, bounds = _pack(subjects, entities.subject_order, len(entities.type_of), chunk_size)
    return ImportPlan(tuple(sorted(tenants)), total, order, bounds)


def _pack(subjects: array, subject_order: array, entity_count: int,
          chunk_size: int) -> tuple[array, tuple[int, ...]]:
    """Positions grouped by subject (a counting sort: stable, so each subject's keep their order)."""
    counts = array("q", bytes(8 * entity_count))
    for number in subjects:
        counts[number] += 1
    offsets = array("q", bytes(8 * entity_count))
    bounds, position, filled = [0], 0, 0
    for number in subject_order:
        count = counts[number]
        if filled and filled + count > chunk_size:
            bounds.append(position)
            filled = 0
        offsets[number] = position
        position += count
        filled += count
    if position:
        bounds.append(position)
    order = array("q", bytes(8 * len(subjects)))
    for index, number in enumerate(subjects):
        order[offsets[number]] = index
        offsets[number] += 1
    return order, tuple(bounds)


def chunk_steps(ready: Sequence[_Prepared], schema: Schema, clock: Callable[[], datetime]) -> WriteSteps:
    """One chunk's transaction: the ordinary write (its checks done by :func:`plan_steps`), then the
    chunk's ``MENTIONS`` links."""
    batch = yield from write_steps(ready, (), schema, clock, True, checked=True, mentions=False)
    links = mentions_of(ready)
    if links:
        yield Statement(MERGE_MENTIONS, {"mentions": links})
    return batch


class Outcomes(Sequence[DeltaResult]):
    """Per-delta results of an import, one byte each: ``DeltaResult(index, outcome)``, built on access.

    An import is atomic, so none is rejected; the new rows' ids and the per-delta messages are not
    kept (read them from the graph: ``history``, ``provenance``).
    """

    def __init__(self, total: int) -> None:
        self.codes = bytearray(total)
        self.names: list[str] = []

    def record(self, results: Iterable[DeltaResult]) -> None:
        names, codes = self.names, self.codes
        for r in results:
            try:
                code = names.index(r.outcome)
            except ValueError:
                if len(names) == 255:
                    raise ValueError(f"more than 255 outcomes, cannot add {r.outcome!r}") from None
                names.append(r.outcome)
                code = len(names) - 1
            codes[r.index] = code

    def __len__(self) -> int:
        return len(self.codes)

    @overload
    def __getitem__(self, index: int) -> DeltaResult: ...
    @overload
    def __getitem__(self, index: slice) -> list[DeltaResult]: ...

    def __getitem__(self, index: int | slice) -> DeltaResult | list[DeltaResult]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"result {index} out of range (0..{len(self) - 1})")
        return DeltaResult(index, self.names[self.codes[index]])

    def counts(self) -> dict[str, int]:
        """How many deltas had each outcome."""
        return {name: self.codes.count(code) for code, name in enumerate(self.names)}

    def __repr__(self) -> str:
        return f"Outcomes({len(self):,} deltas: {self.counts()})"


@dataclass(frozen=True)
class ImportResult(BatchResult):
    """What :meth:`Store.import_history` did: a :class:`BatchResult` whose ``results`` are
    :class:`Outcomes` (one byte a delta; ``count``/``written`` read their tallies)."""

    results: Outcomes  # type: ignore[assignment]

    def count(self, outcome: str) -> int:
        return self.results.counts().get(outcome, 0)

    @property
    def written(self) -> int:
        return sum(n for outcome, n in self.results.counts().items() if outcome != "unchanged")

    @property
    def rejected(self) -> tuple[DeltaResult, ...]:
        return ()


def occupied_error(records: Sequence[dict]) -> Conflict | None:
    """The error for tenants that already hold entities or tombstones (None when all are empty)."""
    busy = [r["tenant"] for r in records if r["entities"] or r["tombstones"]]
    if not busy:
        return None
    return Conflict(
        f"tenant(s) {', '.join(repr(t) for t in busy)} already hold entities or facts: import_history "
        "loads a whole history into empty tenants only; use write_many to add to a tenant"
    )


def missing_error(tenant: str, missing: Sequence[str]) -> InvalidDelta | None:
    if not missing:
        return None
    shown = ", ".join(repr(m) for m in missing[:5])
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return InvalidDelta(
        f"source episodes {shown}{more} are not recorded episodes of tenant {tenant!r}: "
        "record the episodes first (record_episodes)"
    )


# What :func:`import_requests` asks of its driver (``Store`` / ``AsyncStore``): ``("read", Statement)``
# is answered with the records; ``("write", make_steps)`` runs ``make_steps()`` as one write
# transaction and is answered with its result; ``("undo", tenants)`` removes what was imported
# into ``tenants`` (``UNDO``). A failed request is thrown back into the generator.
ImportRequest = tuple[str, object]


def import_requests(deltas: Sequence[MemoryDelta], schema: Schema, clock: Callable[[], datetime],
                    chunk_size: int = DEFAULT_CHUNK,
                    on_progress: Callable[[int, int], None] | None = None,
                    ) -> Generator[ImportRequest, object, ImportResult]:
    """The whole import (see the module docstring) as requests to a driver, so that the sync and
    the async store run the same plan, checks, chunks and undo."""
    steps = plan_steps(deltas, schema, chunk_size)
    try:
        statement = next(steps)
        while True:
            statement = steps.send((yield ("read", statement)))  # type: ignore[arg-type]
    except StopIteration as stop:
        plan: ImportPlan = stop.value
    outcomes = Outcomes(plan.total)
    if not plan.chunk_count:
        return ImportResult(outcomes)
    occupied = yield ("read", Statement(OCCUPIED, {"tenants": list(plan.tenants)}))
    error = occupied_error(occupied)  # type: ignore[arg-type]
    if error is not None:
        raise error
    done = 0
    try:
        for chunk in plan.chunks():
            ready = prepare_all(deltas, chunk, schema)
            batch = yield ("write", lambda: chunk_steps(ready, schema, clock))
            outcomes.record(batch.results)  # type: ignore[attr-defined]
            done += len(chunk)
            del ready
            if on_progress is not None:
                on_progress(done, plan.total)
    except GeneratorExit:
        raise
    except BaseException:  # an interrupt too: the tenants are left as empty as they were
        if done:
            yield ("undo", plan.tenants)
        raise
    return ImportResult(outcomes)


__all__ = ["DEFAULT_CHUNK", "ImportPlan", "ImportResult", "MERGE_MENTIONS", "MISSING_EPISODES", "OCCUPIED",
           "Outcomes", "UNDO", "check_chunk_size", "chunk_steps", "import_requests", "missing_error", "occupied_error",
           "plan_steps", "prepare_all"]

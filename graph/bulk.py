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
few bytes a delta, plus one dictionary entry per entity). The second pass writes one chunk at a
time while a worker thread prepares the next. Per-delta outcomes come back one byte each (:class:`ImportResult`).

Everything is checked before the first write; if a chunk still fails, the facts, values and
entities already imported are removed again, so the tenant is as empty as before (its episodes stay).

A process that is killed (or a server that stops) midway cannot undo anything, so the import
records itself as it runs: an ``(:ImportRun {tenant_id, id, fingerprint, status, ...})`` node per
tenant, written before the first chunk, advanced in the transaction of each chunk and marked
``done`` at the end. The fingerprint (:func:`fingerprint`) identifies the stream: its length and
a hash of its deltas' idempotency keys in order, taken in the validation pass. A re-run finds the
unfinished run (:func:`decide`): the same stream resumes after the last committed chunk (chunks
hold whole subjects, so a committed chunk is complete; the packing uses the run's chunk size); a
different stream is refused unless the caller asks to undo the unfinished run first
(``on_unfinished="undo"``). An undo marks the run ``undoing`` before it deletes anything, so an
undo that is itself interrupted is finished by the next run instead of being resumed.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar, overload

from .errors import Conflict, InvalidDelta, SchemaViolation
from .handoffs import prompt_handoffs
from .models import MemoryDelta
from .reconcile import DEFAULT_MAX_FUTURE
from .schema import Schema
from .steps import Auto, InTx, Operation, Read, Records, Statement, Write
from .writes import BatchResult, DeltaResult, entities_of, Planned, Prepared, mentions_of, plan_ahead, \
    prepare, stated_targets, write_steps

# Chunks of 5,000 deltas: at 1M deltas they took 430 s against 473 s for 20,000 (the server's
# CPU 260 s against 315 s: a smaller transaction's state costs it less); sgam/bench/README.md.
DEFAULT_CHUNK = 5_000
ON_UNFINISHED = ("resume", "undo")
OnUnfinished = Literal["resume", "undo"]
T = TypeVar("T")
P = TypeVar("P")

# The outcome of a delta that the interrupted run a resumed import continues had already written
# (its own outcome was not kept; the run's tallies are in ``ImportResult.earlier``).
EARLIER = "earlier_run"

# What each target tenant holds: entities, tombstones, its unfinished import runs and, when it has
# one, up to five entities written after that run last advanced, i.e. by something else (resuming
# would mix with them, undoing would delete them). The ``WITH ... WHERE`` keeps a tenant without a
# run from scanning its entities.
TENANT_STATE = """
UNWIND $tenants AS t
CALL (t) { MATCH (e:Entity {tenant_id: t}) RETURN count(e) > 0 AS entities LIMIT 1 }
CALL (t) { MATCH (x:Tombstone {tenant_id: t}) WHERE x.subject IS NOT NULL RETURN count(x) > 0 AS tombstones LIMIT 1 }
CALL (t) {
  OPTIONAL MATCH (r:ImportRun {tenant_id: t}) WHERE r.status <> 'done'
  RETURN collect(r {.id, .fingerprint, .status, .tenants, .chunks, .chunks_done, .deltas, .deltas_done,
                    .chunk_size, .outcome_names, .outcome_counts, started_at: toString(r.started_at)}) AS runs,
         max(r.advanced_at) AS since
}
CALL (t, since) {
  WITH t, since WHERE since IS NOT NULL
  MATCH (e:Entity {tenant_id: t}) WHERE coalesce(e.updated_at, e.created_at) > since
  WITH e.id AS id LIMIT 5
  RETURN collect(id) AS later
}
RETURN t AS tenant, entities, tombstones, runs, later
"""

# The run's marker, one per tenant, before the first chunk. ``active`` is unique per tenant
# (migration 0006) while a run is unfinished, so two imports cannot start into one tenant at once.
START_RUN = """
UNWIND $tenants AS t
CREATE (:ImportRun {tenant_id: t, id: $run, active: true, status: 'running', fingerprint: $fingerprint,
                    tenants: $tenants, chunks: $chunks, chunks_done: 0, deltas: $deltas, deltas_done: 0,
                    chunk_size: $chunk_size, outcome_names: [], outcome_counts: [],
                    started_at: $now, advanced_at: $now})
"""

# In each chunk's transaction: the run moves past chunk ``$chunk`` only if it still stands before
# it (else another process moved it on, and the chunk is rolled back).
ADVANCE_RUN = """
UNWIND $tenants AS t
MATCH (r:ImportRun {tenant_id: t, id: $run})
WHERE r.status = 'running' AND r.chunks_done = $chunk
SET r.chunks_done = $chunk + 1, r.deltas_done = $deltas_done, r.advanced_at = $now,
    r.outcome_names = $names, r.outcome_counts = $counts
RETURN count(r) AS advanced
"""

FINISH_RUN = """
UNWIND $tenants AS t
MATCH (r:ImportRun {tenant_id: t, id: $run})
WHERE r.status = 'running' AND r.chunks_done = r.chunks
SET r.status = 'done', r.finished_at = $now
REMOVE r.active
RETURN count(r) AS finished
"""

# Before an undo deletes anything: a run marked so is never resumed, so an undo that is itself
# interrupted is finished by the next import instead.
MARK_UNDOING = """
UNWIND $tenants AS t
MATCH (r:ImportRun {tenant_id: t, id: $run})
SET r.status = 'undoing', r.undo_started_at = $now
"""

# The episode ids of one slice of the stream that are not recorded. The hint keeps each row a seek
# (see ``writes.CHECK_STORED``: a plan cached on near-empty labels scans otherwise; at 100k deltas
# that scan made the validation pass 27 s instead of 3 s).
MISSING_EPISODES = """
UNWIND $ids AS id
OPTIONAL MATCH (x:Episode {tenant_id: $tenant, id: id})
  USING INDEX SEEK x:Episode(tenant_id, id)
WITH id, x WHERE x IS NULL
RETURN id
"""

# The relation targets a chunk states (``writes.stated_targets``) are entities whether or not a
# fact of the chunk points at them (a statement that loses a tie at its instant holds nowhere), as
# the write path's lock step makes them: which entities exist does not depend on the chunking.
MERGE_TARGETS = """
UNWIND $targets AS t
MERGE (e:Entity {tenant_id: t.tenant_id, id: t.id})
  ON CREATE SET e:$(t.type), e.type = t.type, e.name = t.id, e.created_at = $now
"""

# A chunk's links, in its own transaction, by episode (each episode found once, not once per
# entity it names: a 100k import's links statement took 2.0 s instead of 2.4).
# MERGE, not CREATE: a relation target can be named by one episode from subjects in different
# chunks, and the pairs are deduplicated per chunk only.
MERGE_MENTIONS = """
UNWIND $episodes AS g
MATCH (ep:Episode {tenant_id: g.tenant_id, id: g.id})
  USING INDEX SEEK ep:Episode(tenant_id, id)
UNWIND g.entities AS id
MATCH (e:Entity {tenant_id: g.tenant_id, id: id})
  USING INDEX SEEK e:Entity(tenant_id, id)
MERGE (ep)-[:MENTIONS]->(e)
"""

# Undo of an import, per tenant, after ``MARK_UNDOING``: the tenant held no entities, values or
# ledgers before it started (a tenant written to since is refused, see ``TENANT_STATE``), so all of
# them go; deleting an entity takes its facts and ``MENTIONS`` links along. The marker goes last,
# so an interrupted undo is still found. Episodes and finished runs stay.
UNDO = (
    *(f"MATCH (n:{label} {{tenant_id: $tenant}}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS"
      for label in ("Value", "Entity", "Ledger")),
    "MATCH (r:ImportRun {tenant_id: $tenant}) WHERE r.status = 'undoing' DELETE r",
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
    order: array[int]
    bounds: tuple[int, ...]
    fingerprint: str = ""

    def chunks(self, first: int = 0) -> Iterator[array[int]]:
        """The chunks from chunk ``first`` on."""
        for start, stop in zip(self.bounds[first:], self.bounds[first + 1:]):
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

    def add(self, item: Prepared) -> int:
        """Check ``item``'s entities against their first type; returns its subject's number."""
        tenant = item.delta.tenant_id
        numbers = self.numbers.setdefault(tenant, {})
        subject = -1
        for role, (entity_id, wanted) in enumerate(zip(entities_of(item), (item.subject_type, item.target_type))):
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


def prepare_all(deltas: Sequence[MemoryDelta], indices: Iterable[int], schema: Schema) -> list[Prepared]:
    """``writes.prepare`` for the deltas at ``indices``; raises on the first bad one, naming its position."""
    ready, rejected = prepare(deltas, schema, indices)
    if rejected:
        first = rejected[0]
        raise type(first.error)(f"delta {first.index}: {first.message}")  # type: ignore[misc]
    return ready


@dataclass(frozen=True)
class CheckedStream:
    """A validated stream before it is packed into chunks (:meth:`pack`): each delta's subject as
    a number, the subjects in first-seen order, and the stream's :func:`fingerprint`."""

    tenants: tuple[str, ...]
    total: int
    fingerprint: str
    subjects: array[int]
    subject_order: array[int]
    entity_count: int

    def pack(self, chunk_size: int) -> ImportPlan:
        order, bounds = _pack(self.subjects, self.subject_order, self.entity_count, check_chunk_size(chunk_size))
        return ImportPlan(self.tenants, self.total, order, bounds, self.fingerprint)


class Fingerprint:
    """What identifies a stream across runs: its length and a hash of its deltas' idempotency keys in
    order, under the schema's name and version (the keys hold canonical values, and the schema
    decides them). Deltas that differ only in what the key leaves out (confidence, actor, names)
    are the same stream; fed one key at a time, so the stream is never held."""

    def __init__(self, schema: Schema) -> None:
        self.digest = hashlib.sha256(f"{schema.name}@{schema.version}".encode())
        self.count = 0

    def add(self, key: str) -> None:
        self.digest.update(b"\n" + key.encode())
        self.count += 1

    @property
    def value(self) -> str:
        return f"{self.count}:{self.digest.hexdigest()}"


def check_steps(deltas: Sequence[MemoryDelta], schema: Schema,
                slice_size: int = DEFAULT_CHUNK) -> Operation[CheckedStream]:
    """Validate ``deltas`` slice by slice; raises on the first bad delta.

    An operation of reads (``graph.steps``), each in its own transaction: one per tenant and
    slice, the slice's episode ids that are not recorded. Nothing of a delta is kept but its subject's
    number (and its key, in the running :class:`Fingerprint`), so a lazy ``Sequence`` is never
    held in full.
    """
    check_chunk_size(slice_size)
    total = len(deltas)
    entities = _Entities()
    subjects = array("i")  # per delta, its subject's number
    tenants: set[str] = set()
    stream = Fingerprint(schema)
    for start in range(0, total, slice_size):
        episodes: dict[str, set[str]] = {}
        for item in prepare_all(deltas, range(start, min(start + slice_size, total)), schema):
            subjects.append(entities.add(item))
            stream.add(item.key)
            episodes.setdefault(item.delta.tenant_id, set()).add(item.delta.source_episode_id)
        for tenant in sorted(episodes):
            records = yield Read(Statement(MISSING_EPISODES, {"tenant": tenant, "ids": sorted(episodes[tenant])}))
            error = missing_error(tenant, [r["id"] for r in records])
            if error is not None:
                raise error
        tenants.update(episodes)
    return CheckedStream(tuple(sorted(tenants)), total, stream.value, subjects,
                         entities.subject_order, len(entities.type_of))


def plan_steps(deltas: Sequence[MemoryDelta], schema: Schema,
               chunk_size: int = DEFAULT_CHUNK) -> Operation[ImportPlan]:
    """:func:`check_steps`, then pack the stream into chunks of about ``chunk_size`` deltas."""
    checked = yield from check_steps(deltas, schema, chunk_size)
    return checked.pack(chunk_size)


def _pack(subjects: array[int], subject_order: array[int], entity_count: int,
          chunk_size: int) -> tuple[array[int], tuple[int, ...]]:
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


def _ready(deltas: Sequence[MemoryDelta], chunk: array[int], schema: Schema,
           plan: Callable[[list[Prepared]], P] | None) -> tuple[list[Prepared], P | None]:
    ready = prepare_all(deltas, chunk, schema)
    return ready, None if plan is None else plan(ready)


def prepared_ahead(deltas: Sequence[MemoryDelta], chunks: Iterable[array[int]], schema: Schema,
                   plan: Callable[[list[Prepared]], P] | None = None,
                   ) -> Iterator[tuple[array[int], list[Prepared], P | None]]:
    """Each chunk with its :func:`prepare_all` and, given ``plan``, its plan (:class:`Ahead`),
    the next one prepared and planned in a worker thread while the caller writes this one.

    Reading the deltas and the schema checks are a quarter of an import's Python time, reconciling
    them most of the rest, and a chunk's transaction mostly waits on the server (the driver
    releases the GIL there), so on two cores they overlap. Memory stays bounded by chunks, not by
    the history: the chunk being written, the next one being prepared, and while that starts, what
    is left of the one before (up to three chunks' deltas, measured). An error of the next chunk
    is raised when the caller asks for it, as before. While it runs, the interpreter hands the GIL
    over sooner (:func:`prompt_handoffs`).
    """
    with prompt_handoffs(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="sgam-import") as worker:
        queue = iter(chunks)
        chunk = next(queue, None)
        pending = None if chunk is None else worker.submit(_ready, deltas, chunk, schema, plan)
        while chunk is not None and pending is not None:
            following = next(queue, None)
            ready, planned = pending.result()
            pending = None if following is None else worker.submit(_ready, deltas, following, schema, plan)
            yield chunk, ready, planned
            del ready, planned
            chunk = following


@dataclass(frozen=True)
class RunStep:
    """Where a chunk moves its run: from ``chunk`` to ``chunk + 1``, with the tallies so far."""

    run: str
    tenants: tuple[str, ...]
    chunk: int
    deltas_done: int
    tallies: Mapping[str, int]

    def advance(self, batch: BatchResult, now: datetime) -> tuple[Statement, dict[str, int]]:
        tallies = Counter(self.tallies)
        tallies.update(r.outcome for r in batch.results)
        names = sorted(tallies)
        return Statement(ADVANCE_RUN, {
            "tenants": list(self.tenants), "run": self.run, "chunk": self.chunk,
            "deltas_done": self.deltas_done, "now": now, "names": names,
            "counts": [tallies[n] for n in names]}), dict(tallies)


def _by_episode(links: list[dict[str, str]]) -> list[dict[str, Any]]:
    """``MENTIONS`` pairs (``writes.mentions_of``) as one row per episode with the entities it names."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for m in links:
        grouped.setdefault((m["tenant_id"], m["episode"]), []).append(m["entity"])
    return [{"tenant_id": t, "id": e, "entities": entities} for (t, e), entities in grouped.items()]


class RunTakenOver(Conflict):
    """Another process moved the run on while this one wrote a chunk (whose writes were rolled back)."""


ChunkSteps = Generator[Statement, Records, tuple[BatchResult, dict[str, int]]]


@dataclass
class Ahead:
    """What a chunk's transaction sends, made before it (in :func:`prepared_ahead`'s worker, while
    the chunk before is written): its plan (``writes.plan_ahead``; ``None`` once used, or when a
    delta is refused), and its relation targets and ``MENTIONS`` links by episode, which depend on
    its deltas alone. The transaction then mostly waits on the server."""

    planned: Planned | None
    targets: list[dict[str, str]]
    links: list[dict[str, Any]]

    @classmethod
    def of(cls, ready: Sequence[Prepared], planned: Planned | None = None) -> Ahead:
        return cls(planned, [{"tenant_id": t, "id": i, "type": kind}
                             for (t, i), kind in sorted(stated_targets(ready).items())],
                   _by_episode(mentions_of(ready)))

    def take_plan(self) -> Planned | None:
        """The plan, once: a retried transaction plans again (the plan is changed as it is used)."""
        planned, self.planned = self.planned, None
        return planned


def chunk_steps(ready: Sequence[Prepared], schema: Schema, clock: Callable[[], datetime],
                step: RunStep, max_future: timedelta = DEFAULT_MAX_FUTURE,
                ahead: Ahead | None = None) -> ChunkSteps:
    """One chunk's transaction: the ordinary write (its checks done by :func:`check_steps`; with
    ``ahead``, its plan and its links made ahead), the chunk's ``MENTIONS`` links, and the run's
    advance past it (so a committed chunk is recorded). Returns the batch and the run's outcome
    tallies after it."""
    ahead = ahead or Ahead.of(ready)
    batch = yield from write_steps(ready, (), schema, clock, True, checked=True, mentions=False,
                                   max_future=max_future, planned=ahead.take_plan())
    if ahead.targets:
        yield Statement(MERGE_TARGETS, {"now": clock(), "targets": ahead.targets})
    links = ahead.links
    if links:
        yield Statement(MERGE_MENTIONS, {"episodes": links})
    # read after the write's own clock reading, so the run's time is never before its entities'
    statement, tallies = step.advance(batch, clock())
    records = yield statement
    if records[0]["advanced"] != len(step.tenants):
        raise RunTakenOver(
            f"import run {step.run!r} into tenant(s) {_names(step.tenants)} was moved on by another process "
            f"while this one wrote chunk {step.chunk} (this chunk was rolled back and nothing else was "
            "changed): let that import finish, or re-run import_history with the same stream to resume it"
        )
    return batch, tallies


class Outcomes(Sequence[DeltaResult]):
    """Per-delta results of an import, one byte each: ``DeltaResult(index, outcome)``, built on access.

    An import is atomic, so none is rejected; the new rows' ids and the per-delta messages are not
    kept (read them from the graph: ``history``, ``provenance``).
    """

    def __init__(self, total: int) -> None:
        self.codes = bytearray(total)
        self.names: list[str] = []

    def _code(self, outcome: str) -> int:
        try:
            return self.names.index(outcome)
        except ValueError:
            if len(self.names) == 255:
                raise ValueError(f"more than 255 outcomes, cannot add {outcome!r}") from None
            self.names.append(outcome)
            return len(self.names) - 1

    def record(self, results: Iterable[DeltaResult]) -> None:
        codes = self.codes
        for r in results:
            codes[r.index] = self._code(r.outcome)

    def fill(self, indices: Iterable[int], outcome: str) -> None:
        """Give every delta at ``indices`` the same ``outcome``."""
        code, codes = self._code(outcome), self.codes
        for index in indices:
            codes[index] = code

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
    """What :func:`import_op` did: a :class:`BatchResult` whose ``results`` are
    :class:`Outcomes` (one byte a delta), and how the run went.

    ``run`` is the id of the ``ImportRun`` (empty for an empty stream), ``chunks`` its number of
    chunks. ``resumed_from`` is the chunk this call started at when it resumed an interrupted run
    of the same stream (``None`` when it started afresh): the deltas of the chunks before it read
    ``earlier_run``, and ``earlier`` holds the tallies that run had recorded for them. ``undone``
    names the unfinished runs removed before this import started. ``count`` and ``written`` cover
    the whole import, the earlier run's chunks included.
    """

    results: Outcomes  # type: ignore[assignment]
    run: str = ""
    chunks: int = 0
    resumed_from: int | None = None
    earlier: Mapping[str, int] = field(default_factory=dict)
    undone: tuple[str, ...] = ()

    def tallies(self) -> dict[str, int]:
        """How many deltas of the whole import had each outcome."""
        tallies = Counter(self.earlier)
        tallies.update({k: n for k, n in self.results.counts().items() if k != EARLIER})
        return dict(tallies)

    def count(self, outcome: str) -> int:
        return self.tallies().get(outcome, 0)

    @property
    def written(self) -> int:
        return sum(n for outcome, n in self.tallies().items() if outcome != "unchanged")

    @property
    def rejected(self) -> tuple[DeltaResult, ...]:
        return ()


def _names(tenants: Iterable[str]) -> str:
    return ", ".join(repr(t) for t in tenants)


def _describe(run: Mapping[str, Any]) -> str:
    return (f"run {run['id']!r} (started {run['started_at']}, {run['chunks_done']} of {run['chunks']} chunks "
            f"committed, {run['deltas_done']:,} of {run['deltas']:,} deltas)")


def occupied_error(records: Sequence[Mapping[str, Any]]) -> Conflict | None:
    """The error for tenants that hold entities or tombstones but no unfinished import (None when
    every tenant is empty or holds only an unfinished import)."""
    busy = [r["tenant"] for r in records if (r["entities"] or r["tombstones"]) and not r.get("runs")]
    if not busy:
        return None
    return Conflict(
        f"tenant(s) {_names(busy)} already hold entities or facts: import_history "
        "loads a whole history into empty tenants only; use write_many to add to a tenant"
    )


def touched_error(records: Sequence[Mapping[str, Any]]) -> Conflict | None:
    """The error for tenants that hold an unfinished import and were written to after it stopped."""
    touched = [r for r in records if r.get("runs") and (r["later"] or r["tombstones"])]
    if not touched:
        return None
    r = touched[0]
    what = f"entities {_names(r['later'])} were written later" if r["later"] else "subjects were forgotten since"
    return Conflict(
        f"tenant {r['tenant']!r} holds the unfinished import {_describe(r['runs'][0])}, but {what}: resuming "
        "would mix the import with those writes and undoing it would delete them, so neither is done. "
        "Remove the tenant (delete_tenant; it takes the episodes too) and import again, or keep it and add "
        "to it with write_many"
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


def check_on_unfinished(on_unfinished: object) -> OnUnfinished:
    if on_unfinished not in ON_UNFINISHED:
        raise InvalidDelta(f"on_unfinished must be 'resume' or 'undo', got {on_unfinished!r}")
    return on_unfinished  # type: ignore[return-value]


@dataclass(frozen=True)
class Decision:
    """What an import does before its first chunk: undo these unfinished runs (each in the
    tenants that still hold its marker), then resume ``resume`` or, when it is None, start afresh."""

    undo: tuple[tuple[Mapping[str, Any], tuple[str, ...]], ...] = ()
    resume: Mapping[str, Any] | None = None


def decide(fingerprint: str, targets: Sequence[str], records: Sequence[Mapping[str, Any]],
           on_unfinished: OnUnfinished) -> Decision:
    """What to do about the unfinished runs that ``records`` (``TENANT_STATE`` rows of the target
    tenants and of every other tenant of their runs) show; raises :class:`Conflict` when the
    import must not go ahead.

    A run already being undone is undone to the end. With ``"undo"`` every other unfinished run is
    undone too; with ``"resume"`` the one unfinished run is resumed when it imports the same stream
    (``fingerprint``) into the same tenants, and anything else is refused.
    """
    error = occupied_error([r for r in records if r["tenant"] in targets]) or touched_error(records)
    if error is not None:
        raise error
    runs: dict[str, Mapping[str, Any]] = {}
    holders: dict[str, list[str]] = {}
    for record in records:
        for run in record["runs"]:
            runs.setdefault(run["id"], run)
            holders.setdefault(run["id"], []).append(record["tenant"])
    undo = [i for i, run in runs.items() if on_unfinished == "undo" or run["status"] == "undoing"]
    left = [runs[i] for i in runs if i not in undo]
    decision = Decision(tuple((runs[i], tuple(sorted(holders[i]))) for i in undo))
    if not left:
        return decision
    run = left[0]
    held = set(holders[run["id"]])
    if len(left) == 1 and run["fingerprint"] == fingerprint and held == set(run["tenants"]) == set(targets):
        return Decision(decision.undo, run)
    if len(left) > 1:
        reason = f"besides {len(left) - 1} other unfinished run(s) ({_names(r['id'] for r in left[1:])})"
    elif held != set(run["tenants"]):
        gone = _names(sorted(set(run["tenants"]) - held))
        reason = f"whose marker is gone from tenant(s) {gone}, so it cannot resume"
    else:
        reason = f"of a different stream than this one ({fingerprint.split(':')[0]} deltas; fingerprints differ)"
    raise Conflict(
        f"tenant(s) {_names(sorted(held))} hold the unfinished import {_describe(run)}, {reason}. Either re-run "
        "import_history with that run's stream to finish it, or pass on_unfinished='undo' to remove what it "
        "wrote (facts, values, entities; episodes stay) and import this stream"
    )


def _undo(run: str, tenants: Sequence[str], clock: Callable[[], datetime]) -> Operation[None]:
    yield Write(Statement(MARK_UNDOING, {"tenants": list(tenants), "run": run, "now": clock()}))
    for tenant in tenants:
        for statement in UNDO:  # CALL {} IN TRANSACTIONS: auto-commit
            yield Auto(Statement(statement, {"tenant": tenant}))


def _state(checked: CheckedStream) -> Operation[list[Mapping[str, Any]]]:
    """``TENANT_STATE`` of the target tenants and of the other tenants of their unfinished runs."""
    records: list[Mapping[str, Any]] = yield Read(Statement(TENANT_STATE, {"tenants": list(checked.tenants)}))
    others = {t for r in records for run in r["runs"] for t in run["tenants"]} - set(checked.tenants)
    if others:
        records += yield Read(Statement(TENANT_STATE, {"tenants": sorted(others)}))
    return records


def _start(plan: ImportPlan, chunk_size: int, clock: Callable[[], datetime]) -> Operation[dict[str, Any]]:
    run = {"id": "import-" + os.urandom(8).hex(), "chunks_done": 0, "deltas_done": 0,
           "outcome_names": [], "outcome_counts": []}
    try:
        yield Write(Statement(START_RUN, {
            "tenants": list(plan.tenants), "run": run["id"], "fingerprint": plan.fingerprint,
            "chunks": plan.chunk_count, "deltas": plan.total, "chunk_size": chunk_size, "now": clock()}))
    except Conflict as exc:  # the uniqueness of an unfinished run per tenant
        raise Conflict(
            f"another import_history into tenant(s) {_names(plan.tenants)} started at the same time; "
            "this one wrote nothing: let that one finish"
        ) from exc
    return run


def import_op(deltas: Sequence[MemoryDelta], schema: Schema, clock: Callable[[], datetime],
              chunk_size: int = DEFAULT_CHUNK,
              on_progress: Callable[[int, int], None] | None = None,
              on_unfinished: OnUnfinished = "resume",
              max_future: timedelta = DEFAULT_MAX_FUTURE,
              ) -> Operation[ImportResult]:
    """Load a whole history into tenants without entities, in chunks of whole subjects (see the
    module docstring); on a failure the imported part is removed again and the error raised.

    An import interrupted by a crash is found by the next one: ``on_unfinished="resume"``
    continues it when the stream is the same (and refuses a different one), ``"undo"`` removes
    it first. ``deltas`` is read twice by index (validation, then chunk by chunk) and never
    copied, so a lazy sequence that builds each delta on access keeps memory bounded; the second
    pass reads it from a worker thread, one chunk ahead of the writes (:func:`prepared_ahead`).
    ``on_progress(done, total)`` is called after each chunk with counts of deltas.
    """
    check_on_unfinished(on_unfinished)
    checked = yield from check_steps(deltas, schema, chunk_size)
    if not checked.total:
        return ImportResult(Outcomes(0))
    decision = decide(checked.fingerprint, checked.tenants, (yield from _state(checked)), on_unfinished)
    for undone, tenants in decision.undo:
        yield from _undo(undone["id"], tenants, clock)
    run = decision.resume
    plan = checked.pack(run["chunk_size"] if run else chunk_size)
    del checked
    if run is None:
        run = yield from _start(plan, chunk_size, clock)
    first = run["chunks_done"]
    outcomes = Outcomes(plan.total)
    done = plan.bounds[first]
    if done:
        outcomes.fill((plan.order[i] for i in range(done)), EARLIER)
    earlier = tallies = dict(zip(run["outcome_names"], run["outcome_counts"]))
    try:
        chunks = prepared_ahead(deltas, plan.chunks(first), schema,
                                lambda ready: Ahead.of(ready, plan_ahead(ready, schema, clock(), max_future)))
        for number, (chunk, ready, ahead) in enumerate(chunks, start=first):
            step = RunStep(run["id"], plan.tenants, number, done + len(chunk), tallies)
            batch, tallies = yield InTx(lambda: chunk_steps(ready, schema, clock, step, max_future,  # noqa: B023
                                                            ahead))  # noqa: B023
            outcomes.record(batch.results)
            done = step.deltas_done
            del ready, ahead
            if on_progress is not None:
                on_progress(done, plan.total)
        finished = yield Write(Statement(FINISH_RUN, {"tenants": list(plan.tenants), "run": run["id"],
                                                            "now": clock()}))
        if finished[0]["finished"] != len(plan.tenants):
            raise RunTakenOver(f"import run {run['id']!r} into tenant(s) {_names(plan.tenants)} was finished or "
                               "undone by another process meanwhile: nothing was changed here")
    except (GeneratorExit, RunTakenOver):
        raise
    except BaseException:  # an interrupt too: the tenants are left as empty as they were
        yield from _undo(run["id"], plan.tenants, clock)
        raise
    resumed = first if decision.resume is not None else None
    return ImportResult(outcomes, run["id"], plan.chunk_count, resumed, earlier if resumed is not None else {},
                        tuple(r["id"] for r, _ in decision.undo))


__all__ = ["DEFAULT_CHUNK", "EARLIER", "ON_UNFINISHED", "UNDO", "Ahead", "CheckedStream", "Decision", "Fingerprint",
           "ImportPlan", "ImportResult", "Outcomes", "RunStep", "RunTakenOver", "check_chunk_size",
           "check_on_unfinished", "check_steps", "chunk_steps", "decide", "import_op", "missing_error",
           "occupied_error", "plan_steps", "prepare_all", "prepared_ahead", "touched_error"]

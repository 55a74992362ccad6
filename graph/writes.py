"""The write transaction as a sequence of Cypher statements (built here, executed by ``store``).

A write runs as a generator: it yields a :class:`Statement`, receives the records, and finally
returns a :class:`BatchResult`. The sync and the async store drive the same generator, so both
share one write path. Labels and relationship types are values the schema gives (checked there),
set as Cypher's dynamic ``$(...)`` labels and types (the lock step names the schema's fact types
through ``quote_identifier``); everything else is a parameter.

Steps of one batch, all in one transaction:

1. check that every source episode exists and that existing entities have the expected types,
   and find the subjects a batch episode already mentions (only those can see a replay);
2. lock the subjects (``MERGE`` + ``SET``, in sorted order so concurrent batches cannot deadlock),
   read the ledger of every slot the batch touches and an outline of its believed rows, and in
   full only the rows the ledger cannot stand for (candidates, and slots without a ledger yet);
   then read the clock: transaction time starts under the locks;
3. reconcile each delta in order, in memory (:func:`reconcile.reconcile`); a bulk import's chunk
   comes reconciled ahead (:func:`plan_ahead`), which is kept only if step 2 read nothing stored;
4. write the differences, in one statement (:data:`PERSIST`): updated rows, new attribute facts
   with their value nodes, new relation facts with their target entities, the statements appended
   to the ledgers, and ``MENTIONS`` links from episodes to entities. A refused delta leaves
   nothing: it links nothing, and a subject that step 2 created only for refused deltas is removed
   again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Iterable, Sequence
from functools import lru_cache
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from typing import Any

from .errors import Conflict, InvalidDelta, SchemaViolation, SgamError, checked
from .models import Cardinality, Fact, MemoryDelta, Op, Status, check_value
from .reconcile import DEFAULT_MAX_FUTURE, PREVIOUS_VERSION, Point, apply_plan, delta_key, points_from_rows, \
    reconcile
from .schema import Schema, quote_identifier
from .codec import INSTANTS, caption, fact_from_properties, native, storable
from .handoffs import collector_paused
from .steps import InTx, Operation, Records, Statement, Steps
from . import telemetry

_AS_DATETIME = ", ".join(f"{k}: datetime(r.at.{k})" for k in INSTANTS)
# A fact's value as stored: a date or datetime value is sent as ISO text (see fact_entry).
_TYPED_VALUE = ("CASE r.props.value_type WHEN 'datetime' THEN datetime(r.props.value) "
                "WHEN 'date' THEN date(r.props.value) ELSE r.props.value END")


@dataclass(frozen=True)
class DeltaResult:
    """What happened to one delta of a batch: an outcome, or the error that rejected it."""

    index: int
    outcome: str
    memory_ids: tuple[str, ...] = ()
    message: str = ""
    error: SgamError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class BatchResult:
    results: tuple[DeltaResult, ...]

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def written(self) -> int:
        return sum(1 for r in self.results if r.ok and r.outcome not in ("unchanged",))

    @property
    def rejected(self) -> tuple[DeltaResult, ...]:
        return tuple(r for r in self.results if not r.ok)


WriteSteps = Steps[BatchResult]

# One round trip for the checks. ``mentioned``: subjects that an episode of the batch already
# mentions, i.e. that may see a replay (an applied delta's episode always mentions its subject).
# The hints keep each row a seek: a plan made while the labels were nearly empty (a new server, or
# one whose tenants were just deleted) scanned the whole (tenant_id, id) index once per row, and
# stayed cached until the statistics moved. ``USING INDEX`` alone still allowed that scan (500 ids
# against 10,000 episodes: 1.2 s, 5 million db hits); ``USING INDEX SEEK`` takes 6 ms.
CHECK_STORED = """
CALL () {
  UNWIND $episodes AS ep
  OPTIONAL MATCH (x:Episode {tenant_id: ep.tenant_id, id: ep.id})
    USING INDEX SEEK x:Episode(tenant_id, id)
  RETURN collect({tenant_id: ep.tenant_id, id: ep.id, found: x IS NOT NULL, occurred_at: toString(x.occurred_at),
                  eid: elementId(x)}) AS episodes
}
CALL () {
  UNWIND $entities AS s
  OPTIONAL MATCH (e:Entity {tenant_id: s.tenant_id, id: s.id})
    USING INDEX SEEK e:Entity(tenant_id, id)
  OPTIONAL MATCH (t:Tombstone {tenant_id: s.tenant_id, subject: s.id})
    USING INDEX SEEK t:Tombstone(tenant_id, subject)
  RETURN collect({tenant_id: s.tenant_id, id: s.id, type: e.type, forgotten_at: t.forgotten_at,
                  eid: elementId(e), merged_into: e.merged_into}) AS entities
}
CALL () {
  UNWIND $mentions AS m
  MATCH (x:Episode {tenant_id: m.tenant_id, id: m.episode})
    USING INDEX SEEK x:Episode(tenant_id, id)
  MATCH (e:Entity {tenant_id: m.tenant_id, id: m.entity})
    USING INDEX SEEK e:Entity(tenant_id, id)
  WHERE EXISTS { (x)-[:MENTIONS]->(e) }
  RETURN collect(DISTINCT [m.tenant_id, m.entity]) AS mentioned
}
RETURN episodes, entities, mentioned
"""

# The lock step reads, for every touched slot, its ledger (the statements, which decide the
# believed rows) and an outline of its believed rows (element id, attribute, validity, status,
# value key, memory id, recorded_at): the diff needs no more of a confirmed row. Candidates, and the
# rows of a slot without a ledger yet (written before ledgers existed), are then read in full
# (``FETCH_ROWS``). Retired rows matter only for a replay of a candidate's statement (the keys they
# carry), so their keys are read only for subjects the check step found already mentioned by one
# of the batch's episodes (``s.replay``). One branch per fact type of the schema, each guarded by
# the subject's touched types before it expands: a subject with a long history of other
# attributes (or many ``MENTIONS``) costs no more than its touched slots. ``%(branches)s`` is
# filled in by :func:`lock_and_read_query`.
LOCK_AND_READ = """
UNWIND $subjects AS s
MERGE (e:Entity {tenant_id: s.tenant_id, id: s.id})
  ON CREATE SET e:$(s.type), e.type = s.type, e.name = s.name, e.created_at = $now
// The write lock on the subject, leaving no trace: a batch that changes nothing (a replay)
// changes no property; the write step stamps updated_at on the subjects it did change.
SET e._lock = true
REMOVE e._lock
WITH e, s
OPTIONAL CALL (e, s) {
%(branches)s
}
WITH e, s, collect(CASE WHEN f IS NOT NULL AND f.expired_at IS NULL THEN
               [elementId(f), f.attribute, toString(f.valid_from), toString(f.valid_to), f.status,
                f.value_key, f.memory_id, toString(f.recorded_at)] END)
         AS outline,
       collect(CASE WHEN s.replay THEN
               [k IN coalesce(f.delta_keys, []) + coalesce(f.expired_by_delta_key, []) WHERE k IN s.keys]
               END) AS applied
OPTIONAL CALL (s) {
  UNWIND s.attributes AS attribute
  MATCH (l:Ledger {tenant_id: s.tenant_id, subject: s.id, attribute: attribute})
    USING INDEX SEEK l:Ledger(tenant_id, subject, attribute)
  RETURN collect([l.attribute, l.points, toString(l.updated_at)]) AS ledgers
}
RETURN s.tenant_id AS tenant_id, s.id AS id, e.type AS type, elementId(e) AS eid, outline, applied,
       ledgers
"""

# Rows read under the subject lock are addressed by element id: valid inside this transaction.
FETCH_ROWS = """
UNWIND $ids AS id
MATCH ()-[f]->() WHERE elementId(f) = id
RETURN f {.*, _eid: id, %s,
          value: CASE WHEN f.value_type IN ['date', 'datetime'] THEN toString(f.value) ELSE f.value END}
         AS props
""" % ", ".join(f"{k}: toString(f.{k})" for k in INSTANTS)

_BRANCH = """  MATCH (e)-[f:%(type)s]->() WHERE %(name)s IN s.types AND f.attribute IN s.attributes
    AND (s.replay OR f.expired_at IS NULL)
  RETURN f"""


@lru_cache(maxsize=64)
def lock_and_read_query(types: tuple[str, ...]) -> str:
    """``LOCK_AND_READ`` for a schema whose facts are stored as relationship ``types``."""
    # quote_identifier admits only [A-Za-z0-9_], so the name is safe as a string literal too.
    branches = "\n  UNION ALL\n".join(
        _BRANCH % {"type": quote_identifier(t), "name": f"'{t}'"} for t in types)
    return LOCK_AND_READ % {"branches": branches}

# Rows read under the subject lock are addressed by element id: valid inside this transaction.
# Support only grows (relative to what is stored: a row may be known here by its outline only), and
# a retired row gets its expiry.
UPDATE_ROWS = """
UNWIND $rows AS r
MATCH ()-[f]->() WHERE elementId(f) = r.fid
SET f.support_count = f.support_count + r.count,
    f.support_episodes = f.support_episodes + [x IN r.episodes WHERE NOT x IN f.support_episodes],
    f.delta_keys = f.delta_keys + r.keys,
    f.last_confirmed_at = CASE WHEN r.count > 0 THEN datetime(r.confirmed) ELSE f.last_confirmed_at END,
    f.expired_at = CASE WHEN r.expired IS NULL THEN f.expired_at ELSE datetime(r.expired) END,
    f.expired_by_episode_id = coalesce(r.expired_by_episode_id, f.expired_by_episode_id),
    f.expired_by_delta_key = coalesce(r.expired_by_delta_key, f.expired_by_delta_key)
"""

# Rows a batch only retires (no support added; three in four updated rows of the scale stream):
# their expiry alone. ``UPDATE_ROWS`` reads and copies a row's support lists even to set them
# unchanged: 80 against 47 ms for 4,000 rows (sgam/bench/README.md, "Session 28").
EXPIRE_ROWS = """
UNWIND $rows AS r
MATCH ()-[f]->() WHERE elementId(f) = r.fid
SET f.expired_at = datetime(r.expired), f.expired_by_episode_id = r.expired_by_episode_id,
    f.expired_by_delta_key = r.expired_by_delta_key
"""

# Subjects whose facts, support or statements a batch changed.
TOUCH_SUBJECTS = """
UNWIND $subjects AS id
MATCH (e:Entity) WHERE elementId(e) = id
SET e.updated_at = $now
"""

# The statements a batch adds to each slot's ledger (docs/temporal-semantics.md), and the
# subject's updated_at. The subject is locked, so no other transaction creates the same ledger.
APPEND_LEDGERS = """
UNWIND $ledgers AS x
MERGE (l:Ledger {tenant_id: x.tenant_id, subject: x.subject, attribute: x.attribute})
  ON CREATE SET l.points = []
SET l.points = l.points + x.points, l.updated_at = $now
WITH x WHERE x.eid IS NOT NULL
MATCH (e:Entity) WHERE elementId(e) = x.eid
SET e.updated_at = $now
"""

# One statement per batch for all attributes: the relationship type is a row's ``rel_type``
# (from the schema), so a batch does not pay a round trip and a plan per relationship type.
CREATE_ATTRIBUTE_FACTS = """
UNWIND $rows AS r
MATCH (e:Entity) WHERE elementId(e) = r.eid
MERGE (v:Value {tenant_id: r.tenant_id, key: r.node_key})
  ON CREATE SET v.value = %(value)s, v.value_type = r.props.value_type,
                v.attribute = r.props.attribute, v.name = r.caption,
                v.created_at = datetime(r.at.recorded_at)
WITH e, v, r, r.props AS props
CREATE (e)-[f:$(r.rel_type)]->(v)
SET f = props {.*, value: %(value)s, %(instants)s}
""" % {"value": _TYPED_VALUE, "instants": _AS_DATETIME}

# Relation facts whose target was not locked (so it is merged): a bulk import's, which locks no
# target, and in a write the copies of stored rows that point at an entity no delta of the batch
# names (a row cut short by a correction). Neither is linked by the batch's ``MENTIONS``.
CREATE_RELATION_FACTS = """
UNWIND $rows AS r
MATCH (e:Entity) WHERE elementId(e) = r.eid
MERGE (t:Entity {tenant_id: r.tenant_id, id: r.target})
  ON CREATE SET t:$(r.target_type), t.type = r.target_type, t.name = r.target, t.created_at = $now
WITH e, t, r, r.props AS props
CREATE (e)-[f:$(r.rel_type)]->(t)
SET f = props {.*, %s}  // a relation's value is its target's id: text
""" % _AS_DATETIME

# Relation facts whose target the lock step locked (so it exists, and its element id is known):
# no MERGE of the target, which also spared the plan its eager barriers.
CREATE_RELATION_FACTS_TO = """
UNWIND $rows AS r
MATCH (e:Entity) WHERE elementId(e) = r.eid
MATCH (t:Entity) WHERE elementId(t) = r.target_eid
WITH e, t, r, r.props AS props
CREATE (e)-[f:$(r.rel_type)]->(t)
SET f = props {.*, %s}
""" % _AS_DATETIME

# An episode that states a private fact holds its text: only the fact's readers may see it too.
RESTRICT_EPISODES = """
UNWIND $episodes AS r
MATCH (ep:Episode {tenant_id: r.tenant_id, id: r.id})
SET ep.visible_to = CASE WHEN ep.visible_to IS NULL THEN r.readers
                         ELSE [p IN ep.visible_to WHERE p IN r.readers] END
"""

# Episodes and entities by element id (read earlier in the transaction): a planned lookup by
# (tenant_id, id) inside UNWIND can fall back to an index scan per row while the plan cache holds
# a plan made when the labels were nearly empty (millions of db hits for a few thousand rows).
LINK_MENTIONS = """
UNWIND $mentions AS m
MATCH (ep:Episode) WHERE elementId(ep) = m.episode
MATCH (e:Entity) WHERE elementId(e) = m.entity
MERGE (ep)-[:MENTIONS]->(e)
"""

# Subjects the lock step created for deltas that were then all refused (a refusal leaves nothing
# but its record). Last in the batch, so a subject that a relation of the batch points at, or that
# a concurrent writer gave facts before this one locked it, is kept.
DROP_UNUSED_SUBJECTS = """
UNWIND $ids AS id
MATCH (e:Entity) WHERE elementId(e) = id AND NOT EXISTS { (e)--() }
DELETE e
"""


def _together(parts: Sequence[tuple[str, str]]) -> str:
    """The statements ``parts`` (name, text) as one: each a unit subquery, in order (a subquery
    reads what the ones before it wrote), every parameter ``$x`` of part ``name`` read from the one
    map as ``$args.name_x`` (``$now`` as ``$args.now``, shared)."""
    def read(name: str) -> Callable[[re.Match[str]], str]:
        return lambda m: "$args.now" if m.group(1) == "now" else f"$args.{name}_{m.group(1)}"

    return "\n".join(f"CALL () {{\n{_PARAMETER.sub(read(name), text).strip()}\n}}" for name, text in parts)


_PARAMETER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# Step 4 as one statement, one round trip: a single ``write`` took six (check, lock, then the
# ledgers, the rows, the new facts and the links one by one) and half its time was those waits.
# Its parameters are one map (``Statement.packed``), so the text keeps one plan whatever its lists'
# sizes; a part with nothing to write unwinds an empty list. The unused subjects go last: a subject
# that a relation of the batch points at is kept.
PERSIST = _together((
    ("touched", TOUCH_SUBJECTS), ("ledgers", APPEND_LEDGERS), ("updates", UPDATE_ROWS), ("expired", EXPIRE_ROWS),
    ("attributes", CREATE_ATTRIBUTE_FACTS), ("relations", CREATE_RELATION_FACTS_TO),
    ("merged", CREATE_RELATION_FACTS), ("restricted", RESTRICT_EPISODES), ("mentions", LINK_MENTIONS),
    ("unused", DROP_UNUSED_SUBJECTS),
))


@dataclass
class Prepared:
    index: int
    delta: MemoryDelta
    subject_type: str
    target_type: str | None
    key: str
    value_key: str = ""
    value: Any = None  # coerced by the schema


def prepare(deltas: Sequence[MemoryDelta], schema: Schema,
            indices: Iterable[int] | None = None) -> tuple[list[Prepared], list[DeltaResult]]:
    """Schema checks that need no database: attribute, value type, subject and target types.

    ``indices``: only the deltas at these positions (read by index), in that order.
    """
    ready: list[Prepared] = []
    rejected: list[DeltaResult] = []
    chosen = enumerate(deltas) if indices is None else ((i, deltas[i]) for i in indices)
    for index, delta in chosen:
        try:
            spec = schema.attribute(delta.attribute)
            subject_type = schema.subject_type_for(delta.attribute, delta.subject_type)
            value, vkey = schema.coerce(delta.attribute, delta.value) if delta.value is not None else (None, "")
            target_type = spec.target if spec.value_type == "entity" else None
            replaces = schema.coerce(delta.attribute, delta.replaces)[1] if delta.replaces is not None else ""
            if delta.subject_name is not None:
                _check_name(delta.subject_name)
            ready.append(Prepared(index, delta, subject_type, target_type,
                                   delta_key(delta, vkey, replaces), vkey, value))
        except SgamError as exc:
            rejected.append(DeltaResult(index, "rejected", error=exc, message=str(exc)))
    return ready, rejected


def _check_name(name: str) -> None:
    """A subject name as the store can hold it (the model checks it too, but a delta built without
    validation reaches here unchecked)."""
    checked(check_value, name, "subject_name")


def write_steps(
    prepared: Sequence[Prepared],
    rejected: Sequence[DeltaResult],
    schema: Schema,
    clock: Callable[[], datetime],
    atomic: bool,
    *,
    checked: bool = False,
    mentions: bool = True,
    max_future: timedelta = DEFAULT_MAX_FUTURE,
    planned: Planned | None = None,
) -> WriteSteps:
    """The whole write transaction for one batch (see the module docstring).

    ``checked``: the episodes and entity types were checked for the whole stream already (bulk
    import), so step 1 is skipped; ``mentions=False`` leaves the ``MENTIONS`` links to the caller.
    The links address episodes by the element ids step 1 reads, so ``checked`` needs
    ``mentions=False``. ``max_future``: how far after now a ``valid_from`` may lie. ``planned``:
    the batch as :func:`plan_ahead` planned it (``checked`` batches only), used when the lock step
    finds that its subjects hold nothing; otherwise the batch is planned again under the locks.
    """
    if planned is not None and not checked:
        raise ValueError("write_steps(planned=...) is for checked batches (bulk import) only")
    if checked and mentions:
        raise ValueError("write_steps(checked=True) reads no episode ids: pass mentions=False")
    results = list(rejected)
    prepared = list(prepared)
    known: dict[tuple[str, str, str], str] = {}
    mentioned: set[tuple[str, str]] = set()
    if prepared and not checked:
        prepared = yield from _check(prepared, results, known, mentioned)
    if atomic and results:
        raise results[0].error or InvalidDelta(results[0].message)
    if not prepared:
        return BatchResult(tuple(sorted(results, key=lambda r: r.index)))

    locked = yield from _lock_and_read(prepared, schema, planned.now if planned else clock(), mentioned,
                                       targets=not checked, subjects=planned.lock if planned else None)
    locked.node_ids.update(known)
    if planned is not None and not locked.holds_rows():
        # Planned ahead against subjects that held nothing, and they hold nothing: the same plan.
        now = planned.now
        results.extend(planned.results)
        changed = planned.changed
        rows = planned.addressed(locked.subject_ids)
        restricted: list[dict[str, Any]] | None = planned.restricted
    else:
        # Transaction time is read only now, under the subject locks, and never before a row or
        # statement this transaction read: a writer that waited for a lock cannot stamp its rows
        # earlier than the rows it retires (docs/temporal-semantics.md, "Transaction time").
        now = max(clock(), locked.latest) if locked.latest is not None else clock()
        planned_here, changed, rows = _plan(prepared, locked, schema, now, atomic, checked, known, max_future)
        results.extend(planned_here)
        restricted = None
    yield from _persist(changed, locked, rows, schema, now, mentions, restricted)
    return BatchResult(tuple(sorted(results, key=lambda r: r.index)))


def _plan(prepared: list[Prepared], locked: _Locked, schema: Schema, now: datetime, atomic: bool,
          checked: bool, known: dict[tuple[str, str, str], str],
          max_future: timedelta) -> tuple[list[DeltaResult], list[Prepared], _Rows]:
    """Step 3: reconcile each delta against what ``locked`` holds, in order, and build the rows
    that write the difference. Returns the deltas' results, those that change something, and the rows."""
    results: list[DeltaResult] = []
    creates: list[dict[str, Any]] = []
    touched: dict[str, _Touched] = {}
    accepted: list[Prepared] = []
    # What this batch applies for the first time: an unchanged (repeated) statement got its
    # MENTIONS links when it was applied, and must not gain one now that its target exists.
    changed: list[Prepared] = []
    with collector_paused():
        for item in prepared:
            result = _reconcile_one(item, locked, schema, now, creates, touched, max_future)
            results.append(result)
            if result.ok:
                accepted.append(item)
                if result.outcome != "unchanged":
                    changed.append(item)
            elif atomic:
                raise result.error  # type: ignore[misc]
        rows = _rows(locked, creates, touched, schema, now)
        if rows.stand_ins:
            results = [_readdressed(r, rows.stand_ins) for r in results]
        # A refused delta leaves nothing but its refusal: no MENTIONS link, no restricted episode,
        # and no subject that the lock step created only for it.
        if len(accepted) < len(prepared) and not checked:
            rows.unused = _unused_subjects(prepared, accepted, known, locked)
        # Relation targets the lock step created: those no new fact points at are removed again.
        rows.unused += sorted(eid for key, eid in locked.targets.items() if ("Entity", *key) not in known)
        # What planning read is not needed to write: let it go before the collector runs again,
        # so that it does not find a batch's worth of statements and rows still alive.
        locked.slots.clear()
        locked.retired.clear()
        locked.points.clear()
        locked.new_points.clear()
        del creates, touched
    return results, changed, rows


@dataclass
class Planned:
    """A checked batch planned before its transaction as if its subjects held nothing
    (:func:`plan_ahead`), with the transaction time it then takes. Its rows address each subject
    by a stand-in (``stand_ins``: stand-in -> (tenant, subject)) until the lock step gives its
    element id."""

    now: datetime
    results: list[DeltaResult]
    changed: list[Prepared]
    rows: _Rows
    stand_ins: dict[str, tuple[str, str]]
    # The lock step's subjects (:func:`_lock_subjects`) and the episodes the batch restricts
    # (:func:`_private_episodes`): made ahead too, so that the transaction only sends them.
    lock: tuple[list[dict[str, Any]], set[tuple[str, str]]]
    restricted: list[dict[str, Any]]

    def addressed(self, subject_ids: dict[tuple[str, str], str]) -> _Rows:
        """The rows with each subject's element id in place of its stand-in (once: they are changed in place)."""
        ids = {stand_in: subject_ids[key] for stand_in, key in self.stand_ins.items()}
        rows = self.rows
        for entry in rows.attributes:
            entry["eid"] = ids[entry["eid"]]
        for entry in rows.relations:
            entry["eid"] = ids[entry["eid"]]
        for entry in rows.ledgers:
            if entry["eid"] is not None:
                entry["eid"] = ids[entry["eid"]]
        rows.subjects = sorted(ids[s] for s in rows.subjects)
        return rows


def plan_ahead(prepared: Sequence[Prepared], schema: Schema, now: datetime,
               max_future: timedelta = DEFAULT_MAX_FUTURE) -> Planned | None:
    """Plan a checked batch (bulk import) before its transaction, as if none of its subjects held a
    fact, a statement or a key: what the lock step then finds for a chunk of an import into empty
    tenants. ``write_steps(planned=...)`` uses it only if the lock step finds exactly that, and then
    stamps the batch with ``now`` (nothing stored is retired, so no later row can be stamped
    earlier than one it retires); otherwise it plans the batch again under the locks. ``None``
    when a delta is refused: the transaction plans the batch again and reports it."""
    ready = list(prepared)
    stand_ins = {f"{i}": key for i, key in enumerate(dict.fromkeys(
        (p.delta.tenant_id, p.delta.subject) for p in ready))}
    locked = _Locked(subject_ids={key: stand_in for stand_in, key in stand_ins.items()})
    try:
        results, changed, rows = _plan(ready, locked, schema, now, True, True, {}, max_future)
    except SgamError:
        return None
    return Planned(now, results, changed, rows, stand_ins, _lock_subjects(ready, schema, set(), False),
                   _private_episodes(changed, schema))


def write_op(deltas: Sequence[MemoryDelta], schema: Schema, clock: Callable[[], datetime],
             atomic: bool = False, max_future: timedelta = DEFAULT_MAX_FUTURE) -> Operation[BatchResult]:
    """Reconcile and persist ``deltas`` in one transaction, traced as one write span. ``atomic``:
    a delta the schema refuses refuses the batch before anything is sent."""
    with telemetry.write_batch(deltas, atomic) as span:
        ready, rejected = prepare(deltas, schema)
        if atomic and rejected:
            raise rejected[0].error  # type: ignore[misc]
        result: BatchResult = yield InTx(lambda: write_steps(ready, rejected, schema, clock, atomic,
                                                             max_future=max_future))
        telemetry.written(span, result)
        return result


def _unused_subjects(prepared: list[Prepared], accepted: list[Prepared],
                     known: dict[tuple[str, str, str], str], locked: _Locked) -> list[str]:
    """Element ids of the subjects the lock step created (the check step did not find them) for
    refused deltas only."""
    used = {(p.delta.tenant_id, p.delta.subject) for p in accepted}
    return sorted({locked.subject_ids[(p.delta.tenant_id, p.delta.subject)] for p in prepared
                   if (p.delta.tenant_id, p.delta.subject) not in used
                   and ("Entity", p.delta.tenant_id, p.delta.subject) not in known})


def _check(prepared: list[Prepared], results: list[DeltaResult], known: dict[tuple[str, str, str], str],
           mentioned: set[tuple[str, str]]) -> Generator[Statement, Records, list[Prepared]]:
    """Drop (into ``results``) the deltas that fail a stored-state check; ``known`` receives the
    element ids of the episodes and entities found, keyed ``("Episode" | "Entity", tenant, id)``,
    and ``mentioned`` the subjects (tenant, id) already mentioned by one of the batch's episodes."""
    episodes = sorted({(p.delta.tenant_id, p.delta.source_episode_id) for p in prepared})
    wanted = sorted({(p.delta.tenant_id, entity) for p in prepared for entity in entities_of(p)})
    pairs = sorted({(p.delta.tenant_id, p.delta.source_episode_id, p.delta.subject) for p in prepared})
    [stored] = yield Statement(CHECK_STORED, {
        "episodes": [{"tenant_id": t, "id": i} for t, i in episodes],
        "entities": [{"tenant_id": t, "id": i} for t, i in wanted],
        "mentions": [{"tenant_id": t, "episode": e, "entity": i} for t, e, i in pairs],
    })
    found, entities = stored["episodes"], stored["entities"]
    mentioned.update((t, i) for t, i in stored["mentioned"])
    # Each cited episode's time as text: it matters only beside a forgotten subject (parsed there),
    # and the driver's conversion of a stored datetime took 70 us, 2% of an import's Python time.
    present = {(r["tenant_id"], r["id"]): r["occurred_at"] for r in found if r["found"]}
    known.update((("Episode", r["tenant_id"], r["id"]), r["eid"]) for r in found if r["found"])
    stored_types = {(r["tenant_id"], r["id"]): r["type"] for r in entities if r["type"]}
    known.update((("Entity", r["tenant_id"], r["id"]), r["eid"]) for r in entities if r["eid"])
    forgotten = {(r["tenant_id"], r["id"]): native(r["forgotten_at"]) for r in entities if r["forgotten_at"]}
    merged = {(r["tenant_id"], r["id"]): r["merged_into"] for r in entities if r.get("merged_into")}
    kept: list[Prepared] = []
    claimed: dict[tuple[str, str], int] = {}  # new entities typed by a kept delta of this batch
    failed: list[tuple[Prepared, SgamError]] = []
    for p in prepared:
        error = _check_one(p, present, stored_types, claimed) or _check_forgotten(p, present, forgotten) \
            or _check_merged(p, merged)
        if error is None:
            kept.append(p)
            for entity_id, entity_type in zip(entities_of(p), (p.subject_type, p.target_type)):
                if (p.delta.tenant_id, entity_id) not in stored_types:
                    stored_types[(p.delta.tenant_id, entity_id)] = entity_type
                    claimed[(p.delta.tenant_id, entity_id)] = p.index
        else:
            failed.append((p, error))
    if failed:
        # A statement already applied stays applied. A retract of a value not held names a target
        # without creating it, so a later statement may give that id another type; repeated, the
        # retract is unchanged rather than refused for a type it was never judged against.
        [applied] = yield Statement(APPLIED_KEYS, {"keys": [
            {"tenant_id": p.delta.tenant_id, "subject": p.delta.subject, "attribute": p.delta.attribute,
             "key": p.key, "needle": f'"id":{json.dumps(p.key)}'} for p, _ in failed]})
        for p, error in failed:
            if p.key in applied["keys"]:
                results.append(DeltaResult(p.index, "unchanged", message="already applied: its statement is stored"))
            else:
                results.append(DeltaResult(p.index, "rejected", error=error, message=str(error)))
    return kept


# The keys among ``$keys`` whose statement its slot already holds (in the ledger, or on a row of a
# slot written before ledgers).
APPLIED_KEYS = """
UNWIND $keys AS k
OPTIONAL MATCH (l:Ledger {tenant_id: k.tenant_id, subject: k.subject, attribute: k.attribute})
WITH k, l
WHERE any(p IN coalesce(l.points, []) WHERE p CONTAINS k.needle)
   OR EXISTS { MATCH (:Entity {tenant_id: k.tenant_id, id: k.subject})-[f]->()
               WHERE f.attribute = k.attribute AND (k.key IN f.delta_keys OR f.expired_by_delta_key = k.key) }
RETURN collect(k.key) AS keys
"""


def _check_forgotten(p: Prepared, occurred: dict[tuple[str, str], str],
                     forgotten: dict[tuple[str, str], datetime]) -> SgamError | None:
    """A forgotten subject comes back only through an episode that occurred after it was forgotten
    (``occurred``: each episode's time as Cypher's ``toString`` gives it)."""
    d = p.delta
    for entity_id in entities_of(p):
        at = forgotten.get((d.tenant_id, entity_id))
        if at is None:
            continue
        # toString() of a datetime in a named zone ends in "[zone]", which fromisoformat refuses
        episode_time = datetime.fromisoformat(occurred[(d.tenant_id, d.source_episode_id)].split("[", 1)[0])
        if episode_time < at:
            return Conflict(
                f"{entity_id!r} of tenant {d.tenant_id!r} was forgotten at {at.isoformat()}; episode "
                f"{d.source_episode_id!r} occurred before that ({episode_time.isoformat()}), so it "
                "cannot bring it back"
            )
    return None


def _check_merged(p: Prepared, merged: dict[tuple[str, str], str]) -> SgamError | None:
    """An entity merged into another holds only its history (graph/merge.py): write about that one."""
    for entity_id in entities_of(p):
        into = merged.get((p.delta.tenant_id, entity_id))
        if into is not None:
            return Conflict(f"{entity_id!r} of tenant {p.delta.tenant_id!r} was merged into {into!r}: write "
                            f"about {into!r} (or split them first: sgam entities split)")
    return None


def entities_of(p: Prepared) -> list[str]:
    ids = [p.delta.subject]
    if p.target_type and p.delta.value is not None:
        ids.append(str(p.delta.value).strip())
    return ids


def _check_one(p: Prepared, present: dict[tuple[str, str], str], stored_types: dict[tuple[str, str], str],
               claimed: dict[tuple[str, str], int]) -> SgamError | None:
    """The stored-state checks of one delta; ``stored_types`` also holds the types of new entities
    that an earlier delta of the batch (``claimed``: its index) gave them."""
    d = p.delta
    if (d.tenant_id, d.source_episode_id) not in present:
        return InvalidDelta(
            f"source_episode_id {d.source_episode_id!r} is not a recorded episode of tenant "
            f"{d.tenant_id!r}: record the episode first (record_episode, or an 'episode' line in replay)"
        )
    if p.target_type and p.target_type != p.subject_type and str(d.value).strip() == d.subject:
        return SchemaViolation(
            f"{d.attribute!r} would point {d.subject!r} of tenant {d.tenant_id!r} at itself, making it "
            f"both a {p.subject_type} and a {p.target_type}: an entity has one type"
        )
    roles = (("subject", p.subject_type), ("target", p.target_type))
    for entity_id, (role, expected) in zip(entities_of(p), roles):
        stored = stored_types.get((d.tenant_id, entity_id))
        if stored is not None and stored != expected:
            by = claimed.get((d.tenant_id, entity_id))
            made = "" if by is None else f" (made one by delta {by} of the same batch)"
            return SchemaViolation(
                f"{role} {entity_id!r} of tenant {d.tenant_id!r} is a {stored}{made}, but attribute "
                f"{d.attribute!r} needs a {expected} there"
            )
    return None


@dataclass
class _Locked:
    """What the lock step read: believed rows by slot, element ids, and already-applied keys."""

    slots: dict[tuple[str, str, str], list[Fact]] = field(default_factory=dict)
    # Rows the batch retired (they leave ``slots``), by memory id: the write step stamps their expiry.
    retired: dict[str, Fact] = field(default_factory=dict)
    # The slots' ledgers; a slot missing here has none yet (its rows were written before ledgers).
    points: dict[tuple[str, str, str], list[Point]] = field(default_factory=dict)
    new_points: dict[tuple[str, str, str], list[Point]] = field(default_factory=dict)
    subject_ids: dict[tuple[str, str], str] = field(default_factory=dict)
    row_ids: dict[str, str] = field(default_factory=dict)
    applied: set[str] = field(default_factory=set)
    latest: datetime | None = None  # the latest recorded_at (or ledger update) read
    # Element ids of episodes and entities, keyed ("Episode" | "Entity", tenant, id).
    node_ids: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # Relation targets that are no subject of the batch, locked with the subjects: (tenant, id) -> element id.
    targets: dict[tuple[str, str], str] = field(default_factory=dict)

    def holds_rows(self) -> bool:
        """Whether the lock step read anything stored: a row, a statement, an applied key."""
        return bool(self.slots or self.points or self.applied) or self.latest is not None


def _lock_and_read(prepared: list[Prepared], schema: Schema, now: datetime, mentioned: set[tuple[str, str]],
                   targets: bool = False,
                   subjects: tuple[list[dict[str, Any]], set[tuple[str, str]]] | None = None,
                   ) -> Generator[Statement, Records, _Locked]:
    """Lock the subjects (creating new ones) and read the believed rows of their slots, and the
    already-applied keys of the batch for the ``mentioned`` subjects (the only ones that can see
    a replay). ``targets``: lock the relation targets too (creating new ones), in the same sorted
    pass, so that a batch takes every entity lock it needs in one global order: lanes of
    ``write_many`` deadlocked on the unique-index entry of an entity that one lane had created as
    a subject and another then merged as a relation target, each holding the other's next one.
    ``subjects``: :func:`_lock_subjects` of the same arguments, made ahead (``Planned.lock``)."""
    locking, only_targets = subjects or _lock_subjects(prepared, schema, mentioned, targets)
    query = lock_and_read_query(schema.fact_types())
    records = yield Statement(query, {"subjects": locking, "now": now})
    locked = _Locked()
    wanted: list[str] = []
    latest: list[datetime] = []
    # Inside the write transaction, which runs with the cyclic collector paused (``Store``).
    for record in records:
        tenant, subject = record["tenant_id"], record["id"]
        if (tenant, subject) in only_targets:
            locked.targets[(tenant, subject)] = record["eid"]
            continue
        locked.subject_ids[(tenant, subject)] = record["eid"]
        locked.node_ids[("Entity", tenant, subject)] = record["eid"]
        locked.applied.update(k for keys in record["applied"] for k in keys or ())
        for attribute, entries, updated in record["ledgers"]:
            points = Point.many_from_json(entries or ())
            locked.points[(tenant, subject, attribute)] = points
            locked.applied.update(k for p in points for k in p.supporting_keys)
            if updated is not None:
                latest.append(datetime.fromisoformat(updated))
        for eid, attribute, valid_from, valid_to, status, value_key, memory_id, recorded in record["outline"]:
            slot = (tenant, subject, attribute)
            latest.append(datetime.fromisoformat(recorded))
            if status == Status.CONFIRMED.value and slot in locked.points \
                    and not schema.attribute(attribute).gated:
                # The ledger decides; of a confirmed row the diff needs its interval only.
                locked.slots.setdefault(slot, []).append(_outline_row(
                    eid, tenant, subject, attribute, valid_from, valid_to, value_key, memory_id))
                locked.row_ids[memory_id] = eid
            else:
                wanted.append(eid)
    locked.latest = max(latest) if latest else None
    if wanted:
        fetched = yield Statement(FETCH_ROWS, {"ids": wanted})
        for record in fetched:
            props = record["props"]
            fact = fact_from_properties(props)
            locked.row_ids[fact.memory_id] = props["_eid"]
            locked.slots.setdefault((fact.tenant_id, fact.subject, fact.attribute), []).append(fact)
    return locked


def _lock_subjects(prepared: list[Prepared], schema: Schema, mentioned: set[tuple[str, str]],
                   targets: bool) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    """The lock step's subjects (:func:`_lock_and_read`), one entry each with its attributes,
    relationship types and keys, sorted; with ``targets`` the relation targets that are no subject
    too, which are also returned apart."""
    subjects: dict[tuple[str, str], dict[str, Any]] = {}
    for p in prepared:
        entry = subjects.setdefault(
            (p.delta.tenant_id, p.delta.subject),
            {"tenant_id": p.delta.tenant_id, "id": p.delta.subject, "type": p.subject_type,
             "name": p.delta.subject_name or p.delta.subject, "attributes": [], "types": [],
             "keys": [], "replay": (p.delta.tenant_id, p.delta.subject) in mentioned},
        )
        if p.delta.attribute not in entry["attributes"]:
            entry["attributes"].append(p.delta.attribute)
            rel_type = schema.rel_type(p.delta.attribute)
            if rel_type not in entry["types"]:
                entry["types"].append(rel_type)
        entry["keys"].append(p.key)
    only_targets: set[tuple[str, str]] = set()
    for p in prepared if targets else ():
        if p.target_type and p.delta.value is not None:
            key = (p.delta.tenant_id, entities_of(p)[1])
            if key not in subjects:
                only_targets.add(key)
                subjects[key] = {"tenant_id": key[0], "id": key[1], "type": p.target_type, "name": key[1],
                                 "attributes": [], "types": [], "keys": [], "replay": False}
    # Sorted, so that two batches lock shared subjects in the same order.
    return [subjects[k] for k in sorted(subjects)], only_targets


@dataclass
class _OutlineRow:
    """A confirmed believed row known by its outline: what reconcile and ``apply_plan`` read of it
    (a ``Fact`` costs more to build than the rest of a delta's planning)."""

    memory_id: str
    tenant_id: str
    subject: str
    attribute: str
    valid_from: datetime
    valid_to: datetime | None
    value_key: str
    status: Status = Status.CONFIRMED
    expired_at: datetime | None = None
    expired_by_episode_id: str | None = None
    expired_by_delta_key: str | None = None
    support_count: int = 1
    support_episodes: tuple[str, ...] = ()
    delta_keys: tuple[str, ...] = ()
    last_confirmed_at: datetime | None = None

    def model_copy(self, update: dict[str, Any]) -> _OutlineRow:
        return replace(self, **update)


def _outline_row(eid: str, tenant: str, subject: str, attribute: str, valid_from: str,
                 valid_to: str | None, value_key: str, memory_id: str) -> Fact:
    row = _OutlineRow(memory_id, tenant, subject, attribute, datetime.fromisoformat(valid_from),
                      None if valid_to is None else datetime.fromisoformat(valid_to), value_key)
    return row  # type: ignore[return-value]  # read like a Fact by reconcile and apply_plan


@dataclass
class _Touched:
    """What a batch does to a stored row: support it adds, and its expiry."""

    count: int = 0
    episodes: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    expired: tuple[str, str] | None = None  # (episode, delta key) that retired it


def _reconcile_one(item: Prepared, locked: _Locked, schema: Schema, now: datetime,
                   creates: list[dict[str, Any]], touched: dict[str, _Touched],
                   max_future: timedelta) -> DeltaResult:
    delta = item.delta
    slots = locked.slots
    rows = slots.get(delta.key, [])
    try:
        plan = reconcile(rows, delta, schema, now, statements=locked.points.get(delta.key),
                         applied=locked.applied, applied_only=True, max_future=max_future,
                         prepared=(item.value, item.value_key, item.key))
    except SgamError as exc:
        return DeltaResult(item.index, "rejected", error=exc, message=str(exc))
    # ``locked.applied`` stays the set of every key the slot's rows and statements carry.
    for props in plan.create:
        locked.applied.update(props["delta_keys"])
    locked.applied.add(plan.delta_key)
    if plan.statements:
        locked.points.setdefault(delta.key, []).extend(plan.statements)
        locked.new_points.setdefault(delta.key, []).extend(plan.statements)
    # A row retired here is done with: planning reads a slot's believed rows only (its keys are in
    # ``locked.applied``), so it waits apart for the write step instead of being filtered out again
    # by every later delta of its slot (an import applies a hot slot's whole history in one chunk).
    if plan.expire:
        live = []
        for row in apply_plan(rows, plan):
            if row.expired_at is None:
                live.append(row)
            else:
                locked.retired[row.memory_id] = row
        slots[delta.key] = live
    elif plan.create or plan.support:
        slots[delta.key] = apply_plan(rows, plan)
    for memory_id in plan.support:
        change = touched.setdefault(memory_id, _Touched())
        change.count += 1
        if plan.episode_id not in change.episodes:
            change.episodes.append(plan.episode_id)
        change.keys.append(plan.delta_key)
    for memory_id in plan.expire:
        touched.setdefault(memory_id, _Touched()).expired = (plan.episode_id, plan.delta_key)
    creates.extend(plan.create)
    return DeltaResult(
        item.index, plan.outcome, tuple(p["memory_id"] for p in plan.create), plan.message
    )


@dataclass
class _Rows:
    """The parameter rows of a batch's writes."""

    updates: list[dict[str, Any]]
    attributes: list[dict[str, Any]]
    relations: list[dict[str, Any]]
    ledgers: list[dict[str, Any]]
    subjects: list[str]
    unused: list[str] = field(default_factory=list)
    """Subjects created by the lock step for refused deltas only (element ids): removed again."""
    stand_ins: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Rows the batch would have created and retired at once, each with the copies written in its
    place (:func:`_never_believed`)."""


def _rows(locked: _Locked, creates: list[dict[str, Any]], touched: dict[str, _Touched],
          schema: Schema, now: datetime) -> _Rows:
    final = {row.memory_id: row for rows in locked.slots.values() for row in rows}
    final.update(locked.retired)
    new_ids = {props["memory_id"] for props in creates}
    stamp = now.astimezone(timezone.utc).isoformat()
    updates = []
    for memory_id, change in touched.items():
        if memory_id not in new_ids:
            expired = change.expired
            updates.append({
                "fid": locked.row_ids[memory_id], "count": change.count, "episodes": change.episodes,
                "keys": change.keys, "confirmed": stamp, "expired": stamp if expired else None,
                "expired_by_episode_id": expired[0] if expired else None,
                "expired_by_delta_key": expired[1] if expired else None,
            })
    attribute_rows: list[dict[str, Any]] = []
    relation_rows: list[dict[str, Any]] = []
    stand_ins, revises = _never_believed(creates, final, locked)
    for props in creates:
        memory_id = props["memory_id"]
        if memory_id in stand_ins:
            continue
        row = final[memory_id]
        if memory_id in revises:
            row = row.model_copy(update={"revises_memory_id": revises[memory_id]})
        entry = fact_entry(row, locked.subject_ids[(row.tenant_id, row.subject)], schema)
        (relation_rows if row.kind == "relation" else attribute_rows).append(entry)
    # Each changed subject's updated_at is set once: with its first ledger, or on its own.
    stamped: set[tuple[str, str]] = set()
    ledgers = []
    for (t, subject, a), points in sorted(locked.new_points.items()):
        first = (t, subject) not in stamped
        stamped.add((t, subject))
        ledgers.append({"tenant_id": t, "subject": subject, "attribute": a,
                        "points": [p.to_json() for p in points],
                        "eid": locked.subject_ids.get((t, subject)) if first else None})
    changed = {(final[m].tenant_id, final[m].subject) for m in touched if m in final}
    changed.update((p["tenant_id"], p["subject"]) for p in creates)
    subjects = sorted(locked.subject_ids[k] for k in changed - stamped if k in locked.subject_ids)
    return _Rows(updates, attribute_rows, relation_rows, ledgers, subjects, stand_ins=stand_ins)


def _never_believed(creates: list[dict[str, Any]], final: dict[str, Fact],
                    locked: _Locked) -> tuple[dict[str, tuple[str, ...]], dict[str, str | None]]:
    """The rows of a batch that are not written, each with the copies that stand in for it, and
    the new ``revises_memory_id`` of those copies.

    Reconciling a batch delta by delta can create a row that a later delta of the same batch
    retires at once (``recorded_at = expired_at``: never believed at any instant), such as an
    open-ended row that a later statement of the slot cuts short: the batch then also creates its
    copy over the shorter interval, which revises it. Such a row is left out when nothing is lost
    with it: it is a confirmed row; every row that revises it is a copy (same statement and value,
    every one of its supporting keys and episodes; the copy is what the episode sourced); every row
    that supersedes it is left out too; and its slot's ledger holds the statement that retired it
    (so the delta key it would have carried as ``expired_by_delta_key`` stays applied). Its copies
    then revise what it revised, and a delta's result names the copies. A batch of changes in
    valid-time order so stores just the believed runs; an import of the scale stream left out a
    quarter of its rows (sgam/bench/README.md, "Session 19").
    """
    revisers: dict[str, list[str]] = {}
    superseders: dict[str, list[str]] = {}
    for props in creates:
        row = final[props["memory_id"]]
        if row.revises_memory_id is not None:
            revisers.setdefault(row.revises_memory_id, []).append(row.memory_id)
        if row.supersedes_memory_id is not None:
            superseders.setdefault(row.supersedes_memory_id, []).append(row.memory_id)
    # Latest first: every row that names a row was created after it, so whether those are written
    # is decided by then (a row superseded only by rows left out is left out too).
    left_out: set[str] = set()
    ledger_keys: dict[tuple[str, str, str], set[str]] = {}  # by slot, built on first use
    for props in reversed(creates):
        row = final[props["memory_id"]]
        copies = revisers.get(row.memory_id)
        if (not copies or row.expired_at is None or row.status is not Status.CONFIRMED
                or not left_out.issuperset(superseders.get(row.memory_id, ()))
                or not all(_copies(final[c], row) for c in copies)):
            continue
        slot = (row.tenant_id, row.subject, row.attribute)
        if slot not in ledger_keys:
            ledger_keys[slot] = {p.key for p in locked.points.get(slot, ())}
        if row.expired_by_delta_key in ledger_keys[slot]:
            left_out.add(row.memory_id)
    # Oldest first: a copy revises what the row it stands in for revised, itself re-pointed already.
    stand_ins: dict[str, tuple[str, ...]] = {}
    revises: dict[str, str | None] = {}
    for props in creates:
        memory_id = props["memory_id"]
        if memory_id in left_out:
            revised = revises.pop(memory_id, final[memory_id].revises_memory_id)
            for copy in revisers[memory_id]:
                revises[copy] = revised
            stand_ins[memory_id] = tuple(revisers[memory_id])
    return stand_ins, revises


def _copies(copy: Fact, row: Fact) -> bool:
    """Whether ``copy`` states what ``row`` states, over another interval, with all its support."""
    return (copy.source_episode_id == row.source_episode_id and copy.value_key == row.value_key
            and copy.op == row.op and copy.asserted_by == row.asserted_by and copy.confidence == row.confidence
            and copy.status is row.status and set(row.delta_keys) <= set(copy.delta_keys)
            and set(row.support_episodes) <= set(copy.support_episodes))


def _written_for(memory_id: str, stand_ins: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The rows written in place of ``memory_id`` (itself if it was written). Not a closure in
    :func:`_readdressed`: a recursive nested function is a reference cycle (the function and its
    cell), left for the cyclic collector once per delta of a batch."""
    if memory_id not in stand_ins:
        return (memory_id,)
    return tuple(c for copy in stand_ins[memory_id] for c in _written_for(copy, stand_ins))


def _readdressed(result: DeltaResult, stand_ins: dict[str, tuple[str, ...]]) -> DeltaResult:
    """``result`` naming the copies of the rows that were not written in their place."""
    ids, message = result.memory_ids, result.message
    if any(m in stand_ins for m in ids):
        ids = tuple(dict.fromkeys(c for m in ids for c in _written_for(m, stand_ins)))
    at = message.find(PREVIOUS_VERSION)
    if at >= 0:  # "...; previous version <memory id> (value ...)": see reconcile's messages
        start = at + len(PREVIOUS_VERSION)
        previous = message[start:].split(" ", 1)[0]
        if previous in stand_ins:
            message = message[:start] + _written_for(previous, stand_ins)[0] + message[start + len(previous):]
    if ids is result.memory_ids and message is result.message:
        return result
    return replace(result, memory_ids=ids, message=message)


def _persist(prepared: list[Prepared], locked: _Locked, rows: _Rows, schema: Schema,
             now: datetime, mentions: bool = True,
             restricted: list[dict[str, Any]] | None = None) -> Generator[Statement, Records, None]:
    """Step 4, :data:`PERSIST`. A relation fact's target locked in step 2 is addressed by its
    element id; another is merged. The links join each episode to the entities its deltas name,
    every one of them locked in step 2 (``mentions``, unless the caller links them itself).
    ``restricted``: :func:`_private_episodes` of ``prepared``, made ahead (``Planned.restricted``)."""
    ids = locked.node_ids
    to_known: list[dict[str, Any]] = []
    to_merge: list[dict[str, Any]] = []
    for r in rows.relations:
        eid = ids.get(("Entity", r["tenant_id"], r["target"])) or locked.targets.get((r["tenant_id"], r["target"]))
        if eid is None:
            to_merge.append(r)
        else:
            to_known.append({**r, "target_eid": eid})
            ids[("Entity", r["tenant_id"], r["target"])] = eid
    links = []
    stated = stated_targets(prepared) if mentions else {}
    for m in mentions_of(prepared) if mentions else ():
        key = (m["tenant_id"], m["entity"])
        episode = ids.get(("Episode", m["tenant_id"], m["episode"]))
        # A value a statement states is an entity its episode mentions, whether or not the
        # statement ever holds (one that loses a tie at its instant), so that which entities exist
        # and which episodes mention them depends on the statements, not on their arrival order.
        # A retract's target is linked only if it exists already (it is never created for one).
        entity = ids.get(("Entity", *key)) or (locked.targets.get(key) if key in stated else None)
        if episode is not None and entity is not None:
            links.append({"episode": episode, "entity": entity})
    # A row without added support is one the batch only retires (``_Touched``).
    supported = [r for r in rows.updates if r["count"]]
    retired = [r for r in rows.updates if not r["count"]]
    parts = {"touched_subjects": rows.subjects, "ledgers_ledgers": rows.ledgers, "updates_rows": supported,
             "expired_rows": retired,
             "attributes_rows": rows.attributes, "relations_rows": to_known, "merged_rows": to_merge,
             "restricted_episodes": _private_episodes(prepared, schema) if restricted is None else restricted,
             "mentions_mentions": links,
             "unused_ids": rows.unused}
    if any(parts.values()):
        yield Statement(PERSIST, {**parts, "now": now}, packed=True)


# Stores written before ledgers existed: the believed confirmed rows of the slots that have no
# ledger yet, a batch of entities at a time (in element-id order, after ``$after``).
UNLEDGERED_ROWS = """
MATCH (e:Entity) WHERE elementId(e) > $after AND ($tenant IS NULL OR e.tenant_id = $tenant)
WITH e ORDER BY elementId(e) LIMIT $batch
OPTIONAL CALL (e) {
  MATCH (e)-[f]->()
  WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL AND f.status = 'confirmed'
    AND NOT EXISTS { MATCH (l:Ledger {tenant_id: e.tenant_id, subject: e.id, attribute: f.attribute}) }
  RETURN collect(f {.*, %s,
         value: CASE WHEN f.value_type IN ['date', 'datetime'] THEN toString(f.value) ELSE f.value END})
    AS rows
}
RETURN elementId(e) AS eid, rows
""" % ", ".join(f"{k}: toString(f.{k})" for k in INSTANTS)

# A ledger a concurrent write created meanwhile is left as it is.
CREATE_LEDGERS = """
UNWIND $ledgers AS x
MERGE (l:Ledger {tenant_id: x.tenant_id, subject: x.subject, attribute: x.attribute})
  ON CREATE SET l.points = x.points, l.updated_at = $now
"""


def backfill_steps(schema: Schema, after: str, batch: int, now: datetime,
                   tenant: str | None = None) -> Generator[Statement, Records, tuple[int, str | None]]:
    """Give the slots of up to ``batch`` entities (of ``tenant``, or all) after element id ``after``
    a ledger rebuilt from their believed rows (:func:`reconcile.points_from_rows`). Returns the
    number of ledgers made and the element id to continue after (``None``: done)."""
    records = yield Statement(UNLEDGERED_ROWS, {"after": after, "batch": batch, "tenant": tenant})
    slots: dict[tuple[str, str, str], list[Fact]] = {}
    for record in records:
        for props in record["rows"]:
            fact = fact_from_properties(props)
            slots.setdefault((fact.tenant_id, fact.subject, fact.attribute), []).append(fact)
    ledgers = [{"tenant_id": t, "subject": subject, "attribute": a,
                "points": [p.to_json() for p in points_from_rows(rows, _many(schema, a))]}
               for (t, subject, a), rows in sorted(slots.items())]
    if ledgers:
        yield Statement(CREATE_LEDGERS, {"ledgers": ledgers, "now": now})
    return len(ledgers), (records[-1]["eid"] if len(records) == batch else None)


def _many(schema: Schema, attribute: str) -> bool:
    """Whether ``attribute`` is set-valued (an attribute the schema no longer has: as one value)."""
    spec = schema.attributes.get(attribute)
    return spec is not None and spec.cardinality is Cardinality.MANY


def stated_targets(prepared: Sequence[Prepared]) -> dict[tuple[str, str], str]:
    """The relation targets that ``prepared`` state as a value (every op but a retract), each
    ``(tenant, id)`` with its entity type: entities, linked from the episodes that state them."""
    return {(p.delta.tenant_id, entities_of(p)[1]): p.target_type for p in prepared
            if p.target_type and p.delta.value is not None and p.delta.op is not Op.RETRACT}


def mentions_of(prepared: Sequence[Prepared]) -> list[dict[str, str]]:
    """The ``MENTIONS`` links of ``prepared``: each (episode, entity) pair once, sorted."""
    pairs = {(p.delta.tenant_id, p.delta.source_episode_id, entity)
             for p in prepared for entity in entities_of(p)}
    return [{"tenant_id": t, "episode": e, "entity": s} for t, e, s in sorted(pairs)]


def _private_episodes(prepared: list[Prepared], schema: Schema) -> list[dict[str, Any]]:
    """The source episodes of private deltas, each with the readers every such delta allows."""
    readers: dict[tuple[str, str], list[str]] = {}
    for p in prepared:
        allowed = schema.attribute(p.delta.attribute).visible_to(p.delta.subject)
        if allowed is not None:
            key = (p.delta.tenant_id, p.delta.source_episode_id)
            readers[key] = [r for r in readers.get(key, allowed) if r in allowed]
    return [{"tenant_id": t, "id": e, "readers": r} for (t, e), r in sorted(readers.items())]


def fact_entry(row: Fact, eid: str, schema: Schema) -> dict[str, Any]:
    """The parameter row that creates ``row`` under the subject with element id ``eid``:
    for :data:`CREATE_RELATION_FACTS` when ``row.kind`` is ``relation``, else for
    :data:`CREATE_ATTRIBUTE_FACTS`."""
    stored, instants = storable(vars(row))  # the fields, as model_dump() gives them
    # Sent as little as the row needs: a null property is not stored anyway, and a date or
    # datetime value goes as ISO text that the statement types (the driver's conversion of a
    # temporal value cost about 0.15 ms each, more than the server's write of the whole row).
    stored = {key: value for key, value in stored.items() if value is not None}
    value = stored.get("value")
    if isinstance(value, (date, datetime)):
        stored["value"] = value.isoformat()
    # The relationship type comes from the schema (checked there like every identifier).
    entry: dict[str, Any] = {"tenant_id": row.tenant_id, "eid": eid, "rel_type": schema.rel_type(row.attribute),
                             "props": stored, "at": instants}
    if row.kind == "relation":
        entry.update(target=row.value, target_type=schema.attribute(row.attribute).target)
    else:
        # One value node per subject and value: versions that repeat a value share it, and
        # no two subjects ever lock the same value node (shared ones deadlocked batches).
        entry.update(node_key=f"{row.subject}|{row.attribute}|{row.value_key}", caption=caption(row.value))
    return entry


__all__ = [
    "BatchResult",
    "DeltaResult",
    "Prepared",
    "entities_of",
    "mentions_of",
    "stated_targets",
    "Planned",
    "plan_ahead",
    "prepare",
    "write_op",
    "write_steps",
]

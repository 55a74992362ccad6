"""Schema evolution: apply a new schema version with its declared migrations (``sgam schema apply``).

:func:`plan_migration` is pure: it checks a new schema against the stored one and returns the
steps, in this order whatever the file's order: renames, relation-type renames, splits, retypes.
It refuses (``SchemaViolation``, nothing applied) a version not above the stored one, a breaking
change (``schema_diff``) that no step covers, a step naming an unknown attribute, and an unknown
upcaster or splitter. The statements and batch generators below are run by :func:`migrate_op`.

What moves, and how (every tenant; ``tenant_id`` and every other property is kept):

* **rename** ``a -> b``: each fact of ``a`` is recreated under ``b``'s relationship type (Neo4j
  cannot retype a relationship) with all its properties, ``attribute = b``, and deleted; its value
  node's ``attribute``/``key`` follow (its embedding is cleared for the next backfill).
* **rename_relation**: the same move, the attribute keeps its name and gets its new type.
* **split** ``a -> (b, c)``: each fact of ``a`` becomes one fact of ``b`` and one of ``c`` (a part the
  splitter leaves empty is not written) with the same times and provenance; their memory ids are
  derived from the old one (``derived_memory_id``), so supersession chains stay linked.
* **retype** ``a``: each value goes through the upcaster and the new schema's checks; the fact
  moves to the new value node and keeps its memory id.

History moves too (closed, expired and candidate rows alike): valid and transaction times are
copied, so ``as_of`` before the migration answers under the new names and ``known_at`` stays exact.
A migrated fact keeps the ``schema_version`` it was written under and gains
``migrated_by: ["<schema>@<from>-><to>/<kind>:<attribute>", ...]``; it takes the new attribute's
``memory_type`` and ``retention_policy``. Replaying a pre-migration episode with the new names
re-confirms the migrated fact (its stored delta keys name the old attribute).

The run is recorded as ``(:SchemaMigration {id, name, from_version, to_version, status, cursor,
counts, batches, aliases, dual_read_until, started_at, finished_at})``. Each batch is one
transaction that also advances the cursor, and each step selects only facts it has not moved yet,
so a crashed run resumes where it stopped and applying twice is a no-op. While the migration runs,
and until ``dual_read_until``, the named reads ``current``, ``as-of`` and ``history`` also answer
for the old name from the new one and the other way round (``aliases``), so no reader misses a
fact mid-migration and agents built against the old version keep reading.

**Dual reads.** Those three reads' statements cost about 7% more with the aliases' clause than
without it, on every read, also in a database that never migrated. So a store reads without it while it knows no
migration's dual read is in force (:class:`MigrationWatch`: one small read, ``IN_FORCE``, at most
every ``NOTICE_SECONDS``), and a migration, once recorded as running, waits ``WAIT_FACTOR`` times
that before it moves a fact: a reader that asked before the record has asked again by then. The
wait is in every run of :func:`migrate_op` that moves facts (2 s); a migration run by an SGAM
older than this does not wait, so every process should run this version before a migration starts.
The wait leaves one notice of margin: a read that takes more than a second from the store's check to
the server (a stalled process, a queued server) could miss a fact moved in that second.
"""

from __future__ import annotations

import hashlib
import contextlib
import math
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any

from .errors import SchemaViolation
from .models import shown
from .schema import RenameRelationStep, RenameStep, RetypeStep, Schema, SplitStep, quote_identifier
from .schema_diff import diff
from .transforms import splitter, upcaster
from .ddl import LATEST_SCHEMA, RECORD_SCHEMA, ddl_op
from .steps import Blocking, InTx, Operation, Read, Records, Statement, Write
from .codec import native

DEFAULT_BATCH = 1000

# Dual reads without a query per read. The named reads that widen an attribute with a migration's
# aliases (``current``, ``as-of``, ``history``) cost about 7% more for it, every read, also when no
# migration ever ran. So a process reads with the aliases only while it knows a migration's dual
# read is in force, and asks again at most NOTICE_SECONDS after it last asked; a migration, once
# recorded as running, waits WAIT_FACTOR times as long before it moves a fact, so that every reader
# that asked before has asked again by then (module docstring, "Dual reads").
NOTICE_SECONDS = 1.0
WAIT_FACTOR = 2.0
# Which recorded migrations a read widens its attribute for: the named queries' clause says the
# same (tests/unit/test_dual_read_notice.py holds them to it).
ALIASES_IN_FORCE = "m.status <> 'done' OR properties(m).dual_read_until > datetime()"
IN_FORCE = f"RETURN EXISTS {{ MATCH (m:SchemaMigration) WHERE {ALIASES_IN_FORCE} }} AS in_force"


class MigrationWatch:
    """Whether a schema migration's dual read is in force, as this process last learnt it: a store
    asks (``IN_FORCE``) before a read that can leave the aliases out, when its answer is older than
    ``NOTICE_SECONDS``. Shared by a store's threads: an answer and the time it was asked are kept
    together, and an answer asked earlier than the one held does not replace it."""

    def __init__(self) -> None:
        # (time.monotonic() when the answer was asked for, the answer); nothing asked: in force.
        self._state: tuple[float, bool] = (-math.inf, True)
        self._lock = threading.Lock()

    def due(self) -> float | None:
        """``None`` if the answer is fresh; else the time to stamp the next answer with (taken
        before it is asked, so that the answer is never thought younger than it is)."""
        now = time.monotonic()
        return now if now - self._state[0] > NOTICE_SECONDS else None

    def learn(self, in_force: bool, asked: float) -> None:
        with self._lock:
            if asked >= self._state[0]:
                self._state = (asked, in_force)

    @property
    def in_force(self) -> bool:
        return self._state[1]


KINDS = "rename, rename_relation, retype, split"
_ORDER = {"rename": 0, "rename_relation": 1, "split": 2, "retype": 3}

GET_MIGRATION = """
MATCH (m:SchemaMigration {id: $id})
RETURN m.status AS status, m.cursor AS cursor, m.counts AS counts, m.batches AS batches
"""

START_MIGRATION = """
MERGE (m:SchemaMigration {id: $id})
  ON CREATE SET m.name = $name, m.from_version = $from_version, m.to_version = $to_version,
                m.steps = $steps, m.counts = $zeros, m.cursor = 0, m.batches = 0,
                m.started_at = $now
  ON MATCH SET m.resumed_at = $now
SET m.status = 'running', m.aliases = $aliases, m.dual_read_until = $dual_read_until, m.error = null
RETURN m.cursor AS cursor
"""

ADVANCE = """
MATCH (m:SchemaMigration {id: $id})
SET m.cursor = $step, m.after = $after, m.batches = m.batches + 1, m.updated_at = $now,
    m.counts = [i IN range(0, size(m.counts) - 1) | m.counts[i] + CASE WHEN i = $step THEN $n ELSE 0 END]
"""

FINISH = """
MATCH (m:SchemaMigration {id: $id})
SET m.status = 'done', m.finished_at = $now, m.cursor = $steps
WITH m
MERGE (s:SchemaVersion {name: $name, version: $version})
  ON CREATE SET s.definition = $definition, s.applied_at = $now
"""

# Moved and converted facts leave their statements behind: the ledgers of every attribute a
# migration touched are dropped when it finishes, and each slot's next write rebuilds its ledger
# from the migrated rows (docs/temporal-semantics.md).
DROP_LEDGERS = "MATCH (l:Ledger) WHERE l.attribute IN $attributes DETACH DELETE l"

FAIL = "MATCH (m:SchemaMigration {id: $id}) SET m.status = 'failed', m.error = $error, m.failed_at = $now"

# A fact moves to another relationship type: recreate it with every property, then delete it.
MOVE = """
MATCH (s:Entity)-[f:%(from)s]->(o)
WHERE f.attribute = $attribute AND f.memory_id IS NOT NULL
WITH s, f, o LIMIT $batch
CREATE (s)-[g:%(to)s]->(o)
SET g = properties(f)
SET g.attribute = $to, g.memory_type = $memory_type, g.retention_policy = $retention,
    g.migrated_by = coalesce(f.migrated_by, []) + $marker
FOREACH (_ IN CASE WHEN o:Value THEN [1] ELSE [] END |
  SET o.attribute = $to, o.key = s.id + '|' + $to + '|' + f.value_key, o.embedding = null)
DELETE f
RETURN count(*) AS moved
"""

# Same relationship type (an explicit ``rel_type`` kept across a rename): rename in place.
RENAME_IN_PLACE = """
MATCH (s:Entity)-[f:%(from)s]->(o)
WHERE f.attribute = $attribute AND f.memory_id IS NOT NULL
WITH s, f, o LIMIT $batch
SET f.attribute = $to, f.memory_type = $memory_type, f.retention_policy = $retention,
    f.migrated_by = coalesce(f.migrated_by, []) + $marker
FOREACH (_ IN CASE WHEN o:Value THEN [1] ELSE [] END |
  SET o.attribute = $to, o.key = s.id + '|' + $to + '|' + f.value_key, o.embedding = null)
RETURN count(*) AS moved
"""

# In memory-id order from the cursor (the type's memory_id index), so a long retype never rescans.
READ_VALUES = """
MATCH (s:Entity)-[f:%s]->(o:Value)
WHERE f.memory_id > $after AND f.attribute = $attribute AND NOT $marker IN coalesce(f.migrated_by, [])
WITH s, f ORDER BY f.memory_id LIMIT $batch
RETURN elementId(f) AS fid, elementId(s) AS sid, properties(f) AS props
"""

DELETE_FACTS = """
UNWIND $fids AS fid
MATCH ()-[f]->(o:Value) WHERE elementId(f) = fid
DELETE f
RETURN collect(DISTINCT elementId(o)) AS values
"""

CREATE_FACTS = """
UNWIND $rows AS r
MATCH (s:Entity) WHERE elementId(s) = r.sid
MERGE (v:Value {tenant_id: r.props.tenant_id, key: r.node_key})
  ON CREATE SET v.value = r.props.value, v.value_type = r.props.value_type,
                v.attribute = r.props.attribute, v.name = r.caption,
                v.created_at = datetime(r.props.recorded_at)
CREATE (s)-[g:%s]->(v)
SET g = r.props
"""

DROP_ORPHAN_VALUES = """
UNWIND $values AS id
MATCH (v:Value) WHERE elementId(v) = id AND NOT EXISTS { ()-->(v) }
DETACH DELETE v
"""

COUNT = """
MATCH ()-[f:%s]->()
WHERE f.attribute = $attribute AND f.memory_id IS NOT NULL AND NOT $marker IN coalesce(f.migrated_by, [])
RETURN count(f) AS facts
"""

DISTINCT_VALUES = """
MATCH ()-[f:%s]->(:Value)
WHERE f.attribute = $attribute AND f.memory_id IS NOT NULL AND NOT $marker IN coalesce(f.migrated_by, [])
RETURN DISTINCT f.value AS value
"""


@dataclass(frozen=True)
class PlannedStep:
    """One step, resolved against both versions.

    ``sources`` are the (attribute, relationship type) pairs whose facts the step will convert when
    it runs (earlier renames may still have to move them there), used for counts and value checks.
    """

    kind: str
    attribute: str
    from_type: str
    to: tuple[str, ...]
    to_types: tuple[str, ...]
    function: str | None
    marker: str
    sources: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        target = ", ".join(self.to)
        how = f" ({self.function})" if self.function else ""
        return f"{self.kind} {self.attribute} -> {target}{how}"


@dataclass(frozen=True)
class MigrationPlan:
    """What applying ``new`` over the stored version does (no steps: record the version only)."""

    name: str
    from_version: int | None
    to_version: int
    steps: tuple[PlannedStep, ...]
    aliases: tuple[str, ...]
    dual_read_until: datetime | None
    new_rel_types: tuple[str, ...]
    unchanged: bool = False

    @property
    def id(self) -> str:
        return f"{self.name}@{self.from_version}->{self.to_version}"


@dataclass
class StepReport:
    """Facts a step converted (or, in a dry run, would convert)."""

    kind: str
    attribute: str
    to: tuple[str, ...]
    function: str | None
    facts: int = 0


@dataclass
class MigrationReport:
    """The outcome of ``apply_schema``: ``status`` is one of ``applied``, ``resumed``, ``recorded``
    (a compatible version, nothing to move), ``unchanged`` (already applied) or ``dry-run``."""

    id: str
    name: str
    from_version: int | None
    to_version: int
    status: str
    steps: list[StepReport] = field(default_factory=list)
    new_rel_types: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    dual_read_until: datetime | None = None
    batches: int = 0

    @property
    def facts(self) -> int:
        return sum(step.facts for step in self.steps)


def plan_migration(old: Schema | None, new: Schema) -> MigrationPlan:
    """Check ``new`` against the stored ``old`` and resolve its migration steps (pure)."""
    if old is None:
        return MigrationPlan(new.name, None, new.version, (), (), None, (), unchanged=False)
    if new.version < old.version or (new.version == old.version and not new.same_definition(old.definition())):
        raise SchemaViolation(
            f"schema {new.name!r} v{new.version} is not newer than the stored v{old.version}: give the "
            f"changed schema a version above {old.version}"
        )
    old_types = set(old.fact_types())
    new_types = tuple(t for t in new.fact_types() if t not in old_types)
    if new.version == old.version:
        return MigrationPlan(new.name, old.version, new.version, (), (), None, (), unchanged=True)
    declared = new.migration_from(old.version)
    steps = _resolve(old, new, declared.steps if declared else ())
    _check_coverage(old, new, steps, declared is not None)
    aliases: list[str] = []
    for step in steps:
        if step.kind in ("rename", "split"):
            for target in step.to:
                aliases += [f"{step.attribute}>{target}", f"{target}>{step.attribute}"]
    return MigrationPlan(new.name, old.version, new.version, tuple(steps), tuple(aliases),
                         declared.dual_read_until if declared else None, new_types)


def _resolve(old: Schema, new: Schema, declared: tuple[Any, ...]) -> list[PlannedStep]:
    marker_base = f"{new.name}@{old.version}->{new.version}"
    renamed: dict[str, str] = {}      # new name -> old name
    moved: set[str] = set()           # old names renamed or split away
    steps: list[PlannedStep] = []

    def old_attribute(name: str, step: str) -> None:
        if name not in old.attributes:
            raise SchemaViolation(
                f"migration step {step}: attribute {name!r} is not in the stored v{old.version}; it knows: "
                f"{', '.join(sorted(old.attributes))}"
            )
        if name in moved:
            raise SchemaViolation(f"migration step {step}: attribute {name!r} is renamed or split twice")

    def new_attribute(name: str, step: str, fresh: bool) -> None:
        if name not in new.attributes:
            raise SchemaViolation(
                f"migration step {step}: attribute {name!r} is not in v{new.version}; it knows: "
                f"{', '.join(sorted(new.attributes))}"
            )
        if fresh and name in old.attributes:
            raise SchemaViolation(
                f"migration step {step}: {name!r} already exists in v{old.version}; a rename or split "
                "must target an attribute new in this version"
            )

    for spec in sorted(declared, key=lambda s: _ORDER[s.kind]):
        marker = f"{marker_base}/{spec.kind}:{spec.attribute}"
        where = f"{spec.kind} {spec.attribute!r}"
        if isinstance(spec, RenameStep):
            old_attribute(spec.attribute, where)
            new_attribute(spec.to, where, fresh=True)
            if spec.attribute in new.attributes:
                raise SchemaViolation(
                    f"migration step {where}: v{new.version} still has {spec.attribute!r}; remove it "
                    "from the new version or do not rename it"
                )
            if (old.attributes[spec.attribute].value_type == "entity") != (new.attributes[spec.to].value_type == "entity"):
                raise SchemaViolation(
                    f"migration step {where}: cannot rename between a relation and a value attribute"
                )
            renamed[spec.to] = spec.attribute
            moved.add(spec.attribute)
            steps.append(PlannedStep("rename", spec.attribute, old.rel_type(spec.attribute), (spec.to,),
                                     (new.rel_type(spec.to),), None, marker,
                                     ((spec.attribute, old.rel_type(spec.attribute)),)))
        elif isinstance(spec, RenameRelationStep):
            old_attribute(spec.attribute, where)
            new_attribute(spec.attribute, where, fresh=False)
            if new.rel_type(spec.attribute) != spec.to:
                raise SchemaViolation(
                    f"migration step {where}: v{new.version} stores {spec.attribute!r} as "
                    f"{new.rel_type(spec.attribute)}, not {spec.to}; set its rel_type to {spec.to}"
                )
            if old.rel_type(spec.attribute) == spec.to:
                raise SchemaViolation(f"migration step {where}: {spec.attribute!r} is already stored as {spec.to}")
            steps.append(PlannedStep("rename_relation", spec.attribute, old.rel_type(spec.attribute),
                                     (spec.attribute,), (spec.to,), None, marker,
                                     ((spec.attribute, old.rel_type(spec.attribute)),)))
        elif isinstance(spec, SplitStep):
            splitter(spec.splitter)
            old_attribute(spec.attribute, where)
            if spec.attribute in new.attributes:
                raise SchemaViolation(f"migration step {where}: v{new.version} still has {spec.attribute!r}")
            if spec.into[0] == spec.into[1]:
                raise SchemaViolation(f"migration step {where}: 'into' names {spec.into[0]!r} twice")
            for target in (spec.attribute, *spec.into):
                schema = old if target == spec.attribute else new
                if target != spec.attribute:
                    new_attribute(target, where, fresh=True)
                if schema.attributes[target].value_type == "entity":
                    raise SchemaViolation(f"migration step {where}: {target!r} is a relation; only values split")
            moved.add(spec.attribute)
            steps.append(PlannedStep("split", spec.attribute, old.rel_type(spec.attribute), spec.into,
                                     tuple(new.rel_type(t) for t in spec.into), spec.splitter, marker,
                                     ((spec.attribute, old.rel_type(spec.attribute)),)))
        elif isinstance(spec, RetypeStep):
            upcaster(spec.upcaster)
            new_attribute(spec.attribute, where, fresh=False)
            origin = renamed.get(spec.attribute, spec.attribute)
            if origin not in old.attributes:
                raise SchemaViolation(
                    f"migration step {where}: {spec.attribute!r} has no stored facts to retype (it is "
                    f"not in v{old.version} nor the target of a rename)"
                )
            if new.attributes[spec.attribute].value_type == "entity":
                raise SchemaViolation(f"migration step {where}: {spec.attribute!r} is a relation; only values retype")
            now_type = new.rel_type(spec.attribute)
            sources = {(spec.attribute, now_type), (origin, old.rel_type(origin))}
            steps.append(PlannedStep("retype", spec.attribute, now_type, (spec.attribute,), (now_type,),
                                     spec.upcaster, marker, tuple(sorted(sources))))
    return steps


def _check_coverage(old: Schema, new: Schema, steps: list[PlannedStep], declared: bool) -> None:
    """Refuse breaking changes that no step covers, naming each one."""
    covered = {(s.kind, s.attribute) for s in steps}
    moved = {s.attribute for s in steps if s.kind in ("rename", "split")}
    problems: list[str] = []
    for change in diff(old, new):
        if not change.breaking:
            continue
        element = change.element
        if element.startswith("attribute ") and change.kind == "removed":
            if element.removeprefix("attribute ") in moved:
                continue
        elif element.startswith("attribute ") and change.kind == "changed":
            name, _, prop = element.removeprefix("attribute ").partition(".")
            if prop == "rel_type" and (old.rel_type(name) == new.rel_type(name)
                                       or ("rename_relation", name) in covered):
                continue
            if prop in ("value_type", "values") and ("retype", name) in covered:
                continue
        problems.append(f"{element} ({change.kind}{': ' + change.detail if change.detail else ''})")
    for step in steps:
        if step.kind == "rename":
            before, after = old.attributes[step.attribute], new.attributes[step.to[0]]
            for prop in ("value_type", "values"):
                if getattr(before, prop) != getattr(after, prop) and ("retype", step.to[0]) not in covered:
                    problems.append(f"attribute {step.attribute} -> {step.to[0]} changes {prop} "
                                    f"without a retype step")
            for prop in ("cardinality", "target", "subject_types"):
                if getattr(before, prop) != getattr(after, prop):
                    problems.append(f"attribute {step.attribute} -> {step.to[0]} changes {prop}, which no "
                                    "migration kind converts")
    if problems:
        hint = ("the declared migration does not cover them" if declared
                else f"declare `migrations: [{{from_version: {old.version}, steps: [...]}}]`")
        raise SchemaViolation(
            f"schema {new.name!r} v{old.version} -> v{new.version} has incompatible changes: "
            f"{'; '.join(problems)}; {hint} (step kinds: {KINDS}); nothing was applied"
        )


# -- batches (each one transaction, driven by migrate_op) ------------------------------------------

def move_batch(plan: MigrationPlan, index: int, step: PlannedStep, new: Schema, batch: int,
               now: datetime, after: str = "") -> Generator[Statement, Records, tuple[int, str]]:
    """Move up to ``batch`` facts of a rename / rename_relation step and advance the cursor.

    Moved facts leave the selection, so each batch starts from the beginning (``after`` unused).
    """
    target = step.to[0]
    spec = new.attributes[target]
    query = RENAME_IN_PLACE if step.from_type == step.to_types[0] else MOVE
    [result] = yield Statement(
        query % {"from": quote_identifier(step.from_type), "to": quote_identifier(step.to_types[0])},
        {"attribute": step.attribute, "to": target, "batch": batch, "marker": [step.marker],
         "memory_type": spec.memory_type, "retention": spec.retention},
    )
    moved = result["moved"]
    yield Statement(ADVANCE, {"id": plan.id, "step": index, "n": moved, "now": now, "after": ""})
    return moved, ""


def convert_batch(plan: MigrationPlan, index: int, step: PlannedStep, new: Schema, batch: int,
                  now: datetime, after: str = "") -> Generator[Statement, Records, tuple[int, str]]:
    """Convert up to ``batch`` facts of a split / retype step after memory id ``after``, and advance
    the cursor; returns the count and the last memory id converted."""
    rows = yield Statement(READ_VALUES % quote_identifier(step.from_type),
                           {"attribute": step.attribute, "marker": step.marker, "batch": batch, "after": after})
    if not rows:
        return 0, after
    creates: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        # as Python values: instants go back with the +00:00 offset every stored instant uses
        props = {key: native(value) for key, value in row["props"].items()}
        for attribute, rel_type, value in _converted(step, new, props["value"]):
            creates.setdefault(rel_type, []).append(
                _new_fact(step, new, row["sid"], props, attribute, value))
    [deleted] = yield Statement(DELETE_FACTS, {"fids": [r["fid"] for r in rows]})
    for rel_type, items in sorted(creates.items()):
        yield Statement(CREATE_FACTS % quote_identifier(rel_type), {"rows": items})
    yield Statement(DROP_ORPHAN_VALUES, {"values": deleted["values"]})
    last = rows[-1]["props"]["memory_id"]
    yield Statement(ADVANCE, {"id": plan.id, "step": index, "n": len(rows), "now": now, "after": last})
    return len(rows), last


def _converted(step: PlannedStep, new: Schema, value: Any) -> list[tuple[str, str, Any]]:
    """The new (attribute, relationship type, value) facts one stored value becomes."""
    if step.kind == "retype":
        return [(step.to[0], step.to_types[0], convert_value(step, new, value)[0])]
    return [(a, t, v) for a, t, v in zip(step.to, step.to_types, convert_value(step, new, value)) if v is not None]


def convert_value(step: PlannedStep, new: Schema, value: Any) -> list[Any]:
    """Run the step's function on one value and check the result(s) against the new schema.

    Raises ``ValueError`` (or an SGAM error from the schema's checks) when it cannot convert.
    """
    if step.kind == "retype":
        return [new.coerce(step.to[0], upcaster(step.function or "")(value))[0]]
    parts = splitter(step.function or "")(value)
    if not isinstance(parts, tuple) or len(parts) != 2 or all(p is None for p in parts):
        raise ValueError(f"splitter {step.function!r} must return two parts, not both empty; got {parts!r}")
    return [None if part is None else new.coerce(target, part)[0] for target, part in zip(step.to, parts)]


def derived_memory_id(memory_id: str | None, attribute: str) -> str | None:
    """The memory id of the part of a split fact that goes to ``attribute`` (stable across runs)."""
    if memory_id is None:
        return None
    return "m-" + hashlib.sha256(f"{memory_id}|{attribute}".encode()).hexdigest()[:20]


def _new_fact(step: PlannedStep, new: Schema, sid: str, props: dict[str, Any], attribute: str,
              value: Any) -> dict[str, Any]:
    from .schema import value_key

    spec = new.attributes[attribute]
    stored = value.astimezone(timezone.utc) if isinstance(value, datetime) else value
    out = {**props, "attribute": attribute, "value": stored, "value_type": spec.value_type,
           "value_key": value_key(value), "memory_type": spec.memory_type,
           "retention_policy": spec.retention,
           "migrated_by": [*props.get("migrated_by", []), step.marker]}
    if step.kind == "split":
        for key in ("memory_id", "supersedes_memory_id", "revises_memory_id"):
            if props.get(key) is not None:
                out[key] = derived_memory_id(props[key], attribute)
    caption = value.isoformat() if isinstance(value, (date, datetime)) else str(value)
    return {"sid": sid, "props": out, "node_key": f"{props['subject']}|{attribute}|{out['value_key']}",
            "caption": caption}


def count_statement(step: PlannedStep, source: tuple[str, str]) -> Statement:
    """How many facts of ``source`` the step has still to convert."""
    return Statement(COUNT % quote_identifier(source[1]), {"attribute": source[0], "marker": step.marker})


def values_statement(step: PlannedStep, source: tuple[str, str]) -> Statement:
    """The distinct stored values the step will convert (checked before anything is written)."""
    return Statement(DISTINCT_VALUES % quote_identifier(source[1]), {"attribute": source[0], "marker": step.marker})


def check_values(step: PlannedStep, new: Schema, values: list[Any]) -> None:
    """Refuse the migration if the step's function cannot convert every stored value."""
    failures: list[str] = []
    for value in values:
        try:
            convert_value(step, new, native(value))
        except Exception as exc:  # noqa: BLE001 - any failure of a user function is reported
            failures.append(f"{shown(native(value))} ({exc})")
    if failures:
        raise SchemaViolation(
            f"migration step {step.label} cannot convert {len(failures)} stored value(s) of "
            f"{step.attribute!r}, e.g. {'; '.join(failures[:3])}; correct those facts or use another "
            "function; nothing was applied"
        )


def migrate_op(new: Schema, clock: Callable[[], datetime], *, dry_run: bool = False,
               batch_size: int = DEFAULT_BATCH,
               on_progress: Callable[[StepReport, int], None] | None = None) -> Operation[MigrationReport]:
    """Apply schema version ``new`` with its declared migration, in bounded batches.

    Every check (version, coverage, functions, every stored value) runs before anything is
    written. ``on_progress(step, done)`` is called after each committed batch. Re-applying an
    applied version is a no-op; a run that stopped midway resumes. The store runs under ``new``
    once the report's status is ``applied``, ``recorded`` or ``resumed``.
    """
    if batch_size < 1:
        raise SchemaViolation(f"batch_size must be at least 1, not {batch_size}")
    latest = yield Read(Statement(LATEST_SCHEMA, {"name": new.name}))
    old = Schema.model_validate_json(latest[0]["definition"]) if latest else None
    plan = plan_migration(old, new)
    report = MigrationReport(plan.id, plan.name, plan.from_version, plan.to_version,
                             "dry-run" if dry_run else "applied",
                             [StepReport(s.kind, s.attribute, s.to, s.function) for s in plan.steps],
                             plan.new_rel_types, plan.aliases, plan.dual_read_until)
    if plan.unchanged:
        report.status = "unchanged"
        return report
    for step, step_report in zip(plan.steps, report.steps):
        for source in step.sources:
            step_report.facts += (yield Read(count_statement(step, source)))[0]["facts"]
            if step.kind in ("retype", "split"):
                check_values(step, new, [r["value"] for r in (yield Read(values_statement(step, source)))])
    if dry_run:
        return report
    yield from ddl_op(new)
    if not plan.steps:
        yield from _finish(plan, new, clock)
        report.status = "recorded"
        return report
    if (yield Read(Statement(GET_MIGRATION, {"id": plan.id}))):
        report.status = "resumed"
    yield from _run_migration(plan, new, report, batch_size, on_progress, clock)
    return report


def _run_migration(plan: MigrationPlan, new: Schema, report: MigrationReport, batch_size: int,
                   on_progress: Callable[[StepReport, int], None] | None,
                   clock: Callable[[], datetime]) -> Operation[None]:
    yield Write(Statement(START_MIGRATION, {
        "id": plan.id, "name": plan.name, "from_version": plan.from_version,
        "to_version": plan.to_version, "steps": [s.label for s in plan.steps],
        "zeros": [0] * len(plan.steps), "aliases": list(plan.aliases),
        "dual_read_until": plan.dual_read_until, "now": clock()}))
    # Readers that last asked before the record above leave the aliases out for NOTICE_SECONDS at
    # most: nothing moves until each of them has asked again.
    yield Blocking(lambda: time.sleep(WAIT_FACTOR * NOTICE_SECONDS))
    try:
        for index, (step, step_report) in enumerate(zip(plan.steps, report.steps)):
            run = move_batch if step.kind in ("rename", "rename_relation") else convert_batch
            step_report.facts, after = 0, ""
            while True:
                done, after = yield InTx(
                    lambda: run(plan, index, step, new, batch_size, clock(), after))  # noqa: B023
                if done:
                    report.batches += 1
                    step_report.facts += done
                    if on_progress is not None:
                        on_progress(step_report, step_report.facts)
                if done < batch_size:
                    break
    except GeneratorExit:
        raise
    except BaseException as exc:
        with contextlib.suppress(Exception):
            yield Write(Statement(FAIL, {"id": plan.id, "error": f"{type(exc).__name__}: {exc}",
                                         "now": clock()}))
        raise
    yield from _finish(plan, new, clock)


def _finish(plan: MigrationPlan, new: Schema, clock: Callable[[], datetime]) -> Operation[None]:
    if plan.steps:
        touched = sorted({a for step in plan.steps for a in (step.attribute, *step.to)})
        yield Write(Statement(DROP_LEDGERS, {"attributes": touched}))
        yield Write(Statement(FINISH, {"id": plan.id, "steps": len(plan.steps), "name": new.name,
                                       "version": new.version, "definition": new.definition(),
                                       "now": clock()}))
    else:
        yield Write(Statement(RECORD_SCHEMA, {"name": new.name, "version": new.version,
                                              "definition": new.definition()}))

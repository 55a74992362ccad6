"""Merging two entities of a tenant into one, and splitting them again (statements; ``store`` runs them).

A merge of ``dropped`` into ``kept`` **re-keys statements, it asserts nothing**. Each slot's
believed history is a function of its set of statements (docs/temporal-semantics.md), so:

* each slot of ``dropped`` gives its statements to the same slot of ``kept``: the new set is the
  union (each statement re-keyed to ``kept``, as the delta stating it about ``kept`` would be
  keyed, so one said of both is one statement), and the slot is derived again from it under the
  attribute's rules and conflict policy (:func:`sgam.graph.reconcile.rederive`). Two values of a
  single-valued attribute are settled as any two statements are; the report lists each such
  conflict with the value the union holds now;
* relation facts of other subjects pointing at ``dropped`` point at ``kept`` (their statements'
  value re-keyed, their slots derived again);
* a pending candidate of a gated attribute (``requires``, ``sensitive``) moves to ``kept``, joined
  to ``kept``'s own candidate of the same value (support added up; it is promoted by the next
  statement or confirmation that reaches the rule);
* ``dropped``'s aliases, its id and its name become aliases of ``kept``; its ``MENTIONS`` links
  move to ``kept``.

Nothing is edited in place: rows that change are retired with the merge's transaction time and
new rows recorded at it, so ``as_of(..., known_at=before the merge)`` answers as before, for both
ids. ``dropped`` stays as an entity holding only retired rows, marked ``merged_into``; reading it
now raises :class:`~sgam.graph.errors.MergedSubject` naming ``kept``, and ingest resolves its id
to ``kept``. Its slots' ledgers go into the ``(:Merge {tenant_id, id, kept, dropped, status,
merged_at, merged_by, reason, ...})`` record with what else moved, so :func:`split_steps` can undo
the merge exactly: each slot's statements become what they were, minus what the merge added, plus
what it took away (statements written to ``kept`` after the merge stay with ``kept``), and the
slots are derived again, again at a new transaction time. Merging never happens by itself:
:func:`sgam.graph.candidates.candidate_steps` only proposes pairs.

A merge is refused across tenants, into itself, between entities of two types, for an entity
already merged or forgotten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from .aliases import ADD_ALIASES, REMOVE_ALIASES, alias_key, checked_aliases
from .deletion import LOCK_SUBJECTS
from .errors import Conflict, ForgottenSubject, NotAllowed, NotFound, SchemaViolation, UnknownSubject
from .models import Cardinality, Fact, Status
from .names import words
from .reconcile import (
    Point, WritePlan, believed_runs, new_memory_id, points_from_rows, rederive, statement_key, value_at,
)
from .schema import Schema, value_key
from .codec import INSTANTS, fact_from_properties, native
from .steps import InTx, Operation, Read, Records, Statement
from .writes import CREATE_ATTRIBUTE_FACTS, CREATE_RELATION_FACTS, fact_entry

ENTITIES = """
UNWIND $subjects AS id
OPTIONAL MATCH (e:Entity {tenant_id: $tenant, id: id})
RETURN id, elementId(e) AS eid, e.type AS type, e.name AS name, e.merged_into AS merged_into,
       EXISTS { MATCH (t:Tombstone {tenant_id: $tenant, subject: id}) } AS forgotten,
       COLLECT { MATCH (a:Alias)-[:ALIAS_OF]->(e) RETURN {key: a.key, name: a.name} } AS aliases,
       COLLECT { MATCH (ep:Episode)-[:MENTIONS]->(e) RETURN ep.id } AS episodes
"""

# The slots of ``$subjects``: those with a believed row, and those with statements.
SLOTS_OF = """
UNWIND $subjects AS id
MATCH (:Entity {tenant_id: $tenant, id: id})-[f]->()
WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL
RETURN DISTINCT id AS subject, f.attribute AS attribute
UNION
UNWIND $subjects AS id
MATCH (l:Ledger {tenant_id: $tenant, subject: id})
RETURN l.subject AS subject, l.attribute AS attribute
"""

# Other subjects' slots whose facts point at ``$target`` (a believed row, or a statement naming it
# as value or as the member a correction replaces: ``$needles``).
INCOMING = """
MATCH (s:Entity {tenant_id: $tenant})-[f]->(:Entity {tenant_id: $tenant, id: $target})
WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL AND s.id <> $target
RETURN DISTINCT s.id AS subject, f.attribute AS attribute
UNION
MATCH (l:Ledger {tenant_id: $tenant})
WHERE l.attribute IN $relations AND l.subject <> $target
  AND any(p IN l.points WHERE any(n IN $needles WHERE p CONTAINS n))
RETURN l.subject AS subject, l.attribute AS attribute
"""

SLOT_STATE = """
UNWIND $slots AS slot
OPTIONAL MATCH (l:Ledger {tenant_id: $tenant, subject: slot.subject, attribute: slot.attribute})
RETURN slot.subject AS subject, slot.attribute AS attribute, l.points AS points,
       toString(l.updated_at) AS updated,
       COLLECT { MATCH (:Entity {tenant_id: $tenant, id: slot.subject})-[f]->()
                 WHERE f.memory_id IS NOT NULL AND f.attribute = slot.attribute AND f.expired_at IS NULL
                 RETURN f {.*, _eid: elementId(f), %s,
                           value: CASE WHEN f.value_type IN ['date', 'datetime'] THEN toString(f.value)
                                       ELSE f.value END} } AS rows
""" % ", ".join(f"{k}: toString(f.{k})" for k in INSTANTS)

# Retired rows by memory id (a split re-creates the pending candidates a merge moved).
ROWS_BY_ID = """
UNWIND $ids AS id
MATCH (:Entity {tenant_id: $tenant})-[f]->()
WHERE f.memory_id = id
RETURN f {.*, %s,
          value: CASE WHEN f.value_type IN ['date', 'datetime'] THEN toString(f.value) ELSE f.value END} AS props
""" % ", ".join(f"{k}: toString(f.{k})" for k in INSTANTS)

RETIRE_ROWS = """
UNWIND $ids AS id
MATCH ()-[f]->() WHERE elementId(f) = id
SET f.expired_at = $now, f.expired_by_merge = $merge
"""

SET_LEDGERS = """
UNWIND $ledgers AS x
MERGE (l:Ledger {tenant_id: $tenant, subject: x.subject, attribute: x.attribute})
SET l.points = x.points, l.updated_at = $now
"""

DROP_LEDGERS = """
UNWIND $slots AS x
MATCH (l:Ledger {tenant_id: $tenant, subject: x.subject, attribute: x.attribute})
DELETE l
"""

MOVE_MENTIONS = """
MATCH (src:Entity {tenant_id: $tenant, id: $source}), (dst:Entity {tenant_id: $tenant, id: $target})
MATCH (ep:Episode)-[r:MENTIONS]->(src)
WHERE ep.id IN $episodes
MERGE (ep)-[:MENTIONS]->(dst)
WITH r, ep WHERE NOT ep.id IN $keep
DELETE r
"""

MARK_MERGED = """
MATCH (d:Entity {tenant_id: $tenant, id: $dropped})
SET d.merged_into = $kept, d.merged_at = $now, d.merge_id = $id
"""

UNMARK_MERGED = """
MATCH (d:Entity {tenant_id: $tenant, id: $dropped})
REMOVE d.merged_into, d.merged_at, d.merge_id
SET d.updated_at = $now
"""

RECORD = """
CREATE (m:Merge {tenant_id: $tenant, id: $id})
SET m += $props
"""

FIND_RECORD = """
MATCH (m:Merge {tenant_id: $tenant, kept: $kept, dropped: $dropped, status: 'merged'})
RETURN m {.*} AS record
ORDER BY m.merged_at DESC LIMIT 1
"""

FINISH_SPLIT = """
MATCH (m:Merge {tenant_id: $tenant, id: $id})
SET m.status = 'split', m.split_at = $now, m.split_by = $actor, m.split_reason = $reason
"""

LIST_MERGES = """
MATCH (m:Merge {tenant_id: $tenant})
RETURN m.id AS id, m.kept AS kept, m.dropped AS dropped, m.status AS status, m.merged_at AS merged_at,
       m.merged_by AS merged_by, m.reason AS reason, m.split_at AS split_at, m.split_by AS split_by
ORDER BY m.merged_at
"""


@dataclass(frozen=True)
class MergeReport:
    """What a merge (or a split: ``split``) did, or on a dry run would do.

    ``slots``: the slots derived again (``subject|attribute``); ``retired``/``created``: rows
    retired and recorded; ``conflicts``: single-valued attributes both entities held with
    different values now, with the value the union holds (``result``); ``aliases``: the aliases
    that moved or were added; ``episodes``: the episodes whose ``MENTIONS`` link moved."""

    tenant_id: str
    kept: str
    dropped: str
    dry_run: bool
    at: datetime
    actor: str
    reason: str | None = None
    merge_id: str | None = None
    split: bool = False
    slots: tuple[str, ...] = ()
    retired: int = 0
    created: int = 0
    conflicts: tuple[dict[str, Any], ...] = ()
    aliases: tuple[str, ...] = ()
    episodes: tuple[str, ...] = ()


@dataclass
class _Slot:
    subject: str
    attribute: str
    rows: list[Fact]
    row_ids: dict[str, str]
    points: list[Point] | None  # None: no ledger (rows written before ledgers)


@dataclass
class _Plan:
    """The writes of a merge or split, collected while it plans."""

    retire: list[str] = field(default_factory=list)
    attributes: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)
    ledgers: list[dict[str, Any]] = field(default_factory=list)
    dropped_ledgers: list[dict[str, str]] = field(default_factory=list)
    slots: list[str] = field(default_factory=list)


def new_merge_id() -> str:
    return "merge-" + os.urandom(8).hex()


def _many(schema: Schema, attribute: str) -> bool:
    return schema.attribute(attribute).cardinality is Cardinality.MANY


def _points(slot: _Slot, schema: Schema) -> list[Point]:
    return list(slot.points) if slot.points is not None else points_from_rows(slot.rows, _many(schema, slot.attribute))


def rekeyed(point: Point, tenant: str, subject: str, attribute: str,
            values: dict[str, tuple[str, Any]] | None = None) -> Point:
    """``point`` as a statement about ``subject``; ``values`` re-names values (value key -> new
    value key and value), for relations pointing at a merged entity. A statement that stands for a
    row (its key names the row) keeps its key."""
    values = values or {}
    vkey, value = values.get(point.value_key, (point.value_key, point.value))
    rkey, replaced = values.get(point.replaces_key, (point.replaces_key, point.replaces))
    moved = replace(point, value_key=vkey, value=value, replaces_key=rkey, replaces=replaced)
    if point.key.startswith("row"):
        return moved
    return replace(moved, key=statement_key(tenant, subject, attribute, point.op, vkey, point.at, point.episode,
                                            point.until, rkey))


def _read_slots(tenant: str, pairs: Iterable[tuple[str, str]]
                ) -> Generator[Statement, Records, tuple[dict[tuple[str, str], _Slot], list[datetime]]]:
    records = yield Statement(SLOT_STATE, {"tenant": tenant, "slots": [
        {"subject": s, "attribute": a} for s, a in sorted(set(pairs))]})
    slots: dict[tuple[str, str], _Slot] = {}
    latest: list[datetime] = []
    for r in records:
        rows = [fact_from_properties({k: v for k, v in props.items() if k != "_eid"}) for props in r["rows"]]
        ids = {props["memory_id"]: props["_eid"] for props in r["rows"]}
        points = [Point.from_json(p) for p in r["points"]] if r["points"] is not None else None
        slots[(r["subject"], r["attribute"])] = _Slot(r["subject"], r["attribute"], rows, ids, points)
        latest += [row.recorded_at for row in rows]
        if r["updated"]:
            latest.append(datetime.fromisoformat(r["updated"]))
    return slots, latest


def _derive(plan: _Plan, slot: _Slot, points: list[Point], schema: Schema, tenant: str,
            eids: dict[str, str], now: datetime, merge_id: str) -> WritePlan:
    """Derive ``slot`` again from ``points`` into ``plan``; returns the reconcile plan."""
    spec = schema.attribute(slot.attribute)
    base = WritePlan(tenant_id=tenant, subject=slot.subject, attribute=slot.attribute,
                     rel_type=schema.rel_type(slot.attribute),
                     kind="relation" if spec.value_type == "entity" else "attribute",
                     outcome="unchanged", delta_key=merge_id, episode_id="", now=now)
    derived = rederive(slot.rows, points, schema, base)
    plan.retire += [slot.row_ids[m] for m in derived.expire]
    for props in derived.create:
        _add_row(plan, props, schema, eids[slot.subject])
    if points:
        plan.ledgers.append({"subject": slot.subject, "attribute": slot.attribute,
                             "points": [p.to_json() for p in points]})
    elif slot.points is not None:
        plan.dropped_ledgers.append({"subject": slot.subject, "attribute": slot.attribute})
    if derived.expire or derived.create:
        plan.slots.append(f"{slot.subject}|{slot.attribute}")
    return derived


def _add_row(plan: _Plan, props: dict[str, Any], schema: Schema, eid: str) -> None:
    row = Fact.model_validate(props)
    (plan.relations if row.kind == "relation" else plan.attributes).append(fact_entry(row, eid, schema))


def _write(plan: _Plan, tenant: str, now: datetime, merge_id: str) -> Generator[Statement, Records, None]:
    params = {"tenant": tenant, "now": now, "merge": merge_id}
    yield Statement(RETIRE_ROWS, {**params, "ids": plan.retire})
    if plan.attributes:
        yield Statement(CREATE_ATTRIBUTE_FACTS, {"rows": plan.attributes})
    if plan.relations:
        yield Statement(CREATE_RELATION_FACTS, {"rows": plan.relations, "now": now})
    yield Statement(SET_LEDGERS, {**params, "ledgers": plan.ledgers})
    yield Statement(DROP_LEDGERS, {**params, "slots": plan.dropped_ledgers})


def _entities(tenant: str, ids: list[str]) -> Generator[Statement, Records, dict[str, dict[str, Any]]]:
    rows = yield Statement(ENTITIES, {"tenant": tenant, "subjects": ids})
    return {r["id"]: r for r in rows}


def _check_pair(tenant: str, kept: str, dropped: str, found: dict[str, dict[str, Any]]) -> None:
    for subject in (kept, dropped):
        row = found[subject]
        if row["forgotten"] and row["eid"] is None:
            raise ForgottenSubject(f"{subject!r} of tenant {tenant!r} was forgotten: nothing is left to merge")
        if row["eid"] is None:
            raise UnknownSubject(f"tenant {tenant!r} has no entity {subject!r} to merge: check the id "
                                 "(`sgam query search-entities` finds entities by name)")
        if row["merged_into"] is not None:
            raise Conflict(f"{subject!r} of tenant {tenant!r} was already merged into {row['merged_into']!r} "
                           f"(merge {subject!r} no more; merge into {row['merged_into']!r}, or split it first)")
    if found[kept]["type"] != found[dropped]["type"]:
        raise SchemaViolation(f"{kept!r} is a {found[kept]['type']} and {dropped!r} a {found[dropped]['type']} "
                              f"(tenant {tenant!r}): an entity has one type, so these are not one entity")


def check_merge_target(tenant: str, kept: str, dropped: str, dropped_tenant: str | None) -> None:
    """The refusals that need no read: across tenants, into itself."""
    if dropped_tenant is not None and dropped_tenant != tenant:
        raise NotAllowed(f"{dropped!r} of tenant {dropped_tenant!r} cannot be merged into {kept!r} of tenant "
                         f"{tenant!r}: tenants are isolated, and an entity belongs to one tenant")
    if kept == dropped:
        raise Conflict(f"{kept!r} cannot be merged into itself (tenant {tenant!r}): name two entities")


def _conflicts(schema: Schema, slots: dict[tuple[str, str], _Slot], dropped: str, keep: str,
               derived: dict[str, list[Point]], now: datetime) -> list[dict[str, Any]]:
    """Single-valued attributes both hold now with different values, and what the union holds."""
    found = []
    for (subject, attribute), slot in sorted(slots.items()):
        if subject != dropped or _many(schema, attribute) or (keep, attribute) not in slots:
            continue
        spec = schema.attribute(attribute)
        rank = (lambda p: spec.rank(p.asserted_by, p.confidence, keep)) if spec.ranked else None
        mine = value_at(believed_runs(_points(slots[(keep, attribute)], schema), False, rank), now)
        theirs = value_at(believed_runs(_points(slot, schema), False, rank), now)
        if mine is None or theirs is None or mine.value_key == theirs.value_key:
            continue
        union = value_at(believed_runs(derived[attribute], False, rank), now)
        found.append({"attribute": attribute, "kept": mine.opener.value, "dropped": theirs.opener.value,
                      "result": None if union is None else union.opener.value})
    return found


def merge_steps(tenant: str, kept: str, dropped: str, schema: Schema, clock: Callable[[], datetime], *,
                dry_run: bool = False, actor: str = "unknown", reason: str | None = None
                ) -> Generator[Statement, Records, MergeReport]:
    """Merge ``dropped`` into ``kept`` in one transaction (see the module docstring); a ``dry_run``
    reads only (run it in a read transaction) and reports what the merge would do."""
    check_merge_target(tenant, kept, dropped, None)
    params: dict[str, Any] = {"tenant": tenant}
    if not dry_run:
        yield Statement(LOCK_SUBJECTS, {**params, "subjects": sorted([kept, dropped]), "now": clock()})
    found = yield from _entities(tenant, [kept, dropped])
    _check_pair(tenant, kept, dropped, found)
    own = yield Statement(SLOTS_OF, {**params, "subjects": [dropped]})
    attributes = sorted({r["attribute"] for r in own})
    relations = [a for a, spec in schema.attributes.items() if spec.value_type == "entity"]
    incoming = yield Statement(INCOMING, {**params, "target": dropped, "relations": relations,
                                          "needles": [f'"k":{json.dumps(value_key(dropped), ensure_ascii=False)}',
                                                      f'"rk":{json.dumps(value_key(dropped), ensure_ascii=False)}']})
    pointing = sorted({(r["subject"], r["attribute"]) for r in incoming})
    own_links = sorted(a for s, a in pointing if s == kept)
    if own_links:
        raise Conflict(f"{kept!r} of tenant {tenant!r} points at {dropped!r} ({', '.join(own_links)}): merged, it "
                       "would point at itself; retract that fact first, then merge")
    others = sorted({s for s, _ in pointing} - {kept, dropped})
    if others and not dry_run:
        yield Statement(LOCK_SUBJECTS, {**params, "subjects": others, "now": clock()})
    eids = {s: r["eid"] for s, r in found.items()}
    if others:
        eids.update({s: r["eid"] for s, r in (yield from _entities(tenant, others)).items()})
    pairs = [(s, a) for a in attributes for s in (kept, dropped)] + pointing
    slots, latest = yield from _read_slots(tenant, pairs)
    now = max([clock(), *latest])
    merge_id = new_merge_id()
    plan = _Plan()
    record: list[dict[str, Any]] = []
    union: dict[str, list[Point]] = {}
    to_value = {value_key(dropped): (value_key(kept), kept)}
    # Relations pointing at the dropped entity point at the kept one (the kept one's own too).
    for subject, attribute in pointing:
        slot = slots[(subject, attribute)]
        before = _points(slot, schema)
        after = _union([], [rekeyed(p, tenant, subject, attribute, to_value) for p in before])
        record.append(_slot_record(subject, attribute, before, after))
        _derive(plan, slot, after, schema, tenant, eids, now, merge_id)
    candidates: list[dict[str, Any]] = []
    for attribute in attributes:
        mine, theirs = slots[(kept, attribute)], slots[(dropped, attribute)]
        before = _points(mine, schema)
        moved = [rekeyed(p, tenant, kept, attribute, to_value) for p in _points(theirs, schema)]
        union[attribute] = _union(before, moved)
        record.append(_slot_record(kept, attribute, before, union[attribute]))
        record.append(_slot_record(dropped, attribute, _points(theirs, schema), []))
        _derive(plan, mine, union[attribute], schema, tenant, eids, now, merge_id)
        _derive(plan, theirs, [], schema, tenant, eids, now, merge_id)
        if schema.attribute(attribute).gated:
            candidates += _move_candidates(plan, mine, theirs, eids[kept], schema, now)
    conflicts = _conflicts(schema, slots, dropped, kept, union, now)
    kept_keys = {a["key"] for a in found[kept]["aliases"]}
    names = [a["name"] for a in found[dropped]["aliases"]] + [dropped] + ([found[dropped]["name"]]
                                                                            if found[dropped]["name"] else [])
    aliases = [a for a in checked_aliases(n for n in names if words(n)) if a["key"] not in kept_keys]
    episodes = sorted(set(found[dropped]["episodes"]))
    report = MergeReport(tenant, kept, dropped, dry_run, now, actor, reason, None if dry_run else merge_id,
                         slots=tuple(sorted(set(plan.slots))), retired=len(plan.retire),
                         created=len(plan.attributes) + len(plan.relations), conflicts=tuple(conflicts),
                         aliases=tuple(a["name"] for a in aliases), episodes=tuple(episodes))
    if dry_run:
        return report
    yield from _write(plan, tenant, now, merge_id)
    yield Statement(REMOVE_ALIASES, {**params, "subject": dropped,
                                     "keys": [a["key"] for a in found[dropped]["aliases"]]})
    yield Statement(ADD_ALIASES, {**params, "subject": kept, "aliases": aliases, "now": now, "actor": actor})
    yield Statement(MOVE_MENTIONS, {**params, "source": dropped, "target": kept, "episodes": episodes, "keep": []})
    yield Statement(MARK_MERGED, {**params, "dropped": dropped, "kept": kept, "now": now, "id": merge_id})
    yield Statement(RECORD, {**params, "id": merge_id, "props": {
        "kept": kept, "dropped": dropped, "status": "merged", "merged_at": now, "merged_by": actor,
        "reason": reason, "slots": json.dumps(record, ensure_ascii=False),
        "aliases_moved": json.dumps(found[dropped]["aliases"], ensure_ascii=False),
        "aliases_added": [a["key"] for a in aliases], "episodes": episodes,
        "kept_episodes": sorted(set(found[kept]["episodes"]) & set(episodes)),
        "candidates": json.dumps(candidates), "retired": len(plan.retire), "created": report.created,
    }})
    return report


def merge_op(tenant: str, kept: str, dropped: str, schema: Schema, clock: Callable[[], datetime], *,
             dry_run: bool = False, actor: str = "unknown", reason: str | None = None,
             dropped_tenant: str | None = None) -> Operation[MergeReport]:
    """:func:`merge_steps` in one transaction (a read one for a ``dry_run``); refused before any
    read across tenants (``dropped_tenant``) or into itself."""
    check_merge_target(tenant, kept, dropped, dropped_tenant)
    report: MergeReport = yield InTx(lambda: merge_steps(tenant, kept, dropped, schema, clock, dry_run=dry_run,
                                                         actor=actor, reason=reason), read=dry_run)
    return report


def _union(before: list[Point], added: list[Point]) -> list[Point]:
    """A set of statements: each key once (the first kept)."""
    seen: dict[str, Point] = {}
    for p in [*before, *added]:
        seen.setdefault(p.key, p)
    return list(seen.values())


def _slot_record(subject: str, attribute: str, before: list[Point], after: list[Point]) -> dict[str, Any]:
    """How a slot's statements changed: the keys added, the statements taken away (for a split)."""
    old = {p.key for p in before}
    new = {p.key for p in after}
    return {"subject": subject, "attribute": attribute, "added": sorted(new - old),
            "removed": [p.to_json() for p in before if p.key not in new]}


def _move_candidates(plan: _Plan, mine: _Slot, theirs: _Slot, eid: str, schema: Schema,
                     now: datetime) -> list[dict[str, Any]]:
    """A gated attribute's pending candidates of the dropped entity, as candidates of the kept one
    (joined to the kept one's candidate of the same value). Returns what a split needs."""
    pending = {r.value_key: r for r in mine.rows if r.status is Status.CANDIDATE}
    moved = []
    for row in (r for r in theirs.rows if r.status is Status.CANDIDATE):
        joined = pending.get(row.value_key)
        update: dict[str, Any] = {"memory_id": new_memory_id(), "subject": mine.subject,
                                  "recorded_at": now, "expired_at": None}
        if joined is not None:
            plan.retire.append(mine.row_ids[joined.memory_id])
            first = min((joined, row), key=lambda r: r.valid_from)
            update.update(valid_from=first.valid_from, source_episode_id=first.source_episode_id,
                          support_count=joined.support_count + row.support_count,
                          support_episodes=tuple(dict.fromkeys([*joined.support_episodes, *row.support_episodes])),
                          delta_keys=tuple(dict.fromkeys([*joined.delta_keys, *row.delta_keys])))
        plan.retire.append(theirs.row_ids[row.memory_id])
        copy = (joined or row).model_copy(update=update)
        _add_row(plan, vars(copy), schema, eid)
        moved.append({"from": row.memory_id, "joined": joined.memory_id if joined else None,
                      "to": copy.memory_id})
    return moved


def split_steps(tenant: str, kept: str, dropped: str, schema: Schema, clock: Callable[[], datetime], *,
                dry_run: bool = False, actor: str = "unknown", reason: str | None = None
                ) -> Generator[Statement, Records, MergeReport]:
    """Undo the last merge of ``dropped`` into ``kept`` (see the module docstring)."""
    check_merge_target(tenant, kept, dropped, None)
    params: dict[str, Any] = {"tenant": tenant}
    found_record = yield Statement(FIND_RECORD, {**params, "kept": kept, "dropped": dropped})
    if not found_record:
        raise NotFound(f"tenant {tenant!r} has no merge of {dropped!r} into {kept!r} to split "
                       "(`sgam entities merges -t T` lists them)")
    merge = found_record[0]["record"]
    changes = json.loads(merge["slots"])
    subjects = sorted({c["subject"] for c in changes} | {kept, dropped})
    if not dry_run:
        yield Statement(LOCK_SUBJECTS, {**params, "subjects": subjects, "now": clock()})
    entities = yield from _entities(tenant, subjects)
    eids = {s: r["eid"] for s, r in entities.items()}
    slots, latest = yield from _read_slots(tenant, [(c["subject"], c["attribute"]) for c in changes])
    now = max([clock(), *latest])
    plan = _Plan()
    for change in changes:
        slot = slots[(change["subject"], change["attribute"])]
        added = set(change["added"])
        points = [p for p in _points(slot, schema) if p.key not in added]
        points = _union(points, [Point.from_json(p) for p in change["removed"]])
        _derive(plan, slot, points, schema, tenant, eids, now, merge["id"])
    moved = json.loads(merge["candidates"] or "[]")
    if moved:
        _restore_candidates(plan, moved, (yield Statement(ROWS_BY_ID, {**params, "ids": [
            i for m in moved for i in (m["from"], m["joined"], m["to"]) if i]})), slots, eids, schema, now)
    aliases = json.loads(merge["aliases_moved"])
    report = MergeReport(tenant, kept, dropped, dry_run, now, actor, reason, merge["id"], split=True,
                         slots=tuple(sorted(set(plan.slots))), retired=len(plan.retire),
                         created=len(plan.attributes) + len(plan.relations),
                         aliases=tuple(a["name"] for a in aliases), episodes=tuple(merge["episodes"]))
    if dry_run:
        return report
    yield from _write(plan, tenant, now, merge["id"])
    yield Statement(REMOVE_ALIASES, {**params, "subject": kept, "keys": list(merge["aliases_added"])})
    yield Statement(UNMARK_MERGED, {**params, "dropped": dropped, "now": now})
    yield Statement(ADD_ALIASES, {**params, "subject": dropped, "now": now, "actor": actor, "aliases": [
        {"key": alias_key(a["name"]), "name": a["name"]} for a in aliases]})
    yield Statement(MOVE_MENTIONS, {**params, "source": kept, "target": dropped,
                                    "episodes": list(merge["episodes"]), "keep": list(merge["kept_episodes"])})
    yield Statement(FINISH_SPLIT, {**params, "id": merge["id"], "now": now, "actor": actor, "reason": reason})
    return report


def split_op(tenant: str, kept: str, dropped: str, schema: Schema, clock: Callable[[], datetime], *,
             dry_run: bool = False, actor: str = "unknown", reason: str | None = None) -> Operation[MergeReport]:
    """:func:`split_steps` in one transaction (a read one for a ``dry_run``)."""
    report: MergeReport = yield InTx(lambda: split_steps(tenant, kept, dropped, schema, clock, dry_run=dry_run,
                                                         actor=actor, reason=reason), read=dry_run)
    return report


def merges_op(tenant: str) -> Operation[list[dict[str, Any]]]:
    """The tenant's merge records, oldest first (:data:`LIST_MERGES`), as Python values."""
    rows = yield Read(Statement(LIST_MERGES, {"tenant": tenant}))
    return [{k: native(v) for k, v in r.items()} for r in rows]


def _restore_candidates(plan: _Plan, moved: list[dict[str, Any]], records: Records,
                        slots: dict[tuple[str, str], _Slot], eids: dict[str, str], schema: Schema,
                        now: datetime) -> None:
    rows = {r["props"]["memory_id"]: fact_from_properties(r["props"]) for r in records}
    believed = {m: slot.row_ids[m] for slot in slots.values() for m in slot.row_ids}
    for m in moved:
        if m["to"] in believed:
            plan.retire.append(believed[m["to"]])
        for original in (m["from"], m["joined"]):
            if original in rows:
                row = rows[original]
                copy = row.model_copy(update={"memory_id": new_memory_id(), "recorded_at": now,
                                              "expired_at": None, "expired_by_episode_id": None,
                                              "expired_by_delta_key": None})
                _add_row(plan, vars(copy), schema, eids[row.subject])

"""Deletion at every grain: one memory, one slot, one episode, a tenant (statements; ``store`` runs them).

Each grain is a generator that first only reads, under the locks of the subjects it will change,
and plans what goes; a dry run is the same generator stopped before its first write (the store
runs it in a read transaction), so it lists exactly what the deletion would remove.

* **memory** (one fact version, by ``memory_id``): the row and its copies, the rows it revises or
  that revise it (the same value closed, trimmed or extended), each a version of one statement;
* **slot** (tenant, subject, attribute): every row of the slot, retired ones and candidates too;
* **episode**: the episode, the rows it alone supports, and its pointer on every other row that
  cites it (support, source, the statement that retired or confirmed a row); its quarantine
  entries, and the entities it alone brought in (no fact, no other episode, no statement left);
* **tenant**: everything the tenant holds except its deletion records (``store.delete_tenant``).

**Rows decide.** A deletion removes rows; it never re-derives a slot from its statements. The
ledger of every slot it touches is dropped and rebuilt from the remaining rows on the slot's next
write (``reconcile.points_from_rows``, as after a forget or a purge), so the statements of the
deleted rows cannot come back, and neither can a value that a deleted version ended: deleting the
current version leaves nothing believed where it held, not the value before it. Value nodes no fact
points at any more go with their rows.

Every deletion that ran leaves ``(:Deletion {tenant_id, id, grain, status, deleted_at, deleted_by,
reason, target_*, memory_ids, statement_keys, slots, quarantine_ids, <counts>})``: ids, counts and
the grain, never a value or a text. A tenant's record stays after the tenant is gone (it is not the
tenant's data but the proof it went). The ``doctor`` query reads these records to find what a
deletion must not leave (queries/doctor.cypher).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import NotFound
from .reconcile import Point
from .retention import DROP_LEDGERS
from .steps import Auto, Operation, Read, Records, Statement, Write

GRAINS = ("memory", "slot", "episode", "tenant")

# The labels a tenant's data lives under, deleted in this order (facts first; see store.py).
TENANT_LABELS = ("Episode", "Value", "Alias", "Entity", "Tombstone", "PurgeRun", "Quarantine", "ImportRun", "Ledger",
                 "Extraction", "Merge", "ReadAudit")

# Locks the subjects a deletion changes, in sorted order as the write path locks them.
LOCK_SUBJECTS = """
UNWIND $subjects AS id
MATCH (e:Entity {tenant_id: $tenant, id: id})
SET e.updated_at = $now
"""

MEMORY_SLOT = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->()
WHERE f.memory_id = $memory_id
RETURN f.attribute AS attribute
"""

SLOT_ROWS = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->()
WHERE f.memory_id IS NOT NULL AND f.attribute = $attribute
RETURN elementId(f) AS fid, f.memory_id AS memory_id, f.revises_memory_id AS revises,
       f.status AS status, coalesce(f.delta_keys, []) AS keys
"""

HAS_LEDGER = """
OPTIONAL MATCH (l:Ledger {tenant_id: $tenant, subject: $subject, attribute: $attribute})
RETURN count(l) AS n
"""

# Value nodes that only the rows about to go point at.
ORPHANED_VALUES = """
UNWIND $fids AS fid
MATCH ()-[f]->(v:Value) WHERE elementId(f) = fid
WITH DISTINCT v
WHERE NOT EXISTS { MATCH ()-[g]->(v) WHERE NOT elementId(g) IN $fids }
RETURN collect(elementId(v)) AS values
"""

DELETE_FACTS = """
UNWIND $fids AS fid
MATCH ()-[f]->() WHERE elementId(f) = fid
DELETE f
"""

DELETE_NODES = """
UNWIND $ids AS id
MATCH (n) WHERE elementId(n) = id
DETACH DELETE n
"""

FIND_EPISODE = """
MATCH (ep:Episode {tenant_id: $tenant, id: $episode})
OPTIONAL MATCH (ep)-[:MENTIONS]->(e:Entity)
RETURN elementId(ep) AS eid, collect(e.id) AS mentioned
"""

# Every delta links its episode to the entities it names, so the rows that cite an episode hang
# off the entities it mentions.
EPISODE_ROWS = """
UNWIND $mentioned AS id
MATCH (s:Entity {tenant_id: $tenant, id: id})-[f]->()
WHERE f.memory_id IS NOT NULL
  AND (f.source_episode_id = $episode OR $episode IN coalesce(f.support_episodes, [])
       OR f.expired_by_episode_id = $episode OR f.confirmed_by_episode_id = $episode)
RETURN elementId(f) AS fid, f.memory_id AS memory_id, s.id AS subject, f.attribute AS attribute,
       f.status AS status, f.source_episode_id AS source, coalesce(f.support_episodes, []) AS episodes,
       coalesce(f.support_count, 1) AS count, coalesce(f.delta_keys, []) AS keys,
       f.asserted_by AS asserted_by, f.expired_by_episode_id AS expired_by,
       f.confirmed_by_episode_id AS confirmed_by
"""

# The ledgers holding a statement of the episode (``$pattern``: see :func:`episode_pattern`).
EPISODE_LEDGERS = """
MATCH (l:Ledger {tenant_id: $tenant})
WHERE l.subject IN $mentioned AND any(p IN l.points WHERE p =~ $pattern)
RETURN l.subject AS subject, l.attribute AS attribute, l.points AS points
"""

EPISODE_QUARANTINE = """
MATCH (q:Quarantine {tenant_id: $tenant})
WHERE q.episode_id = $episode
RETURN collect(q.id) AS ids
"""

DELETE_QUARANTINE = """
MATCH (q:Quarantine {tenant_id: $tenant})
WHERE q.id IN $ids
DETACH DELETE q
"""

# The episode's extraction trails (ingest/trail.py) quote it: they go with it.
DELETE_EPISODE_TRAILS = """
MATCH (x:Extraction {tenant_id: $tenant, episode_id: $episode})
DETACH DELETE x
"""

# Entities the episode alone brought in: no fact either way once its rows are gone, mentioned by
# no other episode, and no statement left in a ledger that stays.
ORPHANED_ENTITIES = """
UNWIND $mentioned AS id
MATCH (e:Entity {tenant_id: $tenant, id: id})
WHERE NOT EXISTS { MATCH (e)-[f]-() WHERE f.memory_id IS NOT NULL AND NOT elementId(f) IN $fids }
  AND NOT EXISTS { MATCH (other:Episode)-[:MENTIONS]->(e) WHERE other.id <> $episode }
  AND NOT EXISTS { MATCH (l:Ledger {tenant_id: $tenant, subject: e.id})
                   WHERE NOT [l.subject, l.attribute] IN $slots }
RETURN collect(elementId(e)) AS eids, collect(e.id) AS ids
"""

# The aliases of the entities a deletion removes (graph/aliases.py): they name nothing after it.
DELETE_ALIASES_OF = """
UNWIND $ids AS id
MATCH (e:Entity) WHERE elementId(e) = id
MATCH (a:Alias)-[:ALIAS_OF]->(e)
DETACH DELETE a
"""

# The rows an episode deletion keeps lose its pointers; the fields are computed in Python.
UPDATE_SUPPORT = """
UNWIND $rows AS r
MATCH ()-[f]->() WHERE elementId(f) = r.fid
SET f.source_episode_id = r.source, f.support_episodes = r.episodes, f.support_count = r.count,
    f.delta_keys = r.keys, f.asserted_by = r.asserted_by,
    f.expired_by_episode_id = CASE WHEN r.clear_expired THEN null ELSE f.expired_by_episode_id END,
    f.expired_by_delta_key = CASE WHEN r.clear_expired THEN null ELSE f.expired_by_delta_key END,
    f.confirmed_by_episode_id = CASE WHEN r.clear_confirmed THEN null ELSE f.confirmed_by_episode_id END
"""

RECORD = """
CREATE (d:Deletion {tenant_id: $tenant, id: $id})
SET d += $props
"""

FINISH_TENANT = """
MATCH (d:Deletion {tenant_id: $tenant, id: $id})
SET d += $counts, d.status = 'done', d.finished_at = $now
"""

# Label by label, so each scan uses the tenant's index; batched so a big tenant cannot exhaust memory.
# Facts first (relationship by relationship), then the nodes: DETACH DELETE of 2,000 hot subjects
# with long histories at once exceeded the transaction memory pool at 1M facts.
DELETE_TENANT = (
    "MATCH (:Entity {tenant_id: $tenant})-[f]->() CALL (f) { DELETE f } IN TRANSACTIONS OF 10000 ROWS",
    *(f"MATCH (n:{label} {{tenant_id: $tenant}}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 2000 ROWS"
      for label in TENANT_LABELS),
)

COUNT_TENANT = "CALL () {\n  MATCH (:Entity {tenant_id: $tenant})-[f]->() RETURN 'facts' AS kind, count(f) AS n\n" + "".join(
    f"  UNION ALL MATCH (n:{label} {{tenant_id: $tenant}}) RETURN '{label}' AS kind, count(n) AS n\n"
    for label in TENANT_LABELS) + "}\nRETURN kind, n"


@dataclass(frozen=True)
class DeletionReport:
    """What a deletion removed (or, on a dry run, would remove). Ids and counts only.

    ``memory_ids``: fact rows removed (pending candidates among them in ``candidates``);
    ``updated``: rows that lost a deleted episode's support and stay; ``ledgers``: slots
    (``subject|attribute``) whose ledger goes, to be rebuilt from their remaining rows;
    ``counts``: every kind removed, by name (for a tenant: ``facts`` and one per label).
    ``record_id`` names the ``(:Deletion)`` record (None on a dry run, or when nothing was there).
    """

    tenant_id: str
    grain: str
    target: dict[str, str]
    dry_run: bool
    at: datetime
    actor: str
    reason: str | None = None
    memory_ids: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    ledgers: tuple[str, ...] = ()
    quarantine: tuple[str, ...] = ()
    episodes: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    record_id: str | None = None

    @property
    def empty(self) -> bool:
        """Whether there was nothing to delete."""
        return not any(self.counts.values())


@dataclass
class _Plan:
    """What one grain will remove, collected by its reads."""

    tenant: str
    grain: str
    target: dict[str, str]
    subjects: list[str]
    fids: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    slots: list[tuple[str, str]] = field(default_factory=list)
    ledgers: list[tuple[str, str]] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    quarantine: list[str] = field(default_factory=list)
    episode_eid: str | None = None
    entity_eids: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = {"facts": len(self.memory_ids), "candidates": len(self.candidates),
                  "values": len(self.values), "ledgers": len(self.ledgers)}
        if self.grain == "episode":
            counts.update(updated_facts=len(self.updates), quarantine=len(self.quarantine),
                          episodes=1, entities=len(self.entities))
        return counts


def missing_memory(tenant: str, memory_id: str) -> NotFound:
    return NotFound(f"tenant {tenant!r} has no fact version {memory_id!r} (memory ids come from "
                    "history, current or provenance)")


def new_record_id() -> str:
    return "del-" + os.urandom(8).hex()


def _slot_name(slot: tuple[str, str]) -> str:
    return f"{slot[0]}|{slot[1]}"


def lineage(rows: Iterable[dict[str, Any]], memory_id: str) -> set[str]:
    """``memory_id`` and every row linked to it by ``revises_memory_id``, either way."""
    links: dict[str, set[str]] = {}
    for r in rows:
        if r["revises"]:
            links.setdefault(r["memory_id"], set()).add(r["revises"])
            links.setdefault(r["revises"], set()).add(r["memory_id"])
    found, todo = {memory_id}, [memory_id]
    while todo:
        for other in links.get(todo.pop(), ()):
            if other not in found:
                found.add(other)
                todo.append(other)
    return found


def _select(plan: _Plan, rows: list[dict[str, Any]], chosen: set[str]) -> None:
    gone = [r for r in rows if r["memory_id"] in chosen]
    kept_keys = {k for r in rows if r["memory_id"] not in chosen for k in r["keys"]}
    plan.fids = [r["fid"] for r in gone]
    plan.memory_ids = sorted(r["memory_id"] for r in gone)
    plan.candidates = sorted(r["memory_id"] for r in gone if r["status"] == "candidate")
    plan.keys = sorted({k for r in gone for k in r["keys"]} - kept_keys)


def slot_steps(tenant: str, subject: str, attribute: str | None, memory_id: str | None, now: datetime,
               dry_run: bool) -> Generator[Statement, Records, _Plan]:
    """Plan the deletion of one version (``memory_id``, of ``subject``) or of the whole slot."""
    params: dict[str, Any] = {"tenant": tenant, "subject": subject, "memory_id": memory_id, "now": now}
    if not dry_run:
        yield Statement(LOCK_SUBJECTS, {**params, "subjects": [subject]})
    if memory_id is not None:
        found = yield Statement(MEMORY_SLOT, params)
        if not found:
            raise missing_memory(tenant, memory_id)
        attribute = found[0]["attribute"]
    params["attribute"] = attribute
    rows = yield Statement(SLOT_ROWS, params)
    [ledger] = yield Statement(HAS_LEDGER, params)
    if not rows and not ledger["n"]:
        raise NotFound(f"tenant {tenant!r} holds no facts or statements of {subject!r}'s {attribute!r}")
    slot = (subject, str(attribute))
    plan = _Plan(tenant, "memory" if memory_id else "slot",
                 {"memory_id": memory_id} if memory_id else {"subject": subject, "attribute": str(attribute)},
                 [subject], slots=[slot], ledgers=[slot] if ledger["n"] else [])
    _select(plan, rows, lineage(rows, memory_id) if memory_id else {r["memory_id"] for r in rows})
    [values] = yield Statement(ORPHANED_VALUES, {"fids": plan.fids})
    plan.values = values["values"]
    return plan


def episode_pattern(episode: str) -> str:
    """A Java regex matching a ledger entry stated by ``episode`` (``"ep"``, or in ``"eps"``)."""
    quoted = re.escape(json.dumps(episode))
    return f'.*("ep":{quoted}|"eps":\\[[^\\]]*{quoted}).*'


def _episode_keys(points: Iterable[Point], episode: str) -> set[str]:
    """The idempotency keys of the statements ``episode`` made (a point rebuilt from rows carries
    the keys of several episodes at once: those are kept, as they cannot be told apart)."""
    keys: set[str] = set()
    for p in points:
        if p.supporting_episodes == (episode,):
            keys.update(p.supporting_keys)
    return keys


def _without(row: dict[str, Any], episode: str, keys: set[str], points: list[Point]) -> dict[str, Any] | None:
    """The fields of a row that loses ``episode``, or None when it was its only support."""
    episodes = [e for e in row["episodes"] if e != episode]
    support = set(row["episodes"]) | {row["source"]}
    if support <= {episode}:
        return None
    mine = [k for k in row["keys"] if k in keys]
    removed = len(mine) or (1 if episode in row["episodes"] else 0)
    source, asserted_by = row["source"], row["asserted_by"]
    if source == episode:
        source = episodes[0]
        # the new source's own statement says who asserted the row now
        stated = next((p for p in points if p.episode == source and p.key in row["keys"]), None)
        asserted_by = stated.asserted_by if stated else asserted_by
    return {"fid": row["fid"], "source": source, "episodes": episodes,
            "count": max(row["count"] - removed, len(episodes), 1),
            "keys": [k for k in row["keys"] if k not in keys], "asserted_by": asserted_by,
            "clear_expired": row["expired_by"] == episode, "clear_confirmed": row["confirmed_by"] == episode}


def episode_steps(tenant: str, episode: str, now: datetime, dry_run: bool) -> Generator[Statement, Records, _Plan]:
    """Plan the deletion of ``episode`` and of what only it supports."""
    params: dict[str, Any] = {"tenant": tenant, "episode": episode, "now": now}
    found = yield Statement(FIND_EPISODE, params)
    if not found:
        raise NotFound(f"tenant {tenant!r} has no episode {episode!r}")
    mentioned = sorted(set(found[0]["mentioned"]))
    params["mentioned"] = mentioned
    if not dry_run and mentioned:
        yield Statement(LOCK_SUBJECTS, {**params, "subjects": mentioned})
    rows = yield Statement(EPISODE_ROWS, params)
    ledgers = yield Statement(EPISODE_LEDGERS, {**params, "pattern": episode_pattern(episode)})
    points = {(r["subject"], r["attribute"]): [Point.from_json(p) for p in r["points"]] for r in ledgers}
    keys = {k for slot in points.values() for k in _episode_keys(slot, episode)}
    plan = _Plan(tenant, "episode", {"episode_id": episode}, mentioned, episode_eid=found[0]["eid"])
    for row in sorted(rows, key=lambda r: r["memory_id"]):
        slot = (row["subject"], row["attribute"])
        kept = _without(row, episode, keys, points.get(slot, []))
        if kept is None:
            plan.fids.append(row["fid"])
            plan.memory_ids.append(row["memory_id"])
            if row["status"] == "candidate":
                plan.candidates.append(row["memory_id"])
        else:
            plan.updates.append({**kept, "memory_id": row["memory_id"]})
        if slot not in plan.slots:
            plan.slots.append(slot)
    plan.ledgers = sorted(points)
    plan.slots = sorted(set(plan.slots) | set(points))
    plan.keys = sorted(keys)
    [values] = yield Statement(ORPHANED_VALUES, {"fids": plan.fids})
    plan.values = values["values"]
    [quarantine] = yield Statement(EPISODE_QUARANTINE, params)
    plan.quarantine = sorted(quarantine["ids"])
    [entities] = yield Statement(ORPHANED_ENTITIES, {**params, "fids": plan.fids,
                                                     "slots": [list(s) for s in plan.ledgers]})
    plan.entity_eids, plan.entities = entities["eids"], sorted(entities["ids"])
    return plan


def deletion_steps(plan_steps: Generator[Statement, Records, _Plan], now: datetime, actor: str,
                   reason: str | None, dry_run: bool) -> Generator[Statement, Records, DeletionReport]:
    """Run a grain's plan, then (unless ``dry_run``) its writes and its record, in one transaction."""
    plan = yield from plan_steps
    record_id = None if dry_run else new_record_id()
    if not dry_run:
        yield from _remove(plan)
        yield Statement(RECORD, {"tenant": plan.tenant, "id": record_id, "props": _record_props(
            plan.grain, now, actor, reason, plan.counts(), **_targets(plan.target),
            memory_ids=plan.memory_ids, statement_keys=plan.keys,
            slots=[_slot_name(s) for s in plan.slots], quarantine_ids=plan.quarantine)})
    return DeletionReport(
        plan.tenant, plan.grain, plan.target, dry_run, now, actor, reason, tuple(plan.memory_ids),
        tuple(plan.candidates), tuple(u["memory_id"] for u in plan.updates),
        tuple(_slot_name(s) for s in plan.ledgers), tuple(plan.quarantine),
        tuple(plan.target.values()) if plan.grain == "episode" else (), tuple(plan.entities),
        plan.counts(), record_id)


def _remove(plan: _Plan) -> Generator[Statement, Records, None]:
    params = {"tenant": plan.tenant}
    if plan.fids:
        yield Statement(DELETE_FACTS, {"fids": plan.fids})
    if plan.updates:
        yield Statement(UPDATE_SUPPORT, {"rows": plan.updates})
    if plan.entity_eids:
        yield Statement(DELETE_ALIASES_OF, {"ids": plan.entity_eids})
    if plan.values or plan.entity_eids:
        yield Statement(DELETE_NODES, {"ids": plan.values + plan.entity_eids})
    if plan.ledgers:
        yield Statement(DROP_LEDGERS, {**params, "slots": [list(s) for s in plan.ledgers]})
    if plan.quarantine:
        yield Statement(DELETE_QUARANTINE, {**params, "ids": plan.quarantine})
    if plan.episode_eid is not None:
        yield Statement(DELETE_EPISODE_TRAILS, {**params, "episode": plan.target["episode_id"]})
        yield Statement(DELETE_NODES, {"ids": [plan.episode_eid]})


def _targets(target: dict[str, str]) -> dict[str, str]:
    return {f"target_{k}": v for k, v in target.items()}


def _record_props(grain: str, now: datetime, actor: str, reason: str | None, counts: dict[str, int],
                  status: str = "done", **extra: Any) -> dict[str, Any]:
    return {"grain": grain, "status": status, "deleted_at": now, "deleted_by": actor, "reason": reason,
            **counts, **extra}


def tenant_counts(records: Records) -> dict[str, int]:
    """``COUNT_TENANT``'s records as counts named like the other grains' (``facts``, ``episodes``...)."""
    found = {r["kind"]: r["n"] for r in records}
    return {name: found.get(kind, 0) for kind, name in _COUNT_NAMES.items()}


_COUNT_NAMES = {"facts": "facts", "Episode": "episodes", "Value": "values", "Entity": "entities",
                "Tombstone": "tombstones", "PurgeRun": "purge_runs", "Quarantine": "quarantine",
                "ImportRun": "import_runs", "Ledger": "ledgers", "Extraction": "extractions",
                "ReadAudit": "read_audits"}


def tenant_record(tenant: str, record_id: str, now: datetime, actor: str, reason: str | None,
                  counts: dict[str, int]) -> Statement:
    """The tenant's deletion record, written before anything goes (``status: deleting``), so that
    a deletion stopped halfway is seen by ``doctor``; :func:`tenant_finished` closes it."""
    return Statement(RECORD, {"tenant": tenant, "id": record_id,
                              "props": _record_props("tenant", now, actor, reason, counts, "deleting")})


def tenant_finished(tenant: str, record_id: str, now: datetime, counts: dict[str, int]) -> Statement:
    return Statement(FINISH_TENANT, {"tenant": tenant, "id": record_id, "now": now, "counts": counts})


def tenant_report(tenant: str, now: datetime, actor: str, reason: str | None, counts: dict[str, int],
                  dry_run: bool, record_id: str | None) -> DeletionReport:
    return DeletionReport(tenant, "tenant", {"tenant_id": tenant}, dry_run, now, actor, reason,
                          counts=counts, record_id=record_id)


def delete_tenant_op(tenant: str, clock: Callable[[], datetime], *, dry_run: bool = False,
                     actor: str = "unknown", reason: str | None = None) -> Operation[DeletionReport]:
    """Remove every node and fact of ``tenant`` but its deletion records, in bounded
    transactions, recorded by a ``(:Deletion {grain: 'tenant'})`` that stays. ``dry_run`` only
    counts. A tenant holding nothing is left without a record."""
    now = clock()
    counts = tenant_counts((yield Read(Statement(COUNT_TENANT, {"tenant": tenant}))))
    if dry_run or not any(counts.values()):
        return tenant_report(tenant, now, actor, reason, counts, dry_run, None)
    record_id = new_record_id()
    yield Write(tenant_record(tenant, record_id, now, actor, reason, counts))
    for statement in DELETE_TENANT:
        yield Auto(Statement(statement, {"tenant": tenant}))
    yield Write(tenant_finished(tenant, record_id, clock(), counts))
    return tenant_report(tenant, now, actor, reason, counts, False, record_id)


__all__ = ["COUNT_TENANT", "DELETE_TENANT", "DeletionReport", "GRAINS", "TENANT_LABELS", "delete_tenant_op", "deletion_steps", "episode_pattern",
           "episode_steps", "lineage", "missing_memory", "slot_steps", "tenant_counts", "tenant_finished", "tenant_record",
           "tenant_report"]

"""Retention: purge the facts whose retention class has expired (statements; ``store`` runs them).

A fact of a class with ``ttl_days`` expires ``ttl_days`` after it was last confirmed (or recorded,
if never reconfirmed). A purge removes expired facts in bounded batches, each its own transaction,
then what the class says goes with them: value nodes no fact points at any more (with their
embeddings) and episodes no remaining fact cites. The refusals ``sgam replay`` recorded
(``ingest/quarantine.py``) carry their attribute's class too: one holds a proposed value like the
fact would have, so it expires ``ttl_days`` after it was recorded. Read audit records go after
the ``audit`` class's days (:mod:`sgam.graph.audit`). Every purge that removed
something leaves a ``(:PurgeRun)`` record, so "expired by retention" stays a queryable state after
the rows are gone.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .audit import purge_audit_op
from .schema import Schema
from .steps import InTx, Operation, Read, Records, Statement

BATCH = 2000

EXPIRE_BATCH = """
MATCH (s:Entity {tenant_id: $tenant})-[f]->(o)
WHERE f.retention_policy = $policy AND f.memory_id IS NOT NULL
  AND coalesce(f.last_confirmed_at, f.recorded_at) < $cutoff
WITH s, f, o LIMIT $batch
WITH collect(f) AS facts, collect(DISTINCT o) AS ends,
     collect(DISTINCT f.source_episode_id) AS cited, collect(DISTINCT [s.id, f.attribute]) AS slots
FOREACH (f IN facts | DELETE f)
RETURN size(facts) AS removed, [o IN ends WHERE o:Value | elementId(o)] AS values, cited, slots
"""

# A purged fact must not come back from its statements: the ledgers of the slots a purge touched
# go too, and the next write to such a slot rebuilds its ledger from the rows that remain.
DROP_LEDGERS = """
UNWIND $slots AS slot
MATCH (l:Ledger {tenant_id: $tenant, subject: slot[0], attribute: slot[1]})
DETACH DELETE l
"""

COUNT_EXPIRED = """
MATCH (s:Entity {tenant_id: $tenant})-[f]->()
WHERE f.retention_policy = $policy AND f.memory_id IS NOT NULL
  AND coalesce(f.last_confirmed_at, f.recorded_at) < $cutoff
RETURN count(f) AS n
"""

DROP_ORPHAN_VALUES = """
UNWIND $values AS id
MATCH (v:Value) WHERE elementId(v) = id AND NOT EXISTS { ()-[]->(v) }
DETACH DELETE v
RETURN count(*) AS removed
"""

# An episode is still needed while a fact about an entity it mentions cites it. Its extraction
# trails (ingest/trail.py) quote it: they go with it.
DROP_ORPHAN_EPISODES = """
UNWIND $episodes AS id
MATCH (ep:Episode {tenant_id: $tenant, id: id})
WHERE NOT EXISTS {
  MATCH (ep)-[:MENTIONS]->(:Entity)-[g]->()
  WHERE g.source_episode_id = ep.id OR ep.id IN coalesce(g.support_episodes, [])
}
WITH ep, COLLECT { MATCH (x:Extraction {tenant_id: $tenant, episode_id: ep.id}) RETURN x } AS trails
FOREACH (x IN trails | DETACH DELETE x)
DETACH DELETE ep
RETURN count(*) AS removed
"""

EXPIRE_REFUSALS = """
MATCH (q:Quarantine {tenant_id: $tenant})
WHERE q.retention_policy = $policy AND q.created_at < $cutoff
WITH q LIMIT $batch
DETACH DELETE q
RETURN count(*) AS removed
"""

RECORD_RUN = """
CREATE (:PurgeRun {tenant_id: $tenant, at: $now, policy: $policy, cutoff: $cutoff,
                   facts: $facts, values: $values, episodes: $episodes, refusals: $refusals})
"""


@dataclass
class PurgeReport:
    """What one purge removed, per retention class."""

    tenant_id: str
    now: datetime
    facts: dict[str, int] = field(default_factory=dict)
    values: int = 0
    episodes: int = 0
    refusals: int = 0
    """Refusal records of ``sgam replay`` removed with their class."""
    audits: int = 0
    """Read audit records past the audit retention (:mod:`sgam.graph.audit`)."""

    @property
    def total_facts(self) -> int:
        return sum(self.facts.values())


def expiring_classes(schema: Schema) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Retention classes that can expire: name -> (ttl_days, also_remove)."""
    return {name: (spec.ttl_days, spec.also_remove)
            for name, spec in schema.retention.items() if spec.ttl_days is not None}


def count_expired(tenant: str, policy: str, ttl_days: int, now: datetime) -> Statement:
    """How many facts of ``policy`` a purge at ``now`` would remove (for progress and --dry-run)."""
    return Statement(COUNT_EXPIRED, {"tenant": tenant, "policy": policy,
                                     "cutoff": now - timedelta(days=ttl_days)})


def purge_batch(tenant: str, policy: str, ttl_days: int, also_remove: tuple[str, ...], now: datetime,
                batch: int = BATCH) -> Generator[Statement, Records, dict[str, int]]:
    """One bounded batch for one class, as one transaction; returns what it removed."""
    cutoff = now - timedelta(days=ttl_days)
    params: dict[str, Any] = {"tenant": tenant, "policy": policy, "cutoff": cutoff, "batch": batch}
    [expired] = yield Statement(EXPIRE_BATCH, params)
    removed = {"facts": expired["removed"], "values": 0, "episodes": 0}
    if expired["removed"]:
        yield Statement(DROP_LEDGERS, {"tenant": tenant, "slots": expired["slots"]})
    if expired["removed"] and "values" in also_remove:
        [values] = yield Statement(DROP_ORPHAN_VALUES, {"values": expired["values"]})
        removed["values"] = values["removed"]
    if expired["removed"] and "episodes" in also_remove:
        [episodes] = yield Statement(DROP_ORPHAN_EPISODES, {"tenant": tenant, "episodes": expired["cited"]})
        removed["episodes"] = episodes["removed"]
    if expired["removed"]:
        yield Statement(RECORD_RUN, {**params, "now": now, **removed, "refusals": 0})
    return removed


def purge_refusals_batch(tenant: str, policy: str, ttl_days: int, now: datetime,
                         batch: int = BATCH) -> Generator[Statement, Records, int]:
    """One bounded batch of expired refusal records of one class, as one transaction; returns
    how many it removed."""
    params: dict[str, Any] = {"tenant": tenant, "policy": policy,
                              "cutoff": now - timedelta(days=ttl_days), "batch": batch}
    [expired] = yield Statement(EXPIRE_REFUSALS, params)
    if expired["removed"]:
        yield Statement(RECORD_RUN, {**params, "now": now, "facts": 0, "values": 0, "episodes": 0,
                                     "refusals": expired["removed"]})
    return int(expired["removed"])


def purge_op(tenant: str, now: datetime, schema: Schema,
             on_progress: Callable[[int, int], None] | None = None) -> Operation[PurgeReport]:
    """Remove expired facts class by class in bounded transactions.

    ``on_progress(done, total)`` is called after each batch.
    """
    report = PurgeReport(tenant, now)
    classes = expiring_classes(schema)
    total = 0
    for name, (ttl, _) in classes.items():
        total += (yield Read(count_expired(tenant, name, ttl, now)))[0]["n"]
    for name, (ttl, also_remove) in classes.items():
        while True:
            removed = yield InTx(lambda: purge_batch(tenant, name, ttl, also_remove, now))  # noqa: B023
            report.facts[name] = report.facts.get(name, 0) + removed["facts"]
            report.values += removed["values"]
            report.episodes += removed["episodes"]
            if on_progress is not None:
                on_progress(report.total_facts, total)
            if removed["facts"] < BATCH:
                break
        while True:
            refusals = yield InTx(lambda: purge_refusals_batch(tenant, name, ttl, now))  # noqa: B023
            report.refusals += refusals
            if refusals < BATCH:
                break
    report.audits = yield from purge_audit_op(tenant, now, schema)
    return report

"""Bulk import: load a whole history of deltas into tenants that hold no facts yet.

``write_many`` reads the stored rows of every slot a batch touches, under subject locks, in
batches of a few thousand deltas. A tenant that is still empty has nothing to read, so a whole
history can go in larger transactions: the deltas are grouped by subject (each subject's deltas
keep their order), subjects are packed into chunks of about ``chunk_size`` deltas, and each chunk
runs the ordinary write transaction (``writes.write_steps``: the same ``reconcile`` / ``apply_plan``
in memory, the same rows). Since a chunk holds every delta of its subjects, the result is the one
``write_many`` gives for the same stream.

Everything that can be checked before writing is checked first (schema, episodes, entity types
across the whole stream, empty tenants); if a chunk still fails, the facts, values and entities
already imported are removed again, so the tenant is as empty as before (its episodes stay).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .errors import Conflict, InvalidDelta, SchemaViolation
from .models import MemoryDelta
from .schema import Schema
from .writes import _entities_of, _Prepared, prepare

DEFAULT_CHUNK = 20_000

# A tenant qualifies when it has no entities (facts hang off entities) and no tombstones.
OCCUPIED = """
UNWIND $tenants AS t
CALL (t) { MATCH (e:Entity {tenant_id: t}) RETURN count(e) > 0 AS entities LIMIT 1 }
CALL (t) { MATCH (x:Tombstone {tenant_id: t}) RETURN count(x) > 0 AS tombstones LIMIT 1 }
RETURN t AS tenant, entities, tombstones
"""

# Ids by element id, read with one scan per tenant: planned lookups by (tenant_id, id) inside
# UNWIND can fall back to an index scan per row while the plan cache holds a plan made when
# the labels were nearly empty, which is exactly the state of a bulk import.
EPISODE_IDS = "MATCH (x:Episode {tenant_id: $tenant}) RETURN x.id AS id, elementId(x) AS eid"
ENTITY_IDS = "MATCH (x:Entity {tenant_id: $tenant}) RETURN x.id AS id, elementId(x) AS eid"

# The entities are new, so no link exists yet; the pairs come deduplicated over the whole stream.
CREATE_MENTIONS = """
UNWIND $mentions AS m
MATCH (ep:Episode) WHERE elementId(ep) = m.episode
MATCH (e:Entity) WHERE elementId(e) = m.entity
CREATE (ep)-[:MENTIONS]->(e)
"""

# Undo of a failed import: the tenant had no entities or values before it started.
UNDO = tuple(
    f"MATCH (n:{label} {{tenant_id: $tenant}}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS"
    for label in ("Value", "Entity")
)


@dataclass(frozen=True)
class ImportPlan:
    """Validated deltas packed into chunks of whole subjects."""

    tenants: tuple[str, ...]
    episodes: tuple[tuple[str, str], ...]
    chunks: tuple[tuple[_Prepared, ...], ...]


def plan_import(deltas: Sequence[MemoryDelta], schema: Schema, chunk_size: int = DEFAULT_CHUNK) -> ImportPlan:
    """Check what needs no database and pack the deltas into chunks (raises on the first bad one)."""
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise InvalidDelta(f"chunk_size must be a positive whole number, got {chunk_size!r}")
    ready, rejected = prepare(deltas, schema)
    if rejected:
        first = rejected[0]
        raise type(first.error)(f"delta {first.index}: {first.message}")  # type: ignore[misc]
    _check_types(ready)
    by_subject: dict[tuple[str, str], list[_Prepared]] = {}
    for item in ready:
        by_subject.setdefault((item.delta.tenant_id, item.delta.subject), []).append(item)
    chunks: list[tuple[_Prepared, ...]] = []
    current: list[_Prepared] = []
    for items in by_subject.values():
        if current and len(current) + len(items) > chunk_size:
            chunks.append(tuple(current))
            current = []
        current.extend(items)
    if current:
        chunks.append(tuple(current))
    tenants = tuple(sorted({item.delta.tenant_id for item in ready}))
    episodes = tuple(sorted({(item.delta.tenant_id, item.delta.source_episode_id) for item in ready}))
    return ImportPlan(tenants, episodes, tuple(chunks))


def _check_types(ready: Sequence[_Prepared]) -> None:
    """Every entity gets one type in the whole stream (as subject and as relation target)."""
    seen: dict[tuple[str, str], tuple[str, int, str]] = {}
    for item in ready:
        roles = (("subject", item.subject_type), ("target", item.target_type))
        for entity_id, (role, wanted) in zip(_entities_of(item), roles):
            key = (item.delta.tenant_id, entity_id)
            first = seen.setdefault(key, (wanted, item.index, role))  # type: ignore[arg-type]
            if first[0] != wanted:
                raise SchemaViolation(
                    f"delta {item.index}: {role} {entity_id!r} of tenant {item.delta.tenant_id!r} "
                    f"must be a {wanted} for attribute {item.delta.attribute!r}, but delta {first[1]} "
                    f"made it a {first[0]} ({first[2]})"
                )


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


__all__ = ["DEFAULT_CHUNK", "ImportPlan", "CREATE_MENTIONS", "ENTITY_IDS", "EPISODE_IDS", "OCCUPIED", "UNDO", "missing_error",
           "occupied_error", "plan_import"]

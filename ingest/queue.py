"""The background queue, kept in Neo4j itself: episode ``status`` is the queue (statements only).

    recorded                 stored, not queued (record_episode, replay, real-time writes)
    pending  --claim-->  claimed (lease_until, claimed_by) --done-->  done
       ^                    |  transient error: back to pending after a backoff (not_before)
       +--------------------+  terminal error, or out of attempts: failed (dead letter, error)
    claimed with an expired lease is claimable again (its worker died or stalled)

A claim is one write transaction: read up to ``3 * limit`` claimable candidates, oldest first, and
keep those of the oldest one's tenant (a batch holds one tenant, so workers spread over tenants);
lock them all (in element-id order), then re-check each chunk of ``limit`` in a *new* statement and
claim those still claimable; if another worker took some, go on with the next candidates. The
re-check must be its own statement: within one, Cypher may reuse the property values it read before
the lock was granted, and two workers would claim the same episode. ``attempts`` counts claims; an
expired lease on an episode that has used up its attempts dead-letters it instead of handing it out
again.

**Order per tenant.** Episodes of one tenant are claimed in occurrence order and by one worker at a
time: an episode is claimable only while no *other* worker holds a live claim in its tenant, and no
older episode of its tenant waits out a retry backoff. Several workers therefore run different
tenants side by side, never one tenant's episodes out of order. The write path alone would not make
order irrelevant: asserts and corrections land in their valid-time place whatever the order, but a
retraction applied before the assert it retracts is refused (a ``Conflict``). Two claims of the same
tenant serialise on its oldest claimable episode, which both lock, so the second sees the first's
claims when it re-checks. A worker that takes over an expired lease resumes at the oldest episode.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sgam.graph.models import Episode
from sgam.graph.steps import Records, Statement
from sgam.graph.codec import native

_DUE = """((e.status = 'pending' AND (e.not_before IS NULL OR e.not_before <= $now))
       OR (e.status = 'claimed' AND e.lease_until <= $now))"""

# Per-tenant order (see the module docstring): the tenants another worker holds, and per tenant the
# oldest episode waiting out a backoff, computed once per statement (both sets are small).
_TURNS = """CALL () {
  OPTIONAL MATCH (o:Episode)
  WHERE o.status = 'claimed' AND o.lease_until > $now AND o.claimed_by <> $worker
  RETURN collect(DISTINCT o.tenant_id) AS held
}
CALL () {
  OPTIONAL MATCH (o:Episode) WHERE o.status = 'pending' AND o.not_before > $now
  WITH o.tenant_id AS tenant, min(o.occurred_at) AS oldest
  RETURN [w IN collect([tenant, oldest]) WHERE w[0] IS NOT NULL] AS waiting
}"""
_IN_TURN = """NOT e.tenant_id IN held
  AND none(w IN waiting WHERE w[0] = e.tenant_id AND w[1] < e.occurred_at)"""

CANDIDATES = f"""
{_TURNS}
MATCH (e:Episode)
WHERE e.status IN ['pending', 'claimed'] AND ($tenants IS NULL OR e.tenant_id IN $tenants)
  AND {_DUE}
  AND {_IN_TURN}
RETURN elementId(e) AS eid, e.tenant_id AS tenant
ORDER BY e.occurred_at, e.recorded_at
LIMIT $limit
"""

LOCK = """
UNWIND $eids AS eid
MATCH (e:Episode) WHERE elementId(e) = eid
SET e._claim_lock = true
REMOVE e._claim_lock
"""

DEAD_LETTER_EXPIRED = """
UNWIND $eids AS eid
MATCH (e:Episode) WHERE elementId(e) = eid
  AND e.status = 'claimed' AND e.lease_until <= $now AND e.attempts >= $max_attempts
SET e.status = 'failed', e.failed_at = $now, e.lease_until = null,
    e.error = 'lease expired ' + toString(e.attempts) + ' times: its worker crashed or outlived the lease'
RETURN e.tenant_id AS tenant_id, e.id AS id
"""

CLAIM = f"""
{_TURNS}
UNWIND $eids AS eid
MATCH (e:Episode) WHERE elementId(e) = eid AND {_DUE}
  AND {_IN_TURN}
SET e.status = 'claimed', e.claimed_by = $worker, e.claimed_at = $now, e.lease_until = $lease_until,
    e.attempts = coalesce(e.attempts, 0) + 1
RETURN e {{.tenant_id, .id, .content, .kind, .actor, .session_id, .occurred_at, .attempts, .deltas}} AS episode
ORDER BY e.occurred_at, e.recorded_at
"""

DONE = """
MATCH (e:Episode {tenant_id: $tenant, id: $id})
WHERE e.status = 'claimed' AND e.claimed_by = $worker
SET e.status = 'done', e.processed_at = $now, e.lease_until = null, e.not_before = null,
    e.written = $written, e.quarantined = $quarantined
RETURN count(e) AS n
"""

RETRY = """
MATCH (e:Episode {tenant_id: $tenant, id: $id})
WHERE e.status = 'claimed' AND e.claimed_by = $worker
SET e.status = 'pending', e.not_before = $not_before, e.last_error = $error, e.lease_until = null,
    e.claimed_by = null
RETURN count(e) AS n
"""

FAIL = """
MATCH (e:Episode {tenant_id: $tenant, id: $id})
WHERE e.status = 'claimed' AND e.claimed_by = $worker
SET e.status = 'failed', e.failed_at = $now, e.error = $error, e.lease_until = null
RETURN count(e) AS n
"""

RENEW = """
UNWIND $ids AS id
MATCH (e:Episode {tenant_id: id[0], id: id[1]})
WHERE e.status = 'claimed' AND e.claimed_by = $worker
SET e.lease_until = $lease_until
"""


RELEASE = """
UNWIND $ids AS id
MATCH (e:Episode {tenant_id: id[0], id: id[1]})
WHERE e.status = 'claimed' AND e.claimed_by = $worker
SET e.status = 'pending', e.lease_until = null, e.claimed_by = null,
    e.attempts = coalesce(e.attempts, 1) - 1
"""

REQUEUE_FAILED = """
MATCH (e:Episode {tenant_id: $tenant})
WHERE e.status = 'failed'
SET e.status = 'pending', e.attempts = 0, e.not_before = null, e.requeued_at = $now
RETURN count(e) AS n
"""

BACKLOG = """
MATCH (e:Episode)
WHERE e.status IN ['pending', 'claimed'] AND ($tenants IS NULL OR e.tenant_id IN $tenants)
RETURN count(e) AS n
"""


@dataclass(frozen=True)
class Claimed:
    """An episode a worker holds, and how many times it has been claimed (this one included)."""

    episode: Episode
    attempts: int
    deltas: tuple[dict[str, Any], ...] = ()
    """The agent's own deltas, stored on an episode deferred from real time."""


def claim_steps(worker: str, limit: int, lease: timedelta, max_attempts: int, now: datetime,
                tenants: Sequence[str] | None = None) -> Generator[Statement, Records, list[Claimed]]:
    """Claim up to ``limit`` claimable episodes of one tenant for ``worker``, oldest first, from
    ``tenants`` (all when ``None``; see the module docstring)."""
    scope = list(tenants) if tenants else None
    rows = yield Statement(CANDIDATES, {"tenants": scope, "now": now, "limit": 3 * limit,
                                        "worker": worker})
    # One tenant per claim, the one whose turn is oldest: other workers can take the other tenants.
    remaining = [r["eid"] for r in rows if r["tenant"] == rows[0]["tenant"]]
    if remaining:
        yield Statement(LOCK, {"eids": sorted(remaining)})
    claimed: list[Claimed] = []
    while remaining and len(claimed) < limit:
        # Another worker may have taken some of these: then try the next ones in line.
        chunk, remaining = remaining[:limit - len(claimed)], remaining[limit - len(claimed):]
        eids = sorted(chunk)
        yield Statement(DEAD_LETTER_EXPIRED, {"eids": eids, "now": now, "max_attempts": max_attempts})
        records = yield Statement(CLAIM, {"eids": eids, "now": now, "worker": worker,
                                          "lease_until": now + lease})
        claimed.extend(Claimed(_episode(r["episode"]), r["episode"]["attempts"],
                               tuple(stored_deltas(r["episode"].get("deltas")))) for r in records)
    return sorted(claimed, key=lambda c: (c.episode.occurred_at, c.episode.tenant_id))


def _episode(props: dict[str, Any]) -> Episode:
    data = {k: native(v) for k, v in props.items()
            if v is not None and k not in ("attempts", "deltas")}
    return Episode.model_validate(data)


def stored_deltas(text: str | None) -> list[dict[str, Any]]:
    """The agent's deltas a deferred episode carries (its ``deltas`` property, JSON)."""
    if not text:
        return []
    data = json.loads(text)
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def settle_steps(query: str, **params: Any) -> Generator[Statement, Records, bool]:
    """Run ``DONE``, ``RETRY`` or ``FAIL``; ``False`` if the worker no longer held the episode."""
    rows = yield Statement(query, params)
    return bool(rows and rows[0]["n"])


def release_steps(worker: str, keys: list[tuple[str, str]]) -> Generator[Statement, Records, None]:
    """Hand unprocessed claims back to the queue (a worker stopping cleanly)."""
    if keys:
        yield Statement(RELEASE, {"worker": worker, "ids": [list(k) for k in keys]})


def requeue_failed_steps(tenant: str, now: datetime) -> Generator[Statement, Records, int]:
    """Put every dead-lettered episode of ``tenant`` back in the queue with fresh attempts."""
    rows = yield Statement(REQUEUE_FAILED, {"tenant": tenant, "now": now})
    return rows[0]["n"] if rows else 0


__all__ = ["BACKLOG", "Claimed", "DONE", "FAIL", "RENEW", "RETRY", "claim_steps", "release_steps",
           "requeue_failed_steps", "settle_steps", "stored_deltas"]

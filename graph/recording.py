"""Recording raw episodes, deduplicated by content hash per tenant (statements; ``store`` runs them).

Ids and content hashes interact like this (``content_hash`` covers kind, actor, occurrence time
and content; see :attr:`~sgam.graph.models.Episode.content_hash`):

* an episode whose ``(tenant, id)`` is new and whose hash is new in the tenant is **created**;
* the same id with the same content again is **existing**: nothing changes (replays are idempotent);
* the same id with other content is a :class:`~sgam.graph.errors.Conflict`: ids are permanent;
* a new id whose hash the tenant already holds is a **duplicate**: nothing is stored and the
  existing episode's id is returned (``stored_id``). Facts and quarantine entries must then cite
  ``stored_id``; the given id does not exist in the graph.

New episodes carry ``dedupe_key`` (= ``content_hash``) under a uniqueness constraint, so two
concurrent writers of the same content create one node; episodes recorded before that constraint
existed are still found by ``content_hash``.

``status`` starts as ``recorded`` (stored, nothing queued) or ``pending`` (queued for the
background worker, :mod:`sgam.ingest.queue`). Recording a known episode as ``pending`` queues it
if it was only ``recorded``; an episode already queued, processed or failed keeps its status.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import Conflict, InvalidDelta
from .models import Episode
from .steps import InTx, Operation, Records, Statement

# Per-row lookups by key, hinted to seek: a plan made while the label looked empty (after a
# tenant's deletion, say) could scan the index once per row (see ``writes.CHECK_STORED``).
LOOKUP = """
UNWIND $episodes AS ep
OPTIONAL MATCH (byid:Episode {tenant_id: ep.tenant_id, id: ep.id})
  USING INDEX SEEK byid:Episode(tenant_id, id)
CALL (ep) {
  OPTIONAL MATCH (same:Episode {tenant_id: ep.tenant_id, content_hash: ep.content_hash})
    USING INDEX SEEK same:Episode(tenant_id, content_hash)
  RETURN same.id AS same_id ORDER BY same.recorded_at, same.id LIMIT 1
}
RETURN ep.tenant_id AS tenant_id, ep.id AS id, ep.content_hash AS content_hash,
       byid.content_hash AS id_hash, same_id
"""

CREATE = """
UNWIND $episodes AS ep
MERGE (e:Episode {tenant_id: ep.tenant_id, dedupe_key: ep.content_hash})
  ON CREATE SET e += ep {.*, occurred_at: datetime(ep.occurred_at)}, e.recorded_at = $now, e.status = $status
RETURN ep.tenant_id AS tenant_id, ep.id AS id, e.id AS stored_id,
       e.id = ep.id AND e.recorded_at = $now AS created
"""

QUEUE_RECORDED = """
UNWIND $ids AS id
MATCH (e:Episode {tenant_id: $tenant, id: id})
  USING INDEX SEEK e:Episode(tenant_id, id)
WHERE e.status = 'recorded'
SET e.status = 'pending', e.queued_at = $now
"""


@dataclass(frozen=True)
class Recorded:
    """What recording one episode did; ``stored_id`` is the id to cite from now on."""

    tenant_id: str
    id: str
    stored_id: str
    outcome: str
    """``created``, ``existing`` or ``duplicate`` (see the module docstring)."""

    @property
    def created(self) -> bool:
        return self.outcome == "created"


def episode_params(episode: Episode, content_hash: str | None = None) -> dict[str, Any]:
    """An episode's properties for :data:`CREATE`; ``occurred_at`` as an ISO string, converted in
    Cypher (the driver's conversion of a ``datetime`` took 78 us, most of recording an episode)."""
    return {
        "tenant_id": episode.tenant_id,
        "id": episode.id,
        "content": episode.content,
        "kind": episode.kind.value,
        "actor": episode.actor,
        "session_id": episode.session_id,
        "occurred_at": episode.occurred_at.isoformat(),
        "content_hash": episode.content_hash if content_hash is None else content_hash,
    }


def _conflict(episode: Episode) -> Conflict:
    return Conflict(
        f"episode {episode.id!r} of tenant {episode.tenant_id!r} is already recorded with "
        "different content: episode ids are permanent; give the new episode a new id"
    )


def plan_recording(episodes: Sequence[Episode], found: Records) -> tuple[list[Recorded], list[Episode]]:
    """Decide each episode's outcome from what the lookup found; returns the outcomes known now
    and the episodes still to create. Raises :class:`Conflict` for a reused id (nothing is written)."""
    known, to_create = _plan([(e, e.content_hash) for e in episodes], found)
    return known, [e for e, _ in to_create]


def _plan(hashed: Sequence[tuple[Episode, str]],
          found: Records) -> tuple[list[Recorded], list[tuple[Episode, str]]]:
    """:func:`plan_recording` of episodes with their content hashes (each computed once: a
    hash is a JSON encoding and a SHA-256 of the content)."""
    # What the store holds under an id, and which stored episode has a content: two episodes of
    # a batch may share an id (with other content) and must not read each other's answers.
    id_hashes = {(r["tenant_id"], r["id"]): r["id_hash"] for r in found}
    same_ids = {(r["tenant_id"], r["content_hash"]): r["same_id"] for r in found}
    known: list[Recorded] = []
    to_create: dict[tuple[str, str], tuple[Episode, str]] = {}
    hashes: dict[tuple[str, str], str] = {}  # (tenant, content hash) -> id created by this batch
    for episode, content_hash in hashed:
        key = (episode.tenant_id, episode.id)
        id_hash = id_hashes.get(key)
        same_id = same_ids.get((episode.tenant_id, content_hash))
        earlier = to_create.get(key)
        if id_hash is not None or earlier is not None:
            stored_hash = earlier[1] if earlier is not None else id_hash
            if stored_hash != content_hash:
                raise _conflict(episode)
            if earlier is None:
                known.append(Recorded(*key, episode.id, "existing"))
        elif same_id is not None:
            known.append(Recorded(*key, same_id, "duplicate"))
        elif (episode.tenant_id, content_hash) in hashes:
            known.append(Recorded(*key, hashes[(episode.tenant_id, content_hash)], "duplicate"))
        else:
            to_create[key] = (episode, content_hash)
            hashes[(episode.tenant_id, content_hash)] = episode.id
    return known, list(to_create.values())


def record_steps(episodes: Sequence[Episode], now: datetime,
                 status: str = "recorded") -> Generator[Statement, Records, list[Recorded]]:
    """Record ``episodes`` in one transaction; one :class:`Recorded` per distinct (tenant, id),
    in the order given."""
    if status not in ("recorded", "pending"):
        raise InvalidDelta(f"an episode is recorded as 'recorded' or 'pending', not {status!r}")
    hashed = [(e, e.content_hash) for e in episodes]
    found = yield Statement(LOOKUP, {"episodes": [
        {"tenant_id": e.tenant_id, "id": e.id, "content_hash": h} for e, h in hashed
    ]})
    known, to_create = _plan(hashed, found)
    created: list[Recorded] = []
    if to_create:
        rows = yield Statement(CREATE, {"episodes": [episode_params(e, h) for e, h in to_create],
                                        "now": now, "status": status})
        # A concurrent writer may have stored the same content meanwhile: MERGE finds its node.
        for row in rows:
            outcome = "created" if row["created"] else (
                "existing" if row["stored_id"] == row["id"] else "duplicate")
            created.append(Recorded(row["tenant_id"], row["id"], row["stored_id"], outcome))
    order = {(e.tenant_id, e.id): i for i, e in reversed(list(enumerate(episodes)))}
    results = sorted(known + created, key=lambda r: order[(r.tenant_id, r.id)])
    if status == "pending":
        for tenant in sorted({r.tenant_id for r in results}):
            ids = sorted({r.stored_id for r in results if r.tenant_id == tenant and not r.created})
            if ids:
                yield Statement(QUEUE_RECORDED, {"tenant": tenant, "ids": ids, "now": now})
    return results


def record_op(episodes: Sequence[Episode], clock: Callable[[], datetime],
              status: str = "recorded") -> Operation[list[Recorded]]:
    """Store raw episodes, deduplicated by content hash per tenant, in one transaction."""
    if not episodes:
        return []
    recorded: list[Recorded] = yield InTx(lambda: record_steps(episodes, clock(), status))
    return recorded


__all__ = ["Recorded", "episode_params", "plan_recording", "record_op", "record_steps"]

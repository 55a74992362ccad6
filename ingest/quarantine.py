"""The quarantine: candidates the write path refused, kept with the reason until they pass.

Each refused candidate becomes ``(:Quarantine {tenant_id, id, reason, error, stage, episode_id,
extractor, candidate, subjects, created_at, status, attempts})``:

* ``stage`` says where it failed: ``extract`` (the extractor could not produce candidates; the
  candidate is then the extractor's raw output, if any), ``validate`` (not a valid
  :class:`~sgam.graph.models.MemoryDelta`) or ``write`` (the schema or reconciliation refused it,
  e.g. an unknown attribute or a :class:`~sgam.graph.errors.Conflict`);
* ``candidate`` is the candidate as JSON (instants as ISO 8601 strings), with the fields it
  inherited from its episode, so it can be re-validated on its own;
* ``status`` is ``open`` until a replay (:func:`sgam.ingest.pipeline.replay_quarantine`) writes it,
  then ``resolved`` (with ``resolved_at``, ``resolution`` and ``memory_ids``);
* ``subjects`` lists the entity ids the candidate names, so forgetting a subject removes its entries.

An entry's id is a hash of (tenant, episode, extractor, stage, candidate), so processing the same
episode twice, e.g. after a worker crash, stores each refusal once. The named query
``quarantine`` (queries/quarantine.cypher) lists entries.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from typing import Any

from sgam.graph.models import check_id
from sgam.graph.writes import Records, Statement

STAGES = ("extract", "validate", "write")

STORE = """
UNWIND $entries AS q
MERGE (n:Quarantine {tenant_id: q.tenant_id, id: q.id})
  ON CREATE SET n += q, n.created_at = $now, n.status = 'open', n.attempts = 0
"""

RESOLVE = """
UNWIND $rows AS r
MATCH (n:Quarantine {tenant_id: $tenant, id: r.id})
SET n.status = 'resolved', n.resolved_at = $now, n.resolution = r.resolution,
    n.memory_ids = r.memory_ids, n.attempts = coalesce(n.attempts, 0) + 1, n.last_replayed_at = $now
"""

STILL_FAILING = """
UNWIND $rows AS r
MATCH (n:Quarantine {tenant_id: $tenant, id: r.id})
SET n.reason = r.reason, n.error = r.error, n.attempts = coalesce(n.attempts, 0) + 1,
    n.last_replayed_at = $now
"""


@dataclass(frozen=True)
class QuarantineEntry:
    """One refused candidate (see the module docstring)."""

    tenant_id: str
    id: str
    episode_id: str
    extractor: str
    stage: str
    reason: str
    error: str
    candidate: str
    subjects: tuple[str, ...] = ()
    status: str = "open"

    def params(self) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, "id": self.id, "episode_id": self.episode_id,
                "extractor": self.extractor, "stage": self.stage, "reason": self.reason,
                "error": self.error, "candidate": self.candidate, "subjects": list(self.subjects)}

    def candidate_data(self) -> Any:
        return json.loads(self.candidate)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


def candidate_json(candidate: Any) -> str:
    """The candidate as canonical JSON; anything JSON cannot hold is kept as its ``repr``."""
    return json.dumps(candidate, sort_keys=True, ensure_ascii=False, default=_jsonable)


def _subjects(candidate: Any) -> tuple[str, ...]:
    if not isinstance(candidate, dict):
        return ()
    found = []
    for key in ("subject", "value"):
        value = candidate.get(key)
        try:
            if isinstance(value, str):
                found.append(check_id(value.strip()))
        except ValueError:
            continue
    return tuple(dict.fromkeys(found))


def entry(tenant_id: str, episode_id: str, extractor: str, stage: str, reason: str, error: str,
          candidate: Any) -> QuarantineEntry:
    """A quarantine entry with its deterministic id (see the module docstring)."""
    text = candidate_json(candidate)
    basis = [tenant_id, episode_id, extractor, stage, text] + ([reason] if stage == "extract" else [])
    digest = hashlib.sha256("\x1f".join(basis).encode("utf-8")).hexdigest()[:24]
    return QuarantineEntry(tenant_id, f"q-{digest}", episode_id, extractor, stage, reason, error,
                           text, _subjects(candidate))


def store_steps(entries: Sequence[QuarantineEntry], now: datetime) -> Generator[Statement, Records, int]:
    """Store entries (an entry already stored is left as it is); returns how many were given."""
    if entries:
        yield Statement(STORE, {"entries": [e.params() for e in entries], "now": now})
    return len(entries)


def replayed_steps(tenant: str, resolved: Sequence[dict[str, Any]], failing: Sequence[dict[str, Any]],
                   now: datetime) -> Generator[Statement, Records, None]:
    """Mark replayed entries resolved (``id, resolution, memory_ids``) or still failing
    (``id, reason, error``)."""
    if resolved:
        yield Statement(RESOLVE, {"tenant": tenant, "rows": list(resolved), "now": now})
    if failing:
        yield Statement(STILL_FAILING, {"tenant": tenant, "rows": list(failing), "now": now})


def from_record(record: dict[str, Any], tenant: str) -> QuarantineEntry:
    """An entry from a row of the ``quarantine`` named query."""
    return QuarantineEntry(
        tenant_id=tenant, id=record["id"], episode_id=record["episode"],
        extractor=record.get("extractor") or "unknown", stage=record.get("stage") or "write",
        reason=record.get("reason") or "", error=record.get("error") or "",
        candidate=record.get("candidate") or "null", status=record.get("status") or "open",
    )


__all__ = ["QuarantineEntry", "STAGES", "candidate_json", "entry", "from_record", "replayed_steps",
           "store_steps"]

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
* ``subjects`` lists the entity ids the candidate names, so forgetting a subject removes its entries;
* ``visible_to`` (``Schema.readers_of``): a candidate naming a private attribute keeps that
  attribute's readers, like the fact it would have been, and is listed only to them; the episode
  it came from is restricted to them too (``graph/writes.py`` does the same for a written fact).
  An ``extract`` entry holds the extractor's raw reading of its episode, so it is listed to whoever
  may read that episode.

An entry's id is a hash of (tenant, episode, extractor, stage, candidate), so processing the same
episode twice, e.g. after a worker crash, stores each refusal once. The named query
``quarantine`` (queries/quarantine.cypher) lists entries.

**Refusals of replayed deltas** (extractor ``replay``, :func:`refusal`): ``sgam replay`` records
every delta the write path refuses, keyed by the delta's idempotency key (``delta_key``, see
:func:`sgam.graph.reconcile.delta_key`) with the file's ``line``, so replaying the file again
refuses it as before instead of applying it once a later line made it possible. Their id is a
hash of (tenant, ``delta_key``): one entry per statement. Such an entry also carries the
``retention_policy`` of its attribute, so a retention purge removes it with the facts of that
class. A refusal of a delta naming a subject forgotten after the delta's episode occurred is
stored without the candidate, its subjects or a reason that names them (:data:`FORGOTTEN`): a
forget must not be undone by storing what it erased again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from typing import Any

from sgam.graph.models import MemoryDelta, check_id, shown
from sgam.graph.schema import Schema
from sgam.graph.steps import Records, Statement
from sgam.graph.writes import RESTRICT_EPISODES

STAGES = ("extract", "validate", "write")

REPLAY = "replay"
"""The extractor name of the refusals ``sgam replay`` records."""

FORGOTTEN = ("a subject this delta names was forgotten after its episode occurred: facts from such "
             "episodes are refused (the candidate is not kept, to keep the subject forgotten)")

# An entry naming a subject forgotten after its episode occurred is not stored: it would bring
# back what the forget erased (the worker may process an episode queued before the forget).
STORE = """
UNWIND $entries AS q
OPTIONAL MATCH (ep:Episode {tenant_id: q.tenant_id, id: q.episode_id})
WITH q, ep WHERE NOT EXISTS {
  MATCH (t:Tombstone {tenant_id: q.tenant_id})
  WHERE t.subject IN q.subjects AND (ep IS NULL OR t.forgotten_at > ep.occurred_at)
}
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
    line: int | None = None
    """The line of the replayed file (entries of ``sgam replay`` only)."""
    visible_to: tuple[str, ...] | None = None
    """Who may read this entry as listed (see the module docstring); ``None``: everyone."""

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
    """The candidate as canonical JSON; anything JSON cannot hold is kept as its ``repr``.

    Text with a lone surrogate (which the store cannot hold) is written with ``\\u`` escapes,
    which read back the same; a candidate the encoder cannot take at all (nested too deep, keys
    that do not sort) is kept as its abridged ``repr``, a JSON string.
    """
    try:
        text = json.dumps(candidate, sort_keys=True, ensure_ascii=False, default=_jsonable)
    except (RecursionError, TypeError, ValueError):
        return json.dumps(shown(candidate))
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(candidate, sort_keys=True, default=_jsonable)
    return text


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


def restrict_steps(rows: Sequence[tuple[str, str, tuple[str, ...] | None]]
                   ) -> Generator[Statement, Records, None]:
    """Restrict episodes ``(tenant, id, readers)`` that stated a private value to its readers
    (rows with readers ``None`` are left alone)."""
    episodes = [{"tenant_id": t, "id": e, "readers": list(r)} for t, e, r in rows if r is not None]
    if episodes:
        yield Statement(RESTRICT_EPISODES, {"episodes": episodes})


def entry(tenant_id: str, episode_id: str, extractor: str, stage: str, reason: str, error: str,
          candidate: Any) -> QuarantineEntry:
    """A quarantine entry with its deterministic id (see the module docstring)."""
    text = candidate_json(candidate)
    basis = [tenant_id, episode_id, extractor, stage, text] + ([reason] if stage == "extract" else [])
    digest = hashlib.sha256("\x1f".join(basis).encode("utf-8")).hexdigest()[:24]
    return QuarantineEntry(tenant_id, f"q-{digest}", episode_id, extractor, stage, reason, error,
                           text, _subjects(candidate))


# The tombstone test is the write path's rule (graph/writes.py, _check_forgotten) over every id the
# record names: a delta whose episode occurred before one of its subjects was forgotten is refused
# on every replay, and its record must not keep what the forget erased. Without the episode's
# time (a delta citing another episode) any tombstone counts: redacting too much only shortens
# the record.
STORE_REFUSALS = """
UNWIND $entries AS r
WITH r, EXISTS {
  MATCH (t:Tombstone {tenant_id: r.props.tenant_id})
  WHERE t.subject IN r.props.subjects AND (r.occurred_at IS NULL OR t.forgotten_at > r.occurred_at)
} AS forgotten
MERGE (n:Quarantine {tenant_id: r.props.tenant_id, id: r.props.id})
  ON CREATE SET n += CASE WHEN forgotten THEN r.redacted ELSE r.props END,
                n.created_at = $now, n.status = 'open', n.attempts = 0
"""

REFUSALS_OF = """
UNWIND $keys AS k
MATCH (n:Quarantine {tenant_id: k.tenant_id, delta_key: k.key})
WHERE n.status = 'open' AND n.extractor = $extractor
RETURN k.key AS key, n.line AS line, n.reason AS reason, n.error AS error
"""


@dataclass(frozen=True)
class Refusal:
    """A recorded refusal of a replayed delta (see the module docstring)."""

    entry: QuarantineEntry
    delta_key: str
    occurred_at: datetime | None
    retention_policy: str | None = None

    def params(self, visible_to: tuple[str, ...] | None) -> dict[str, Any]:
        props = {**self.entry.params(), "delta_key": self.delta_key, "line": self.entry.line,
                 "retention_policy": self.retention_policy,
                 "visible_to": None if visible_to is None else list(visible_to)}
        redacted = {**props, "reason": FORGOTTEN, "candidate": "null", "subjects": []}
        return {"props": props, "redacted": redacted, "occurred_at": self.occurred_at}


def refusal(delta: MemoryDelta, key: str, line: int, reason: str, error: str,
            occurred_at: datetime | None, retention_policy: str | None = None) -> Refusal:
    """The record of a replayed ``delta`` the write path refused (``key``: its idempotency key;
    ``occurred_at``: when its episode occurred, if known)."""
    digest = hashlib.sha256("\x1f".join([delta.tenant_id, REPLAY, key]).encode("utf-8")).hexdigest()[:24]
    candidate = delta.model_dump(mode="json")
    made = QuarantineEntry(delta.tenant_id, f"q-{digest}", delta.source_episode_id, REPLAY, "write",
                           reason, error, candidate_json(candidate), _subjects(candidate), line=line)
    return Refusal(made, key, occurred_at, retention_policy)


def store_refusals_steps(refusals: Sequence[Refusal], now: datetime,
                         schema: Schema) -> Generator[Statement, Records, None]:
    """Store refusal records (one already stored for the same statement is left as it is), each
    readable as ``schema`` says (see the module docstring)."""
    if refusals:
        readers = [schema.readers_of(r.entry.candidate_data()) for r in refusals]
        yield Statement(STORE_REFUSALS, {"entries": [r.params(v) for r, v in zip(refusals, readers)],
                                         "now": now})
        yield from restrict_steps([(r.entry.tenant_id, r.entry.episode_id, v)
                                   for r, v in zip(refusals, readers)])


def refusals_of(keys: Sequence[tuple[str, str]]) -> Statement:
    """The open refusal records of ``keys`` ((tenant, delta key) pairs): key, line, reason, error."""
    return Statement(REFUSALS_OF, {"keys": [{"tenant_id": t, "key": k} for t, k in keys],
                                   "extractor": REPLAY})


def store_steps(entries: Sequence[QuarantineEntry], now: datetime,
                schema: Schema) -> Generator[Statement, Records, int]:
    """Store entries (an entry already stored is left as it is), each readable as ``schema``
    says (see the module docstring); returns how many were given."""
    if entries:
        readers = [schema.readers_of(e.candidate_data()) for e in entries]
        rows = [{**e.params(), "visible_to": None if v is None else list(v)}
                for e, v in zip(entries, readers)]
        yield Statement(STORE, {"entries": rows, "now": now})
        yield from restrict_steps([(e.tenant_id, e.episode_id, v) for e, v in zip(entries, readers)])
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
        line=record.get("line"),
        visible_to=None if record.get("readers") is None else tuple(record["readers"]),
    )


__all__ = ["FORGOTTEN", "QuarantineEntry", "REPLAY", "Refusal", "STAGES", "candidate_json", "entry",
           "from_record", "refusal", "refusals_of", "replayed_steps", "restrict_steps",
           "store_refusals_steps", "store_steps"]

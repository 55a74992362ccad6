"""A subject access export: everything the store holds about one subject (statements; ``store`` runs them).

One read transaction, so the parts agree with each other:

* ``entity``: the subject's node (without its embedding);
* ``facts``: every row about it, every version, retired ones and candidates included, with its
  provenance fields (source and supporting episodes, ``asserted_by``, ``recorded_at``/``expired_at``,
  what it supersedes and revises); ``candidates`` repeats the pending ones;
* ``facts_pointing_here``: relation facts of other subjects whose target it is;
* ``episodes``: the episodes that mention it (``MENTIONS``) or that its facts cite;
* ``statements``: its slots' ledgers (the statements the believed rows derive from);
* ``quarantine``: refused candidates that name it; ``deletions`` and ``tombstone``: the records
  of what was deleted or forgotten about it (ids and counts only);
* ``aliases``: the other names it goes by (as given, when and by whom); ``merges``: the records of
  merges it was kept or dropped in (who, when, why, split or not; not the statements they moved).

Reads are the reader's (``principal``, as every read): private facts, their statements, their
episodes and refused candidates of private attributes reach only the principals their attribute
names; ``"*"`` reads everything. A subject the tenant holds nothing about is :class:`NotFound`.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from datetime import datetime
from typing import Any

from .errors import NotFound
from .schema import Schema
from .steps import Records, Statement
from .codec import native

_READABLE = "(%s.visible_to IS NULL OR $principal = '*' OR $principal IN %s.visible_to)"

SUBJECT = """
OPTIONAL MATCH (e:Entity {tenant_id: $tenant, id: $subject})
OPTIONAL MATCH (t:Tombstone {tenant_id: $tenant, subject: $subject})
RETURN CASE WHEN e IS NULL THEN null ELSE properties(e) END AS entity, labels(e) AS labels,
       CASE WHEN t IS NULL THEN null ELSE properties(t) END AS tombstone
"""

FACTS = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->()
WHERE f.memory_id IS NOT NULL AND %s
RETURN type(f) AS rel_type, properties(f) AS fact
ORDER BY f.attribute, f.recorded_at, f.valid_from, f.memory_id
""" % (_READABLE % ("f", "f"))

POINTING_HERE = """
MATCH (s:Entity {tenant_id: $tenant})-[f]->(:Entity {tenant_id: $tenant, id: $subject})
WHERE f.memory_id IS NOT NULL AND %s
RETURN s.id AS from, type(f) AS rel_type, properties(f) AS fact
ORDER BY from, f.attribute, f.recorded_at, f.memory_id
""" % (_READABLE % ("f", "f"))

EPISODES = """
CALL () {
  MATCH (ep:Episode)-[:MENTIONS]->(:Entity {tenant_id: $tenant, id: $subject})
  RETURN ep
  UNION
  UNWIND $cited AS id
  MATCH (ep:Episode {tenant_id: $tenant, id: id})
  RETURN ep
}
WITH ep WHERE %s
RETURN properties(ep) AS episode
ORDER BY ep.occurred_at, ep.id
""" % (_READABLE % ("ep", "ep"))

LEDGERS = """
MATCH (l:Ledger {tenant_id: $tenant, subject: $subject})
RETURN l.attribute AS attribute, l.points AS points
ORDER BY attribute
"""

QUARANTINE = """
MATCH (q:Quarantine {tenant_id: $tenant})
WHERE $subject IN coalesce(q.subjects, [])
RETURN properties(q) AS entry
ORDER BY q.created_at, q.id
"""

DELETIONS = """
MATCH (d:Deletion {tenant_id: $tenant})
WHERE d.target_subject = $subject OR any(s IN coalesce(d.slots, []) WHERE s STARTS WITH $subject + '|')
RETURN properties(d) AS record
ORDER BY d.deleted_at, d.id
"""

# Vectors are derived from the text (which is exported), not something said about the subject.
ALIASES = """
MATCH (a:Alias)-[:ALIAS_OF]->(:Entity {tenant_id: $tenant, id: $subject})
RETURN a {.name, .key, .added_at, .added_by} AS alias
ORDER BY a.key
"""

# A merge record's audit fields: its slot changes hold statements, which the facts export already.
MERGES = """
MATCH (m:Merge {tenant_id: $tenant})
WHERE m.kept = $subject OR m.dropped = $subject
RETURN m {.id, .kept, .dropped, .status, .merged_at, .merged_by, .reason, .split_at, .split_by, .split_reason,
          .retired, .created} AS record
ORDER BY m.merged_at
"""

_LEFT_OUT = ("embedding",)


def _plain(props: dict[str, Any] | None) -> dict[str, Any] | None:
    if props is None:
        return None
    return {k: native(v) for k, v in sorted(props.items()) if k not in _LEFT_OUT}


def _readable(schema: Schema, attribute: Any, subject: str, principal: str | None) -> bool:
    """Whether ``principal`` may read ``attribute`` of ``subject`` (an unknown one: admin only)."""
    spec = schema.attributes.get(attribute) if isinstance(attribute, str) else None
    if principal == "*":
        return True
    if spec is None:
        return attribute is None
    readers = spec.visible_to(subject)
    return readers is None or principal in readers


def _refusal_readable(schema: Schema, entry: dict[str, Any], principal: str | None) -> bool:
    try:
        candidate = json.loads(entry.get("candidate") or "null")
    except ValueError:
        candidate = None
    if not isinstance(candidate, dict):
        return True
    return _readable(schema, candidate.get("attribute"), str(candidate.get("subject")), principal)


def export_steps(tenant: str, subject: str, principal: str | None, schema: Schema,
                 now: datetime) -> Generator[Statement, Records, dict[str, Any]]:
    """The export (see the module docstring), values as Python objects (instants as datetimes)."""
    params: dict[str, Any] = {"tenant": tenant, "subject": subject, "principal": principal}
    [found] = yield Statement(SUBJECT, params)
    rows = yield Statement(FACTS, params)
    facts = [{"rel_type": r["rel_type"], **(_plain(r["fact"]) or {})} for r in rows]
    rows = yield Statement(POINTING_HERE, params)
    pointing = [{"from": r["from"], "rel_type": r["rel_type"], **(_plain(r["fact"]) or {})} for r in rows]
    cited = sorted({e for f in facts + pointing
                    for e in [f.get("source_episode_id"), f.get("expired_by_episode_id"),
                              f.get("confirmed_by_episode_id"), *(f.get("support_episodes") or [])] if e})
    rows = yield Statement(EPISODES, {**params, "cited": cited})
    episodes = [_plain(r["episode"]) for r in rows]
    ledgers = yield Statement(LEDGERS, params)
    rows = yield Statement(QUARANTINE, params)
    refused = [q for q in (_plain(r["entry"]) for r in rows) if q is not None]
    rows = yield Statement(DELETIONS, params)
    deletions = [_plain(r["record"]) for r in rows]
    aliases = [_plain(r["alias"]) for r in (yield Statement(ALIASES, params))]
    merges = [_plain(r["record"]) for r in (yield Statement(MERGES, params))]
    if found["entity"] is None and not refused and not ledgers:
        raise NotFound(f"tenant {tenant!r} holds nothing about subject {subject!r}: no entity, facts, "
                       "statements or quarantine entries (check the tenant and the subject id)")
    entity = _plain(found["entity"])
    if entity is not None:
        entity["labels"] = sorted(found["labels"] or ())
    return {
        "tenant_id": tenant, "subject": subject, "principal": principal, "exported_at": now,
        "entity": entity, "facts": facts,
        "candidates": [f for f in facts if f.get("status") == "candidate" and f.get("expired_at") is None],
        "facts_pointing_here": pointing, "episodes": episodes,
        "statements": {r["attribute"]: [json.loads(p) for p in r["points"] or ()] for r in ledgers
                       if _readable(schema, r["attribute"], subject, principal)},
        "quarantine": [q for q in refused if _refusal_readable(schema, q, principal)],
        "deletions": deletions, "tombstone": _plain(found["tombstone"]), "aliases": aliases, "merges": merges,
    }


__all__ = ["export_steps"]

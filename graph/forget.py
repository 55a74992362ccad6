"""Forgetting a subject: erase it completely and leave a tombstone (statements; ``store`` runs them).

``forget_steps`` is one write transaction:

1. take the subject's lock and note which episodes mention it;
2. delete every fact about it in both directions (its own facts, and relation facts pointing at
   it, such as a customer's ``HOLDS`` of a forgotten account), its value nodes and the entity;
3. delete the episodes that mention only it, and redact those that also mention others (their
   text is replaced; ids and times stay so other facts keep their provenance), and the quarantine
   entries that name the subject or came from those episodes (refusals recorded by ``sgam replay``
   included; a subject known only from such entries can be forgotten too);
4. leave ``(:Tombstone {tenant_id, subject, forgotten_at})``: the write path refuses facts about
   the subject justified by an episode that occurred before it was forgotten, so re-extracting
   an old episode cannot bring it back.

The named query ``residue`` (queries/residue.cypher) proves nothing is left.
"""

from __future__ import annotations

import json

from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import NotFound
from .writes import Records, Statement

REDACTED = "[redacted: this episode mentioned a forgotten subject]"

# ``refused``: quarantine entries naming the subject, which may exist without the entity (a delta
# refused before it was ever written, e.g. by ``sgam replay``); they alone are worth a forget too.
LOCK_SUBJECT = """
OPTIONAL MATCH (e:Entity {tenant_id: $tenant, id: $subject})
SET e.updated_at = $now
WITH e
OPTIONAL MATCH (ep:Episode)-[:MENTIONS]->(e)
WITH e, ep, CASE WHEN ep IS NULL THEN 0 ELSE COUNT { (ep)-[:MENTIONS]->(other) WHERE other <> e } END AS others
RETURN count(DISTINCT e) AS subjects,
       COUNT { MATCH (q:Quarantine {tenant_id: $tenant}) WHERE $subject IN coalesce(q.subjects, []) } AS refused,
       collect(CASE WHEN ep IS NOT NULL AND others = 0 THEN ep.id END) AS only,
       collect(CASE WHEN others > 0 THEN ep.id END) AS shared
"""

DELETE_FACTS = """
MATCH (e:Entity {tenant_id: $tenant, id: $subject})
OPTIONAL MATCH (e)-[f]-()
WHERE f.memory_id IS NOT NULL
WITH e, collect(f) AS facts
FOREACH (f IN facts | DELETE f)
WITH e
OPTIONAL MATCH (v:Value {tenant_id: $tenant}) WHERE v.key STARTS WITH $subject + '|'
DETACH DELETE v
WITH DISTINCT e
DETACH DELETE e
RETURN count(*) AS deleted
"""

DELETE_EPISODES = """
UNWIND $only AS id
MATCH (ep:Episode {tenant_id: $tenant, id: id})
DETACH DELETE ep
"""

REDACT_EPISODES = """
UNWIND $shared AS id
MATCH (ep:Episode {tenant_id: $tenant, id: id})
SET ep.content = $redacted, ep.redacted_at = $now, ep.embedding = null
"""

# Refused candidates naming the subject, or from an episode deleted or redacted here.
DELETE_QUARANTINE = """
MATCH (q:Quarantine {tenant_id: $tenant})
WHERE $subject IN coalesce(q.subjects, []) OR q.episode_id IN $only + $shared
DETACH DELETE q
"""

# The subject's statements, and the statements of other slots that name it as their value (a
# relation pointing at it): those slots are rebuilt from their remaining rows on their next write.
DELETE_LEDGERS = """
MATCH (l:Ledger {tenant_id: $tenant})
WHERE l.subject = $subject OR any(p IN l.points WHERE p CONTAINS $quoted)
DETACH DELETE l
"""

TOMBSTONE = """
MERGE (t:Tombstone {tenant_id: $tenant, subject: $subject})
SET t.forgotten_at = $now, t.episodes_deleted = size($only), t.episodes_redacted = size($shared)
"""



@dataclass(frozen=True)
class ForgetReport:
    """What ``forget_subject`` removed."""

    tenant_id: str
    subject: str
    episodes_deleted: tuple[str, ...]
    episodes_redacted: tuple[str, ...]
    forgotten_at: datetime


def forget_steps(tenant: str, subject: str, now: datetime) -> Generator[Statement, Records, ForgetReport]:
    """The whole erasure as one transaction (see the module docstring)."""
    params: dict[str, Any] = {"tenant": tenant, "subject": subject, "now": now}
    found = yield Statement(LOCK_SUBJECT, params)
    if not found or (found[0]["subjects"] == 0 and found[0]["refused"] == 0):
        raise NotFound(f"tenant {tenant!r} has no subject {subject!r} to forget")
    only = [i for i in found[0]["only"] if i]
    shared = [i for i in found[0]["shared"] if i]
    params.update(only=only, shared=shared, redacted=REDACTED)
    yield Statement(DELETE_FACTS, params)
    yield Statement(DELETE_EPISODES, params)
    yield Statement(REDACT_EPISODES, params)
    yield Statement(DELETE_QUARANTINE, params)
    yield Statement(DELETE_LEDGERS, {**params, "quoted": json.dumps(subject)})
    yield Statement(TOMBSTONE, params)
    return ForgetReport(tenant, subject, tuple(only), tuple(shared), now)

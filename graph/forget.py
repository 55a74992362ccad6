"""Forgetting a subject: erase every trace of it and leave a tombstone (statements; ``store`` runs them).

``forget_steps`` is one write transaction:

1. take the subject's lock and gather its *terms*: what names it (its id, its stored name, the
   ``subject_name`` of refused deltas about it) and its *erased values* (its own string, date and
   datetime values of at least four characters that no other subject's fact holds);
2. find every node and relationship of the tenant whose text names the subject (every string
   property and list of strings, JSON included; see :mod:`sgam.graph.names` for what "names"
   means), and the episodes it was in (linked by ``MENTIONS`` or cited by its facts);
3. delete its entity, its facts in both directions (its own, and relation facts pointing at it),
   its value nodes and the statements of its slots (``Ledger``); delete the facts of other subjects
   whose value names it (with their value nodes), the quarantine entries and extraction trails that
   name it or came from its episodes, and the ledgers whose statements name it (rebuilt from the
   remaining rows on their slot's next write);
4. delete the episodes it was the only subject of (linked to it or cited by its facts, linked to no
   other entity), unless a remaining fact cites them, and redact the others that name it or that
   it was in, queued ones included. In each, every span naming a term or an erased value becomes
   ``[redacted]`` (content, actor, session and every other text property), queued deltas that
   name it are dropped and the embedding is cleared. The content hash stays: replaying the
   original episode finds it, and the tombstone refuses its deltas. Any other property naming it
   is redacted in place;
5. leave ``(:Tombstone {tenant_id, subject, forgotten_at, forgotten_by, reason, counts})``, the
   audit record of the erasure, which holds no erased content: the write path refuses facts about
   the subject justified by an episode that occurred before it was forgotten, so re-extracting
   an old episode cannot bring it back. The tombstone keeps salted hashes of the terms and the ids
   of the redacted episodes (never the terms), so :mod:`sgam.graph.residue` can prove later that
   nothing naming the subject is left.

Keys are not rewritten (ids, memory ids, delta keys): an episode whose id names the subject is
redacted but keeps its id, which :mod:`sgam.graph.residue` reports.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .deletion import DELETE_FACTS, DELETE_NODES, LOCK_SUBJECTS
from .errors import Conflict, NotFound
from .names import Terms, term_hash
from .steps import InTx, Operation, Records, Statement

MIN_VALUE_CHARS = 4
"""Shorter values (``yes``, ``12``) are not searched for in text: they name nothing."""

VALUE_TYPES = ("string", "date", "datetime")
"""The value types whose values are erased from text; numbers, booleans and enum members are
not personal on their own, and relation targets name other subjects."""

# Text properties that are keys or vocabulary: never rewritten (a key naming the subject is
# reported by the residue check instead).
KEYS = frozenset({
    "id", "tenant_id", "status", "kind", "type", "memory_id", "subject", "attribute", "value_key",
    "value_type", "memory_type", "retention_policy", "op", "key", "dedupe_key", "content_hash",
    "delta_key", "delta_keys", "episode_id", "source_episode_id", "expired_by_episode_id",
    "supersedes_memory_id", "revises_memory_id", "support_episodes", "embedding_model", "stage",
    "extractor", "claimed_by",
})

# ``refused``: quarantine entries naming the subject, which may exist without the entity (a delta
# refused before it was ever written, e.g. by ``sgam replay``); they alone are worth a forget too.
GATHER = """
OPTIONAL MATCH (e:Entity {tenant_id: $tenant, id: $subject})
OPTIONAL MATCH (ep:Episode)-[:MENTIONS]->(e)
WITH e, ep, CASE WHEN ep IS NULL THEN 0 ELSE COUNT { (ep)-[:MENTIONS]->(other) WHERE other <> e } END AS others
WITH e, collect(CASE WHEN ep IS NOT NULL AND others = 0 THEN ep.id END) AS only,
     collect(CASE WHEN others > 0 THEN ep.id END) AS shared
RETURN count(e) AS subjects, e.name AS name, e.merged_into AS merged_into, only, shared,
       COLLECT { MATCH (a:Alias)-[:ALIAS_OF]->(e) RETURN a.name } AS aliases,
       COLLECT { MATCH (h:Entity {tenant_id: $tenant, merged_into: $subject}) RETURN h.id } AS merged,
       COUNT { (e)-[f]-() WHERE f.memory_id IS NOT NULL } AS facts,
       COLLECT { MATCH (q:Quarantine {tenant_id: $tenant}) WHERE $subject IN coalesce(q.subjects, [])
                 RETURN q.candidate } AS refused,
       COLLECT { MATCH (e)-[f]->() WHERE f.memory_id IS NOT NULL AND f.value_type IN $types
                 RETURN DISTINCT toString(f.value) } AS values,
       COLLECT { MATCH (e)-[f]-() WHERE f.memory_id IS NOT NULL
                 UNWIND [f.source_episode_id, f.expired_by_episode_id] + coalesce(f.support_episodes, []) AS id
                 WITH id WHERE id IS NOT NULL RETURN DISTINCT id } AS cited
"""

# The subject's values that another subject's fact also holds: not the subject's to erase. A fact
# leaves its subject's entity, so the tenant's entities (an index seek) lead to every one of its
# facts; a match on the relationships alone read every relationship of the database.
HELD_ELSEWHERE = """
MATCH (:Entity {tenant_id: $tenant})-[f]->()
WHERE f.tenant_id = $tenant AND f.memory_id IS NOT NULL AND f.subject <> $subject
  AND toString(f.value) IN $values
RETURN collect(DISTINCT toString(f.value)) AS held
"""

# Candidates for naming the subject: a text property containing one of the needles (a word of a
# term, lower-cased), or an episode it was in. Python decides on the exact word match.
_TEXTS = """[k IN keys(x) WHERE x[k] IS :: STRING OR x[k] IS :: LIST<STRING NOT NULL> | [k, x[k]]]"""
_NAMES_A_NEEDLE = """any(p IN texts WHERE any(needle IN $needles WHERE
    toLower(CASE WHEN p[1] IS :: STRING THEN p[1] ELSE reduce(s = '', t IN p[1] | s + ' ' + t) END)
    CONTAINS needle))"""

SCAN_NODES = f"""
MATCH (x) WHERE x.tenant_id = $tenant AND NOT x:Tombstone AND NOT (x:Entity AND x.id = $subject)
WITH x, {_TEXTS} AS texts
WHERE (x:Episode AND x.id IN $episodes) OR {_NAMES_A_NEEDLE}
RETURN elementId(x) AS eid, labels(x) AS labels, x.id AS id, texts,
       CASE WHEN x:Episode THEN COUNT {{ (x)-[:MENTIONS]->(o:Entity) WHERE o.id <> $subject }} END AS mentions
"""

SCAN_RELATIONSHIPS = f"""
MATCH (a)-[x]->(b)
WHERE a.tenant_id = $tenant AND NOT (a:Entity AND a.id = $subject) AND NOT (b:Entity AND b.id = $subject)
WITH x, {_TEXTS} AS texts
WHERE {_NAMES_A_NEEDLE}
RETURN elementId(x) AS eid, type(x) AS type, x.memory_id AS memory_id, texts
"""

# Episodes a fact that stays cites (so they are redacted rather than deleted); from the tenant's
# entities, as HELD_ELSEWHERE.
CITED_BY_OTHERS = """
MATCH (a:Entity {tenant_id: $tenant})-[f]->(b)
WHERE f.tenant_id = $tenant AND f.memory_id IS NOT NULL AND NOT f.memory_id IN $dropped
  AND a.id <> $subject AND NOT (b:Entity AND b.id = $subject)
UNWIND [f.source_episode_id, f.expired_by_episode_id] + coalesce(f.support_episodes, []) AS id
WITH id WHERE id IN $episodes
RETURN collect(DISTINCT id) AS cited
"""

# The subject's aliases, the entities merged into it (their retired rows are its history) and the
# records of those merges (they hold the merged statements), before the entities go.
DELETE_MERGED = """
CALL () {
  UNWIND [$subject] + $merged AS id
  MATCH (e:Entity {tenant_id: $tenant, id: id})
  MATCH (a:Alias)-[:ALIAS_OF]->(e)
  DETACH DELETE a
}
CALL () {
  MATCH (m:Merge {tenant_id: $tenant})
  WHERE m.kept = $subject OR m.dropped = $subject OR m.dropped IN $merged
  DETACH DELETE m
}
"""

DELETE_SUBJECT = """
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

REWRITE_NODES = """
UNWIND $rows AS row
MATCH (x) WHERE elementId(x) = row.eid
SET x += row.props
"""

REWRITE_RELATIONSHIPS = """
UNWIND $rows AS row
MATCH ()-[x]->() WHERE elementId(x) = row.eid
SET x += row.props
"""

# Refused candidates and extraction trails (which quote their episode) from an episode deleted or
# redacted here (those naming the subject, and the ledgers whose statements name it, went with the
# nodes the scan found), and the statements of the subject's own slots.
DELETE_BY_SUBJECT = """
CALL () {
  MATCH (q:Quarantine {tenant_id: $tenant})
  WHERE $subject IN coalesce(q.subjects, []) OR q.episode_id IN $episodes
  DETACH DELETE q
}
CALL () {
  MATCH (l:Ledger {tenant_id: $tenant, subject: $subject})
  DETACH DELETE l
}
CALL () {
  MATCH (x:Extraction {tenant_id: $tenant})
  WHERE $subject IN coalesce(x.subjects, []) OR x.episode_id IN $episodes
  DETACH DELETE x
}
"""

TOMBSTONE = """
MERGE (t:Tombstone {tenant_id: $tenant, subject: $subject})
SET t.forgotten_at = $now, t.forgotten_by = $actor, t.reason = $reason, t.facts_deleted = $facts, t.episodes_deleted = size($deleted), t.episodes_redacted = size($redacted),
    t.redacted_episodes = $redacted, t.salt = $salt, t.name_hashes = $name_hashes,
    t.value_hashes = $value_hashes, t.max_words = $max_words
"""


@dataclass(frozen=True)
class ForgetReport:
    """What ``forget_subject`` removed."""

    tenant_id: str
    subject: str
    episodes_deleted: tuple[str, ...]
    episodes_redacted: tuple[str, ...]
    forgotten_at: datetime
    facts_deleted: int = 0
    """Facts of *other* subjects deleted because their value named the subject."""
    redacted: int = 0
    """Other nodes and facts whose text naming the subject was redacted in place."""
    facts: int = 0
    """The subject's own facts (every version) and relation facts pointing at it."""
    dry_run: bool = False
    """Nothing was changed: this is what a forget would do."""
    actor: str | None = None


def _names(subject: str, name: str | None, refused: Iterable[str | None]) -> list[str]:
    names = [subject] + ([name] if name else [])
    for text in refused:
        try:
            data = json.loads(text or "null")
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("subject") == subject and isinstance(data.get("subject_name"), str):
            names.append(data["subject_name"])
    return list(dict.fromkeys(names))


def _needles(terms: Terms) -> list[str]:
    # The longest word of each term, lower-cased as Cypher's toLower does (a prefilter only).
    return sorted({max(seq, key=len).lower() for seq in terms.sequences})


def _rewrite(value: Any, terms: Terms) -> Any:
    if isinstance(value, str):
        return terms.redact(value)
    return [terms.redact(v) for v in value]


def _names_in(value: Any, terms: Terms) -> bool:
    return any(terms.named_in(v) for v in ([value] if isinstance(value, str) else value))


def _json_strings(data: Any) -> Iterable[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield str(k)
            yield from _json_strings(v)
    elif isinstance(data, list):
        for v in data:
            yield from _json_strings(v)


def _queued_deltas(text: str, terms: Terms) -> str | None:
    """A queued episode's deltas without those that name the subject (``None`` if none is left)."""
    try:
        deltas = json.loads(text)
    except ValueError:
        return terms.redact(text)
    if not isinstance(deltas, list):
        deltas = [deltas]
    kept = [d for d in deltas if not any(terms.named_in(s) for s in _json_strings(d))]
    return json.dumps(kept, sort_keys=True, ensure_ascii=False) if kept else None


def _redacted_texts(texts: list[list[Any]], terms: Terms) -> dict[str, Any]:
    return {k: _rewrite(v, terms) for k, v in texts if k not in KEYS and _names_in(v, terms)}


def forget_steps(tenant: str, subject: str, now: datetime, *, dry_run: bool = False,
                 actor: str | None = None, reason: str | None = None
                 ) -> Generator[Statement, Records, ForgetReport]:
    """The whole erasure as one transaction (see the module docstring). A ``dry_run`` reads only
    (run it in a read transaction) and reports what the erasure would do; ``actor`` and ``reason``
    go to the tombstone (the reason with any span naming the subject redacted)."""
    params: dict[str, Any] = {"tenant": tenant, "subject": subject, "now": now}
    if not dry_run:
        yield Statement(LOCK_SUBJECTS, {**params, "subjects": [subject]})
    [found] = yield Statement(GATHER, {**params, "types": list(VALUE_TYPES)})
    if found["subjects"] == 0 and not found["refused"]:
        raise NotFound(f"tenant {tenant!r} has no subject {subject!r} to forget")
    if found["merged_into"] is not None:
        raise Conflict(f"{subject!r} of tenant {tenant!r} was merged into {found['merged_into']!r}: forget "
                       f"{found['merged_into']!r}, which holds its facts now (and erases them)")
    merged = list(found["merged"])
    names = Terms(_names(subject, found["name"], found["refused"]) + found["aliases"] + merged)
    values = [v for v in found["values"] if len(v.strip()) >= MIN_VALUE_CHARS]
    if values:
        [held] = yield Statement(HELD_ELSEWHERE, {**params, "values": values})
        values = [v for v in values if v not in set(held["held"])]
    everything = Terms([*(" ".join(s) for s in names.sequences), *values])
    mentioned = [i for i in found["only"] + found["shared"] if i]
    about = list(dict.fromkeys(mentioned + found["cited"]))
    scan = {**params, "needles": _needles(names), "episodes": about}
    nodes = yield Statement(SCAN_NODES, scan)
    relationships = yield Statement(SCAN_RELATIONSHIPS, scan)

    drop_nodes: list[str] = []
    drop_relationships: list[str] = []
    dropped_facts: list[str] = []
    node_rows: list[dict[str, Any]] = []
    relationship_rows: list[dict[str, Any]] = []
    for r in relationships:
        texts = dict(r["texts"])
        if r["memory_id"] is not None and isinstance(texts.get("value"), str) and names.named_in(texts["value"]):
            drop_relationships.append(r["eid"])
            dropped_facts.append(r["memory_id"])
        elif props := _redacted_texts(r["texts"], names):
            relationship_rows.append({"eid": r["eid"], "props": props})
    episodes = {r["id"]: r for r in nodes if "Episode" in r["labels"]}
    for r in nodes:
        if "Episode" in r["labels"]:
            continue
        if "ReadAudit" in r["labels"] and dict(r["texts"]).get("subject") == subject:
            # The record of reads of its facts goes with them; a record of the subject reading
            # someone else's stays, its principal redacted like any other text naming it.
            drop_nodes.append(r["eid"])
        elif {"Value", "Quarantine", "Ledger", "Extraction", "Alias", "Merge"} & set(r["labels"]):
            if any(_names_in(v, names) for _, v in r["texts"]):
                drop_nodes.append(r["eid"])
        elif props := _redacted_texts(r["texts"], names):
            # Its vector was computed from the text that named the subject.
            node_rows.append({"eid": r["eid"], "props": {**props, "embedding": None, "embedding_model": None}})
    # An episode that names the subject without a MENTIONS link is treated as one it was in.
    involved = [i for i, r in episodes.items()
                if i in about or any(_names_in(v, names) for _, v in r["texts"])]
    [cited] = yield Statement(CITED_BY_OTHERS, {**params, "dropped": dropped_facts, "episodes": involved})
    kept = set(cited["cited"])
    deleted = [i for i in involved if i in about and episodes[i]["mentions"] == 0 and i not in kept]
    redacted = [i for i in involved if i not in set(deleted)]
    drop_nodes += [episodes[i]["eid"] for i in deleted]
    for i in redacted:
        texts = dict(episodes[i]["texts"])
        props = _redacted_texts(episodes[i]["texts"], everything)
        if "deltas" in texts:
            props["deltas"] = _queued_deltas(texts["deltas"], everything)
        props.update(embedding=None, embedding_model=None, redacted_at=now)
        node_rows.append({"eid": episodes[i]["eid"], "props": props})

    report = ForgetReport(tenant, subject, tuple(deleted), tuple(redacted), now,
                          facts_deleted=len(dropped_facts), redacted=len(node_rows) + len(relationship_rows),
                          facts=found["facts"], dry_run=dry_run, actor=actor)
    if dry_run:
        return report
    yield Statement(DELETE_MERGED, {**params, "merged": merged})
    for husk in [subject, *merged]:
        yield Statement(DELETE_SUBJECT, {**params, "subject": husk})
    yield Statement(DELETE_FACTS, {"fids": drop_relationships})
    yield Statement(DELETE_NODES, {"ids": drop_nodes})
    yield Statement(REWRITE_RELATIONSHIPS, {"rows": relationship_rows})
    yield Statement(REWRITE_NODES, {"rows": node_rows})
    yield Statement(DELETE_BY_SUBJECT, {**params, "episodes": involved})
    salt = secrets.token_hex(16)
    # Each entity merged into it is forgotten with it: an old episode cannot bring it back either.
    for husk in [subject, *merged]:
        yield Statement(TOMBSTONE, {
            **params, "subject": husk, "deleted": deleted, "redacted": redacted, "salt": salt,
            "name_hashes": sorted(term_hash(salt, s) for s in names.sequences),
            "value_hashes": sorted(term_hash(salt, s) for s in everything.sequences - names.sequences),
            "max_words": max(everything.lengths), "actor": actor,
            "reason": everything.redact(reason) if reason else None, "facts": found["facts"],
        })
    return report


def forget_op(tenant: str, subject: str, clock: Callable[[], datetime], *, dry_run: bool = False,
              actor: str | None = None, reason: str | None = None) -> Operation[ForgetReport]:
    """Erase ``subject`` in one transaction and leave a tombstone; a dry run reads only, in a READ
    transaction."""
    report: ForgetReport = yield InTx(lambda: forget_steps(tenant, subject, clock(), dry_run=dry_run,
                                                           actor=actor, reason=reason), read=dry_run)
    return report

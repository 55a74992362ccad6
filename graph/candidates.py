"""Candidate merges: pairs of entities of a tenant that may be one (statements; ``store`` runs them).

Nothing here merges: the pairs are proposed, with their reasons, for a person or an agent to
merge (``sgam entities merge``) or leave. Two entities are paired only when they have the same
type (a merge needs it) and share a word of a name, an alias or an e-mail address (blocking keeps
the work linear in practice). Each pair gets evidence, each piece a score in (0, 1]:

======================  =====  ======================================================================
evidence                score  when
======================  =====  ======================================================================
``same alias``          1.0    a name, id or alias of one is (as an alias key) one of the other's
``same email``          0.95   both hold the same e-mail address as a fact value believed now
``email matches name``  0.7    the words of an e-mail's local part (an id, alias or value) are the
                               words of the other's name, id or an alias (``ada.lovelace@...`` and
                               ``Ada Lovelace``)
``name words``          0.6    the words of one's name are some of the other's (``Ada``, ``Ada Lovelace``)
``full-text``           ≤ 0.5  Lucene finds the other by the one's name (``sgam_entity_name``; only
                               for a name of its own, not an id), its score relative to the best
                               hit, halved
``embedding``           ≤ 0.8  both have entity embeddings (``sgam embed``) with cosine ≥ 0.9
======================  =====  ======================================================================

The pair's score combines its evidence as independent hints, ``1 - Π(1 - s)``, so it rises with
each further piece and never exceeds 1.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from .aliases import alias_key
from .errors import InvalidDelta
from .steps import InTx, Operation, Records, Statement

MAX_ENTITIES = 20_000
"""The entities of one tenant looked at (the most recently updated first)."""

EMBEDDING_THRESHOLD = 0.9

ENTITIES = """
MATCH (e:Entity {tenant_id: $tenant})
WHERE e.merged_into IS NULL
WITH e ORDER BY coalesce(e.updated_at, e.created_at) DESC LIMIT $max
RETURN e.id AS id, e.type AS type, e.name AS name, e.embedding IS NOT NULL AS embedded,
       COLLECT { MATCH (a:Alias)-[:ALIAS_OF]->(e) RETURN a.key } AS aliases,
       COLLECT { MATCH (e)-[f]->() WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL
                   AND f.status = 'confirmed' AND f.value IS :: STRING AND f.value CONTAINS '@'
                 RETURN DISTINCT f.value } AS emails
"""

FULLTEXT = """
UNWIND $queries AS q
CALL (q) {
  CALL db.index.fulltext.queryNodes('sgam_entity_name', q.text) YIELD node, score
  WHERE node.tenant_id = $tenant AND node.id <> q.id AND node.merged_into IS NULL
  RETURN node.id AS other, score
  LIMIT 5
}
RETURN q.id AS id, other, score
"""

EMBEDDED = """
UNWIND $ids AS id
MATCH (e:Entity {tenant_id: $tenant, id: id})
CALL db.index.vector.queryNodes('sgam_entity_embedding', 6, e.embedding) YIELD node, score
WITH id, node, score WHERE node.tenant_id = $tenant AND node.id <> id AND node.merged_into IS NULL
  AND score >= $threshold
RETURN id, node.id AS other, score
"""

_EMAIL = re.compile(r"^([^@\s]+)@[^@\s]+\.[^@\s]+$")
_LETTERS = re.compile(r"[^\W\d_]+")
_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')


@dataclass(frozen=True)
class MergeCandidate:
    """Two entities that may be one: ``score`` in (0, 1] and the ``reasons`` (evidence, score)."""

    a: str
    b: str
    type: str
    score: float
    reasons: tuple[tuple[str, float], ...]


def _tokens(text: str | None) -> frozenset[str]:
    return frozenset(_LETTERS.findall(text.casefold())) if text else frozenset()


def _local_tokens(texts: list[str]) -> list[frozenset[str]]:
    found = []
    for text in texts:
        match = _EMAIL.match(text.strip())
        if match:
            found.append(_tokens(match.group(1)))
    return [t for t in found if t]


@dataclass
class _Entity:
    id: str
    type: str
    keys: frozenset[str]
    names: frozenset[str]  # the words of its name (or id)
    emails: frozenset[str]
    locals: list[frozenset[str]]
    named: bool  # a name of its own, not its id (a relation's target is named by its id)


def _entity(row: dict[str, Any]) -> _Entity:
    keys = {k for k in (alias_key(row["id"]), alias_key(row["name"] or ""), *row["aliases"]) if k}
    emails = frozenset(e.strip().casefold() for e in row["emails"] if _EMAIL.match(e.strip()))
    return _Entity(row["id"], row["type"], frozenset(keys), _tokens(row["name"]) or _tokens(row["id"]), emails,
                   _local_tokens([row["id"], *row["aliases"], *row["emails"]]),
                   bool(row["name"]) and row["name"] != row["id"])


def _evidence(x: _Entity, y: _Entity) -> dict[str, float]:
    found: dict[str, float] = {}
    if x.keys & y.keys:
        found["same alias"] = 1.0
    if x.emails & y.emails:
        found["same email"] = 0.95
    if any(local == other.names or any(local == _tokens(k) for k in other.keys)
           for one, other in ((x, y), (y, x)) for local in one.locals):
        found["email matches name"] = 0.7
    if x.names and y.names and x.names != y.names and (x.names <= y.names or y.names <= x.names):
        found["name words"] = 0.6
    return found


def _query(entity: _Entity) -> str:
    words = sorted(entity.names)
    return " OR ".join(_LUCENE_SPECIAL.sub(r"\\\1", w) for w in words)


def candidate_steps(tenant: str, limit: int = 50) -> Generator[Statement, Records, list[MergeCandidate]]:
    """The tenant's candidate merges, best first, at most ``limit`` (see the module docstring)."""
    rows = yield Statement(ENTITIES, {"tenant": tenant, "max": MAX_ENTITIES})
    entities = {r["id"]: _entity(r) for r in rows if r["type"]}
    blocks: dict[str, set[str]] = {}
    for e in entities.values():
        for token in {*e.keys, *e.names, *e.emails, *(t for local in e.locals for t in local)}:
            blocks.setdefault(token, set()).add(e.id)
    pairs: dict[tuple[str, str], dict[str, float]] = {}
    for ids in blocks.values():
        for a, b in combinations(sorted(ids), 2):
            if (a, b) not in pairs and entities[a].type == entities[b].type:
                pairs[(a, b)] = _evidence(entities[a], entities[b])
    queries = [{"id": e.id, "text": _query(e)} for e in entities.values() if e.named and e.names]
    hits = (yield Statement(FULLTEXT, {"tenant": tenant, "queries": queries})) if queries else []
    best: dict[str, float] = {}
    for hit in hits:
        best[hit["id"]] = max(best.get(hit["id"], 0.0), hit["score"])
    for hit in hits:
        a, b = sorted((hit["id"], hit["other"]))
        if b in entities and a in entities and entities[a].type == entities[b].type and best[hit["id"]] > 0:
            found = pairs.setdefault((a, b), {})
            found["full-text"] = max(found.get("full-text", 0.0), round(0.5 * hit["score"] / best[hit["id"]], 3))
    embedded = [e for e, r in zip(entities, (r for r in rows if r["type"])) if r["embedded"]]
    if embedded:
        for hit in (yield Statement(EMBEDDED, {"tenant": tenant, "ids": embedded,
                                               "threshold": EMBEDDING_THRESHOLD})):
            a, b = sorted((hit["id"], hit["other"]))
            if b in entities and entities[a].type == entities[b].type:
                found = pairs.setdefault((a, b), {})
                found["embedding"] = round(0.8 * hit["score"], 3)
    scored = []
    for (a, b), found in pairs.items():
        if not found or set(found) == {"full-text"} and max(found.values()) < 0.25:
            continue
        miss = 1.0
        for s in found.values():
            miss *= 1.0 - s
        reasons = tuple(sorted(found.items(), key=lambda kv: (-kv[1], kv[0])))
        scored.append(MergeCandidate(a, b, entities[a].type, round(1.0 - miss, 3), reasons))
    scored.sort(key=lambda c: (-c.score, c.a, c.b))
    return scored[:limit]


def candidates_op(tenant: str, limit: int = 50) -> Operation[list[MergeCandidate]]:
    """:func:`candidate_steps` in one read transaction; :class:`InvalidDelta` for a ``limit``
    that is not a whole number from 1 to 1000."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 1000:
        raise InvalidDelta(f"limit must be a whole number from 1 to 1000, not {limit!r}")
    found: list[MergeCandidate] = yield InTx(lambda: candidate_steps(tenant, limit), read=True)
    return found

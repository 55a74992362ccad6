"""Aliases: the other names an entity goes by (statements; ``store`` runs them).

An alias is a node ``(:Alias {tenant_id, key, name, added_at, added_by})-[:ALIAS_OF]->(:Entity)``:
``name`` as it was given (``Ada Lovelace``), ``key`` its words case-folded and joined by one space
(``ada lovelace``; words as :mod:`sgam.graph.names` defines them, so ``ada@example.org`` is one
word). One node per (entity, key). An alias may name two entities of a tenant: that is not an
error but a merge candidate (:mod:`sgam.graph.merge`), so adding one reports the other entities it
already names.

Aliases are found three ways: ``search-entities`` searches them (full-text index
``sgam_entity_alias``); ingest links an episode to the entities whose alias its text names
(:func:`alias_grams`, looked up by ingest's ``LINK_AND_READ``); and ingest resolves a candidate's
``subject`` that is no entity id, or its ``subject_name``, and a relation's value that is no entity
id, to the one entity that alias names (:func:`resolve_steps`).
Ingest adds each accepted delta's ``subject_name`` as an alias of its subject. ``forget`` erases
a subject's aliases with it, and the residue check finds one left behind.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from datetime import datetime
from typing import Any

from .errors import Conflict, InvalidDelta, UnknownSubject
from .names import words
from .steps import InTx, Operation, Records, Statement

MAX_ALIAS_WORDS = 8
"""An alias is at most this many words (ingest looks for runs of up to this many words)."""

MAX_GRAMS = 20_000
"""At most this many word runs of one episode are looked up (a long text is cut)."""

ENTITY = """
MATCH (e:Entity {tenant_id: $tenant, id: $subject})
RETURN e.merged_into AS merged_into, COLLECT { MATCH (a:Alias)-[:ALIAS_OF]->(e) RETURN a.key } AS keys
"""

ADD_ALIASES = """
MATCH (e:Entity {tenant_id: $tenant, id: $subject})
UNWIND $aliases AS row
MERGE (a:Alias {tenant_id: $tenant, key: row.key})-[:ALIAS_OF]->(e)
  ON CREATE SET a.name = row.name, a.added_at = $now, a.added_by = $actor
RETURN row.key AS key,
       COLLECT { MATCH (:Alias {tenant_id: $tenant, key: row.key})-[:ALIAS_OF]->(o:Entity)
                 WHERE o <> e RETURN o.id } AS others
"""

REMOVE_ALIASES = """
MATCH (a:Alias {tenant_id: $tenant})-[:ALIAS_OF]->(:Entity {tenant_id: $tenant, id: $subject})
WHERE a.key IN $keys
DETACH DELETE a
"""

# For each reference (a subject id or a name): the entity with that id (or, for a merged one,
# the entity it was merged into), and the entities an alias with that key names.
RESOLVE = """
UNWIND $refs AS ref
OPTIONAL MATCH (e:Entity {tenant_id: $tenant, id: ref.id})
RETURN ref.id AS ref, e IS NOT NULL AS exists, e.merged_into AS merged_into,
       COLLECT { MATCH (:Alias {tenant_id: $tenant, key: ref.key})-[:ALIAS_OF]->(o:Entity)
                 WHERE o.merged_into IS NULL RETURN DISTINCT o.id } AS named
"""


def alias_key(name: str) -> str:
    """The key an alias is found by: its words, case-folded, one space apart ("" without words)."""
    return " ".join(words(name))


def checked_aliases(names: Iterable[str]) -> list[dict[str, str]]:
    """``[{key, name}]`` for ``names``, each once by key; :class:`InvalidDelta` for a name without
    a word or longer than :data:`MAX_ALIAS_WORDS` words."""
    rows: dict[str, dict[str, str]] = {}
    for name in names:
        if not isinstance(name, str):
            raise InvalidDelta(f"an alias is a text, not {type(name).__name__} ({name!r})")
        key = alias_key(name)
        if not key:
            raise InvalidDelta(f"alias {name!r} has no letter or digit: an alias names the entity in words")
        if len(key.split(" ")) > MAX_ALIAS_WORDS:
            raise InvalidDelta(f"alias {name!r} is longer than {MAX_ALIAS_WORDS} words: give a name, "
                               "not a sentence")
        rows.setdefault(key, {"key": key, "name": name.strip()})
    return list(rows.values())


def add_alias_steps(tenant: str, subject: str, names: Sequence[str], now: datetime, actor: str
                    ) -> Generator[Statement, Records, dict[str, list[str]]]:
    """Add ``names`` as aliases of ``subject`` (an alias it has already is kept as it is). Returns,
    for each alias key, the other entities it also names (merge candidates). Raises
    :class:`UnknownSubject` for an entity the tenant does not hold, :class:`Conflict` for one
    merged into another (its aliases went there)."""
    rows = checked_aliases(names)
    params: dict[str, Any] = {"tenant": tenant, "subject": subject}
    found = yield Statement(ENTITY, params)
    if not found:
        raise UnknownSubject(f"tenant {tenant!r} has no entity {subject!r} to give an alias: check the id "
                             "(`sgam query search-entities` finds entities by name)")
    if found[0]["merged_into"] is not None:
        raise Conflict(f"entity {subject!r} of tenant {tenant!r} was merged into "
                       f"{found[0]['merged_into']!r}: add the alias there")
    added = yield Statement(ADD_ALIASES, {**params, "aliases": rows, "now": now, "actor": actor})
    return {r["key"]: sorted(r["others"]) for r in added}


def add_alias_op(tenant: str, subject: str, names: Sequence[str], clock: Callable[[], datetime],
                 actor: str) -> Operation[dict[str, list[str]]]:
    """:func:`add_alias_steps` in one transaction, stamped with ``clock()``."""
    others: dict[str, list[str]] = yield InTx(lambda: add_alias_steps(tenant, subject, names, clock(), actor))
    return others


def alias_grams(text: str) -> list[str]:
    """The runs of 1 to :data:`MAX_ALIAS_WORDS` consecutive words of ``text``, as alias keys."""
    found = words(text)
    grams: dict[str, None] = {}
    for i in range(len(found)):
        for n in range(1, min(MAX_ALIAS_WORDS, len(found) - i) + 1):
            grams[" ".join(found[i:i + n])] = None
            if len(grams) >= MAX_GRAMS:
                return list(grams)
    return list(grams)


def resolve_steps(tenant: str, refs: Sequence[tuple[str, str | None]]
                  ) -> Generator[Statement, Records, dict[tuple[str, str | None], str]]:
    """The entity each ``(subject, subject_name)`` reference means, when it is not ``subject``
    itself: an entity merged into another means that one; a subject that is no entity id means
    the one entity its id, or else its name, is an alias of. A reference an alias of several
    entities names stays as it is (a merge candidate, never guessed)."""
    wanted = sorted({r for ref in refs for r in ref if r})
    rows = yield Statement(RESOLVE, {"tenant": tenant,
                                     "refs": [{"id": r, "key": alias_key(r)} for r in wanted]})
    by_ref = {r["ref"]: r for r in rows}
    resolved: dict[tuple[str, str | None], str] = {}
    for subject, name in refs:
        row = by_ref.get(subject)
        if row is None:
            continue
        if row["exists"]:
            if row["merged_into"] is not None:
                resolved[(subject, name)] = row["merged_into"]
            continue
        for named in (row["named"], by_ref[name]["named"] if name in by_ref else []):
            if len(named) == 1:
                resolved[(subject, name)] = named[0]
                break
    return resolved

"""Proof of erasure: what is left anywhere of a forgotten subject (statements; ``store`` runs them).

This check does not reuse the erasure's list of places or its matcher (:mod:`sgam.graph.forget`).
It reads every node of the tenant, every relationship touching one, and the tenant's hits in every
full-text index, and looks in every text it finds (strings, lists of strings, JSON inside strings,
property names) for

* the subject's id, as words (``user:mira`` names ``mira``; ``mira-2`` does not: see
  :mod:`sgam.graph.names`);
* its names and erased values, known from the tombstone only as salted hashes: every run of up to
  ``max_words`` consecutive words is hashed and looked up. Erased values are looked for in the
  episodes the forget redacted (elsewhere they may be anyone's).

What was recorded after the forget (a node or fact whose ``created_at``, ``recorded_at`` or, for a
ledger, ``updated_at`` is later) is not residue: a new episode may introduce the subject again. The
tombstone itself holds the id by design and is skipped. Findings name where (label or type, id,
property) and what was found (``id``, ``name``, ``value``), never the text itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterable
from typing import Any

from .errors import NotFound
from .names import term_hash
from .steps import Records, Statement

TOMBSTONE = """
MATCH (t:Tombstone {tenant_id: $tenant, subject: $subject})
RETURN t.forgotten_at AS at, t.salt AS salt, coalesce(t.name_hashes, []) AS names,
       coalesce(t.value_hashes, []) AS values, coalesce(t.max_words, 1) AS max_words,
       coalesce(t.redacted_episodes, []) AS redacted
"""

# Text properties only (strings, lists of strings), of what was recorded by the forget ($since).
_TEXT = """[k IN keys(x) WHERE valueType(x[k]) STARTS WITH 'STRING' OR valueType(x[k]) STARTS WITH 'LIST<STRING'
          | [k, x[k]]] AS texts, x.id AS id, x.memory_id AS memory_id"""
_BY = "($since IS NULL OR coalesce(x.recorded_at, x.created_at, $since) <= $since)"

NODES = f"""
MATCH (x) WHERE x.tenant_id = $tenant AND NOT x:Tombstone
  AND CASE WHEN x:Ledger THEN $since IS NULL OR x.updated_at <= $since ELSE {_BY} END
RETURN labels(x) AS labels, elementId(x) AS eid, {_TEXT}
"""

RELATIONSHIPS = f"""
MATCH (a)-[x]->(b) WHERE (a.tenant_id = $tenant OR b.tenant_id = $tenant) AND {_BY}
RETURN [type(x)] AS labels, elementId(x) AS eid, {_TEXT}
"""

FULLTEXT = "SHOW FULLTEXT INDEXES YIELD name, entityType WHERE entityType = 'NODE' RETURN name"

FULLTEXT_HITS = f"""
CALL db.index.fulltext.queryNodes($index, $phrase) YIELD node
WITH node AS x WHERE x.tenant_id = $tenant AND NOT x:Tombstone AND {_BY}
RETURN labels(x) AS labels, elementId(x) AS eid, {_TEXT}
"""

# Words as the specification defines them, found by splitting instead of matching: separators are
# anything but letters, digits and the joiners - . @, and a run of two or more joiners.
_SEPARATORS = re.compile(r"[^\w.@-]+|[.@-]{2,}")
_JOINERS = ".@-"


def _words(text: str) -> list[str]:
    pieces = (p.strip(_JOINERS).casefold() for p in _SEPARATORS.split(text))
    return [p for p in pieces if p]


def _texts(value: Any) -> Iterable[str]:
    """Every string inside a property value, JSON in strings decoded."""
    if isinstance(value, str):
        yield value
        if value[:1] in "[{\"":
            try:
                yield from _texts(json.loads(value))
            except (ValueError, RecursionError):
                pass
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _texts(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _texts(v)


class _Search:
    def __init__(self, subject: str, stone: dict[str, Any] | None) -> None:
        self.subject = tuple(_words(subject))
        self.salt = stone["salt"] if stone else None
        self.names = set(stone["names"]) if stone else set()
        self.values = set(stone["values"]) if stone else set()
        self.longest = max(stone["max_words"], len(self.subject)) if stone else len(self.subject)
        self.cache: dict[tuple[str, bool], str | None] = {}

    def found(self, text: str, with_values: bool) -> str | None:
        # Most texts repeat (statuses, attribute names, actors): each is read once.
        key = (text, with_values)
        if key not in self.cache:
            self.cache[key] = self._find(text, with_values)
        return self.cache[key]

    def _find(self, text: str, with_values: bool) -> str | None:
        w = _words(text)
        n = len(self.subject)
        if n and any(tuple(w[i:i + n]) == self.subject for i in range(len(w) - n + 1)):
            return "id"
        if self.salt is None:
            return None
        for size in range(1, self.longest + 1):
            for i in range(len(w) - size + 1):
                h = term_hash(self.salt, tuple(w[i:i + size]))
                if h in self.names:
                    return "name"
                if with_values and h in self.values:
                    return "value"
        return None


def residue_steps(tenant: str, subject: str, *, forgotten: bool = True
                  ) -> Generator[Statement, Records, list[dict[str, Any]]]:
    """What is left of ``subject``. With ``forgotten``, the subject must have a tombstone (else
    :class:`NotFound`); without, only its id is looked for (what a forget would have to remove)."""
    params: dict[str, Any] = {"tenant": tenant, "subject": subject}
    stones = yield Statement(TOMBSTONE, params)
    if forgotten and not stones:
        raise NotFound(f"tenant {tenant!r} has no tombstone for {subject!r}: it was never forgotten "
                       "(check the tenant and subject ids; `sgam forget` erases a subject)")
    stone = stones[0] if stones else None
    search = _Search(subject, stone)
    params["since"] = stone["at"] if stone else None
    redacted = set(stone["redacted"]) if stone else set()
    findings: list[dict[str, Any]] = []
    seen: set[str] = set()

    def look(kind: str, r: dict[str, Any]) -> None:
        label = r["labels"][0] if r["labels"] else "(no label)"
        if r["eid"] in seen:
            return
        with_values = label == "Episode" and r["id"] in redacted
        for key, value in r["texts"]:
            what = next((f for f in (search.found(t, with_values) for t in _texts(value)) if f),
                        None) or search.found(key, False)
            if what:
                seen.add(r["eid"])
                findings.append({"where": f"{kind} {label}", "id": r["id"] or r["memory_id"] or r["eid"],
                                 "property": key, "found": what})

    for kind, query in (("node", NODES), ("fact", RELATIONSHIPS)):
        for r in (yield Statement(query, params)):
            look(kind, r)
    # The full-text indexes answer from their own copy of the text; a hit is residue when the
    # node it points at still names the subject (Lucene's own word splitting finds more).
    phrase = '"' + subject.replace("\\", "\\\\").replace('"', '\\"') + '"'
    for index in (yield Statement(FULLTEXT, {})):
        for hit in (yield Statement(FULLTEXT_HITS, {**params, "index": index["name"], "phrase": phrase})):
            look(f"index {index['name']}:", hit)
    return findings

"""The extraction trail: why each accepted write was made, kept next to the facts it produced.

The quarantine keeps the reasoning of refused candidates; this module keeps it for the accepted
ones. Each (episode, extractor) that got at least one candidate through the write path leaves

    (:Extraction {tenant_id, id, episode_id, extractor, version, model, deltas, memory_ids,
                  subjects, visible_to, created_at})

* ``deltas`` is JSON, one entry per accepted candidate: its ``subject``, ``attribute``, ``op``,
  ``value``, the ``evidence`` quotes, the stored value it was ``compared_with`` and the model's
  ``decision`` (an extractor without reasoning, e.g. the event mapping, leaves them null), the
  write's ``outcome`` and the ``memory_ids`` it produced. Quotes and the whole are size-bounded
  (:data:`MAX_QUOTE_CHARS`, :data:`MAX_QUOTES`, :data:`MAX_DELTAS_CHARS`); no endpoint, key or
  prompt is kept, only the extractor's name, version and model.
* ``memory_ids`` links the node to the fact versions it produced (a relationship cannot be the
  end of another): the provenance query finds the trail of a fact by its episode, then by this
  list. One ``UNWIND`` per processed episode, in the transaction that stores its quarantine entries.
* ``visible_to`` is its episode's (the trail quotes it, private values included); the provenance
  query shows a trail only to readers of that episode. Forgetting a subject deletes the trails
  naming it or of the episodes it was in (graph/forget.py); deleting the episode deletes its trails
  (graph/deletion.py).

The id is a hash of (tenant, episode, extractor): processing an episode again adds the memory ids
it produced to the same node and keeps the first reasoning.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sgam.graph.steps import Records, Statement
from sgam.graph.writes import DeltaResult

from .quarantine import candidate_json

MAX_QUOTE_CHARS = 500
"""A longer evidence quote is cut (with an ellipsis) in the trail."""
MAX_QUOTES = 8
"""Quotes kept per candidate."""
MAX_DELTAS_CHARS = 32_000
"""The trail's ``deltas`` JSON is kept under this size: entries past it are counted, not kept."""

STORE = """
UNWIND $trails AS t
MATCH (ep:Episode {tenant_id: t.tenant_id, id: t.episode_id})
MERGE (x:Extraction {tenant_id: t.tenant_id, id: t.id})
  ON CREATE SET x += t.props, x.created_at = $now
  ON MATCH SET x.memory_ids = x.memory_ids + [m IN t.props.memory_ids WHERE NOT m IN x.memory_ids],
               x.updated_at = $now
SET x.visible_to = ep.visible_to
"""


@dataclass(frozen=True)
class Trail:
    """One extractor's accepted candidates of one episode (see the module docstring)."""

    tenant_id: str
    episode_id: str
    extractor: str
    version: str | None
    model: str | None
    deltas: tuple[dict[str, Any], ...]

    @property
    def id(self) -> str:
        basis = "\x1f".join([self.tenant_id, self.episode_id, self.extractor])
        return "x-" + hashlib.sha256(basis.encode("utf-8")).hexdigest()[:24]

    def params(self) -> dict[str, Any]:
        memory_ids = list(dict.fromkeys(m for d in self.deltas for m in d["memory_ids"]))
        subjects = sorted({str(d["subject"]) for d in self.deltas if d.get("subject") is not None})
        return {"tenant_id": self.tenant_id, "episode_id": self.episode_id, "id": self.id, "props": {
            "tenant_id": self.tenant_id, "id": self.id, "episode_id": self.episode_id,
            "extractor": self.extractor, "version": self.version, "model": self.model,
            "deltas": bounded_json(list(self.deltas)), "memory_ids": memory_ids, "subjects": subjects}}


def _quote(text: Any) -> str:
    text = str(text)
    return text if len(text) <= MAX_QUOTE_CHARS else text[:MAX_QUOTE_CHARS - 1] + "…"


def bounded_json(entries: list[dict[str, Any]]) -> str:
    """``entries`` as JSON under :data:`MAX_DELTAS_CHARS`: the last entries are dropped (and
    counted in a final ``{"omitted": n}``) until it fits."""
    kept = list(entries)
    text = candidate_json(kept)
    while len(text) > MAX_DELTAS_CHARS and kept:
        kept.pop()
        text = candidate_json([*kept, {"omitted": len(entries) - len(kept)}])
    return text


def entry(candidate: dict[str, Any], result: DeltaResult) -> dict[str, Any]:
    """The trail entry of an accepted ``candidate`` (its raw fields and provenance keys)."""
    evidence = candidate.get("evidence")
    quotes = [_quote(q) for q in evidence[:MAX_QUOTES]] if isinstance(evidence, list) else None
    return {"subject": candidate.get("subject"), "attribute": candidate.get("attribute"),
            "op": candidate.get("op", "assert"), "value": candidate.get("value"), "evidence": quotes,
            "compared_with": candidate.get("compared_with"), "decision": candidate.get("decision"),
            "outcome": result.outcome, "memory_ids": list(result.memory_ids)}


def identity(extractor: Any) -> tuple[str | None, str | None]:
    """An extractor's (version, model), when it declares them."""
    version = getattr(extractor, "version", None)
    model = getattr(extractor, "model", None)
    return (None if version is None else str(version)), (None if model is None else str(model))


def trails(tenant: str, episode: str, identities: dict[str, tuple[str | None, str | None]],
           accepted: Sequence[tuple[str, dict[str, Any], DeltaResult]]) -> list[Trail]:
    """One trail per extractor among ``accepted`` ``(extractor, candidate, result)`` writes, in
    the order the extractors ran."""
    by: dict[str, list[dict[str, Any]]] = {}
    for name, candidate, result in accepted:
        if result.ok:
            by.setdefault(name, []).append(entry(candidate, result))
    return [Trail(tenant, episode, name, *identities.get(name, (None, None)), tuple(entries))
            for name, entries in by.items()]


def store_steps(made: Sequence[Trail], now: datetime) -> Generator[Statement, Records, None]:
    """Store ``made`` trails (readable as their episode is)."""
    if made:
        yield Statement(STORE, {"trails": [t.params() for t in made], "now": now})


def shown(record: dict[str, Any], memory_id: str) -> dict[str, Any]:
    """A stored trail as provenance shows it for ``memory_id``: the extractor, and the entries
    that produced that fact version (all of them when none names it)."""
    deltas = json.loads(record.get("deltas") or "[]")
    mine = [d for d in deltas if memory_id in d.get("memory_ids", ())]
    return {"id": record.get("id"), "episode_id": record.get("episode_id"), "extractor": record.get("extractor"),
            "version": record.get("version"), "model": record.get("model"),
            "created_at": record.get("created_at"), "deltas": mine or deltas}


__all__ = ["MAX_DELTAS_CHARS", "MAX_QUOTES", "MAX_QUOTE_CHARS", "STORE", "Trail", "bounded_json", "entry",
           "identity", "shown", "store_steps", "trails"]

"""The ingest pipeline: episode -> extractors -> validated candidates -> ``write_many`` | quarantine.

:func:`ingest` does it all now, in this order:

1. record the raw episode first (deduplicated by content hash: a duplicate is processed under the
   id it is already stored as), so nothing said is lost if a later step fails;
2. link it to the known entities it mentions (entity ids, or aliases, that appear in its text)
   and read their current values, which every extractor gets to compare against;
3. run each extractor; a terminal :class:`~sgam.graph.errors.ExtractionError` is quarantined
   (stage ``extract``), a transient one is raised for the caller or worker to retry;
4. fill each candidate's implied fields from the episode (:func:`~sgam.ingest.extract.implied_fields`)
   and validate it as a :class:`~sgam.graph.models.MemoryDelta` (stage ``validate``);
5. write the valid ones through ``write_many``, the same path as every other write; whatever
   the schema or reconciliation refuses is quarantined with the reason (stage ``write``), and the
   reasoning behind what it accepted is kept as the episode's extraction trail (:mod:`.trail`);
6. mark the episode ``done``.

Each step is an operation of ``graph.steps`` (``ingest_op``, ``process_op``...) run by a store, so
the sync and the async graph run the same pipeline: the extractors, which may block on a model,
are :class:`~sgam.graph.steps.Blocking` work (the async store runs them in a thread), and every
write goes through ``graph.batches.write_many_op``, as ``write_many`` does.

Candidates must cite their own episode and tenant. Everything is idempotent: processing an episode
again writes nothing new (delta keys) and stores no second quarantine entry (entry ids).

:func:`submit` is the real-time / background switch: an agent's direct deltas, ``remember=True``
or a message that starts with "remember" are processed now (readable by the very next call);
anything else is queued for ``sgam worker`` (:mod:`sgam.ingest.worker`).

A real-time write that hits a transient failure after its episode is stored (Neo4j unavailable or
a transient Neo4j error after the driver's own retries, a model endpoint timing out) is not lost:
the episode is queued for the worker instead, with the agent's deltas stored on it (``deltas``,
JSON), and the report says so (``queued`` and ``deferred``, the reason). Deltas of a private
attribute restrict the episode to its readers right away, as writing them would have. If even
queueing fails, the error is raised and says that the raw episode is kept; ingesting again is
idempotent.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import ValidationError

from sgam.graph import recording
from sgam.graph.aliases import (
    MAX_ALIAS_WORDS, add_alias_steps, alias_grams, alias_key, resolve_steps,
)
from sgam.graph.batches import write_many_op
from sgam.graph.recording import Recorded
from sgam.graph.errors import ExtractionError, InvalidDelta, SgamError, StoreUnavailable, validation_problems
from sgam.graph.models import Episode, EpisodeKind, MemoryDelta
from sgam.graph.schema import Schema
from sgam.graph.steps import Blocking, InTx, Operation, Read, Records, Statement
from sgam.graph.store import Store
from sgam.graph.codec import native
from sgam.graph.writes import BatchResult, DeltaResult

from . import quarantine as q
from . import trail
from .extract import REFUSED_KEY, CurrentState, Extractor, RawCandidate, implied_fields

PROVENANCE_KEYS = frozenset({"evidence", "decision", "compared_with"})
"""Keys an extractor may add for provenance (kept in the quarantine and the extraction trail, not
part of a delta)."""

MAX_MENTION_TOKENS = 5000
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}")
_EXPLICIT = re.compile(r"^\W*(please\s+)?remember\b", re.IGNORECASE)

# The entities an episode mentions: by id (``$ids``), or by an alias (``$grams``, its word runs).
LINK_AND_READ = """
MATCH (ep:Episode {tenant_id: $tenant, id: $episode})
CALL () {
  UNWIND $ids AS id
  MATCH (e:Entity {tenant_id: $tenant, id: id})
  RETURN e
  UNION
  UNWIND $grams AS gram
  MATCH (:Alias {tenant_id: $tenant, key: gram})-[:ALIAS_OF]->(e:Entity)
  WHERE e.merged_into IS NULL
  RETURN e
}
MERGE (ep)-[:MENTIONS]->(e)
WITH e
OPTIONAL MATCH (e)-[f]->()
WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL AND f.status = 'confirmed'
  AND f.valid_from <= $now AND (f.valid_to IS NULL OR $now < f.valid_to)
RETURN e.id AS subject, f.attribute AS attribute, f.value AS value
ORDER BY subject, attribute, value
"""

MARK_DONE = """
MATCH (e:Episode {tenant_id: $tenant, id: $episode})
WHERE e.status IN ['recorded', 'pending', 'failed']
SET e.status = 'done', e.processed_at = $now, e.written = $written, e.quarantined = $quarantined
"""

DEFER = """
MATCH (e:Episode {tenant_id: $tenant, id: $episode})
SET e.status = 'pending', e.queued_at = $now, e.not_before = $not_before, e.last_error = $error,
    e.claimed_by = null, e.lease_until = null, e.deltas = coalesce($deltas, e.deltas)
RETURN e.status AS status
"""

DEFER_BACKOFF = timedelta(seconds=2)
"""How long a deferred real-time episode waits before a worker may take it."""

READ_EPISODE = """
MATCH (e:Episode {tenant_id: $tenant, id: $episode})
RETURN e {.tenant_id, .id, .content, .kind, .actor, .session_id, .occurred_at} AS episode
"""


class Target(Protocol):
    """What the pipeline's operations need of the store that runs them (a ``Store`` or an
    ``AsyncStore``): the schema, clock and future bound it writes under."""

    schema: Schema
    clock: Callable[[], datetime]
    max_future: timedelta


class StructuredDeltas:
    """The extractor for deltas an agent gives directly (no model): they are the candidates.

    Each delta is a mapping of :class:`~sgam.graph.models.MemoryDelta` fields (or a MemoryDelta);
    fields it leaves out are inherited from the episode.
    """

    name = "structured"

    def __init__(self, deltas: Iterable[Mapping[str, Any] | MemoryDelta]) -> None:
        self.deltas = [d.model_dump(exclude_unset=True) if isinstance(d, MemoryDelta) else d
                       for d in deltas]

    def extract(self, episode: Episode, current: CurrentState) -> Sequence[RawCandidate]:
        return [dict(d) if isinstance(d, Mapping) else d for d in self.deltas]


@dataclass(frozen=True)
class IngestReport:
    """What ingesting one episode did."""

    tenant_id: str
    episode_id: str
    """The id the episode is stored under (the existing one for a duplicate)."""
    recorded: str
    """``created``, ``existing`` or ``duplicate``."""
    queued: bool = False
    candidates: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    memory_ids: tuple[str, ...] = ()
    quarantined: tuple[q.QuarantineEntry, ...] = ()
    mentions: tuple[str, ...] = ()
    deferred: str | None = None
    """Why an episode meant for real time was queued instead (a transient error), else ``None``."""

    @property
    def written(self) -> int:
        return sum(n for k, n in self.outcomes.items() if k != "unchanged")

    @property
    def unchanged(self) -> int:
        return self.outcomes["unchanged"]


def default_extractors(schema: Schema) -> list[Extractor]:
    """The extractors that need no model: the shipped event mapping, checked against ``schema``."""
    from .extractors.events import EventMapper, load_event_rules

    return [EventMapper(load_event_rules(), schema=schema)]


def is_explicit_memory(episode: Episode) -> bool:
    """A message that asks to be remembered ("Remember that ...", "please remember: ...")."""
    return episode.kind is EpisodeKind.MESSAGE and bool(_EXPLICIT.match(episode.content))


def mention_tokens(text: str) -> list[str]:
    """Distinct id-like tokens of ``text`` (trailing punctuation dropped), capped, sorted."""
    tokens = {t.rstrip(".:-") for t in _TOKEN.findall(text)}
    return sorted(t for t in tokens if t)[:MAX_MENTION_TOKENS]


def _link_steps(episode: Episode, now: datetime) -> Generator[Statement, Records, tuple[list[str], dict]]:
    rows = yield Statement(LINK_AND_READ, {"tenant": episode.tenant_id, "episode": episode.id,
                                           "ids": mention_tokens(episode.content),
                                           "grams": alias_grams(episode.content), "now": now})
    mentions: list[str] = []
    current: dict[tuple[str, str], Any] = {}
    for row in rows:
        if row["subject"] not in mentions:
            mentions.append(row["subject"])
        if row["attribute"] is not None:
            key = (row["subject"], row["attribute"])
            value = native(row["value"])
            current[key] = [*current[key], value] if key in current else value
    return mentions, current


def _done_steps(episode: Episode, now: datetime, written: int,
                quarantined: int) -> Generator[Statement, Records, None]:
    yield Statement(MARK_DONE, {"tenant": episode.tenant_id, "episode": episode.id, "now": now,
                                "written": written, "quarantined": quarantined})


def record_op(target: Target, episode: Episode, *,
              queue: bool = False) -> Operation[tuple[Episode, Recorded]]:
    """Store the raw episode; returns it under its stored id, and what recording did."""
    [recorded] = yield from recording.record_op([episode], target.clock, "pending" if queue else "recorded")
    if recorded.stored_id != episode.id:
        episode = episode.model_copy(update={"id": recorded.stored_id})
    return episode, recorded


def record(store: Store, episode: Episode, *, queue: bool = False) -> tuple[Episode, Recorded]:
    """:func:`record_op` on a sync store."""
    return store.run(record_op(store, episode, queue=queue))


def ingest(store: Store, episode: Episode, extractors: Sequence[Extractor] = (), *,
           deltas: Iterable[Mapping[str, Any] | MemoryDelta] = (), strict: bool = False) -> IngestReport:
    """:func:`ingest_op` on a sync store."""
    return store.run(ingest_op(store, episode, extractors, deltas=deltas, strict=strict))


def ingest_op(target: Target, episode: Episode, extractors: Sequence[Extractor] = (), *,
              deltas: Iterable[Mapping[str, Any] | MemoryDelta] = (),
              strict: bool = False) -> Operation[IngestReport]:
    """Record ``episode`` and process it now (see the module docstring); ``deltas`` are the
    agent's own candidates (the :class:`StructuredDeltas` extractor).

    ``strict``: a given delta that is not valid, or that the schema or reconciliation refuses, is
    raised as ``write()`` raises it (:class:`~sgam.graph.errors.InvalidDelta`,
    :class:`~sgam.graph.errors.SchemaViolation`, ...) instead of being quarantined, and no delta
    of the episode is written (the given ones in one transaction, before the extractors'
    candidates). The raw episode stays recorded (status ``recorded``), so ingesting it again with
    corrected deltas finds it. A transient failure is raised too instead of queueing the episode,
    since a worker could only quarantine what the caller must hear about.
    """
    given = episode.id
    episode, recorded = yield from record_op(target, episode)
    extractors = list(extractors)
    deltas = list(deltas)
    given_deltas = StructuredDeltas(_renamed(deltas, given, episode.id)) if deltas else None
    if given_deltas is not None:
        extractors.insert(0, given_deltas)
    try:
        return (yield from process_op(target, episode, extractors, recorded=recorded.outcome, strict=strict))
    except SgamError as exc:
        if strict or not exc.transient:
            raise
        return (yield from defer_op(target, episode, given_deltas.deltas if given_deltas else None, exc,
                                    recorded.outcome))


def defer(store: Store, episode: Episode, deltas: Sequence[Mapping[str, Any]] | None, error: SgamError,
          recorded: str = "existing") -> IngestReport:
    """:func:`defer_op` on a sync store."""
    return store.run(defer_op(store, episode, deltas, error, recorded))


def defer_op(target: Target, episode: Episode, deltas: Sequence[Mapping[str, Any]] | None, error: SgamError,
             recorded: str = "existing") -> Operation[IngestReport]:
    """Queue a stored episode whose real-time processing failed transiently (see the module
    docstring); ``deltas`` (the agent's own) are stored on it for the worker."""
    reason = f"{type(error).__name__}: {error}"
    now = target.clock()
    stored = q.candidate_json(list(deltas)) if deltas else None
    params = {"tenant": episode.tenant_id, "episode": episode.id, "now": now,
              "not_before": now + DEFER_BACKOFF, "error": reason, "deltas": stored}
    readers = target.schema.readers_of(json.loads(stored)) if stored else None
    try:
        yield InTx(lambda: _defer_steps(params, readers))
    except SgamError as again:
        raise StoreUnavailable(
            f"episode {episode.tenant_id}/{episode.id} is stored (raw) but could neither be processed "
            f"({reason}) nor queued ({type(again).__name__}: {again}); ingest it again when Neo4j "
            "answers: ingesting is idempotent"
        ) from error
    return IngestReport(episode.tenant_id, episode.id, recorded, queued=True, deferred=reason)


def _defer_steps(params: dict[str, Any],
                 readers: tuple[str, ...] | None) -> Generator[Statement, Records, None]:
    yield Statement(DEFER, params)
    yield from q.restrict_steps([(params["tenant"], params["episode"], readers)])


def submit(store: Store, episode: Episode, extractors: Sequence[Extractor] = (), *,
           deltas: Iterable[Mapping[str, Any] | MemoryDelta] = (), remember: bool = False,
           strict: bool = False) -> IngestReport:
    """:func:`submit_op` on a sync store."""
    return store.run(submit_op(store, episode, extractors, deltas=deltas, remember=remember, strict=strict))


def submit_op(target: Target, episode: Episode, extractors: Sequence[Extractor] = (), *,
              deltas: Iterable[Mapping[str, Any] | MemoryDelta] = (), remember: bool = False,
              strict: bool = False) -> Operation[IngestReport]:
    """Process now (direct deltas, ``remember``, or an explicit "remember ..." message) or queue;
    ``strict`` as for :func:`ingest_op` (a queued episode has no caller to raise to: it is ignored)."""
    deltas = list(deltas)
    if deltas or remember or is_explicit_memory(episode):
        return (yield from ingest_op(target, episode, extractors, deltas=deltas, strict=strict))
    stored, recorded = yield from record_op(target, episode, queue=True)
    return IngestReport(stored.tenant_id, stored.id, recorded.outcome, queued=True)


def process_op(target: Target, episode: Episode, extractors: Sequence[Extractor], *,
               recorded: str = "existing", mark_done: bool = True,
               strict: bool = False) -> Operation[IngestReport]:
    """Run steps 2-6 on an episode that is already stored under ``episode.id``; ``strict`` as
    for :func:`ingest_op`."""
    now = target.clock()
    mentions, current = yield InTx(lambda: _link_steps(episode, now))
    entries: list[q.QuarantineEntry] = []
    candidates: list[tuple[str, RawCandidate]] = []
    for extractor in extractors:
        try:
            raw = yield Blocking(lambda: list(extractor.extract(episode, current)))  # noqa: B023
        except ExtractionError as exc:
            if exc.transient:
                raise
            entries.append(_extract_entry(episode, extractor.name, exc))
            continue
        candidates.extend((extractor.name, c) for c in raw)
    valid, refused = validate(episode, candidates)
    valid = yield from resolve_references(episode.tenant_id, valid, target.schema)
    given: list[DeltaResult] = []
    given_valid = [v for v in valid if v[0] == StructuredDeltas.name] if strict else []
    if strict:
        given, valid = yield from _write_given(target, episode, valid, refused)
    entries.extend(refused)
    result, write_refused = yield from write(target, episode, valid)
    entries.extend(write_refused)
    accepted = [(*given_valid[r.index][:2], r) for r in given] + [(*valid[r.index][:2], r) for r in result.results]
    made = trail.trails(episode.tenant_id, episode.id, {x.name: trail.identity(x) for x in extractors}, accepted)
    yield from remember_names(target, episode, valid, result)
    yield InTx(lambda: _stored_steps(entries, made, now, target.schema))
    results = [*given, *result.results]
    report = IngestReport(
        episode.tenant_id, episode.id, recorded, candidates=len(candidates),
        outcomes=Counter(r.outcome for r in results if r.ok),
        memory_ids=tuple(m for r in results for m in r.memory_ids),
        quarantined=tuple(entries), mentions=tuple(mentions),
    )
    if mark_done:
        yield InTx(lambda: _done_steps(episode, now, report.written, len(entries)))
    return report


def _stored_steps(entries: Sequence[q.QuarantineEntry], made: Sequence[trail.Trail], now: datetime,
                  schema: Schema) -> Generator[Statement, Records, None]:
    """The episode's refusals, then its trails (after the refusals restricted the episode, whose
    readers the trails take)."""
    yield from q.store_steps(entries, now, schema)
    yield from trail.store_steps(made, now)


def _write_many(target: Target, deltas: Sequence[MemoryDelta], atomic: bool = False) -> Operation[BatchResult]:
    return write_many_op(deltas, target.schema, target.clock, atomic=atomic, max_future=target.max_future)


def _write_given(target: Target, episode: Episode, valid: list[tuple[str, dict[str, Any], MemoryDelta]],
                 refused: Sequence[q.QuarantineEntry]
                 ) -> Operation[tuple[list[DeltaResult], list[tuple[str, dict[str, Any], MemoryDelta]]]]:
    """A strict ingest's given deltas, all or none: the first one that is not valid is raised
    before anything is written, and the valid ones are written in one atomic ``write_many``
    (which raises the first refusal and writes nothing). Returns their results and the
    extractors' candidates, which go on as usual."""
    for entry in refused:
        if entry.extractor == StructuredDeltas.name:
            raise InvalidDelta(f"{entry.reason} (strict ingest of episode {episode.id}: "
                               "no delta was written)")
    given = [delta for name, _, delta in valid if name == StructuredDeltas.name]
    results = list((yield from _write_many(target, given, atomic=True)).results) if given else []
    return results, [v for v in valid if v[0] != StructuredDeltas.name]


def _extract_entry(episode: Episode, extractor: str, exc: ExtractionError) -> q.QuarantineEntry:
    """An extractor's refusal; a model's raw answer and findings (``raw``, ``problems``) are kept."""
    raw = getattr(exc, "raw", None)
    problems = list(getattr(exc, "problems", ()) or ())
    candidate = {"raw": raw, "problems": problems} if raw is not None or problems else None
    return q.entry(episode.tenant_id, episode.id, extractor, "extract", str(exc), type(exc).__name__,
                   candidate)


def _renamed(deltas: list[Mapping[str, Any] | MemoryDelta], given: str, stored: str) -> list[Any]:
    """Deltas that cite the id a duplicate was given cite the id it is stored under instead."""
    if given == stored:
        return deltas
    out = []
    for d in deltas:
        data = d.model_dump(exclude_unset=True) if isinstance(d, MemoryDelta) else dict(d)
        if data.get("source_episode_id") == given:
            data["source_episode_id"] = stored
        out.append(data)
    return out


def _problems(exc: ValidationError) -> str:
    return validation_problems(exc, "candidate")


def validate(episode: Episode, candidates: Sequence[tuple[str, Any]]
             ) -> tuple[list[tuple[str, dict[str, Any], MemoryDelta]], list[q.QuarantineEntry]]:
    """Fill implied fields and validate; returns ``(extractor, candidate, delta)`` triples and the
    entries for candidates that are not valid deltas."""
    valid = []
    refused = []
    implied = implied_fields(episode)
    for extractor, raw in candidates:
        if not isinstance(raw, Mapping):
            refused.append(q.entry(episode.tenant_id, episode.id, extractor, "validate",
                                   f"a candidate must be an object of delta fields, got {type(raw).__name__}",
                                   "InvalidDelta", raw))
            continue
        candidate = {**implied, **raw}
        if REFUSED_KEY in raw:
            refused.append(q.entry(episode.tenant_id, episode.id, extractor, "validate",
                                   str(raw[REFUSED_KEY]), "UnmappableCandidate", candidate))
            continue
        reason = _foreign(episode, candidate)
        if reason is None:
            try:
                delta = MemoryDelta.model_validate(
                    {k: v for k, v in candidate.items() if k not in PROVENANCE_KEYS})
            except ValidationError as exc:
                reason = f"not a valid delta: {_problems(exc)}"
        if reason is not None:
            refused.append(q.entry(episode.tenant_id, episode.id, extractor, "validate", reason,
                                   "InvalidDelta", candidate))
            continue
        valid.append((extractor, candidate, delta))
    return valid, refused


def _foreign(episode: Episode, candidate: Mapping[str, Any]) -> str | None:
    if candidate.get("tenant_id") != episode.tenant_id:
        return (f"a candidate from episode {episode.id!r} must stay in tenant {episode.tenant_id!r}, "
                f"not {candidate.get('tenant_id')!r}")
    if candidate.get("source_episode_id") != episode.id:
        return (f"a candidate from episode {episode.id!r} must cite it as source_episode_id, "
                f"not {candidate.get('source_episode_id')!r}")
    return None


def write(target: Target, episode: Episode, valid: Sequence[tuple[str, dict[str, Any], MemoryDelta]]
          ) -> Operation[tuple[BatchResult, list[q.QuarantineEntry]]]:
    """Write the deltas through ``write_many``; the refused ones become quarantine entries."""
    if not valid:
        return BatchResult(()), []
    result = yield from _write_many(target, [delta for _, _, delta in valid])
    refused = [
        q.entry(episode.tenant_id, episode.id, valid[r.index][0], "write", r.message,
                type(r.error).__name__, valid[r.index][1])
        for r in result.rejected
    ]
    return result, refused


# -- the quarantine, replayed ------------------------------------------------------------------


@dataclass
class QuarantineReplay:
    """What a replay did: entries now written (``resolved``), still refused (``failing``, with the
    new reason), or left alone because their extractor was not given (``skipped``)."""

    resolved: list[str] = field(default_factory=list)
    failing: list[dict[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    new_entries: list[q.QuarantineEntry] = field(default_factory=list)


def quarantine_params(tenant: str, *, status: str | None = "open", episode: str | None = None,
                      principal: str | None = None) -> dict[str, Any]:
    """The named query ``quarantine``'s parameters: entries of ``tenant`` that ``principal`` may read
    (as reads decide: ``None`` lists the shared ones only, ``"*"`` all), of ``status`` (None: every
    status); :func:`quarantine_entries` makes its rows entries, oldest first."""
    return {"tenant": tenant, "episode": episode, "since": None, "status": status, "principal": principal}


def quarantine_entries(rows: Records, tenant: str) -> list[q.QuarantineEntry]:
    return [q.from_record(r, tenant) for r in reversed(rows)]


def list_quarantine(graph: Any, tenant: str, *, status: str | None = "open",
                    episode: str | None = None, principal: str | None = None) -> list[q.QuarantineEntry]:
    """The quarantine as ``graph.query`` (a ``MemoryGraph``'s) reads it; see :func:`quarantine_params`."""
    params = quarantine_params(tenant, status=status, episode=episode, principal=principal)
    return quarantine_entries(graph.query("quarantine", **params), tenant)


def load_episode_op(tenant: str, episode_id: str) -> Operation[Episode | None]:
    rows = yield Read(Statement(READ_EPISODE, {"tenant": tenant, "episode": episode_id}))
    if not rows:
        return None
    data = {k: native(v) for k, v in rows[0]["episode"].items() if v is not None}
    return Episode.model_validate(data)


def load_episode(store: Store, tenant: str, episode_id: str) -> Episode | None:
    """:func:`load_episode_op` on a sync store."""
    return store.run(load_episode_op(tenant, episode_id))


def replay_quarantine(store: Store, tenant: str, entries: Sequence[q.QuarantineEntry],
                      extractors: Sequence[Extractor] = ()) -> QuarantineReplay:
    """:func:`replay_quarantine_op` on a sync store."""
    return store.run(replay_quarantine_op(store, tenant, entries, extractors))


def replay_quarantine_op(target: Target, tenant: str, entries: Sequence[q.QuarantineEntry],
                         extractors: Sequence[Extractor] = ()) -> Operation[QuarantineReplay]:
    """Re-validate the open ``entries`` of ``tenant`` (every reader's, as :func:`list_quarantine`
    lists them) against the current schema and write those that pass, marking them ``resolved``.
    Entries refused by an extractor (stage ``extract``) are re-extracted when that extractor (by
    name) is among ``extractors``, e.g. after the event rules changed; the candidates it now
    yields go through the pipeline (and may be quarantined anew)."""
    report = QuarantineReplay()
    yield from _replay_candidates(target, tenant, [e for e in entries if e.stage != "extract"], report)
    by_name = {x.name: x for x in extractors}
    for entry in (e for e in entries if e.stage == "extract"):
        extractor = by_name.get(entry.extractor)
        episode = (yield from load_episode_op(tenant, entry.episode_id)) if extractor else None
        if extractor is None or episode is None:
            report.skipped.append(entry.id)
            continue
        again = yield from process_op(target, episode, [extractor], mark_done=False)
        refused = [e for e in again.quarantined if e.stage == "extract"]
        report.new_entries.extend(e for e in again.quarantined if e.stage != "extract")
        if any(e.id == entry.id for e in refused):
            report.failing.append({"id": entry.id, "reason": entry.reason, "error": entry.error})
            continue
        report.new_entries.extend(refused)
        report.resolved.append(entry.id)
        resolution = (f"superseded by {refused[0].id}" if refused else
                      f"re-extracted: {again.candidates} candidates, {len(again.quarantined)} quarantined")
        yield from _mark(target, tenant, [{"id": entry.id, "memory_ids": list(again.memory_ids),
                                           "resolution": resolution}], [])
    yield from _mark(target, tenant, [], report.failing)
    return report


def _mark(target: Target, tenant: str, resolved: list[dict[str, Any]],
          failing: list[dict[str, str]]) -> Operation[None]:
    if resolved or failing:
        yield InTx(lambda: q.replayed_steps(tenant, resolved, failing, target.clock()))


def _replay_candidates(target: Target, tenant: str, entries: Sequence[q.QuarantineEntry],
                       report: QuarantineReplay) -> Operation[None]:
    ready: list[tuple[q.QuarantineEntry, MemoryDelta]] = []
    for entry in entries:
        data = entry.candidate_data()
        if isinstance(data, dict) and REFUSED_KEY in data:
            report.failing.append({"id": entry.id, "reason": entry.reason, "error": entry.error})
            continue
        if (not isinstance(data, dict) or data.get("tenant_id") != tenant
                or data.get("source_episode_id") != entry.episode_id):
            report.failing.append({"id": entry.id, "reason": entry.reason, "error": entry.error})
            continue
        try:
            ready.append((entry, MemoryDelta.model_validate(
                {k: v for k, v in data.items() if k not in PROVENANCE_KEYS})))
        except ValidationError as exc:
            report.failing.append({"id": entry.id, "reason": f"not a valid delta: {_problems(exc)}",
                                   "error": "InvalidDelta"})
    if not ready:
        return
    result = yield from _write_many(target, [delta for _, delta in ready])
    resolved = []
    for r in result.results:
        entry = ready[r.index][0]
        if r.ok:
            report.resolved.append(entry.id)
            resolved.append({"id": entry.id, "resolution": r.outcome, "memory_ids": list(r.memory_ids)})
        else:
            report.failing.append({"id": entry.id, "reason": r.message, "error": type(r.error).__name__})
    yield from _mark(target, tenant, resolved, [])


def _target_ref(delta: MemoryDelta, schema: Schema) -> tuple[str, None] | None:
    """A relation candidate's value as an entity reference (by id or alias; it has no name)."""
    spec = schema.attributes.get(delta.attribute)
    if spec is None or spec.value_type != "entity" or not isinstance(delta.value, str):
        return None
    return delta.value.strip(), None


def resolve_references(tenant: str, valid: list[tuple[str, dict[str, Any], MemoryDelta]], schema: Schema
                       ) -> Operation[list[tuple[str, dict[str, Any], MemoryDelta]]]:
    """The candidates with each ``subject``, and each relation's value, that is no entity id but
    an alias of one entity (the subject by id, else by ``subject_name``), or an entity merged into
    another, replaced by that entity's id (see :func:`sgam.graph.aliases.resolve_steps`)."""
    if not valid:
        return valid
    targets = {i: ref for i, (_, _, d) in enumerate(valid) if (ref := _target_ref(d, schema)) is not None}
    refs = [(d.subject, d.subject_name) for _, _, d in valid] + list(targets.values())
    resolved = yield InTx(lambda: resolve_steps(tenant, refs), read=True)
    found = []
    for i, (name, raw, d) in enumerate(valid):
        update: dict[str, Any] = {}
        if (d.subject, d.subject_name) in resolved:
            update["subject"] = resolved[(d.subject, d.subject_name)]
        if i in targets and targets[i] in resolved:
            update["value"] = resolved[targets[i]]
        found.append((name, raw, d.model_copy(update=update) if update else d))
    return found


def remember_names(target: Target, episode: Episode, valid: Sequence[tuple[str, dict[str, Any], MemoryDelta]],
                   result: BatchResult) -> Operation[None]:
    """Each accepted delta's ``subject_name`` becomes an alias of its subject."""
    named: dict[str, list[str]] = {}
    for r in result.results:
        delta = valid[r.index][2]
        # A name too long to be an alias is only the entity's name.
        if r.ok and delta.subject_name and 0 < len(alias_key(delta.subject_name).split()) <= MAX_ALIAS_WORDS:
            named.setdefault(delta.subject, []).append(delta.subject_name)
    now = target.clock()
    for subject, names in sorted(named.items()):
        yield InTx(partial(add_alias_steps, episode.tenant_id, subject, names, now, episode.actor))


__all__ = ["DEFER_BACKOFF", "IngestReport", "PROVENANCE_KEYS", "QuarantineReplay", "StructuredDeltas", "Target",
           "default_extractors", "defer", "defer_op", "ingest", "ingest_op", "is_explicit_memory", "list_quarantine",
           "load_episode", "load_episode_op", "mention_tokens", "process_op", "quarantine_entries",
           "quarantine_params", "record", "record_op", "remember_names", "replay_quarantine", "replay_quarantine_op",
           "resolve_references", "submit",
           "submit_op", "validate", "write"]

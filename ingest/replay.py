"""Replay a JSONL file of episodes with their structured deltas.

One JSON object a line: an episode, and the deltas it justifies. A delta inherits the episode's
``tenant_id``, ``id`` (as ``source_episode_id``), ``occurred_at`` (as ``valid_from``) and ``actor``
(as ``asserted_by``) unless it says otherwise::

    {"tenant_id": "demo", "id": "e1", "occurred_at": "2026-05-20T09:00:00Z", "actor": "user:mira",
     "content": "My passport deadline is 2026-07-15.",
     "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "2026-07-15"}]}

Blank lines and lines starting with ``#`` are skipped. A bad line is reported with its number and
the good ones are applied; with ``atomic`` nothing is written if any line is bad.

Replaying the same file again changes nothing, refusals included. Every delta the write path
refuses is recorded, keyed by its idempotency key (a quarantine entry of extractor ``replay``, see
:mod:`sgam.ingest.quarantine`), and a later replay reports a delta so recorded as ``refused (as
before)`` with the stored reason instead of writing it, even where the stored state would now
allow it (a ``confirm`` whose candidate a later line opened, an entity typed by a later line).
``sgam quarantine replay`` is the way to apply it after all; it resolves the entry. A statement
that occurs twice in one file is judged at its first line and a repeat follows that verdict
(``unchanged``, or refused as before), as it would if the two were in different chunks. Lines that cannot be read (not JSON, not a valid episode or delta) are ``invalid`` on
every run without a record: that verdict depends on the line's text alone. So is a line whose
episode id is stored with other content: episode ids are permanent. An ``atomic`` replay records
nothing (it writes nothing when a delta is refused) and fails on a delta recorded as refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from sgam.graph.batches import write_many_op
from sgam.graph.recording import record_op
from sgam.graph.errors import Conflict, InvalidDelta, SgamError
from sgam.graph.models import Episode, MemoryDelta
from sgam.graph.reconcile import delta_key
from sgam.graph.schema import Schema
from sgam.graph.store import Store
from sgam.graph.writes import BatchResult, prepare

from . import quarantine as q
from .episodes import decode_utf8, json_line

_INHERITED = {"tenant_id": "tenant_id", "source_episode_id": "id", "valid_from": "occurred_at",
              "asserted_by": "actor"}


@dataclass(frozen=True)
class ReplayLine:
    number: int
    episode: Episode
    deltas: tuple[MemoryDelta, ...]


WRITTEN = "written"
UNCHANGED = "unchanged"
REFUSED = "refused"
REFUSED_AS_BEFORE = "refused (as before)"
INVALID = "invalid"
LINE_STATUSES = (WRITTEN, UNCHANGED, REFUSED, REFUSED_AS_BEFORE, INVALID)
"""What a replay did to a line: ``written`` (its episode or a delta changed the store),
``unchanged``, ``refused`` (a delta refused now, and recorded), ``refused (as before)`` (a delta
recorded as refused by an earlier run or line, not written) or ``invalid`` (nothing of it could be
read); a line takes the first of refused, written, refused (as before), unchanged that applies to
its episode or one of its deltas."""

_RANK = {UNCHANGED: 0, REFUSED_AS_BEFORE: 1, WRITTEN: 2, REFUSED: 3}


@dataclass(frozen=True)
class LineError:
    """A line, or one delta of it, that was not applied: ``status`` is ``invalid``, ``refused`` or
    ``refused (as before)`` (then ``first_line`` is the line whose refusal was recorded)."""

    number: int
    message: str
    status: str = INVALID
    first_line: int | None = None


@dataclass
class ReplaySummary:
    """Counts by outcome, every line or delta not applied with its reason, and each line's status."""

    lines: int = 0
    episodes: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    """Write outcomes of the deltas the write path accepted (``unchanged`` included)."""
    errors: list[LineError] = field(default_factory=list)
    line_status: dict[int, str] = field(default_factory=dict)
    """Line number -> one of :data:`LINE_STATUSES`."""

    @property
    def written(self) -> int:
        return sum(n for k, n in self.outcomes.items() if k != UNCHANGED)

    @property
    def unchanged(self) -> int:
        return self.outcomes[UNCHANGED]

    @property
    def refused(self) -> int:
        return sum(1 for e in self.errors if e.status == REFUSED)

    @property
    def refused_as_before(self) -> int:
        return sum(1 for e in self.errors if e.status == REFUSED_AS_BEFORE)

    @property
    def invalid(self) -> int:
        return sum(1 for e in self.errors if e.status == INVALID)

    @property
    def rejected(self) -> int:
        """Lines and deltas not applied, whatever the reason."""
        return len(self.errors)

    def statuses(self) -> Counter[str]:
        """How many lines ended in each status."""
        return Counter(self.line_status.values())

    def _mark(self, number: int, status: str) -> None:
        current = self.line_status.get(number)
        if current is None or _RANK[status] > _RANK[current]:
            self.line_status[number] = status


def _pydantic_message(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'line'}: {err['msg']}" for err in exc.errors()
    )


def split_lines(data: bytes) -> list[bytes]:
    """A JSONL file's lines: split at ``\\n`` only (a ``\\r`` before it goes with the blanks), never
    at U+2028, U+2029 or U+0085, which JSON strings may hold. Each is decoded by :func:`parse_line`,
    so a line that is not UTF-8 is reported on its own."""
    return data.split(b"\n")


def parse_line(number: int, line: str | bytes) -> ReplayLine | LineError | None:
    """One line of the file (text, or bytes of UTF-8): a :class:`ReplayLine`, a :class:`LineError`,
    or ``None`` if blank."""
    try:
        text = (decode_utf8(line, "the line") if isinstance(line, bytes) else line).strip()
        if not text or text.startswith("#"):
            return None
        data = json_line(text)
    except InvalidDelta as exc:
        return LineError(number, str(exc))
    if not isinstance(data, dict):
        return LineError(number, "expected a JSON object with an episode and its 'deltas'")
    raw_deltas = data.pop("deltas", [])
    if not isinstance(raw_deltas, list):
        return LineError(number, "'deltas' must be a list of objects")
    try:
        episode = Episode.model_validate(data)
        deltas = tuple(_delta(data, raw) for raw in raw_deltas)
    except ValidationError as exc:
        return LineError(number, _pydantic_message(exc))
    except InvalidDelta as exc:
        return LineError(number, str(exc))
    return ReplayLine(number, episode, deltas)


def _delta(episode: dict[str, Any], raw: Any) -> MemoryDelta:
    if not isinstance(raw, dict):
        raise InvalidDelta(f"each delta must be a JSON object, got {raw!r}")
    merged = {key: episode.get(source) for key, source in _INHERITED.items()}
    merged.update(raw)
    return MemoryDelta.model_validate(merged)


def parse_lines(lines: Iterable[str | bytes]) -> Iterator[ReplayLine | LineError]:
    for number, text in enumerate(lines, start=1):
        parsed = parse_line(number, text)
        if parsed is not None:
            yield parsed


def replay(store: Store, lines: Iterable[str | bytes], *, atomic: bool = False, chunk_lines: int = 500,
           on_progress: Callable[[int], None] | None = None) -> ReplaySummary:
    """Record each line's episode, then write its deltas; returns a :class:`ReplaySummary`.

    Lines are applied in chunks (episodes first, then their deltas in batched transactions), and
    the refusals of a chunk are recorded before the next one (see the module docstring).
    With ``atomic`` every line is parsed and checked before anything is written, and the deltas
    go in one transaction, so a bad line means nothing is applied.
    """
    summary = ReplaySummary()
    parsed = list(parse_lines(lines))
    summary.lines = len(parsed)
    good = [p for p in parsed if isinstance(p, ReplayLine)]
    summary.errors = [p for p in parsed if isinstance(p, LineError)]
    if atomic and summary.errors:
        first = summary.errors[0]
        raise InvalidDelta(f"line {first.number}: {first.message} (atomic replay: nothing was written)")
    summary.line_status.update((e.number, INVALID) for e in summary.errors)
    chunks = [good] if atomic else [good[i:i + chunk_lines] for i in range(0, len(good), chunk_lines)]
    for chunk in chunks:
        _apply_chunk(store, chunk, atomic, summary)
        if on_progress is not None:
            on_progress(len(chunk))
    summary.errors.sort(key=lambda e: e.number)
    summary.line_status = dict(sorted(summary.line_status.items()))
    return summary


def _record_episodes(store: Store, chunk: Sequence[ReplayLine], atomic: bool,
                     summary: ReplaySummary) -> list[ReplayLine]:
    """Record the chunk's episodes; lines whose episode id clashes are rejected, the rest kept.

    Every line's episode goes in, repeats included: episode ids are permanent, so a line whose id
    the store, or an earlier line, holds with other content is rejected (``invalid``) whether or
    not the two share a chunk. A chunk where that happens is recorded again line by line, in
    order, as if each line were a chunk of its own.
    """
    episodes = [line.episode for line in chunk]
    try:
        clash = _reused_id(chunk)
        if clash is not None:
            raise clash
        recorded = {(r.tenant_id, r.id): r for r in store.run(record_op(episodes, store.clock))}
        kept = [(line, recorded[(line.episode.tenant_id, line.episode.id)]) for line in chunk]
    except Conflict as exc:
        if atomic:
            raise InvalidDelta(f"{exc} (atomic replay: nothing was written)") from exc
        kept = []
        for line in chunk:
            try:
                [one] = store.run(record_op([line.episode], store.clock))
            except Conflict as conflict:
                summary.errors.append(LineError(line.number, str(conflict)))
                summary.line_status[line.number] = INVALID
                continue
            kept.append((line, one))
    summary.episodes += len({(line.episode.tenant_id, line.episode.id) for line, _ in kept})
    for line, one in kept:
        summary._mark(line.number, WRITTEN if one.created else UNCHANGED)
    return [_cite_stored(line, one.stored_id) for line, one in kept]


def _reused_id(chunk: Sequence[ReplayLine]) -> Conflict | None:
    """The first line of ``chunk`` whose episode id an earlier line gives with other content."""
    first: dict[tuple[str, str], ReplayLine] = {}
    for line in chunk:
        earlier = first.setdefault((line.episode.tenant_id, line.episode.id), line)
        if earlier.episode.content_hash != line.episode.content_hash:
            return Conflict(f"line {line.number}: episode {line.episode.id!r} of tenant "
                            f"{line.episode.tenant_id!r} is given at line {earlier.number} with other "
                            "content: episode ids are permanent; give the new episode a new id")
    return None


def _cite_stored(line: ReplayLine, stored: str) -> ReplayLine:
    """A line whose episode duplicates a stored one (same content hash) carries it under its
    stored id, and its deltas that cited the given id cite that one."""
    if stored == line.episode.id:
        return line
    return ReplayLine(line.number, line.episode.model_copy(update={"id": stored}), tuple(
        d.model_copy(update={"source_episode_id": stored})
        if d.source_episode_id == line.episode.id else d for d in line.deltas))


@dataclass(frozen=True)
class _Item:
    """One delta of a chunk with its line, its idempotency key (``keys[0]``) and the other key a
    refusal of it may be recorded under."""

    line: int
    delta: MemoryDelta
    occurred_at: datetime | None
    keys: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.keys[0]


@dataclass(frozen=True)
class _Verdict:
    """A refusal: the line it was first recorded at, its reason and error type."""

    line: int
    reason: str
    error: str


def _items(chunk: Sequence[ReplayLine], schema: Schema) -> list[_Item]:
    """The chunk's deltas with their keys: the write path's idempotency key, and for a delta the
    schema refuses (it has no canonical value) one over its value as given. A delta keeps that
    second key too, so its refusal is still found after a schema change made it valid."""
    pairs = [(line, d) for line in chunk for d in line.deltas]
    ready, _ = prepare([d for _, d in pairs], schema)
    canonical = {p.index: p.key for p in ready}
    items = []
    for index, (line, delta) in enumerate(pairs):
        raw = delta_key(delta, "raw:" + q.candidate_json(delta.value))
        own = delta.source_episode_id == line.episode.id
        items.append(_Item(line.number, delta, line.episode.occurred_at if own else None,
                           (canonical[index], raw) if index in canonical else (raw,)))
    return items


def _recorded(store: Store, items: Sequence[_Item]) -> dict[str, _Verdict]:
    """The open refusal records of the items' keys, by key."""
    statement = q.refusals_of(sorted({(i.delta.tenant_id, k) for i in items for k in i.keys}))
    return {r["key"]: _Verdict(r["line"], r["reason"], r["error"])
            for r in store.read(statement.query, statement.params)}


def _refused_as_before(summary: ReplaySummary, item: _Item, verdict: _Verdict) -> None:
    summary.errors.append(LineError(item.line, verdict.reason, REFUSED_AS_BEFORE, verdict.line))
    summary._mark(item.line, REFUSED_AS_BEFORE)


def _retention(schema: Schema, attribute: str) -> str | None:
    try:
        return schema.attribute(attribute).retention
    except SgamError:
        return None


def _write(store: Store, deltas: list[MemoryDelta], atomic: bool) -> BatchResult:
    if not deltas:
        return BatchResult(())
    try:
        return store.run(write_many_op(deltas, store.schema, store.clock, atomic=atomic, max_future=store.max_future))
    except SgamError as exc:
        if atomic:
            raise InvalidDelta(f"{exc} (atomic replay: no delta was written)") from exc
        raise


def _apply_chunk(store: Store, chunk: Sequence[ReplayLine], atomic: bool,
                 summary: ReplaySummary) -> None:
    items = _items(_record_episodes(store, chunk, atomic, summary), store.schema)
    if not items:
        return
    recorded = _recorded(store, items)
    verdicts: dict[str, _Verdict | None] = {}  # a statement judged in this chunk: None = accepted
    sent: list[_Item] = []
    repeats: list[_Item] = []
    for item in items:
        before = next((recorded[k] for k in item.keys if k in recorded), None)
        if before is not None:
            if atomic:
                raise InvalidDelta(f"line {item.line}: refused as before (at line {before.line}): "
                                   f"{before.reason} (atomic replay: no delta was written)")
            _refused_as_before(summary, item, before)
        elif item.key in verdicts:
            repeats.append(item)
        else:
            verdicts[item.key] = None
            sent.append(item)
    refusals = []
    for r in _write(store, [item.delta for item in sent], atomic).results:
        item = sent[r.index]
        if r.ok:
            summary.outcomes[r.outcome] += 1
            summary._mark(item.line, UNCHANGED if r.outcome == UNCHANGED else WRITTEN)
            continue
        error = type(r.error).__name__
        verdicts[item.key] = _Verdict(item.line, r.message, error)
        summary.errors.append(LineError(item.line, r.message, REFUSED))
        summary._mark(item.line, REFUSED)
        refusals.append(q.refusal(item.delta, item.key, item.line, r.message, error, item.occurred_at,
                                  _retention(store.schema, item.delta.attribute)))
    for item in repeats:
        verdict = verdicts[item.key]
        if verdict is None:
            summary.outcomes[UNCHANGED] += 1
            summary._mark(item.line, UNCHANGED)
        else:
            _refused_as_before(summary, item, verdict)
    if refusals:
        store.transact(lambda: q.store_refusals_steps(refusals, store.clock(), store.schema))

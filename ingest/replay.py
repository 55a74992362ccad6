"""Replay a JSONL file of episodes with their structured deltas.

One JSON object a line: an episode, and the deltas it justifies. A delta inherits the episode's
``tenant_id``, ``id`` (as ``source_episode_id``), ``occurred_at`` (as ``valid_from``) and ``actor``
(as ``asserted_by``) unless it says otherwise::

    {"tenant_id": "demo", "id": "e1", "occurred_at": "2026-05-20T09:00:00Z", "actor": "user:mira",
     "content": "My passport deadline is 2026-07-15.",
     "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "2026-07-15"}]}

Blank lines and lines starting with ``#`` are skipped. A bad line is reported with its number and
the good ones are applied; with ``atomic`` nothing is written if any line is bad.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from sgam.graph.errors import Conflict, InvalidDelta, SgamError
from sgam.graph.models import Episode, MemoryDelta
from sgam.graph.writes import BatchResult

_INHERITED = {"tenant_id": "tenant_id", "source_episode_id": "id", "valid_from": "occurred_at",
              "asserted_by": "actor"}


@dataclass(frozen=True)
class ReplayLine:
    number: int
    episode: Episode
    deltas: tuple[MemoryDelta, ...]


@dataclass(frozen=True)
class LineError:
    number: int
    message: str


@dataclass
class ReplaySummary:
    """Counts by outcome, and every rejected line with its reason."""

    lines: int = 0
    episodes: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: list[LineError] = field(default_factory=list)

    @property
    def written(self) -> int:
        return sum(n for k, n in self.outcomes.items() if k not in ("unchanged", "rejected"))

    @property
    def unchanged(self) -> int:
        return self.outcomes["unchanged"]

    @property
    def rejected(self) -> int:
        return len(self.errors)


class Writer(Protocol):
    def record_episodes(self, episodes: Sequence[Episode]) -> dict[str, str]: ...

    def record_episode(self, episode: Episode) -> Episode: ...

    def write_many(self, deltas: Iterable[MemoryDelta], *, atomic: bool = False,
                   batch_size: int = ...) -> BatchResult: ...


def _pydantic_message(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'line'}: {err['msg']}" for err in exc.errors()
    )


def parse_line(number: int, text: str) -> ReplayLine | LineError | None:
    """One line of the file: a :class:`ReplayLine`, a :class:`LineError`, or ``None`` if blank."""
    text = text.strip()
    if not text or text.startswith("#"):
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return LineError(number, f"not valid JSON ({exc.msg} at column {exc.colno})")
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


def parse_lines(lines: Iterable[str]) -> Iterator[ReplayLine | LineError]:
    for number, text in enumerate(lines, start=1):
        parsed = parse_line(number, text)
        if parsed is not None:
            yield parsed


def replay(writer: Writer, lines: Iterable[str], *, atomic: bool = False, chunk_lines: int = 500,
           on_progress: Callable[[int], None] | None = None) -> ReplaySummary:
    """Record each line's episode, then write its deltas; returns a :class:`ReplaySummary`.

    Lines are applied in chunks (episodes first, then their deltas in batched transactions).
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
    chunks = [good] if atomic else [good[i:i + chunk_lines] for i in range(0, len(good), chunk_lines)]
    for chunk in chunks:
        _apply_chunk(writer, chunk, atomic, summary)
        if on_progress is not None:
            on_progress(len(chunk))
    summary.errors.sort(key=lambda e: e.number)
    return summary


def _record_episodes(writer: Writer, chunk: Sequence[ReplayLine], atomic: bool,
                     summary: ReplaySummary) -> Sequence[ReplayLine]:
    """Record the chunk's episodes; lines whose episode id clashes are rejected, the rest kept."""
    episodes = list({(line.episode.tenant_id, line.episode.id): line.episode for line in chunk}.values())
    try:
        outcomes = writer.record_episodes(episodes)
        summary.episodes += len(episodes)
        return _cite_stored(writer, chunk, outcomes)
    except Conflict:
        if atomic:
            raise
    kept = []
    outcomes = {}
    for line in chunk:
        try:
            outcomes.update(writer.record_episodes([line.episode]))
        except Conflict as exc:
            summary.errors.append(LineError(line.number, str(exc)))
            continue
        summary.episodes += 1
        kept.append(line)
    return _cite_stored(writer, kept, outcomes)


def _cite_stored(writer: Writer, lines: Sequence[ReplayLine], outcomes: dict[str, str]) -> list[ReplayLine]:
    """Deltas of a line whose episode duplicates a stored one (same content hash) cite that one."""
    out = []
    for line in lines:
        stored = (writer.record_episode(line.episode).id
                  if outcomes.get(line.episode.id) == "duplicate" else line.episode.id)
        if stored != line.episode.id:
            line = ReplayLine(line.number, line.episode, tuple(
                d.model_copy(update={"source_episode_id": stored})
                if d.source_episode_id == line.episode.id else d for d in line.deltas))
        out.append(line)
    return out


def _apply_chunk(writer: Writer, chunk: Sequence[ReplayLine], atomic: bool,
                 summary: ReplaySummary) -> None:
    chunk = _record_episodes(writer, chunk, atomic, summary)
    deltas: list[MemoryDelta] = []
    origin: list[int] = []
    for line in chunk:
        deltas.extend(line.deltas)
        origin.extend([line.number] * len(line.deltas))
    if not deltas:
        return
    try:
        result = writer.write_many(deltas, atomic=atomic)
    except SgamError as exc:
        if atomic:
            raise InvalidDelta(f"{exc} (atomic replay: no delta was written)") from exc
        raise
    for item in result.results:
        summary.outcomes[item.outcome] += 1
        if not item.ok:
            summary.errors.append(LineError(origin[item.index], item.message))

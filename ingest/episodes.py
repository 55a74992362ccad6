"""Episodes from what agents and systems hand over: messages, tool results, business events, documents.

Each builder returns a validated :class:`~sgam.graph.models.Episode`; nothing here touches the
store. Rules shared by all of them:

* times are timezone-aware (a naive ``occurred_at`` is an error, never shifted);
* content is at most :data:`~sgam.graph.models.MAX_EPISODE_BYTES` (100 kB) of UTF-8 and not blank;
* without an ``id`` the episode gets ``ep-`` + the first 24 hex digits of its content hash, so
  handing over the same thing twice names the same episode (recording deduplicates by hash anyway,
  see :mod:`sgam.graph.recording`).

Bad input raises :class:`~sgam.graph.errors.InvalidDelta` with a message naming the problem.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from pydantic import ValidationError

from sgam.graph.errors import InvalidDelta, validation_problems
from sgam.graph.models import Episode, EpisodeKind

EVENT_TIME_FIELDS = ("occurred_at", "timestamp")
"""Fields of a business event that may carry its occurrence time, in order of preference."""


def _problems(exc: ValidationError) -> str:
    return validation_problems(exc, "episode")


def episode_from_fields(fields: Mapping[str, Any]) -> Episode:
    """An episode from keyword fields; ``speaker`` may stand for ``actor``; without an ``id``, one
    is derived from the content hash."""
    data = dict(fields)
    if "speaker" in data:
        if data.get("actor") is not None:
            raise InvalidDelta("give an episode's speaker or its actor, not both")
        data["actor"] = data.pop("speaker")
    derive = data.get("id") is None
    if derive:
        data["id"] = "ep-pending"
    try:
        episode = Episode.model_validate(data)
    except ValidationError as exc:
        raise InvalidDelta(f"invalid Episode: {_problems(exc)}") from None
    return episode.model_copy(update={"id": "ep-" + episode.content_hash[:24]}) if derive else episode


def new_episode(*, tenant_id: str, content: str, occurred_at: datetime | str,
                kind: EpisodeKind | str = EpisodeKind.MESSAGE, actor: str | None = None,
                session_id: str | None = None, id: str | None = None) -> Episode:
    """A validated episode; ``id`` defaults to one derived from the content hash."""
    fields: dict[str, Any] = {"tenant_id": tenant_id, "content": content, "occurred_at": occurred_at,
                              "kind": kind, "session_id": session_id, "id": id}
    if actor is not None:
        fields["actor"] = actor
    return episode_from_fields(fields)


def message(tenant_id: str, text: str, *, speaker: str, occurred_at: datetime | str,
            session_id: str | None = None, id: str | None = None) -> Episode:
    """Something said in a conversation; ``speaker`` is e.g. ``user:mira`` or ``agent:support``."""
    return new_episode(tenant_id=tenant_id, content=text, occurred_at=occurred_at,
                       kind=EpisodeKind.MESSAGE, actor=speaker, session_id=session_id, id=id)


def tool_result(tenant_id: str, result: Any, *, tool: str, occurred_at: datetime | str,
                session_id: str | None = None, id: str | None = None) -> Episode:
    """What a tool returned; anything but a string is stored as canonical JSON."""
    content = result if isinstance(result, str) else canonical_json(result, "tool result")
    actor = tool if ":" in tool else f"tool:{tool}"
    return new_episode(tenant_id=tenant_id, content=content, occurred_at=occurred_at,
                       kind=EpisodeKind.TOOL_RESULT, actor=actor, session_id=session_id, id=id)


def event(tenant_id: str, payload: Mapping[str, Any], *, occurred_at: datetime | str | None = None,
          source: str = "system:events", session_id: str | None = None,
          id: str | None = None) -> Episode:
    """A structured business event (``{"type": "address_changed", ...}``) as canonical JSON.

    The occurrence time is ``occurred_at`` if given, else the event's own ``occurred_at`` (or
    ``timestamp``) field; an event with neither cannot be stored. Its ``type`` and other fields
    are checked later, by the event mapping (:mod:`sgam.ingest.extractors.events`): a bad event is still
    kept as an episode, and its problem goes to the quarantine.
    """
    if not isinstance(payload, Mapping):
        raise InvalidDelta(f"a business event must be a JSON object, got {type(payload).__name__}")
    when = occurred_at if occurred_at is not None else next(
        (payload[f] for f in EVENT_TIME_FIELDS if payload.get(f) is not None), None)
    if when is None:
        kind = payload.get("type", "(no type)")
        raise InvalidDelta(
            f"business event {kind!r} has no occurrence time: give it an 'occurred_at' field "
            "(ISO 8601 with a timezone) or pass occurred_at"
        )
    return new_episode(tenant_id=tenant_id, content=canonical_json(dict(payload), "event"),
                       occurred_at=when, kind=EpisodeKind.EVENT, actor=source,
                       session_id=session_id, id=id)


def document(tenant_id: str, data: str | bytes, *, occurred_at: datetime | str,
             actor: str = "unknown", name: str | None = None, session_id: str | None = None,
             id: str | None = None) -> Episode:
    """A document's text; bytes must be UTF-8 (a BOM is dropped)."""
    text = decode_utf8(data, name or "document") if isinstance(data, bytes) else data
    return new_episode(tenant_id=tenant_id, content=text, occurred_at=occurred_at,
                       kind=EpisodeKind.DOCUMENT, actor=actor, session_id=session_id, id=id)


def decode_utf8(data: bytes, name: str) -> str:
    """Strict UTF-8 (a leading BOM is dropped); undecodable bytes are an error naming the offset."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1].hex()
        raise InvalidDelta(
            f"{name} is not UTF-8 text: byte 0x{bad} at offset {exc.start} cannot be decoded; "
            "convert it first (e.g. iconv -f latin1 -t utf-8)"
        ) from None


MAX_JSON_DEPTH = 64
"""How deeply a JSON line (an episode, an event, a tool result) may nest objects and lists."""


def json_line(text: str) -> Any:
    """One line of a JSONL file, parsed: strict JSON (``NaN`` and ``Infinity`` are not JSON) nested
    at most :data:`MAX_JSON_DEPTH` deep. Anything else raises :class:`InvalidDelta` saying why."""
    too_deep = InvalidDelta(f"JSON nested deeper than {MAX_JSON_DEPTH} levels: flatten it")
    try:
        data = json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise InvalidDelta(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except _NotJson as exc:
        raise InvalidDelta(f"not valid JSON ({exc.args[0]} is no JSON number: give a finite number "
                           "or null)") from None
    except RecursionError:
        raise too_deep from None
    if _deeper_than(data, MAX_JSON_DEPTH):
        raise too_deep
    return data


class _NotJson(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity``, which Python's json module reads and JSON has not."""


def _not_json(name: str) -> Any:
    raise _NotJson(name)


def _deeper_than(data: Any, limit: int) -> bool:
    """Whether ``data`` nests more than ``limit`` levels (without recursion: any depth is safe)."""
    level = [data]
    for _ in range(limit):
        level = [child for item in level if isinstance(item, (dict, list))
                 for child in (item.values() if isinstance(item, dict) else item)]
        if not level:
            return False
    return any(isinstance(item, (dict, list)) for item in level)


def _instant(value: Any) -> str:
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def canonical_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False, default=_instant)
    except (TypeError, ValueError) as exc:
        raise InvalidDelta(f"the {what} is not JSON-serialisable: {exc}") from None


__all__ = ["MAX_JSON_DEPTH", "canonical_json", "decode_utf8", "json_line", "document", "episode_from_fields", "event", "message", "new_episode",
           "tool_result"]

"""Reading what ``sgam ingest`` is given: documents, and JSONL files of messages, tool results or events.

``--kind document``: each file is one document episode (UTF-8; other bytes are an error for that
file, nothing else). Any other kind: a JSONL file, one episode a line (blank and ``#`` lines are
skipped), the line's ``kind`` overriding the command's:

* ``message``: ``{"speaker": "user:mira", "text": "...", "occurred_at": "...Z"}``, optionally
  ``id``, ``session_id``, ``deltas`` (the agent's own candidates, written now) and ``remember``;
* ``tool_result``: ``{"tool": "crm", "result": {...} or "text", "occurred_at": "...Z"}``;
* ``event``: the business event itself, ``{"type": "address_changed", "occurred_at": "...Z",
  "customer_id": "cust-ada", ...}``;
* ``document``: ``{"text": "...", "occurred_at": "...Z"}``.

``content`` may stand for ``text``, ``actor`` for ``speaker``. A line without ``occurred_at`` uses
the command's ``--occurred-at``. Each bad line (not UTF-8, not JSON, a naive time, empty or over
100 kB) is reported with its number and the good ones are kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sgam.graph.errors import InvalidDelta
from sgam.graph.models import Episode, EpisodeKind

from . import episodes


@dataclass(frozen=True)
class Item:
    """One episode to ingest, where it came from, and the agent's own deltas for it."""

    source: str
    episode: Episode
    deltas: tuple[dict[str, Any], ...] = ()
    remember: bool = False


@dataclass(frozen=True)
class ItemError:
    source: str
    message: str


@dataclass(frozen=True)
class Defaults:
    """What the command line says for every episode that does not say it itself."""

    tenant_id: str
    kind: EpisodeKind = EpisodeKind.MESSAGE
    actor: str | None = None
    session_id: str | None = None
    occurred_at: datetime | None = None


def read_items(path: Path, defaults: Defaults) -> Iterator[Item | ItemError]:
    """The items of one file (see the module docstring)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        yield ItemError(str(path), f"cannot be read: {exc.strerror}")
        return
    if defaults.kind is EpisodeKind.DOCUMENT:
        yield _document_file(path, data, defaults)
        return
    for number, raw in enumerate(data.split(b"\n"), start=1):
        source = f"{path}:{number}"
        try:
            text = episodes.decode_utf8(raw, f"line {number}").strip()
            if text and not text.startswith("#"):
                yield _line(source, text, defaults)
        except InvalidDelta as exc:
            yield ItemError(source, str(exc))


def _document_file(path: Path, data: bytes, defaults: Defaults) -> Item | ItemError:
    if defaults.occurred_at is None:
        return ItemError(str(path), "a document needs --occurred-at (when it was written or received)")
    try:
        episode = episodes.document(defaults.tenant_id, data, name=str(path),
                                    occurred_at=defaults.occurred_at,
                                    actor=defaults.actor or "unknown", session_id=defaults.session_id)
    except InvalidDelta as exc:
        return ItemError(str(path), str(exc))
    return Item(str(path), episode)


def _line(source: str, text: str, defaults: Defaults) -> Item:
    obj = episodes.json_line(text)
    if not isinstance(obj, dict):
        raise InvalidDelta("expected a JSON object, one episode a line")
    tenant = obj.pop("tenant_id", defaults.tenant_id)
    if tenant != defaults.tenant_id:
        raise InvalidDelta(f"the line names tenant {tenant!r}, but the command ingests into "
                           f"{defaults.tenant_id!r}")
    try:
        kind = EpisodeKind(obj.pop("kind", defaults.kind))
    except ValueError:
        raise InvalidDelta(f"unknown kind; use one of {', '.join(k.value for k in EpisodeKind)}") from None
    if kind is EpisodeKind.EVENT:
        own_time = any(obj.get(f) is not None for f in episodes.EVENT_TIME_FIELDS)
        return Item(source, episodes.event(defaults.tenant_id, obj,
                                           occurred_at=None if own_time else defaults.occurred_at,
                                           source=defaults.actor or "system:events",
                                           session_id=defaults.session_id))
    return _episode_line(source, obj, kind, defaults)


def _episode_line(source: str, obj: dict[str, Any], kind: EpisodeKind, defaults: Defaults) -> Item:
    deltas = obj.pop("deltas", [])
    if not isinstance(deltas, list) or not all(isinstance(d, dict) for d in deltas):
        raise InvalidDelta("'deltas' must be a list of objects")
    remember = obj.pop("remember", False)
    if not isinstance(remember, bool):
        raise InvalidDelta("'remember' must be true or false")
    text_keys = ("result", "text", "content") if kind is EpisodeKind.TOOL_RESULT else ("text", "content")
    content = next((obj.pop(k) for k in text_keys if k in obj), None)
    actor = obj.pop("speaker", None) or obj.pop("actor", None) or obj.pop("tool", None) or defaults.actor
    fields = {"tenant_id": defaults.tenant_id, "kind": kind, "content": content,
              "occurred_at": obj.pop("occurred_at", None) or defaults.occurred_at, "actor": actor,
              "session_id": obj.pop("session_id", defaults.session_id), "id": obj.pop("id", None)}
    if obj:
        raise InvalidDelta(f"unknown field{'s' if len(obj) > 1 else ''} {', '.join(sorted(obj))}")
    if content is None:
        raise InvalidDelta(f"a {kind.value} line needs its {' or '.join(text_keys)}")
    if fields["occurred_at"] is None:
        raise InvalidDelta("the line has no occurred_at (ISO 8601 with a timezone) and the command "
                           "gives no --occurred-at")
    if kind is EpisodeKind.TOOL_RESULT:
        fields["content"] = content if isinstance(content, str) else episodes.canonical_json(content, "tool result")
        if actor and ":" not in actor:
            fields["actor"] = f"tool:{actor}"
    return Item(source, episodes.episode_from_fields({k: v for k, v in fields.items() if v is not None}),
                tuple(deltas), remember)


__all__ = ["Defaults", "Item", "ItemError", "read_items"]

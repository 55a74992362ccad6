"""The fact model: pure Pydantic models, no I/O.

An :class:`Episode` is a raw thing that was said or happened. A :class:`MemoryDelta` is a proposed
write about one (tenant, subject, attribute), justified by an episode. A :class:`Fact` is one stored
version of a fact (one relationship in Neo4j) with its valid time and transaction time. An
:class:`Entity` is a node.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import date, datetime, timezone
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ScalarValue = str | int | float | bool | date | datetime

# \Z, not $: "$" also matches before a trailing newline, which would let "mira\n" through.
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}\Z")
_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}\Z")
_PRINCIPAL_RE = re.compile(r"^[a-z][a-z0-9_\-]{0,31}:[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}\Z")

SUBJECT_READER = "subject"
"""In a private attribute's ``readers``: the principal of the subject the fact is about (``user:<id>``)."""

ALL_PRINCIPALS = "*"
"""The reader that sees every fact, private ones included: trusted admin or analyst reads only."""


def utcnow() -> datetime:
    """The current instant, timezone-aware UTC (the default clock)."""
    return datetime.now(timezone.utc)


def require_aware(value: datetime, field: str) -> datetime:
    """Return ``value`` in UTC, refusing naive datetimes instead of guessing their zone."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(
            f"{field} is a naive datetime ({value.isoformat()}); give it a timezone, "
            f"e.g. {value.isoformat()}+00:00 or a trailing Z"
        )
    return value.astimezone(timezone.utc)


def check_tenant(value: str) -> str:
    """Validate a tenant id: 1-64 characters of letters, digits, '_' and '-'."""
    if not isinstance(value, str) or not _TENANT_RE.match(value):
        raise ValueError(
            f"tenant_id {value!r} is not valid: use 1-64 letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def check_principal(value: str | None, *, reading: bool = False) -> str | None:
    """Validate a reader principal, ``kind:name`` (``user:mira``, ``agent:hr``).

    When ``reading``, ``None`` (no principal: shared facts only) and :data:`ALL_PRINCIPALS` are
    accepted too.
    """
    if reading and (value is None or value == ALL_PRINCIPALS):
        return value
    if not isinstance(value, str) or not _PRINCIPAL_RE.match(value):
        extra = f", {ALL_PRINCIPALS!r} for every fact, or None for shared facts only" if reading else ""
        raise ValueError(
            f"principal {value!r} is not valid: use kind:name, e.g. 'user:mira' or 'agent:hr' "
            f"(kind: 1-32 lower-case letters, digits, '_' or '-'; name: up to 128 of letters, "
            f"digits or '_.:@-'){extra}"
        )
    return value


MAX_EPISODE_BYTES = 100_000
"""The largest episode content accepted: 100 kB of UTF-8 (split longer documents into parts)."""


def check_content(value: str) -> str:
    """Validate episode content: not blank, at most :data:`MAX_EPISODE_BYTES` of UTF-8."""
    if not value.strip():
        raise ValueError("episode content is empty: there is nothing to remember")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"episode content is not valid Unicode text (a lone surrogate at character {exc.start}); "
            "decode the source with its real encoding"
        ) from None
    if size > MAX_EPISODE_BYTES:
        raise ValueError(
            f"episode content is {size} bytes of UTF-8, over the {MAX_EPISODE_BYTES}-byte limit: "
            "split the document into smaller episodes"
        )
    return value


def check_id(value: str, field: str = "id") -> str:
    """Validate an entity or episode id: 1-128 printable characters without spaces or quotes."""
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise ValueError(
            f"{field} {value!r} is not valid: use 1-128 letters, digits or '_.:@-', "
            "starting with a letter or digit"
        )
    return value


class Op(str, Enum):
    """What a delta does to the stored state (DESIGN.md, "Temporal semantics")."""

    ASSERT = "assert"
    CORRECT = "correct"
    RETRACT = "retract"
    CONFIRM = "confirm"


class Cardinality(str, Enum):
    ONE = "one"
    MANY = "many"


class Status(str, Enum):
    CONFIRMED = "confirmed"
    CANDIDATE = "candidate"


class EpisodeKind(str, Enum):
    MESSAGE = "message"
    TOOL_RESULT = "tool_result"
    EVENT = "event"
    DOCUMENT = "document"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Episode(_Model):
    """A raw episode, stored before anything is extracted from it."""

    tenant_id: str
    id: str
    content: str
    occurred_at: datetime
    kind: EpisodeKind = EpisodeKind.MESSAGE
    actor: str = Field(default="unknown", min_length=1, max_length=200)
    session_id: str | None = None

    _tenant = field_validator("tenant_id")(classmethod(lambda cls, v: check_tenant(v)))
    _id = field_validator("id")(classmethod(lambda cls, v: check_id(v, "episode id")))
    _content = field_validator("content")(classmethod(lambda cls, v: check_content(v)))

    @field_validator("occurred_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return require_aware(value, "occurred_at")

    @property
    def content_hash(self) -> str:
        """Hash of what was said, by whom and when: the per-tenant deduplication key."""
        payload = json.dumps(
            [self.kind.value, self.actor, self.occurred_at.isoformat(), self.content]
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class MemoryDelta(_Model):
    """A proposed write. Models propose these; :func:`sgam.graph.reconcile` decides what they do.

    ``value`` is a literal for attribute facts and the target entity id for relation facts. A
    ``retract`` (or a ``confirm`` of the only pending candidate) may leave ``value`` out for a
    cardinality-one attribute. ``confirm`` promotes a pending candidate; ``asserted_by`` is the
    confirming actor.
    """

    tenant_id: str
    subject: str
    attribute: str = Field(min_length=1, max_length=64)
    value: Any = None
    valid_from: datetime
    source_episode_id: str
    op: Op = Op.ASSERT
    asserted_by: str | None = Field(default=None, max_length=200)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    subject_type: str | None = None
    subject_name: str | None = None
    valid_to: datetime | None = None
    replaces: Any = None

    _tenant = field_validator("tenant_id")(classmethod(lambda cls, v: check_tenant(v)))
    _subject = field_validator("subject")(classmethod(lambda cls, v: check_id(v, "subject")))
    _episode = field_validator("source_episode_id")(
        classmethod(lambda cls, v: check_id(v, "source_episode_id"))
    )

    @field_validator("valid_from")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return require_aware(value, "valid_from")

    @field_validator("valid_to")
    @classmethod
    def _interval_end(cls, value: datetime | None, info: Any) -> datetime | None:
        if value is None:
            return None
        value = require_aware(value, "valid_to")
        start = info.data.get("valid_from")
        if start is not None and value <= start:
            raise ValueError(f"valid_to {value.isoformat()} is not after valid_from {start.isoformat()}: "
                             "a statement speaks about [valid_from, valid_to); leave valid_to out for "
                             "an open end")
        return value

    @property
    def key(self) -> tuple[str, str, str]:
        """The (tenant, subject, attribute) slot this delta writes to."""
        return (self.tenant_id, self.subject, self.attribute)


class Entity(_Model):
    """A node: ``(:Entity:<Type> {tenant_id, id, name})``."""

    tenant_id: str
    id: str
    type: str
    name: str | None = None


class Fact(BaseModel):
    """One stored fact version (one relationship), as read back from Neo4j."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    memory_id: str
    tenant_id: str
    subject: str
    attribute: str
    value: Any
    value_key: str
    value_type: str
    kind: Literal["attribute", "relation"] = "attribute"
    memory_type: str
    schema_version: int
    valid_from: datetime
    valid_to: datetime | None = None
    recorded_at: datetime
    expired_at: datetime | None = None
    supersedes_memory_id: str | None = None
    revises_memory_id: str | None = None
    source_episode_id: str
    asserted_by: str
    confidence: float
    retention_policy: str
    visible_to: tuple[str, ...] | None = None
    status: Status = Status.CONFIRMED
    op: Op = Op.ASSERT
    support_count: int = 1
    support_episodes: tuple[str, ...] = ()
    last_confirmed_at: datetime | None = None
    expired_by_episode_id: str | None = None
    expired_by_delta_key: str | None = None
    delta_keys: tuple[str, ...] = ()
    confirmed_by: str | None = None
    confirmed_by_episode_id: str | None = None

    def valid_at(self, instant: datetime) -> bool:
        """Whether ``instant`` lies in the half-open valid interval ``[valid_from, valid_to)``."""
        return self.valid_from <= instant and (self.valid_to is None or instant < self.valid_to)

    def believed_at(self, instant: datetime) -> bool:
        """Whether the system believed this row at ``instant`` (transaction time)."""
        return self.recorded_at <= instant and (self.expired_at is None or instant < self.expired_at)

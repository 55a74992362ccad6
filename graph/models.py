"""The fact model: pure Pydantic models, no I/O.

An :class:`Episode` is a raw thing that was said or happened. A :class:`MemoryDelta` is a proposed
write about one (tenant, subject, attribute), justified by an episode. A :class:`Fact` is one stored
version of a fact (one relationship in Neo4j) with its valid time and transaction time. An
:class:`Entity` is a node.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import reprlib
from datetime import date, datetime, timezone
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

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
    return _utc(value, field)


def _utc(value: datetime, field: str) -> datetime:
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:
        # 9999-12-31T23:00:00-05:00 is a valid ISO string, but its UTC instant is in year 10000.
        raise ValueError(f"{field} {value.isoformat()} lies outside the years 1 to 9999 once moved to "
                         "UTC; give an instant inside them") from None


def require_instant(value: Any, field: str) -> datetime:
    """An instant in UTC from an aware ``datetime`` or an ISO 8601 string with a timezone: the
    rule for the times a write carries (``valid_from``, ``valid_to``, ``occurred_at``).

    Nothing else is taken for an instant: not a number (pydantic would read ``5`` as five seconds
    after 1970), not a date, not a time without a zone. Raises :class:`ValueError` naming ``field``.
    """
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{field} {shown(value)} is not an ISO 8601 instant; e.g. "
                             "'2026-06-02T12:00:00Z'") from None
        return require_aware(parsed, field)
    if isinstance(value, datetime):
        return require_aware(value, field)
    raise ValueError(f"{field} must be an ISO 8601 string with a timezone (e.g. '2026-06-02T12:00:00Z') "
                     f"or an aware datetime, not {type(value).__name__} {shown(value)}")


INSTANT_EXAMPLE = "e.g. '2026-06-02T12:00:00Z', or a date alone, '2026-06-02' (midnight UTC)"
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}\Z")


def parse_instant(value: datetime | date | str, field: str = "instant") -> datetime:
    """An instant in UTC from what a caller gives: the one rule for the API, the CLI and the
    named queries.

    An aware ``datetime`` or an ISO 8601 string with a timezone (``2026-06-02T12:00:00Z``); a date
    alone (``2026-06-02`` or a :class:`~datetime.date`) is midnight UTC of that day. A time without
    a zone is refused, as :func:`require_aware` refuses naive datetimes: the zone is never guessed.
    Raises :class:`ValueError` naming ``field`` (callers turn it into their own error).
    """
    if isinstance(value, datetime):
        return require_aware(value, field)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a datetime or an ISO 8601 string, not {type(value).__name__} "
                         f"{value!r}; {INSTANT_EXAMPLE}")
    text = value.strip()
    try:
        if _DATE_ONLY.match(text):
            return parse_instant(date.fromisoformat(text), field)
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{field} {value!r} is not an ISO 8601 instant; {INSTANT_EXAMPLE}") from None
    if parsed.tzinfo is None or parsed.tzinfo.utcoffset(parsed) is None:
        raise ValueError(f"{field} {value!r} has no timezone; add one ({text}Z for UTC), or give a "
                         f"date alone for midnight UTC")
    return _utc(parsed, field)


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

MAX_VALUE_BYTES = 7_000
"""The longest string a delta may carry as its ``value``, ``replaces`` or ``subject_name``, in
bytes of UTF-8. Neo4j's range indexes hold a key of at most 8,167 bytes, each string taking its
UTF-8 length plus 3 (measured on 5.26), and a value is indexed in a key that also holds the tenant,
subject and attribute (``Value(tenant_id, key)``, up to about 270 bytes more); a longer string
failed the whole transaction. Longer text belongs in an episode (up to 100 kB)."""

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The integers Neo4j stores (signed 64-bit); the driver cannot send any other."""


def utf8_size(value: str, field: str) -> int:
    """The UTF-8 length of ``value``; a lone surrogate (which no UTF-8 text holds, but JSON's
    ``\\ud800`` escape and Python strings can) raises :class:`ValueError` naming ``field``."""
    if value.isascii():
        return len(value)
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{field} is not valid Unicode text (a lone surrogate, U+{ord(value[exc.start]):04X}, at "
            f"character {exc.start}); decode the source with its real encoding"
        ) from None


def check_value(value: Any, field: str = "value") -> Any:
    """A scalar as the store can hold it: a string of at most :data:`MAX_VALUE_BYTES` of valid
    UTF-8, an integer in signed 64 bits, a finite float; anything else is left to the schema.
    Raises :class:`ValueError` naming ``field``."""
    if isinstance(value, str):
        size = utf8_size(value, field)
        if size > MAX_VALUE_BYTES:
            raise ValueError(f"{field} is {size} bytes of UTF-8, over the {MAX_VALUE_BYTES}-byte limit "
                             "of an indexed string: keep long text in the episode")
    elif isinstance(value, bool):
        pass
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{field} {shown(value)} is outside the signed 64-bit integers Neo4j stores "
                             f"({INT64_MIN} to {INT64_MAX})")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{field} is {value!r}: not a number the store keeps; give a finite number")
    return value


def shown(value: Any) -> str:
    """``repr(value)`` cut short for a message: long strings, deep or large containers and huge
    integers are abridged (and never recurse without bound); a date or time is its ISO form
    (``1991-03-13``, not ``datetime.date(1991, 3, 13)``), also inside a container."""
    return _SHORT.repr(value)


class _MessageRepr(reprlib.Repr):
    def repr1(self, x: Any, level: int) -> str:
        if isinstance(x, (date, datetime)):
            return x.isoformat()
        if callable(getattr(x, "iso_format", None)):  # neo4j.time values, as a read returns them
            return str(x.iso_format())
        return super().repr1(x, level)


_SHORT = _MessageRepr()
_SHORT.maxstring = 80
_SHORT.maxother = 80
_SHORT.maxlong = 40


def check_content(value: str) -> str:
    """Validate episode content: not blank, at most :data:`MAX_EPISODE_BYTES` of UTF-8."""
    if not value.strip():
        raise ValueError("episode content is empty: there is nothing to remember")
    size = utf8_size(value, "episode content")
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

    @model_validator(mode="after")
    def _unicode(self) -> "_Model":
        # A lone surrogate passes pydantic's str but no driver can send it (UnicodeEncodeError).
        for name, value in self.__dict__.items():
            if type(value) is str and not value.isascii():
                utf8_size(value, name)
        return self


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

    @field_validator("occurred_at", mode="before")
    @classmethod
    def _instant(cls, value: Any) -> datetime:
        return require_instant(value, "occurred_at")

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
    confirming actor. ``valid_to`` makes the statement speak about ``[valid_from, valid_to)`` only
    (SQL:2011 ``FOR PORTION OF``); ``replaces`` names the wrong member that a ``correct`` of a
    set-valued attribute replaces. The rules: ``docs/temporal-semantics.md``.
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

    @field_validator("valid_from", "valid_to", mode="before")
    @classmethod
    def _instant(cls, value: Any, info: ValidationInfo) -> datetime | None:
        return None if value is None else require_instant(value, info.field_name or "time")

    @field_validator("value", "replaces")
    @classmethod
    def _storable(cls, value: Any, info: ValidationInfo) -> Any:
        return check_value(value, info.field_name or "value")

    @field_validator("subject_name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else check_value(value, "subject_name")

    @model_validator(mode="after")
    def _interval(self) -> "MemoryDelta":
        if self.valid_to is not None:
            if self.valid_to <= self.valid_from:
                raise ValueError(
                    f"valid_to {self.valid_to.isoformat()} is not after valid_from "
                    f"{self.valid_from.isoformat()}: an interval [valid_from, valid_to) needs "
                    "valid_to later than valid_from (leave valid_to out for 'until further notice')"
                )
            if self.op in (Op.CORRECT, Op.CONFIRM):
                raise ValueError(
                    f"op {self.op.value!r} takes no valid_to: a correction replaces the version "
                    "holding at valid_from; to say a value held only on an interval, use an "
                    "'assert' with valid_to"
                )
        if self.replaces is not None and self.op is not Op.CORRECT:
            raise ValueError("'replaces' names the wrong member a 'correct' replaces; "
                             f"op {self.op.value!r} takes none")
        return self

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

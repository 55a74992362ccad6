"""The operations of the service: one request model and one scope per operation.

The HTTP API validates a request body with the model, the MCP server a tool's arguments, so both
surfaces refuse the same input with the same message. No model has a tenant, principal or actor
field: those come from the caller's API key (:mod:`.keys`), and ``extra="forbid"`` refuses a body
that tries to send one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sgam.graph.models import MAX_EPISODE_BYTES, MAX_VALUE_BYTES, EpisodeKind

ID = Field(min_length=1, max_length=128, description="An entity id, e.g. mira")
ATTRIBUTE = Field(min_length=1, max_length=64)
INSTANT = Field(min_length=1, max_length=64,
                description="ISO 8601 with a timezone (2026-06-02T12:00:00Z), or a date alone (midnight UTC)")
MAX_LIST = 100


class Scope(str, Enum):
    """What a key may do; each scope includes the ones before it."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    def allows(self, needed: Scope) -> bool:
        order = list(Scope)
        return order.index(self) >= order.index(needed)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeltaIn(_Request):
    """One fact to remember, about ``subject``; times default to the episode's ``occurred_at``."""

    subject: str = ID
    attribute: str = ATTRIBUTE
    value: Any = Field(default=None, description="The value (for a relation: the target entity's id)")
    op: Literal["assert", "correct", "retract"] = "assert"
    valid_from: str | None = Field(default=None, max_length=64)
    valid_to: str | None = Field(default=None, max_length=64)
    subject_type: str | None = Field(default=None, max_length=64)
    subject_name: str | None = Field(default=None, max_length=MAX_VALUE_BYTES)
    replaces: Any = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)


class RememberIn(_Request):
    """Record an episode; facts given as deltas are written before the call returns, all or none."""

    content: str = Field(min_length=1, max_length=MAX_EPISODE_BYTES,
                         description="What was said or happened, verbatim")
    occurred_at: str | None = Field(default=None, max_length=64,
                                    description="When it happened (ISO 8601 with a timezone); default now")
    kind: EpisodeKind = EpisodeKind.MESSAGE
    episode_id: str | None = Field(default=None, min_length=1, max_length=128,
                                   description="Default: derived from the content")
    session_id: str | None = Field(default=None, max_length=128)
    deltas: list[DeltaIn] = Field(default_factory=list, max_length=MAX_LIST)
    extract: bool = Field(default=False, description="Without deltas: extract now instead of queueing "
                                                     "the episode for the background worker")


class CurrentIn(_Request):
    subject: str = ID
    attribute: str | None = Field(default=None, max_length=64)
    include_candidates: bool = False
    memory_types: list[str] | None = Field(default=None, max_length=MAX_LIST)


class AsOfIn(_Request):
    subject: str = ID
    attribute: str | None = Field(default=None, max_length=64)
    valid_at: str = INSTANT
    known_at: str | None = Field(default=None, max_length=64,
                                 description="Transaction time: what the store believed then; default now")
    include_candidates: bool = False
    memory_types: list[str] | None = Field(default=None, max_length=MAX_LIST)


class HistoryIn(_Request):
    subject: str = ID
    attribute: str | None = Field(default=None, max_length=64)
    current_only: bool = False
    memory_types: list[str] | None = Field(default=None, max_length=MAX_LIST)


class ProvenanceIn(_Request):
    memory_id: str = Field(min_length=1, max_length=128)


class TraverseIn(_Request):
    subject: str = ID
    relations: list[str] = Field(min_length=1, max_length=10)
    valid_at: str | None = Field(default=None, max_length=64)
    known_at: str | None = Field(default=None, max_length=64)


class ContextIn(_Request):
    question: str = Field(min_length=1, max_length=4000)
    subjects: list[str] | None = Field(default=None, max_length=MAX_LIST)
    valid_at: str | None = Field(default=None, max_length=64)
    budget_tokens: int = Field(default=800, ge=50, le=32000)
    memory_types: list[str] | None = Field(default=None, max_length=MAX_LIST)


class ConfirmIn(_Request):
    """Confirm a pending candidate in a recorded episode; the confirming actor is the key's principal."""

    subject: str = ID
    attribute: str = ATTRIBUTE
    value: Any = None
    episode_id: str = Field(min_length=1, max_length=128)


class RetractIn(_Request):
    """Say a value no longer holds (from ``valid_from``, default the episode's time)."""

    subject: str = ID
    attribute: str = ATTRIBUTE
    value: Any = Field(default=None, description="Which value; may be left out for a one-valued attribute")
    episode_id: str = Field(min_length=1, max_length=128,
                            description="The recorded episode that says so (remember records one)")
    valid_from: str | None = Field(default=None, max_length=64)


class ForgetIn(_Request):
    subject: str = ID
    dry_run: bool = False
    reason: str | None = Field(default=None, max_length=500)


class CandidatesIn(_Request):
    subject: str | None = Field(default=None, max_length=128)
    attribute: str | None = Field(default=None, max_length=64)


class QuarantineIn(_Request):
    status: Literal["open", "resolved", "all"] = "open"


class SchemaIn(_Request):
    pass


@dataclass(frozen=True)
class Operation:
    """One operation: the MCP tool of that name and ``POST /v1/<path>``."""

    name: str
    path: str
    scope: Scope
    model: type[_Request]
    description: str


OPERATIONS: tuple[Operation, ...] = (
    Operation("remember", "remember", Scope.WRITE, RememberIn,
              "Record what was said or happened (an episode) and remember facts from it. Give the facts "
              "as deltas to write them now (all or none); without deltas the episode is queued for "
              "background extraction (or extracted now with extract=true)."),
    Operation("current", "current", Scope.READ, CurrentIn,
              "The facts about a subject that hold now, as the store believes them now."),
    Operation("as_of", "as-of", Scope.READ, AsOfIn,
              "The facts about a subject that held at valid_at, as believed now or at known_at."),
    Operation("history", "history", Scope.READ, HistoryIn,
              "Every stored version of a subject's facts, retired ones included."),
    Operation("provenance", "provenance", Scope.READ, ProvenanceIn,
              "Where one fact version (memory_id) came from: its episode, and the versions it "
              "superseded or was superseded by."),
    Operation("traverse", "traverse", Scope.READ, TraverseIn,
              "Paths from a subject along relation attributes, every hop valid at valid_at (default now)."),
    Operation("context", "context", Scope.READ, ContextIn,
              "The smallest context that answers a question: the exact facts with citations, then "
              "labelled evidence."),
    Operation("confirm", "confirm", Scope.WRITE, ConfirmIn,
              "Confirm a pending candidate value (the caller is the confirming actor)."),
    Operation("retract", "retract", Scope.WRITE, RetractIn,
              "Say that a value no longer holds, citing the recorded episode that says so."),
    Operation("forget", "forget", Scope.ADMIN, ForgetIn,
              "Erase a subject completely and leave a tombstone (admin keys only)."),
    Operation("candidates", "candidates", Scope.READ, CandidatesIn,
              "Pending candidate values (waiting for recurrence or confirmation)."),
    Operation("quarantine", "quarantine", Scope.READ, QuarantineIn,
              "Refused candidates, with the reason each was refused."),
    Operation("schema", "schema", Scope.READ, SchemaIn,
              "The schema: entity types and attributes with their value types, cardinality and readers."),
)
BY_NAME = {op.name: op for op in OPERATIONS}

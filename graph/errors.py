"""The one exception hierarchy of SGAM.

    SgamError                    root: catch this to catch everything SGAM raises
    ├── SchemaViolation          a write or read names something the schema does not allow
    ├── InvalidDelta             a proposed write is malformed (types, times, missing fields)
    ├── Conflict                 a write contradicts the stored state in a way SGAM will not guess
    ├── NotFound                 an episode, fact, query or entity that was asked for does not exist
    ├── NotAllowed               the actor may not do this (e.g. confirm a sensitive attribute)
    ├── StoreUnavailable         Neo4j cannot be reached, refused the credentials, or kept
    │                            failing a transaction with a transient error (transient)
    ├── ProvisioningError        the local Neo4j server could not be installed, started or stopped
    └── ExtractionError          an extractor produced nothing usable

``transient`` says whether retrying the same call later may succeed; workers use it instead of
parsing messages.
"""

from __future__ import annotations

from typing import Any


def validation_problems(exc: Any, whole: str = "(top)") -> str:
    """A pydantic ``ValidationError`` as one line: ``field.path: message; ...`` (``whole`` names
    an error about the whole object), for messages that name the offending element."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}" for e in exc.errors())


class SgamError(Exception):
    """Root of every error SGAM raises."""

    transient: bool = False


class SchemaViolation(SgamError):
    """A name or value that the schema does not allow."""


class InvalidDelta(SgamError):
    """A malformed write proposal: wrong type, naive datetime, missing episode, bad times."""


class Conflict(SgamError):
    """A write that contradicts the stored state, e.g. retracting a value that is not held."""


class NotFound(SgamError):
    """Something asked for by id or name does not exist."""


class NotAllowed(SgamError):
    """An actor that the schema does not authorise, e.g. confirming someone else's sensitive value."""


class StoreUnavailable(SgamError):
    """Neo4j could not be reached, or it refused the connection."""

    transient = True


class ProvisioningError(SgamError):
    """The local Neo4j server could not be provisioned, started or stopped."""


class ExtractionError(SgamError):
    """An extractor failed to produce a usable candidate."""

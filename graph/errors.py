"""The one exception hierarchy of SGAM.

    SgamError                    root: catch this to catch everything SGAM raises
    ├── SchemaViolation          a write or read names something the schema does not allow
    │   └── UnknownAttribute     a read names an attribute the schema does not know (lists the known ones)
    ├── InvalidDelta             a proposed write is malformed (types, times, missing fields)
    ├── Conflict                 a write contradicts the stored state in a way SGAM will not guess
    ├── NotFound                 an episode, fact, query or entity that was asked for does not exist
    │   ├── UnknownTenant        a read names a tenant that holds nothing (a typo, or nothing stored yet)
    │   ├── UnknownSubject       a read names a subject never stored in its tenant
    │   ├── ForgottenSubject     a read names a subject that was erased (it has a tombstone)
    │   └── MergedSubject        a read names an entity merged into another (names the one it is now)
    ├── NotAllowed               the actor may not do this (e.g. confirm a sensitive attribute)
    ├── StoreUnavailable         Neo4j cannot be reached, refused the credentials, or kept
    │                            failing a transaction with a transient error (transient)
    ├── ProvisioningError        the local Neo4j server could not be installed, started or stopped
    ├── InvalidSetting           a setting (an environment variable) holds a value SGAM cannot use
    └── ExtractionError          an extractor produced nothing usable

``transient`` says whether retrying the same call later may succeed; workers use it instead of
parsing messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def validation_problems(exc: Any, whole: str = "(top)") -> str:
    """A pydantic ``ValidationError`` as one line: ``field.path: message; ...`` (``whole`` names
    an error about the whole object), for messages that name the offending element."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or whole}: {e['msg']}" for e in exc.errors())


class SgamError(Exception):
    """Root of every error SGAM raises."""

    transient: bool = False


class SchemaViolation(SgamError):
    """A name or value that the schema does not allow."""


class UnknownAttribute(SchemaViolation):
    """A read names an attribute the schema (and no stored migration) knows; the message lists the
    known names, as the write path's :class:`SchemaViolation` for the same typo does."""


class InvalidDelta(SgamError):
    """A malformed write proposal: wrong type, naive datetime, missing episode, bad times."""


class Conflict(SgamError):
    """A write that contradicts the stored state, e.g. retracting a value that is not held."""


class NotFound(SgamError):
    """Something asked for by id or name does not exist."""


class UnknownTenant(NotFound):
    """A read names a tenant with no entities, episodes, tombstones or quarantine entries: a typo,
    or a tenant nothing was stored for yet. An empty answer would look like "no facts"."""


class UnknownSubject(NotFound):
    """A read names a subject that was never stored in its (known) tenant."""


class ForgottenSubject(NotFound):
    """A read names a subject that was erased (``forget_subject``): known, but nothing is kept."""


class MergedSubject(NotFound):
    """A read names an entity that was merged into another (``merge_entities``): its facts are the
    other's now. ``as_of`` with a ``known_at`` before the merge still answers for it."""


class NotAllowed(SgamError):
    """An actor that the schema does not authorise, e.g. confirming someone else's sensitive value."""


class StoreUnavailable(SgamError):
    """Neo4j could not be reached, or it refused the connection."""

    transient = True


class ProvisioningError(SgamError):
    """The local Neo4j server could not be provisioned, started or stopped."""


class InvalidSetting(SgamError):
    """A setting (an environment variable such as ``NEO4J_URI``) holds a value SGAM cannot use."""


class ExtractionError(SgamError):
    """An extractor failed to produce a usable candidate."""


def checked(check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``check(*args, **kwargs)``, with the ValueError of a model check (an id, an instant, a
    value) raised as :class:`InvalidDelta`, its message unchanged."""
    try:
        return check(*args, **kwargs)
    except ValueError as exc:
        raise InvalidDelta(str(exc)) from None

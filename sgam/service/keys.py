"""API keys: who a request is. A key binds a tenant, a reading principal and a scope.

A key is ``sgam_<id>_<secret>``: ``id`` (12 hex digits) names the key in lists and audit lines,
``secret`` is 32 random bytes. Neo4j keeps ``(:ApiKey {id, hash, tenant_id, principal, scope,
created_at, revoked_at})``; the key itself is shown once, when it is created, and never stored.

The hash is one SHA-256 of the whole key. A slow password hash (bcrypt, argon2) exists to make
guessing a low-entropy password expensive; a 256-bit random secret cannot be guessed at any
speed, so a fast hash loses nothing and lets every request be checked with one index seek
(the ``sgam_api_key_hash`` constraint, graph/migrations.py) instead of tens of milliseconds of
deliberate work.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sgam.graph.errors import InvalidDelta, NotAllowed, NotFound, SgamError
from sgam.graph.models import check_principal, check_tenant, utcnow
from sgam.graph.store import AsyncStore, Store

from .requests import Scope

_KEY_RE = re.compile(r"sgam_([0-9a-f]{12})_[A-Za-z0-9_\-]{43}\Z")

CREATE = """
CREATE (k:ApiKey {id: $id, hash: $hash, tenant_id: $tenant, principal: $principal, scope: $scope,
                  created_at: $now, note: $note})
"""
# Found by the hash of what the caller sent: a unique-constraint seek.
RESOLVE = """
MATCH (k:ApiKey {hash: $hash})
RETURN k.id AS id, k.tenant_id AS tenant, k.principal AS principal, k.scope AS scope,
       k.revoked_at IS NOT NULL AS revoked
"""
LIST = """
MATCH (k:ApiKey) WHERE $tenant IS NULL OR k.tenant_id = $tenant
RETURN k.id AS id, k.tenant_id AS tenant, k.principal AS principal, k.scope AS scope,
       k.created_at AS created_at, k.revoked_at AS revoked_at, k.note AS note
ORDER BY k.created_at, k.id
"""
REVOKE = """
MATCH (k:ApiKey {id: $id})
SET k.revoked_at = coalesce(k.revoked_at, $now)
RETURN k.id AS id, k.revoked_at AS revoked_at
"""
ANY_ACTIVE = "RETURN EXISTS { MATCH (k:ApiKey) WHERE k.revoked_at IS NULL } AS active"


class Unauthenticated(SgamError):
    """A request without a key, with a key SGAM never issued, or with a revoked key (HTTP 401)."""


@dataclass(frozen=True)
class Identity:
    """Who a request is, from its key: the only source of its tenant and principal."""

    key_id: str
    tenant: str
    principal: str
    scope: Scope

    def require(self, needed: Scope, what: str) -> None:
        """:class:`NotAllowed` unless this key's scope covers ``needed``."""
        if not self.scope.allows(needed):
            raise NotAllowed(f"{what} needs a key with scope {needed.value}; key {self.key_id} has "
                             f"scope {self.scope.value}")


@dataclass(frozen=True)
class NewKey:
    key: str
    """The key itself: shown once, not stored."""
    identity: Identity


def key_hash(key: str) -> str:
    """What the store keeps of a key (any text hashes: a key sent with other characters is
    refused afterwards, not here)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _scope(value: Any) -> Scope:
    try:
        return Scope(value)
    except ValueError:
        raise InvalidDelta(f"scope {value!r} is not valid: use one of "
                           f"{', '.join(s.value for s in Scope)}") from None


def create_key(store: Store, tenant: str, principal: str, scope: str, *, note: str | None = None,
               now: datetime | None = None) -> NewKey:
    """Issue a key for ``tenant`` reading as ``principal`` with ``scope``."""
    try:
        check_tenant(tenant)
        check_principal(principal)
    except ValueError as exc:
        raise InvalidDelta(str(exc)) from None
    level = _scope(scope)
    key_id = secrets.token_hex(6)
    key = f"sgam_{key_id}_{secrets.token_urlsafe(32)}"
    store.run_write(CREATE, {"id": key_id, "hash": key_hash(key), "tenant": tenant, "principal": principal,
                             "scope": level.value, "now": now or utcnow(), "note": note})
    return NewKey(key, Identity(key_id, tenant, principal, level))


def list_keys(store: Store, tenant: str | None = None) -> list[dict[str, Any]]:
    """Every key (of ``tenant``), oldest first; never the key or its hash."""
    return store.read(LIST, {"tenant": tenant})


def revoke_key(store: Store, key_id: str, *, now: datetime | None = None) -> dict[str, Any]:
    """Revoke key ``key_id`` (revoking twice keeps the first time); :class:`NotFound` if unknown."""
    rows = store.run_write(REVOKE, {"id": key_id, "now": now or utcnow()})
    if not rows:
        raise NotFound(f"no API key {key_id!r}; `sgam keys list` shows the keys")
    return rows[0]


def any_active(store: Store) -> bool:
    """Whether any key that is not revoked exists (``sgam serve`` needs one to bind beyond loopback)."""
    return bool(store.read(ANY_ACTIVE, {})[0]["active"])


async def resolve(store: AsyncStore, key: str | None) -> Identity:
    """The identity of a presented key; :class:`Unauthenticated` for a missing, malformed, unknown
    or revoked one (the message never repeats what was sent)."""
    if not key:
        raise Unauthenticated("no API key: send 'Authorization: Bearer <key>' (sgam keys create issues one)")
    if not _KEY_RE.match(key):
        raise Unauthenticated("the API key is malformed: keys look like sgam_<12 hex>_<43 characters>")
    rows = await store.read(RESOLVE, {"hash": key_hash(key)})
    if not rows:
        raise Unauthenticated("the API key is not known")
    row = rows[0]
    if row["revoked"]:
        raise Unauthenticated(f"API key {row['id']} was revoked")
    return Identity(row["id"], row["tenant"], row["principal"], Scope(row["scope"]))

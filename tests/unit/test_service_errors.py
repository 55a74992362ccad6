"""Scopes nest, and every SGAM error kind answers with its documented HTTP status."""

from __future__ import annotations

import pytest

from sgam.graph.errors import (
    Conflict, ForgottenSubject, InvalidDelta, NotAllowed, NotFound, SchemaViolation, SgamError, StoreUnavailable,
    UnknownAttribute, UnknownTenant,
)
from sgam.service.http import status_of
from sgam.service.keys import Identity, Unauthenticated
from sgam.service.requests import Scope


@pytest.mark.parametrize(("error", "status"), [
    (Unauthenticated("x"), 401), (NotAllowed("x"), 403), (NotFound("x"), 404), (UnknownTenant("x"), 404),
    (ForgottenSubject("x"), 404), (Conflict("x"), 409), (InvalidDelta("x"), 422), (SchemaViolation("x"), 422),
    (UnknownAttribute("x"), 422), (StoreUnavailable("x"), 503), (SgamError("x"), 400),
])
def test_each_error_kind_has_its_status(error: SgamError, status: int) -> None:
    assert status_of(error) == status


def test_scopes_nest_and_a_missing_one_is_named() -> None:
    assert [s.value for s in Scope if Scope.WRITE.allows(s)] == ["read", "write"]
    assert all(Scope.ADMIN.allows(s) for s in Scope) and not Scope.READ.allows(Scope.WRITE)
    reader = Identity("0123456789ab", "acme", "agent:support", Scope.READ)
    reader.require(Scope.READ, "current")
    with pytest.raises(NotAllowed, match="remember needs a key with scope write; key 0123456789ab has scope read"):
        reader.require(Scope.WRITE, "remember")

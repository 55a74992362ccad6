"""The curated public surface: what `from sgam import *` offers is decided here, not by accident."""

from __future__ import annotations

import sgam
import sgam.graph
import sgam.ingest
import sgam.queries

EXPECTED = [
    "AsyncMemoryGraph", "Conflict", "Entity", "Episode", "EpisodeKind", "ExtractionError", "Fact",
    "InvalidDelta", "MemoryDelta", "MemoryGraph", "NotAllowed", "NotFound", "Op", "Provenance", "ProvisioningError",
    "Schema", "SchemaViolation", "Settings", "SgamError", "StoreUnavailable", "TraversalPath",
    "__version__", "default_schema",
    "ForgottenSubject", "InvalidSetting", "MergedSubject", "UnknownAttribute", "UnknownSubject", "UnknownTenant",
]


def test_top_level_surface_is_pinned() -> None:
    assert sorted(sgam.__all__) == sorted(EXPECTED)
    for name in EXPECTED:
        assert hasattr(sgam, name), name


def test_every_package_exports_what_it_lists() -> None:
    for module in (sgam.graph, sgam.ingest, sgam.queries):
        assert module.__all__, module.__name__
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_one_error_root() -> None:
    for name in ("Conflict", "InvalidDelta", "NotFound", "SchemaViolation", "StoreUnavailable",
                 "ProvisioningError", "ExtractionError", "InvalidSetting"):
        assert issubclass(getattr(sgam, name), sgam.SgamError)
    for name in ("UnknownTenant", "UnknownSubject", "ForgottenSubject", "MergedSubject"):
        assert issubclass(getattr(sgam, name), sgam.NotFound)
    assert issubclass(sgam.UnknownAttribute, sgam.SchemaViolation)
    assert sgam.StoreUnavailable.transient and not sgam.SchemaViolation.transient

"""sgam.graph: the store. Fact model, schema, reconciliation, migrations and the Neo4j seam.

Pure modules (``models``, ``schema``, ``reconcile``) never import the driver; ``store`` is the one
module that executes Cypher. Every operation (``writes.write_op``, ``ddl.bootstrap_op``,
``evolution.migrate_op``, ``bulk.import_op``...) is a generator of the requests ``steps`` defines,
which ``Store.run`` and ``AsyncStore.run`` answer, so the sync and async stores share all logic.

Where Cypher lives: a ``queries/*.cypher`` file is a documented question someone may ask (named,
typed parameters, runnable in Browser); a module-level constant is a step of an operation, next to
the generator that yields it (templated ones are built by a function beside them). Both kinds pass
EXPLAIN in the tests (tests/integration/test_store.py, tests/integration/test_cypher_constants.py).
"""

from .deletion import DeletionReport
from .errors import (
    Conflict,
    ExtractionError,
    InvalidDelta,
    NotAllowed,
    NotFound,
    ProvisioningError,
    SchemaViolation,
    SgamError,
    StoreUnavailable,
    ForgottenSubject,
    MergedSubject,
    InvalidSetting,
    UnknownAttribute,
    UnknownSubject,
    UnknownTenant,
)
from .candidates import MergeCandidate
from .merge import MergeReport
from .models import Cardinality, Entity, Episode, EpisodeKind, Fact, MemoryDelta, Op, Status
from .reconcile import WritePlan, reconcile
from .schema import AttributeSpec, RetentionClass, Schema, default_schema, quote_identifier

__all__ = [
    "AttributeSpec",
    "Cardinality",
    "Conflict",
    "DeletionReport",
    "Entity",
    "Episode",
    "EpisodeKind",
    "ExtractionError",
    "Fact",
    "InvalidDelta",
    "MemoryDelta",
    "MergeCandidate",
    "MergeReport",
    "NotAllowed",
    "NotFound",
    "Op",
    "ProvisioningError",
    "RetentionClass",
    "Schema",
    "SchemaViolation",
    "SgamError",
    "Status",
    "StoreUnavailable",
    "ForgottenSubject",
    "MergedSubject",
    "InvalidSetting",
    "UnknownAttribute",
    "UnknownSubject",
    "UnknownTenant",
    "WritePlan",
    "default_schema",
    "quote_identifier",
    "reconcile",
]

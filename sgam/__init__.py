"""SGAM: schema-guided agent memory, a bitemporal knowledge graph on Neo4j 5.

The front door::

    from sgam import MemoryGraph, MemoryDelta
    graph = MemoryGraph.connect()
    graph.current("demo", "mira", "passport_deadline")

Layout: ``sgam.graph`` (the store: model, schema, reconciliation, Neo4j), ``sgam.ingest`` (the write
path from episodes), ``sgam.queries`` (named Cypher queries, the read path).
"""

from sgam.graph import (
    Conflict,
    Entity,
    Episode,
    EpisodeKind,
    ExtractionError,
    Fact,
    InvalidDelta,
    MemoryDelta,
    NotAllowed,
    NotFound,
    Op,
    ProvisioningError,
    Schema,
    SchemaViolation,
    SgamError,
    StoreUnavailable,
    ForgottenSubject,
    MergedSubject,
    InvalidSetting,
    UnknownAttribute,
    UnknownSubject,
    UnknownTenant,
    default_schema,
)

from .api import AsyncMemoryGraph, MemoryGraph, Provenance, TraversalPath
from .settings import Settings

__version__ = "0.1.0"

__all__ = [
    "AsyncMemoryGraph",
    "Conflict",
    "Entity",
    "Episode",
    "EpisodeKind",
    "ExtractionError",
    "Fact",
    "InvalidDelta",
    "MemoryDelta",
    "MemoryGraph",
    "NotAllowed",
    "NotFound",
    "Op",
    "Provenance",
    "ProvisioningError",
    "Schema",
    "SchemaViolation",
    "Settings",
    "SgamError",
    "StoreUnavailable",
    "ForgottenSubject",
    "MergedSubject",
    "InvalidSetting",
    "UnknownAttribute",
    "UnknownSubject",
    "UnknownTenant",
    "TraversalPath",
    "__version__",
    "default_schema",
]

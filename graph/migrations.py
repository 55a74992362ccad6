"""Schema bootstrap: constraints and indexes, applied as recorded, idempotent migrations.

Each migration has a stable id and a list of DDL statements (all ``IF NOT EXISTS``). The store runs
the ones not yet recorded as ``(:Migration {id})`` nodes, records them, and waits until every index
is online. Fact relationship types come from the schema, so each one gets its own migration.
"""

from __future__ import annotations

from dataclasses import dataclass

from .schema import Schema, quote_identifier


@dataclass(frozen=True)
class Migration:
    id: str
    statements: tuple[str, ...]


CORE = Migration(
    "0001-core",
    (
        "CREATE CONSTRAINT sgam_migration_id IF NOT EXISTS FOR (m:Migration) REQUIRE m.id IS UNIQUE",
        "CREATE CONSTRAINT sgam_entity_key IF NOT EXISTS "
        "FOR (e:Entity) REQUIRE (e.tenant_id, e.id) IS UNIQUE",
        "CREATE CONSTRAINT sgam_episode_key IF NOT EXISTS "
        "FOR (e:Episode) REQUIRE (e.tenant_id, e.id) IS UNIQUE",
        "CREATE CONSTRAINT sgam_value_key IF NOT EXISTS "
        "FOR (v:Value) REQUIRE (v.tenant_id, v.key) IS UNIQUE",
        # tenant-wide scans (export, deletion, doctor checks)
        "CREATE INDEX sgam_entity_tenant IF NOT EXISTS FOR (e:Entity) ON (e.tenant_id)",
        "CREATE INDEX sgam_value_tenant IF NOT EXISTS FOR (v:Value) ON (v.tenant_id)",
        "CREATE INDEX sgam_episode_tenant IF NOT EXISTS FOR (e:Episode) ON (e.tenant_id)",
        "CREATE INDEX sgam_episode_hash IF NOT EXISTS FOR (e:Episode) ON (e.tenant_id, e.content_hash)",
        "CREATE INDEX sgam_episode_time IF NOT EXISTS FOR (e:Episode) ON (e.tenant_id, e.occurred_at)",
    ),
)

# Read-path search indexes (queries/context.py): vector indexes for embeddings of episode text,
# entity names and attribute-fact statements (on :Value nodes, one per subject|attribute|value),
# and full-text indexes for names and episode text. 384 dimensions = all-MiniLM-L6-v2.
EMBEDDING_DIMENSIONS = 384
_VECTOR = ("OPTIONS {indexConfig: {`vector.dimensions`: %d, `vector.similarity_function`: 'cosine'}}"
           % EMBEDDING_DIMENSIONS)
SEARCH = Migration(
    "0003-search-indexes",
    (
        f"CREATE VECTOR INDEX sgam_episode_embedding IF NOT EXISTS FOR (e:Episode) ON (e.embedding) {_VECTOR}",
        f"CREATE VECTOR INDEX sgam_entity_embedding IF NOT EXISTS FOR (e:Entity) ON (e.embedding) {_VECTOR}",
        f"CREATE VECTOR INDEX sgam_value_embedding IF NOT EXISTS FOR (v:Value) ON (v.embedding) {_VECTOR}",
        "CREATE FULLTEXT INDEX sgam_episode_text IF NOT EXISTS FOR (e:Episode) ON EACH [e.content]",
        "CREATE FULLTEXT INDEX sgam_entity_name IF NOT EXISTS FOR (e:Entity) ON EACH [e.name, e.id]",
    ),
)

TOMBSTONES = Migration(
    "0003-tombstones-and-schema-versions",
    (
        "CREATE CONSTRAINT sgam_tombstone_key IF NOT EXISTS "
        "FOR (t:Tombstone) REQUIRE (t.tenant_id, t.subject) IS UNIQUE",
        "CREATE CONSTRAINT sgam_schema_version_key IF NOT EXISTS "
        "FOR (s:SchemaVersion) REQUIRE (s.name, s.version) IS UNIQUE",
    ),
)

# The ingest path: episodes deduplicated by content (graph/episodes.py; a new property, so episodes
# recorded before it cannot make the constraint fail), the queue the worker claims from, quarantine.
INGEST = Migration(
    "0004-ingest-queue-quarantine",
    (
        "CREATE CONSTRAINT sgam_episode_dedupe IF NOT EXISTS "
        "FOR (e:Episode) REQUIRE (e.tenant_id, e.dedupe_key) IS UNIQUE",
        "CREATE INDEX sgam_episode_status IF NOT EXISTS FOR (e:Episode) ON (e.status)",
        "CREATE CONSTRAINT sgam_quarantine_key IF NOT EXISTS "
        "FOR (q:Quarantine) REQUIRE (q.tenant_id, q.id) IS UNIQUE",
        "CREATE INDEX sgam_quarantine_tenant IF NOT EXISTS FOR (q:Quarantine) ON (q.tenant_id)",
    ),
)

# Schema evolution (graph/evolution.py): one record per applied schema migration.
SCHEMA_MIGRATIONS = Migration(
    "0005-schema-migrations",
    (
        "CREATE CONSTRAINT sgam_schema_migration_id IF NOT EXISTS "
        "FOR (m:SchemaMigration) REQUIRE m.id IS UNIQUE",
    ),
)

# Bulk import runs (graph/bulk.py): found by tenant; ``active`` is set only while a run is
# unfinished, so at most one import at a time runs into a tenant.
IMPORT_RUNS = Migration(
    "0006-import-runs",
    (
        "CREATE INDEX sgam_import_run_tenant IF NOT EXISTS FOR (r:ImportRun) ON (r.tenant_id)",
        "CREATE CONSTRAINT sgam_import_run_active IF NOT EXISTS "
        "FOR (r:ImportRun) REQUIRE (r.tenant_id, r.active) IS UNIQUE",
    ),
)

# The change-point model (docs/temporal-semantics.md): one ledger of statements per slot. Slots
# written before it have none; the write path rebuilds one from their believed rows on first touch.
# The tenant index serves deleting a tenant's ledgers (an import's undo, delete_tenant).
LEDGER = Migration(
    "0007-ledger",
    (
        "CREATE CONSTRAINT sgam_ledger_slot IF NOT EXISTS "
        "FOR (l:Ledger) REQUIRE (l.tenant_id, l.subject, l.attribute) IS UNIQUE",
        "CREATE INDEX sgam_ledger_tenant IF NOT EXISTS FOR (l:Ledger) ON (l.tenant_id)",
    ),
)

# Refusals of replayed deltas are quarantine entries found by the delta's idempotency key
# (ingest/quarantine.py), so replaying a file again refuses them as before.
REPLAY_REFUSALS = Migration(
    "0009-replay-refusals",
    (
        "CREATE INDEX sgam_quarantine_delta_key IF NOT EXISTS FOR (q:Quarantine) ON (q.tenant_id, q.delta_key)",
    ),
)

# Deletion records (graph/deletion.py) are found per tenant: the doctor's deletion checks, and a
# read telling a deleted tenant from one that never existed. (0010 is the quarantine readers'
# one-off backfill, recorded by graph/store.py.)
DELETION_RECORDS = Migration(
    "0011-deletion-records",
    (
        "CREATE INDEX sgam_deletion_tenant IF NOT EXISTS FOR (d:Deletion) ON (d.tenant_id)",
    ),
)

# Entity resolution (graph/aliases.py, graph/merge.py): aliases are looked up by (tenant, key) when
# ingest resolves a name and searched in full text with the entity names; merge records per tenant.
ALIASES = Migration(
    "0013-entity-aliases",
    (
        "CREATE INDEX sgam_alias_key IF NOT EXISTS FOR (a:Alias) ON (a.tenant_id, a.key)",
        "CREATE FULLTEXT INDEX sgam_entity_alias IF NOT EXISTS FOR (a:Alias) ON EACH [a.name, a.key]",
        "CREATE INDEX sgam_merge_tenant IF NOT EXISTS FOR (m:Merge) ON (m.tenant_id)",
    ),
)

# The schema a store runs under is stored as data; a changed definition needs a new version.
RECORD_SCHEMA = (
    "MERGE (s:SchemaVersion {name: $name, version: $version}) "
    "ON CREATE SET s.definition = $definition, s.applied_at = datetime() "
    "RETURN s.definition AS stored"
)

APPLIED = "MATCH (m:Migration) RETURN m.id AS id"
RECORD = (
    "MERGE (m:Migration {id: $id}) "
    "ON CREATE SET m.applied_at = datetime(), m.statements = $statements"
)
AWAIT_INDEXES = "CALL db.awaitIndexes($timeout)"


def fact_type_migration(rel_type: str) -> Migration:
    """Uniqueness of ``memory_id`` and the time indexes for one fact relationship type."""
    quoted = quote_identifier(rel_type)
    slug = rel_type.lower()
    return Migration(
        f"0002-fact-type-{rel_type}",
        (
            f"CREATE CONSTRAINT sgam_fact_id_{slug} IF NOT EXISTS "
            f"FOR ()-[f:{quoted}]-() REQUIRE f.memory_id IS UNIQUE",
            # as-of scans across subjects ("what held for this tenant at T")
            f"CREATE INDEX sgam_fact_valid_{slug} IF NOT EXISTS "
            f"FOR ()-[f:{quoted}]-() ON (f.tenant_id, f.valid_from)",
            # transaction-time scans ("what did we learn between K1 and K2")
            f"CREATE INDEX sgam_fact_recorded_{slug} IF NOT EXISTS "
            f"FOR ()-[f:{quoted}]-() ON (f.tenant_id, f.recorded_at)",
        ),
    )


def all_migrations(schema: Schema) -> list[Migration]:
    """Every migration the schema needs, in the order they apply."""
    rel_types = schema.fact_types()
    return [CORE, *(fact_type_migration(t) for t in rel_types), SEARCH, TOMBSTONES, INGEST,
            SCHEMA_MIGRATIONS, IMPORT_RUNS, LEDGER, REPLAY_REFUSALS, DELETION_RECORDS,
            ALIASES]


def pending(applied: set[str], schema: Schema) -> list[Migration]:
    return [m for m in all_migrations(schema) if m.id not in applied]

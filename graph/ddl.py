"""Schema bootstrap: constraints and indexes, applied as recorded, idempotent migrations.

Each migration has a stable id and a list of DDL statements (all ``IF NOT EXISTS``, or ``IF
EXISTS`` for a drop). :func:`ddl_op` runs the ones not yet recorded as ``(:Migration {id})`` nodes,
records them, and waits until every index is online. Fact relationship types come from the schema, so each one gets its own migration.
:func:`bootstrap_op` is what connecting runs: the DDL, the one-off data backfills, and the record of
the schema the store runs under.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .errors import SchemaViolation
from .schema import Schema, quote_identifier
from .steps import Auto, InTx, Operation, Statement, Steps
from .writes import RESTRICT_EPISODES, backfill_steps


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

# The ingest path: episodes deduplicated by content (graph/recording.py; a new property, so episodes
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

# API keys of the service (sgam/service/keys.py): a request's key is found by its hash, a key
# named on the command line by its id.
API_KEYS = Migration(
    "0012-api-keys",
    (
        "CREATE CONSTRAINT sgam_api_key_id IF NOT EXISTS FOR (k:ApiKey) REQUIRE k.id IS UNIQUE",
        "CREATE CONSTRAINT sgam_api_key_hash IF NOT EXISTS FOR (k:ApiKey) REQUIRE k.hash IS UNIQUE",
    ),
)

# The extraction trail (ingest/trail.py): one node per (episode, extractor), found by its id when
# an episode is processed again and by its episode for provenance and deletion.
EXTRACTION_TRAIL = Migration(
    "0013-extraction-trail",
    (
        "CREATE CONSTRAINT sgam_extraction_key IF NOT EXISTS "
        "FOR (x:Extraction) REQUIRE (x.tenant_id, x.id) IS UNIQUE",
        "CREATE INDEX sgam_extraction_episode IF NOT EXISTS FOR (x:Extraction) ON (x.tenant_id, x.episode_id)",
    ),
)

# Entity resolution (graph/aliases.py, graph/merge.py): aliases are looked up by (tenant, key) when
# ingest resolves a name and searched in full text with the entity names; merge records per tenant.
ALIASES = Migration(
    "0014-entity-aliases",
    (
        "CREATE INDEX sgam_alias_key IF NOT EXISTS FOR (a:Alias) ON (a.tenant_id, a.key)",
        "CREATE FULLTEXT INDEX sgam_entity_alias IF NOT EXISTS FOR (a:Alias) ON EACH [a.name, a.key]",
        "CREATE INDEX sgam_merge_tenant IF NOT EXISTS FOR (m:Merge) ON (m.tenant_id)",
    ),
)

# The read audit log (graph/audit.py) is read per tenant and subject, and purged by age.
READ_AUDIT = Migration(
    "0015-read-audit",
    (
        "CREATE INDEX sgam_read_audit_subject IF NOT EXISTS FOR (a:ReadAudit) ON (a.tenant_id, a.subject)",
        "CREATE INDEX sgam_read_audit_time IF NOT EXISTS FOR (a:ReadAudit) ON (a.tenant_id, a.created_at)",
    ),
)

# Forgetting a subject redacts its episodes (graph/forget.py): the tenant's redacted episodes by
# time. Creating the index also makes `redacted_at` a known property key on every store, so the
# episode reads that filter on it raise no "property key does not exist" warning (which Browser
# shows on every run) on a store that never forgot anyone.
REDACTED_EPISODES = Migration(
    "0017-redacted-episodes",
    ("CREATE INDEX sgam_episode_redacted IF NOT EXISTS FOR (e:Episode) ON (e.tenant_id, e.redacted_at)",),
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
INDEX_TIMEOUT_S = 300
RECORDED = "MATCH (m:Migration {id: $id}) RETURN m"
LATEST_SCHEMA = """
MATCH (s:SchemaVersion {name: $name})
RETURN s.version AS version, s.definition AS definition
ORDER BY s.version DESC LIMIT 1
"""

# The recorded migration that gave the slots of an older store their ledgers.
LEDGER_BACKFILL = "0008-ledger-backfill"
QUARANTINE_READERS = "0010-quarantine-readers"
BACKFILL_BATCH = 2000

# Quarantine entries stored before they carried their readers (``visible_to``), in element-id
# order from ``$after``: the backfill stamps those of private attributes, as storing them now does.
UNSTAMPED_QUARANTINE = """
MATCH (q:Quarantine) WHERE q.visible_to IS NULL AND elementId(q) > $after
RETURN elementId(q) AS eid, q.tenant_id AS tenant_id, q.episode_id AS episode_id, q.candidate AS candidate
ORDER BY eid LIMIT $batch
"""

STAMP_QUARANTINE = """
UNWIND $rows AS r
MATCH (q:Quarantine) WHERE elementId(q) = r.eid
SET q.visible_to = r.readers
"""


def fact_type_migration(rel_type: str) -> Migration:
    """Uniqueness of ``memory_id`` for one fact relationship type (schema evolution reads a
    type's facts in ``memory_id`` order through it)."""
    quoted = quote_identifier(rel_type)
    slug = rel_type.lower()
    return Migration(
        f"0002-fact-type-{rel_type}",
        (
            f"CREATE CONSTRAINT sgam_fact_id_{slug} IF NOT EXISTS "
            f"FOR ()-[f:{quoted}]-() REQUIRE f.memory_id IS UNIQUE",
        ),
    )


def fact_time_indexes_migration(rel_type: str) -> Migration:
    """Drop the (tenant_id, valid_from) and (tenant_id, recorded_at) indexes that ``0002`` used to
    create for a fact type. No read used them: every read reaches facts from their subject through
    an untyped pattern, which a relationship property index cannot serve (EXPLAIN of every query
    and module Cypher constant plans no relationship index seek or scan), while every fact written
    paid two index entries, about a third of a batched write's time at commit."""
    slug = rel_type.lower()
    return Migration(
        f"0016-fact-type-{rel_type}-no-time-indexes",
        (
            f"DROP INDEX sgam_fact_valid_{slug} IF EXISTS",
            f"DROP INDEX sgam_fact_recorded_{slug} IF EXISTS",
        ),
    )


def all_migrations(schema: Schema) -> list[Migration]:
    """Every migration the schema needs, in the order they apply."""
    rel_types = schema.fact_types()
    return [CORE, *(fact_type_migration(t) for t in rel_types), SEARCH, TOMBSTONES, INGEST,
            SCHEMA_MIGRATIONS, IMPORT_RUNS, LEDGER, REPLAY_REFUSALS, DELETION_RECORDS, API_KEYS,
            EXTRACTION_TRAIL, ALIASES, READ_AUDIT, REDACTED_EPISODES, *(fact_time_indexes_migration(t) for t in rel_types)]


def pending(applied: set[str], schema: Schema) -> list[Migration]:
    return [m for m in all_migrations(schema) if m.id not in applied]


def ddl_op(schema: Schema) -> Operation[list[str]]:
    """Apply and record the migrations ``schema`` needs that are not recorded yet, then wait for
    the indexes to be online; returns the ids applied now."""
    applied = {r["id"] for r in (yield Auto(Statement(APPLIED)))}
    done = []
    for migration in pending(applied, schema):
        for statement in migration.statements:
            yield Auto(Statement(statement))
        yield Auto(Statement(RECORD, {"id": migration.id, "statements": list(migration.statements)}))
        done.append(migration.id)
    yield Auto(Statement(AWAIT_INDEXES, {"timeout": INDEX_TIMEOUT_S}))
    return done


def bootstrap_op(schema: Schema, clock: Callable[[], datetime]) -> Operation[list[str]]:
    """Apply the schema's pending migrations, record them, and wait for indexes to be online.

    A schema that declares a migration from the stored version is refused here: its facts
    must move first (``sgam schema apply``).
    """
    latest = yield Auto(Statement(LATEST_SCHEMA, {"name": schema.name}))
    if latest and latest[0]["version"] < schema.version \
            and schema.migration_from(latest[0]["version"]) is not None:
        raise SchemaViolation(
            f"schema {schema.name!r} v{schema.version} declares a migration from the "
            f"stored v{latest[0]['version']}, which has not been applied: run `sgam schema apply "
            "FILE` (or MemoryGraph.apply_schema) first"
        )
    done = yield from ddl_op(schema)
    if (yield from _backfill_ledgers(schema, clock)):
        done.append(LEDGER_BACKFILL)
    if (yield from _backfill_quarantine_readers(schema)):
        done.append(QUARANTINE_READERS)
    [stored] = yield Auto(Statement(RECORD_SCHEMA, {"name": schema.name, "version": schema.version,
                                                    "definition": schema.definition()}))
    if not schema.same_definition(stored["stored"]):
        raise SchemaViolation(
            f"schema {schema.name!r} v{schema.version} is already stored with a "
            "different definition: give the changed schema a new version"
        )
    return done


def _backfill_ledgers(schema: Schema, clock: Callable[[], datetime], batch: int = BACKFILL_BATCH) -> Operation[bool]:
    """Once per store: give every slot written before ledgers existed its ledger, rebuilt from
    its believed rows (idempotent, in batches; a slot a write reaches first rebuilds its own).
    Returns whether it ran now."""
    if (yield Auto(Statement(RECORDED, {"id": LEDGER_BACKFILL}))):
        return False
    after: str | None = ""
    while after is not None:
        start = after  # the transaction runs (and reruns) before `after` changes
        _, after = yield InTx(lambda: backfill_steps(schema, start, batch, clock()))
    yield Auto(Statement(RECORD, {"id": LEDGER_BACKFILL, "statements": []}))
    return True


def _backfill_quarantine_readers(schema: Schema, batch: int = BACKFILL_BATCH) -> Operation[bool]:
    """Once per store: give each quarantine entry of a private attribute stored before entries
    carried their readers its ``visible_to``, and restrict its episode to them (as storing it
    now does). Returns whether it ran now."""
    if (yield Auto(Statement(RECORDED, {"id": QUARANTINE_READERS}))):
        return False
    after = ""
    while True:
        rows = yield Auto(Statement(UNSTAMPED_QUARANTINE, {"after": after, "batch": batch}))
        if not rows:
            break
        after = rows[-1]["eid"]
        stamped = []
        for r in rows:
            try:
                readers = schema.readers_of(json.loads(r["candidate"] or "null"))
            except ValueError:
                continue
            if readers is not None:
                stamped.append({**r, "id": r["episode_id"], "readers": list(readers)})
        if stamped:
            yield InTx(lambda: _stamp_steps(stamped))  # run before `stamped` is rebound
    yield Auto(Statement(RECORD, {"id": QUARANTINE_READERS, "statements": []}))
    return True


def _stamp_steps(stamped: list[dict[str, object]]) -> Steps[None]:
    yield Statement(STAMP_QUARANTINE, {"rows": stamped})
    yield Statement(RESTRICT_EPISODES, {"episodes": stamped})

"""The Python graph API: :class:`MemoryGraph` and its async twin :class:`AsyncMemoryGraph`.

Both sit on a store (the one place that runs Cypher) and on the named ``.cypher`` queries, so an
agent's ``current`` and an analyst's ``current.cypher`` in Neo4j Browser are the same query.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import re
import warnings
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sgam.graph import telemetry
from sgam.graph.audit import READ_AUDIT, Disclosure, audit_op, disclosure, failed, read_audit_params
from sgam.graph.batches import DEFAULT_BATCH, DEFAULT_WORKERS, lane_op, lanes, merged
from sgam.graph.bulk import DEFAULT_CHUNK, ImportResult, OnUnfinished, import_op
from sgam.graph.errors import (
    ForgottenSubject, InvalidDelta, MergedSubject, SchemaViolation, SgamError, UnknownAttribute, UnknownSubject,
    UnknownTenant,
    checked, validation_problems,
)
from sgam.graph.handoffs import prompt_handoffs
from sgam.graph.evolution import MigrationReport, StepReport, migrate_op
from sgam.graph.deletion import (
    DeletionReport, delete_tenant_op, deletion_steps, episode_steps, missing_memory, slot_steps,
)
from sgam.graph.recording import Recorded, record_op
from sgam.graph.aliases import add_alias_op
from sgam.graph.candidates import MergeCandidate, candidates_op
from sgam.graph.forget import ForgetReport, forget_op
from sgam.graph.merge import MergeReport, merge_op, merges_op, split_op
from sgam.graph.ddl import bootstrap_op
from sgam.graph.residue import residue_steps
from sgam.graph.retention import PurgeReport, purge_op
from sgam.graph.models import (
    ALL_PRINCIPALS, Cardinality, Episode, Fact, MemoryDelta, Op, check_id, check_principal, check_tenant, parse_instant,
    utcnow,
)
from sgam.graph.schema import Schema, default_schema, load_schema, quote_identifier
from sgam.graph.store import AsyncStore, Clock, Retries, Store
from sgam.graph.subject_access import export_steps
from sgam.graph.steps import ARGS, Operation, Records, Statement
from sgam.graph.codec import fact_from_properties, native
from sgam.graph.writes import BatchResult, DeltaResult, write_op
from sgam.ingest.episodes import episode_from_fields
from sgam.ingest.extract import Extractor
from sgam.ingest.graphiti.importer import GraphitiImportReport, GraphitiMapping, import_graphiti
from sgam.ingest.pipeline import (
    IngestReport,
    QuarantineReplay,
    default_extractors,
    list_quarantine,
    quarantine_entries,
    quarantine_params,
    replay_quarantine_op,
    submit_op,
)
from sgam.ingest.quarantine import QuarantineEntry
from sgam.ingest.rebuild import RebuildReport, rebuild_op
from sgam.ingest.trail import shown as shown_trail
from sgam.queries.context import Context, context_steps
from sgam.queries.embeddings import Embedder, EmbedReport, backfill_steps, require_embedder
from sgam.queries.loader import (FACT_COLUMNS, FIRST, PATH_COLUMNS, STOP, NamedQuery, first_rows, get_query,
                                 load_queries, packed)

from .placement import AsyncStores, Stores
from .settings import Placement, Settings
from .settings import connection as _connection

# context_steps parameters that context() sets itself (the rest are its **options)
CONTEXT_ARGUMENTS = {"tenant", "question", "subjects", "valid_at", "budget_tokens", "now", "schema", "principal"}
T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")
Instant = datetime | date | str
"""A time argument: an aware datetime, an ISO 8601 string with a zone, or a date (midnight UTC)."""

# memory_id is unique per relationship type (graph/ddl.py), so naming every fact type of the
# schema turns "which subject holds this memory_id" into one unique-index seek per type.
SUBJECT_OF = ("MATCH (s:Entity)-[f:%s]->() WHERE f.memory_id = $memory_id AND f.tenant_id = $tenant "
              "RETURN s.id AS subject")

# Asked only when a read's answer is empty (a read that finds rows has shown its tenant and
# subject exist, so it pays nothing): does the tenant hold anything, and which of the named
# subjects are not stored, with when each was forgotten (null: never stored). Every match is an
# index seek (the tenant indexes, the entity key, the tombstone key): tombstones have no index on
# tenant_id alone, and `subject IS NOT NULL` lets the planner seek their (tenant_id, subject) key
# by its first property, where it scanned every tenant's tombstones (tests/integration/test_plans.py).
KNOWN = """
RETURN EXISTS { MATCH (:Entity {tenant_id: $tenant}) } OR EXISTS { MATCH (:Episode {tenant_id: $tenant}) }
       OR EXISTS { MATCH (t:Tombstone {tenant_id: $tenant}) WHERE t.subject IS NOT NULL }
       OR EXISTS { MATCH (:Quarantine {tenant_id: $tenant}) }
       OR EXISTS { MATCH (:Deletion {tenant_id: $tenant}) }
       AS tenant,
       [s IN $subjects WHERE NOT EXISTS { MATCH (:Entity {tenant_id: $tenant, id: s}) } |
        {subject: s, forgotten_at: COLLECT { MATCH (t:Tombstone {tenant_id: $tenant, subject: s})
                                             RETURN t.forgotten_at }[0]}] AS missing,
       COLLECT { UNWIND $subjects AS s MATCH (e:Entity {tenant_id: $tenant, id: s})
                 WHERE e.merged_into IS NOT NULL
                 RETURN {subject: s, into: e.merged_into, at: e.merged_at} } AS merged
"""
# A typed read (facts, paths) as one statement: only the columns the answer uses come back (the
# driver decodes every column sent: a typed instant takes it about 0.1 ms, a path every property
# of its nodes and hops), and, when there are no rows, KNOWN's answer with them. As a second
# statement KNOWN was a second round trip, and as_of, asked before a slot's first version, answers
# nothing at about half the instants the scale benchmark asks. The rows stream as the query makes
# them (an OPTIONAL CALL: one row of nulls when it makes none, and only then is KNOWN asked), not
# collected into one list: ``current`` about 2% faster, ``as_of`` 1.5% (sgam/bench/README.md,
# "Session 31"). The first column is never null in a row of the query. Slots: the named query,
# the columns, the first column (three times), KNOWN, the columns.
ANSWERED = """OPTIONAL CALL () {
%s
}
WITH %s
OPTIONAL CALL (%s) { WITH %s WHERE %s IS NULL %s }
RETURN %s, tenant, missing, merged
"""
# Reads of one instant (valid and transaction time): for one single-valued attribute and
# confirmed facts, at most one fact answers, so their lean form stops at the first (_checked).
SINGLE_READS = frozenset({"current", "as-of"})
# Named queries whose empty answer is the expected one for a subject that is gone.
ABSENCE_QUERIES = frozenset({"residue"})
# Asked only for attribute names this graph's schema does not know: the names no schema migration
# stored in the database ever renamed (a reader on an older version may ask for a newer name).
UNALIASED = """
RETURN [name IN $names WHERE NOT EXISTS { MATCH (m:SchemaMigration)
        WHERE any(pair IN m.aliases WHERE pair STARTS WITH name + '>') }] AS unknown
"""
# Placement (sgam/placement.py): the store chosen for the call in progress, with the graph that
# chose it. A context variable, because one graph serves concurrent calls (threads, tasks).
_ROUTED: ContextVar[tuple[object, Any] | None] = ContextVar("sgam_routed", default=None)
# The arguments that name a call's tenants, and those whose item carries its tenant_id.
TENANT_ARGUMENTS = ("tenant", "dropped_tenant", "into", "tenant_id")
ITEM_ARGUMENTS = ("delta", "episode")


@dataclass(frozen=True)
class Provenance:
    """Where a fact version came from and how it relates to its neighbours in history."""

    fact: Fact
    episode: dict[str, Any] | None
    superseded: tuple[Fact, ...]
    superseded_by: tuple[Fact, ...]
    revises: tuple[Fact, ...]
    revised_by: tuple[Fact, ...]
    trail: tuple[dict[str, Any], ...] = ()
    """The extraction trail that wrote this version (:mod:`sgam.ingest.trail`): per extractor its
    name, version, model and the entries that produced it (evidence quotes, compared value,
    decision); empty when the reader may not read its episode or no extractor wrote it."""


@dataclass(frozen=True)
class TraversalPath:
    """One path of relation facts, every hop valid at the asked instant."""

    entities: tuple[str, ...]
    types: tuple[str, ...]
    facts: tuple[Fact, ...]


@functools.lru_cache(maxsize=None)
def _answered_text(query: str, columns: tuple[str, ...]) -> str:
    named, first = ", ".join(columns), columns[0]
    return ANSWERED % (query, named, first, first, first, packed(KNOWN, ("tenant", "subjects")), named)


def _answered_rows(records: Records, columns: tuple[str, ...]) -> tuple[list[dict[str, Any]], Records]:
    """The rows of an :data:`ANSWERED` statement's records (only ``columns``), and the records
    KNOWN answered in when there are none (one, with nulls for the columns)."""
    first = columns[0]
    rows = [{c: record[c] for c in columns} for record in records if record[first] is not None]
    return rows, ([] if rows else records)


def _answered(query: NamedQuery, columns: tuple[str, ...], args: dict[str, Any],
              single: bool = False) -> Statement:
    """``query`` as :data:`ANSWERED` reads it (``args`` also carry KNOWN's ``subjects``), and
    without the migration aliases for a store that knows no migration's dual read is in force;
    that form stops at its first row when ``single`` (``NamedQuery.packed_for``)."""
    text, unmigrated = _texts(query, query.nulls(args), columns, _answered_text)
    sent = query.sendable(args)
    if unmigrated is not None and query.stops_early:
        sent = {**sent, FIRST: first_rows(single)}
    return Statement(text, sent, packed=True, unmigrated=unmigrated)


@functools.lru_cache(maxsize=None)
def _texts(query: NamedQuery, nulls: frozenset[str], columns: tuple[str, ...],
           wrap: Callable[[str, tuple[str, ...]], str]) -> tuple[str, str | None]:
    """A typed read's two texts, each ``query`` decided for ``nulls`` (``NamedQuery.decided``)
    inside ``wrap`` (:func:`_answered_text`, :func:`_batched_text`): as written, and without the
    migration aliases (``None`` for a query without them), which keeps at most ``first`` rows
    (:func:`~sgam.queries.loader.first_rows`; one text whatever the reader sends). One lookup a
    read, not four (each form's text, then its wrapper)."""
    unmigrated = (wrap(query.decided(nulls, aliases=False, stop=True, columns=columns), columns)
                  if query.reads_aliases else None)
    return wrap(query.decided(nulls, columns=columns), columns), unmigrated


# Many reads of one named query as one statement (current_many; the service's coalesced reads):
# each item of $batch is one read's arguments, which the query reads from the variable `args`
# instead of the parameter (_per_row), answered as ANSWERED answers a read alone. Slots: the named
# query, the columns, KNOWN.
BATCHED = """UNWIND range(0, size($batch) - 1) AS i
WITH i, $batch[i] AS args
CALL (args) {
CALL (args) {
%s
}
RETURN collect({%s}) AS rows
}
OPTIONAL CALL (rows, args) { WITH rows, args WHERE rows = [] %s }
RETURN i, rows, tenant, missing, merged
"""
# A clause's WITH (not STARTS WITH or ENDS WITH), which _per_row makes carry `args` along; `WITH *`
# (a stopping form's row limit) carries every variable already.
_CLAUSE_WITH = re.compile(r"(?<![A-Za-z_])(?<!STARTS )(?<!ENDS )WITH\s+(?![\s*])")
# A stopping form's row limit (after its WITH), and the same limit in a batch (a parameter of the
# whole statement).
_STOP = f"{STOP}\n"
_BATCH_STOP = f"* LIMIT ${FIRST}\n"


def _per_row(text: str) -> str:
    """Packed ``text`` reading its arguments from the variable ``args`` (one row of
    :data:`BATCHED`) instead of the parameter: each clause's ``WITH`` carries it along. A stopping
    form's row limit (``NamedQuery.packed_for(stop=True)``), which may not read a variable, reads
    the parameter ``$first``, one for the whole batch. ValueError for a text this cannot rewrite
    (one that reads another parameter, ``WITH DISTINCT``, ``WITH *`` other than that limit's, or a
    subquery that imports nothing)."""
    text = text.replace(_STOP, _BATCH_STOP)
    if "CALL ()" in text or re.search(r"(?<!STARTS )(?<!ENDS )WITH\s+(DISTINCT|\*(?! LIMIT \$first\n))", text):
        raise ValueError("a query with WITH DISTINCT, WITH * or CALL () cannot be read per row")
    rewritten = _CLAUSE_WITH.sub(f"WITH {ARGS}, ", text.replace(f"${ARGS}.", f"{ARGS}."))
    if "$" in rewritten.replace(_BATCH_STOP, ""):
        raise ValueError("a query that reads a parameter besides its arguments cannot be read per row")
    return rewritten


@functools.lru_cache(maxsize=None)
def _batched_text(query: str, columns: tuple[str, ...]) -> str:
    return BATCHED % (_per_row(query), ", ".join(f"{c}: {c}" for c in columns),
                      _per_row(packed(KNOWN, ("tenant", "subjects"))))


def _facts(records: list[dict[str, Any]]) -> list[Fact]:
    return [fact_from_properties(r["fact"]) for r in records]


def _provenance(records: list[dict[str, Any]]) -> Provenance | None:
    if not records:
        return None
    r = records[0]
    group = lambda key: tuple(fact_from_properties(p) for p in r[key] if p)  # noqa: E731
    episode = ({k: native(v) for k, v in r["episode"].items() if k != "embedding"}  # 384 floats
               if r["episode"] else None)
    fact = fact_from_properties(r["fact"])
    trails = tuple(shown_trail({k: native(v) for k, v in x.items()}, fact.memory_id) for x in r.get("trail") or ())
    return Provenance(fact, episode, group("superseded"), group("superseded_by"), group("revises"),
                      group("revised_by"), trails)


def _paths(records: list[dict[str, Any]]) -> list[TraversalPath]:
    return [
        TraversalPath(tuple(r["entities"]), tuple(r["types"]),
                      tuple(fact_from_properties(p) for p in r["facts"]))
        for r in records
    ]


class _Queries:
    """Builds the named read queries' parameters and the operations; shared by the sync and async
    graphs, which only run them (``store.run``)."""

    clock: Clock
    schema: Schema
    targets: Stores | AsyncStores
    """Where tenants live (:mod:`sgam.placement`): the stores of the placement's targets."""
    audit_reads: str = "private"
    """``SGAM_READ_AUDIT``: record reads of private attributes (``private``) or nothing (``off``);
    see :mod:`sgam.graph.audit`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every public method that names a tenant (see :data:`TENANT_ARGUMENTS`) runs on the store
        of its tenant's target (:func:`_routed`); without a placement it runs as written."""
        super().__init_subclass__(**kwargs)
        for name, member in list(vars(cls).items()):
            if not name.startswith("_") and inspect.isfunction(member) and _names_tenants(member):
                setattr(cls, name, _routed(member))

    @property
    def store(self) -> Any:
        """The store of the call in progress: its tenant's (placement), else the default one."""
        routed = _ROUTED.get()
        return routed[1] if routed is not None and routed[0] is self else self._store

    @store.setter
    def store(self, store: Any) -> None:
        self._store = store

    def _call_tenants(self, signature: inspect.Signature, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> list[str] | None:
        """The tenants a call names, or None when there is no placement (or the call names none,
        or cannot be bound: the method then raises its own error)."""
        if not self.targets.placement.tenants:
            return None
        try:
            bound = signature.bind(self, *args, **kwargs).arguments
        except TypeError:
            return None
        given = dict(bound)
        for parameter in signature.parameters.values():
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                given.update(bound.get(parameter.name) or {})
        named = [given.get(name) for name in TENANT_ARGUMENTS]
        named += [getattr(given.get(name), "tenant_id", None) for name in ITEM_ARGUMENTS]
        tenants = [t for t in named if isinstance(t, str)]
        return tenants or None

    def _disclosure(self, operation: str, params: dict[str, Any], data: Any) -> Disclosure | None:
        """The audit record a read of ``data`` owes (its reader and tenant in ``params``)."""
        return disclosure(self.audit_reads, self.schema, operation, params.get("tenant"),
                          self._principal(params.get("principal")), params.get("subject"), data)

    def _read_audit(self, tenant: str, subject: str | None, principal: str | None,
                    limit: int) -> dict[str, Any]:
        if subject is not None:
            subject = self._id(subject, "subject")
        return read_audit_params(self._tenant(tenant), subject, self._principal(principal), limit)

    @staticmethod
    def _audit_rows(records: Records) -> list[dict[str, Any]]:
        return [{**r, "at": native(r["at"])} for r in records]

    def _write_op(self, deltas: Sequence[MemoryDelta], atomic: bool) -> Operation[BatchResult]:
        return write_op(deltas, self.store.schema, self.store.clock, atomic, self.store.max_future)

    def _lanes(self, deltas: Iterable[MemoryDelta], atomic: bool, batch_size: int,
               workers: int) -> list[Operation[list[tuple[list[int], BatchResult]]]]:
        """write_many's lanes (see ``graph.batches``), each one operation."""
        return [lane_op(lane, self.store.schema, self.store.clock, atomic, self.store.max_future)
                for lane in lanes(items_arg(deltas, MemoryDelta, "deltas"), batch_size, atomic, workers)]

    def _record_op(self, episodes: Sequence[Episode], status: str = "recorded") -> Operation[list[Recorded]]:
        return record_op(episodes, self.store.clock, status)

    def _import_op(self, deltas: Iterable[MemoryDelta], chunk_size: int, on_progress: Any,
                   on_unfinished: OnUnfinished) -> Operation[ImportResult]:
        return import_op(import_deltas(deltas), self.store.schema, self.store.clock, chunk_size,
                         callback_arg(on_progress, "on_progress"), on_unfinished, self.store.max_future)

    def _delete_tenant_op(self, tenant: str, dry_run: bool, actor: str | None,
                          reason: str | None) -> Operation[DeletionReport]:
        actor_, reason = self._audit(actor, reason)
        return delete_tenant_op(self._tenant(tenant), self.store.clock, dry_run=dry_run, actor=actor_,
                                reason=reason)

    def _forget_op(self, tenant: str, subject: str, dry_run: bool, actor: str | None,
                   reason: str | None) -> Operation[ForgetReport]:
        actor_, reason = self._audit(actor, reason)
        return forget_op(self._tenant(tenant), self._id(subject, "subject"), self.store.clock,
                         dry_run=dry_run, actor=actor_, reason=reason)

    def _add_alias_op(self, tenant: str, subject: str, names: Sequence[str],
                      actor: str | None) -> Operation[dict[str, list[str]]]:
        actor_, _ = self._audit(actor, None)
        return add_alias_op(self._tenant(tenant), self._id(subject, "subject"), names, self.store.clock, actor_)

    def _merge_op(self, tenant: str, kept: str, dropped: str, dry_run: bool, actor: str | None,
                  reason: str | None, dropped_tenant: str | None) -> Operation[MergeReport]:
        actor_, reason = self._audit(actor, reason)
        return merge_op(self._tenant(tenant), self._id(kept, "kept entity"), self._id(dropped, "dropped entity"),
                        self.store.schema, self.store.clock, dry_run=dry_run, actor=actor_, reason=reason,
                        dropped_tenant=None if dropped_tenant is None else self._tenant(dropped_tenant))

    def _split_op(self, tenant: str, kept: str, dropped: str, dry_run: bool, actor: str | None,
                  reason: str | None) -> Operation[MergeReport]:
        actor_, reason = self._audit(actor, reason)
        return split_op(self._tenant(tenant), self._id(kept, "kept entity"), self._id(dropped, "dropped entity"),
                        self.store.schema, self.store.clock, dry_run=dry_run, actor=actor_, reason=reason)

    def _purge_op(self, tenant: str, now: Instant | None, on_progress: Any) -> Operation[PurgeReport]:
        at = instant_arg(now, "now") if now is not None else self.clock()
        return purge_op(self._tenant(tenant), at, self.store.schema, callback_arg(on_progress, "on_progress"))

    def _migrate_op(self, schema: Schema | str | Path, dry_run: bool, batch_size: int,
                    on_progress: Any) -> tuple[Schema, Operation[MigrationReport]]:
        new = schema if isinstance(schema, Schema) else load_schema(schema)
        return new, migrate_op(new, self.store.clock, dry_run=dry_run, batch_size=batch_size,
                               on_progress=on_progress)

    def _migrated(self, new: Schema, report: MigrationReport) -> MigrationReport:
        """Run under ``new`` once its migration applied (or was recorded, or finished a resumed run)."""
        if report.status in ("applied", "recorded", "resumed"):
            self.store.schema = self.schema = new
            for store in self.targets.opened.values():
                store.schema = new
        return report

    def _residue(self, tenant: str, subject: str, forgotten: bool) -> Callable[[], Any]:
        tenant, subject = self._tenant(tenant), self._id(subject, "subject")
        return lambda: residue_steps(tenant, subject, forgotten=forgotten)

    @staticmethod
    def _stored(episode: Episode, recorded: Recorded) -> Episode:
        return episode if recorded.stored_id == episode.id else episode.model_copy(
            update={"id": recorded.stored_id})

    def _graphiti_mapping(self, mapping: GraphitiMapping | str | Path) -> GraphitiMapping:
        if not isinstance(mapping, (GraphitiMapping, str, Path)):
            raise InvalidDelta(f"mapping must be a GraphitiMapping or a file path, not {mapping!r:.80}")
        try:
            return mapping if isinstance(mapping, GraphitiMapping) else GraphitiMapping.from_file(mapping)
        except (OSError, ValueError) as exc:   # a path the system cannot open (NUL, lone surrogate)
            raise InvalidDelta(f"mapping {mapping!r:.80} cannot be read: {exc}") from None

    @staticmethod
    def _tenant(tenant: str) -> str:
        return checked(check_tenant, tenant)

    @staticmethod
    def _principal(principal: str | None) -> str | None:
        return checked(check_principal, principal, reading=True)

    def _slot(self, tenant: str, subject: str, attribute: str | None,
              principal: str | None) -> dict[str, Any]:
        return {"tenant": self._tenant(tenant), "subject": subject, "attribute": attribute,
                "principal": self._principal(principal)}

    def _bound(self, name: str, params: dict[str, Any]) -> tuple[NamedQuery, dict[str, Any]]:
        """The query and its checked parameters (the reader's principal and the memory types
        validated)."""
        query = get_query(name)
        if "principal" in params:
            params = {**params, "principal": self._principal(params["principal"])}
        if params.get("memory_types") is not None:
            params = {**params, "memory_types": self.schema.check_memory_types(params["memory_types"])}
        if isinstance(params.get("tenant"), str):
            self._tenant(params["tenant"])
        return query, query.bind(params)

    def _answers_one(self, name: str, bound: dict[str, Any]) -> bool:
        """Whether the read ``name`` with ``bound`` finds at most one fact: one of
        :data:`SINGLE_READS`, confirmed facts only, of one single-valued attribute of this graph's
        schema (its confirmed facts believed at one transaction instant never overlap in valid
        time: the write path closes the old value when a new one starts)."""
        if name not in SINGLE_READS or bound.get("statuses") is not None:
            return False
        attribute = bound.get("attribute")
        spec = self.schema.attributes.get(attribute) if isinstance(attribute, str) else None
        return spec is not None and spec.cardinality is Cardinality.ONE

    def _unread(self, names: Any) -> list[str]:
        """The attribute names among ``names`` (one, a list, or None) that this graph's schema
        does not read; they are then looked up in the stored migrations (:data:`UNALIASED`)."""
        given = [names] if isinstance(names, str) else list(names or [])
        return [name for name in given if not self.schema.reads(name)]

    def _require_attributes(self, records: Records) -> None:
        """Raise :class:`UnknownAttribute` with the write path's message (the known names) for
        the first name the :data:`UNALIASED` answer still finds unknown."""
        for name in records[0]["unknown"]:
            try:
                self.schema.attribute(name)
            except SchemaViolation as exc:
                raise UnknownAttribute(str(exc)) from None

    def _checked(self, name: str, params: dict[str, Any],
                 columns: tuple[str, ...] | None = None) -> Callable[[], Generator[Statement, Records, Records]]:
        """The steps of a named read (parameters checked now): the query, then, only when its
        answer is empty, :data:`KNOWN` in the same transaction, so that an unknown tenant or
        subject raises instead of answering ``[]`` (not for :data:`ABSENCE_QUERIES`). With
        ``columns``, the records hold only those, and the check is in the same statement
        (:data:`ANSWERED`)."""
        query, bound = self._bound(name, params)
        subject = bound.get("subject")
        subjects = [subject] if isinstance(subject, str) else list(bound.get("subjects") or [])
        check = name not in ABSENCE_QUERIES and isinstance(bound.get("tenant"), str)
        unread = self._unread(bound.get("attribute")) + self._unread(bound.get("relations"))
        single = self._answers_one(name, bound)

        def steps() -> Generator[Statement, Records, Records]:
            if unread:
                self._require_attributes((yield Statement(UNALIASED, {"names": unread})))
            if columns is not None and check:
                rows, unanswered = _answered_rows(
                    (yield _answered(query, columns, {**bound, "subjects": subjects}, single)), columns)
                if unanswered:
                    self._require_known(bound["tenant"], unanswered)
                return rows
            records = yield query.statement(bound)
            if not records and check:
                self._require_known(bound["tenant"], (yield Statement(KNOWN, {"tenant": bound["tenant"],
                                                                           "subjects": subjects})))
            return records

        return steps

    def _each_checked(self, name: str, reads: list[dict[str, Any]],
                      columns: tuple[str, ...]) -> Callable[[], Generator[Statement, Records, list[Any]]]:
        """The steps of many reads of one named query in one statement (:data:`BATCHED`), every
        read answered as :meth:`_checked` answers it alone: its records, or the
        :class:`SgamError` it raises (an unknown, forgotten or merged subject)."""
        query = get_query(name)
        bound = [self._bound(name, params)[1] for params in reads]
        unread = list(dict.fromkeys(n for b in bound for n in self._unread(b.get("attribute"))))
        text, unmigrated = self._batched(name, query, bound, columns)
        single = all(self._answers_one(name, b) for b in bound)

        def steps() -> Generator[Statement, Records, list[Any]]:
            if unread:
                self._require_attributes((yield Statement(UNALIASED, {"names": unread})))
            found = yield Statement(text, {"batch": [query.sendable({**b, "subjects": [b["subject"]]}) for b in bound],
                                           FIRST: first_rows(single)}, unmigrated=unmigrated)
            answers: list[Any] = [None] * len(bound)
            for row in found:
                answers[row["i"]] = row["rows"]
                if not row["rows"]:
                    try:
                        self._require_known(bound[row["i"]]["tenant"], [row])
                    except SgamError as exc:
                        answers[row["i"]] = exc
            return answers

        return steps

    def _batched(self, name: str, query: NamedQuery, bound: list[dict[str, Any]],
                 columns: tuple[str, ...]) -> tuple[str, str | None]:
        """:data:`BATCHED`'s text for the reads ``bound``, and its form without the migration
        aliases (``None`` for a query without them). When the reads agree on which of the query's
        tested parameters are null (``current_many`` and the service's coalesced reads share all
        but the subject), both are decided for them as a read alone is (``packed_for``), and the
        lean form keeps at most ``$first`` rows a read: 1 (each read stops at its first fact) when
        every read is of one single-valued attribute, confirmed facts only (:meth:`_checked`)."""
        decided = {query.nulls(b) for b in bound}
        if len(decided) != 1:
            return _batched_text(query.packed_text, columns), None
        return _texts(query, decided.pop(), columns, _batched_text)

    def _many(self, tenant: str, subjects: Sequence[str], attribute: str | None, principal: str | None,
              include_candidates: bool, memory_types: Any, errors: str) -> list[dict[str, Any]]:
        """current_many's reads, one a subject (each once, in the order given)."""
        if isinstance(subjects, str) or not isinstance(subjects, Sequence):
            raise InvalidDelta(f"subjects must be a list of entity ids, not {subjects!r:.80}: use current() for one")
        if errors not in ("raise", "return"):
            raise InvalidDelta(f"errors must be 'raise' or 'return', not {errors!r:.80}")
        shared = {**self._slot(tenant, "", attribute, principal), **self._statuses(include_candidates),
                  "memory_types": memory_types}
        return [{**shared, "subject": subject} for subject in dict.fromkeys(subjects)]

    @staticmethod
    def _by_subject(reads: list[dict[str, Any]], answers: list[Any], errors: str) -> dict[str, Any]:
        """current_many's answer: each subject's facts (or, with ``errors="return"``, its error)."""
        for answer in answers:
            if isinstance(answer, SgamError) and errors == "raise":
                raise answer
        return {params["subject"]: answer if isinstance(answer, SgamError) else _facts(answer)
                for params, answer in zip(reads, answers)}

    @staticmethod
    def _require_known(tenant: str, records: list[dict[str, Any]]) -> None:
        """Raise :class:`UnknownTenant`, :class:`ForgottenSubject` or :class:`UnknownSubject`
        from the :data:`KNOWN` answer; return when the tenant and the subjects exist."""
        [row] = records
        if not row["tenant"]:
            raise UnknownTenant(f"tenant {tenant!r} holds nothing and never did (no entities, episodes, "
                                "tombstones or deletion records): check the tenant id")
        for missing in row["missing"]:
            if missing["forgotten_at"] is not None:
                raise ForgottenSubject(
                    f"subject {missing['subject']!r} of tenant {tenant!r} was forgotten on "
                    f"{native(missing['forgotten_at']):%Y-%m-%d %H:%M} UTC: nothing about it is kept")
            raise UnknownSubject(f"tenant {tenant!r} has no subject {missing['subject']!r} stored (never, "
                                 "or its last facts were deleted): check the subject id")
        for merged in row.get("merged", ()):
            raise MergedSubject(
                f"subject {merged['subject']!r} of tenant {tenant!r} was merged into {merged['into']!r} on "
                f"{native(merged['at']):%Y-%m-%d %H:%M} UTC: read {merged['into']!r} (as_of with a known_at "
                "before the merge still answers for the old id)")

    def _context_known(self, tenant: str, subjects: str | Sequence[str] | None) -> tuple[str, dict[str, Any]]:
        """:data:`KNOWN` for a context whose answer is empty (its tenant and the subjects given)."""
        named = [subjects] if isinstance(subjects, str) else list(subjects or [])
        return KNOWN, {"tenant": self._tenant(tenant), "subjects": [s for s in named if isinstance(s, str)]}


    @staticmethod
    def _statuses(include_candidates: bool) -> dict[str, Any]:
        return {"statuses": ["confirmed", "candidate"] if include_candidates else None}

    def _confirmation(self, tenant: str, subject: str, attribute: str, value: Any, actor: str,
                      episode: str, valid_from: datetime | None) -> MemoryDelta:
        return _build(MemoryDelta, dict(
            tenant_id=self._tenant(tenant), subject=subject, attribute=attribute, value=value,
            op=Op.CONFIRM, asserted_by=actor, source_episode_id=episode,
            valid_from=valid_from or self.clock()))

    def _doctor(self, tenant: str) -> dict[str, Any]:
        single = [name for name, spec in self.schema.attributes.items()
                  if spec.cardinality is Cardinality.ONE]
        return {"tenant": self._tenant(tenant), "single_valued": single}

    def _as_of(self, tenant: str, subject: str, attribute: str | None,
               valid_at: Instant, known_at: Instant | None, principal: str | None,
               include_candidates: bool = False) -> dict[str, Any]:
        return {**self._slot(tenant, subject, attribute, principal), **self._statuses(include_candidates),
                "valid_at": instant_arg(valid_at, "valid_at"),
                "known_at": optional_instant(known_at, "known_at")}

    def _traverse(self, tenant: str, subject: str, relations: Sequence[str],
                  valid_at: Instant | None, known_at: Instant | None,
                  principal: str | None) -> dict[str, Any]:
        return {"tenant": self._tenant(tenant), "subject": subject, "relations": names_arg(relations, "relations"),
                "principal": self._principal(principal),
                "valid_at": instant_arg(self.clock() if valid_at is None else valid_at, "valid_at"),
                "known_at": optional_instant(known_at, "known_at")}

    def _history(self, tenant: str, subject: str, attribute: str | None, current_only: bool,
                 principal: str | None) -> dict[str, Any]:
        return {**self._slot(tenant, subject, attribute, principal), "current_only": current_only}

    def _provenance_params(self, tenant: str, ids: tuple[str, ...], memory_id: str | None,
                           subject: str | None, principal: str | None) -> dict[str, Any]:
        """The provenance query's parameters from ``(memory_id)``, ``(subject, memory_id)`` (the
        older form) or keywords."""
        given = list(ids)
        if memory_id is None and given:
            memory_id = given.pop()
        if given and subject is None:
            subject = given.pop()
        if given or not isinstance(memory_id, str):
            raise InvalidDelta("provenance takes (tenant, memory_id) or (tenant, subject, memory_id); "
                               f"got {len(ids)} id(s) after the tenant"
                               + (" and no memory_id" if memory_id is None else "")
                               + (f" and subject={subject!r}" if subject is not None and ids else ""))
        return {"tenant": self._tenant(tenant), "subject": subject, "memory_id": memory_id,
                "principal": self._principal(principal)}

    def _subject_of(self, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The statement that finds the subject of ``params["memory_id"]`` through the schema's types."""
        types = "|".join(quote_identifier(t) for t in self.schema.fact_types())
        return SUBJECT_OF % types, {"tenant": params["tenant"], "memory_id": params["memory_id"]}

    # -- deletion and subject access (graph/deletion.py, graph/subject_access.py) ---------------

    @staticmethod
    def _id(value: Any, what: str) -> str:
        return checked(check_id, value, what)

    @staticmethod
    def _audit(actor: str | None, reason: str | None) -> tuple[str, str | None]:
        """The deletion record's actor (``"unknown"`` when not given) and reason, checked."""
        if actor is not None and (not isinstance(actor, str) or not actor.strip() or len(actor) > 200):
            raise InvalidDelta(f"actor {actor!r} is not valid: give who deletes, 1-200 characters "
                               "(e.g. 'user:ops-anna' or 'agent:retention')")
        if reason is not None and (not isinstance(reason, str) or len(reason) > 500):
            raise InvalidDelta("reason must be text of at most 500 characters: it is stored in the "
                               "deletion record (say why, not what was deleted)")
        return (actor.strip() if actor else "unknown"), reason

    def _memory_target(self, tenant: str, memory_id: str | None, subject: str | None,
                       attribute: str | None) -> tuple[str, str | None, str | None]:
        """``(tenant, memory_id, attribute)`` checked: one version, or a whole slot of ``subject``."""
        tenant = self._tenant(tenant)
        slot = subject is not None or attribute is not None
        if (memory_id is not None) == slot or (slot and (subject is None or attribute is None)):
            raise InvalidDelta("delete_memory takes memory_id (one fact version) or subject and "
                               "attribute (the slot's whole history), not both and not neither")
        if memory_id is not None and (not isinstance(memory_id, str) or not memory_id):
            raise InvalidDelta(f"memory_id {memory_id!r} is not valid: give a memory id from history or current")
        if subject is not None:
            self._id(subject, "subject")
            if not isinstance(attribute, str) or not attribute:
                raise InvalidDelta(f"attribute {attribute!r} is not valid: give the attribute's name")
        return tenant, memory_id, attribute

    def _slot_deletion(self, tenant: str, subject: str, attribute: str | None, memory_id: str | None,
                       dry_run: bool, actor: str, reason: str | None) -> Callable[[], Any]:
        def steps() -> Any:
            now = self.clock()
            return deletion_steps(slot_steps(tenant, subject, attribute, memory_id, now, dry_run),
                                  now, actor, reason, dry_run)
        return steps

    def _episode_deletion(self, tenant: str, episode_id: str, dry_run: bool, actor: str,
                          reason: str | None) -> Callable[[], Any]:
        def steps() -> Any:
            now = self.clock()
            return deletion_steps(episode_steps(tenant, episode_id, now, dry_run), now, actor, reason, dry_run)
        return steps

    def _export(self, tenant: str, subject: str, principal: str | None) -> Callable[[], Any]:
        tenant, principal = self._tenant(tenant), self._principal(principal)
        self._id(subject, "subject")
        return lambda: export_steps(tenant, subject, principal, self.schema, self.clock())


def _names_tenants(method: Callable[..., Any]) -> bool:
    parameters = inspect.signature(method).parameters
    return any(name in parameters for name in (*TENANT_ARGUMENTS, *ITEM_ARGUMENTS)) or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def _routed(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` run with :attr:`_Queries.store` set to the store of the tenants it names."""
    signature = inspect.signature(method)
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def run_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            tenants = self._call_tenants(signature, args, kwargs)
            if tenants is None:
                return await method(self, *args, **kwargs)
            token = _ROUTED.set((self, await self.targets.of(tenants)))
            try:
                return await method(self, *args, **kwargs)
            finally:
                _ROUTED.reset(token)
        return run_async

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        tenants = self._call_tenants(signature, args, kwargs)
        if tenants is None:
            return method(self, *args, **kwargs)
        token = _ROUTED.set((self, self.targets.of(tenants)))
        try:
            return method(self, *args, **kwargs)
        finally:
            _ROUTED.reset(token)
    return run


def item_tenants(items: Any) -> tuple[Any, list[str] | None]:
    """``items`` (listed if they are a one-pass iterable) and the tenant ids they carry, for a
    call with a placement; the tenants are None when ``items`` is not an iterable (the call then
    raises its own error)."""
    if isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
        return items, None
    listed = items if isinstance(items, Sequence) else list(items)
    return listed, [item.tenant_id for item in listed if isinstance(item, (MemoryDelta, Episode))]


def _build(model: type[T], fields: dict[str, Any]) -> T:
    """A model from keyword fields, with a validation failure as :class:`InvalidDelta`."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise InvalidDelta(f"invalid {model.__name__}: {validation_problems(exc, model.__name__)}") from None


def instant_arg(value: Instant, name: str) -> datetime:
    """A time argument as an aware UTC datetime (:func:`~sgam.graph.models.parse_instant`: ISO
    strings as the CLI takes them, a date alone is midnight UTC), or :class:`InvalidDelta`
    naming ``name`` with an example. The API and the CLI both read their times through this."""
    return checked(parse_instant, value, name)


def names_arg(value: Any, name: str) -> list[str]:
    """A list of ids or names from a list, tuple or one string; :class:`InvalidDelta` otherwise."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return list(value)
    raise InvalidDelta(f"{name} must be a list of strings (or one string), not {value!r:.80}")


def items_arg(value: Any, kind: type[T], name: str) -> list[T]:
    """``value``'s items as a list when it is an iterable of ``kind``; :class:`InvalidDelta` otherwise."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise InvalidDelta(f"{name} must be an iterable of {kind.__name__}, not {value!r:.80}")
    items = list(value)
    for index, item in enumerate(items):
        if not isinstance(item, kind):
            raise InvalidDelta(f"{name}[{index}] must be a {kind.__name__}, not {item!r:.80}")
    return items


class _CheckedDeltas(Sequence[MemoryDelta]):
    """A view of an import's ``Sequence`` that checks each delta as it is read (the import reads
    it by index, twice, and must never copy a lazy one)."""

    def __init__(self, deltas: Sequence[Any]) -> None:
        self.deltas = deltas

    def __len__(self) -> int:
        return len(self.deltas)

    def __getitem__(self, index: Any) -> Any:
        item = self.deltas[index]
        if isinstance(index, int) and not isinstance(item, MemoryDelta):
            raise InvalidDelta(f"deltas[{index}] must be a MemoryDelta, not {item!r:.80}")
        return item


def import_deltas(deltas: Any) -> Sequence[MemoryDelta]:
    """An import's deltas: a ``Sequence`` as it is (checked on access), any other iterable listed."""
    if isinstance(deltas, Sequence) and not isinstance(deltas, (str, bytes)):
        return _CheckedDeltas(deltas)
    return items_arg(deltas, MemoryDelta, "deltas")


def extractors_arg(value: Any) -> list[Extractor]:
    """Extractors given by a caller: each with a ``name`` and an ``extract`` method."""
    items = items_arg(value, object, "extractors")
    for index, item in enumerate(items):
        if not callable(getattr(item, "extract", None)) or not isinstance(getattr(item, "name", None), str):
            raise InvalidDelta(f"extractors[{index}] must be an extractor (a name and an extract method), "
                               f"not {item!r:.80}")
    return items  # type: ignore[return-value]


def model_arg(value: Any, kind: type[T], fields: dict[str, Any]) -> T:
    """The ``kind`` given positionally, or one built from keyword ``fields``; :class:`InvalidDelta`
    for anything else."""
    if value is None:
        return episode_from_fields(fields) if kind is Episode else _build(kind, fields)  # type: ignore[return-value]
    if not isinstance(value, kind):
        raise InvalidDelta(f"expected a {kind.__name__} (or its fields as keywords), not {value!r:.80}")
    return value


# Once, not per call: reading the signature took about 0.15 ms of every context().
CONTEXT_OPTIONS = sorted(inspect.signature(context_steps).parameters.keys() - CONTEXT_ARGUMENTS)


def context_options(options: dict[str, Any]) -> list[str]:
    """Check ``context(**options)`` against :func:`context_steps`'s options; the attribute names given."""
    known = CONTEXT_OPTIONS
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InvalidDelta(f"context() has no option {', '.join(unknown)}; it takes {', '.join(known)}")
    attributes = options.get("attributes")
    return [] if attributes is None else names_arg(attributes, "attributes")


def callback_arg(value: Any, name: str) -> Any:
    """``value`` if it is None or callable; :class:`InvalidDelta` otherwise."""
    if value is not None and not callable(value):
        raise InvalidDelta(f"{name} must be a function (or None), not {value!r:.80}")
    return value


def optional_instant(value: Instant | None, name: str) -> datetime | None:
    return None if value is None else instant_arg(value, name)


def renamed(valid_at: Instant | None, as_of: Instant | None, where: str) -> Instant | None:
    """``valid_at``, or its deprecated old name ``as_of`` with a warning (``where`` names the call)."""
    if as_of is None:
        return valid_at
    if valid_at is not None:
        raise InvalidDelta(f"{where}: give valid_at only (as_of is its deprecated old name)")
    warnings.warn(f"{where}(as_of=...) is deprecated; use valid_at=... (the same instant, valid time)",
                  DeprecationWarning, stacklevel=3)
    return as_of


class MemoryGraph(_Queries):
    """Schema-guided, bitemporal agent memory on Neo4j.

    >>> graph = MemoryGraph.connect()                       # the local server, or NEO4J_URI
    >>> graph.current("demo", "mira", "passport_deadline")  # doctest: +SKIP
    """

    store: Store
    targets: Stores

    def __init__(self, store: Store, targets: Stores | None = None) -> None:
        self.store = store
        self.schema = store.schema
        self.clock = store.clock
        self.targets = targets or Stores(store, None, Placement(), bootstrap=False,
                                         retry_seconds=0)
        telemetry.watch(store)  # the quarantine and queue gauges count on it
        load_queries()  # parsed once a process, here rather than in its first read (3-4 ms)

    @classmethod
    def connect(cls, uri: str | None = None, auth: tuple[str, str] | None = None, *,
                database: str | None = None, schema: Schema | None = None,
                settings: Settings | None = None, clock: Clock = utcnow,
                bootstrap: bool = True, bookmarks: Iterable[str] = ()) -> MemoryGraph:
        """Connect (default: ``NEO4J_URI`` or the local server) and apply pending migrations.
        ``bookmarks``: another process's :meth:`bookmarks`, whose writes every read and write of
        this graph then sees (see :meth:`catch_up`)."""
        settings = settings or Settings()
        uri, auth = _connection(uri, auth, settings)
        store = Store.connect(uri, auth, schema or default_schema(),
                              database or settings.neo4j_database, clock, settings.neo4j_retry_seconds,
                              allow_plaintext=settings.allow_plaintext)
        store.max_future = timedelta(days=settings.max_future_days)
        try:
            store.catch_up(bookmarks)
            if bootstrap:
                store.run(bootstrap_op(store.schema, store.clock))
            store.notice_migrations()
        except BaseException:
            store.close()
            raise
        graph = cls(store, Stores(store, auth, settings.placement_map(), bootstrap=bootstrap,
                                  retry_seconds=settings.neo4j_retry_seconds,
                                  allow_plaintext=settings.allow_plaintext))
        graph.audit_reads = settings.read_audit
        return graph

    def close(self) -> None:
        telemetry.unwatch(self.store)
        self.targets.close()
        self.store.close()

    def _items_store(self, items: Any) -> tuple[Store, Any]:
        """The store of the tenants ``items`` carry (deltas, episodes), and the items."""
        if not self.targets.placement.tenants:
            return self.store, items
        items, tenants = item_tenants(items)
        return (self.store if not tenants else self.targets.of(tenants)), items

    @property
    def retries(self) -> Retries:
        """Write transactions retried after a transient error (a deadlock between concurrent
        writers, a lock time-out) since this graph connected: ``retries.transactions`` of them,
        ``retries.attempts`` extra attempts in all. The driver re-runs such a transaction whole, so
        a retry that then succeeds is not an error, only time lost; a count that keeps growing
        says writers contend (fewer ``workers``, or batches that share fewer subjects)."""
        return self.store.retries

    def bookmarks(self) -> list[str]:
        """The bookmarks of this graph's latest reads and writes, as strings. Hand them to another
        process or service request (``MemoryGraph.connect(bookmarks=...)`` or :meth:`catch_up`) and
        its reads see every write this graph made before, even on a cluster secondary that has
        not caught up yet. Within one graph this is automatic."""
        return self.store.bookmarks()

    def catch_up(self, bookmarks: Iterable[str]) -> None:
        """Make this graph's later reads and writes see the writes named by ``bookmarks`` (another
        graph's :meth:`bookmarks`): waits until the server holds them. Strings that are not Neo4j
        bookmarks are refused (:class:`InvalidDelta`) and nothing is kept of them."""
        self.store.catch_up(bookmarks)

    def __enter__(self) -> MemoryGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ----------------------------------------------------------------------------

    def delete_tenant(self, tenant: str, *, dry_run: bool = False, actor: str | None = None,
                      reason: str | None = None) -> DeletionReport:
        """Erase everything stored for ``tenant`` (entities, facts, values, episodes, ledgers,
        quarantine, run records) but its deletion records, and leave a ``(:Deletion {grain:
        'tenant'})`` record with the counts, who (``actor``) and why (``reason``). ``dry_run`` only
        counts what would go. A tenant that holds nothing gets no record (``report.empty``)."""
        return self.store.run(self._delete_tenant_op(tenant, dry_run, actor, reason))

    def delete_memory(self, tenant: str, memory_id: str | None = None, *, subject: str | None = None,
                      attribute: str | None = None, dry_run: bool = False, actor: str | None = None,
                      reason: str | None = None) -> DeletionReport:
        """Delete one fact version (``memory_id``, with its closed, trimmed or extended copies) or a
        slot's whole history (``subject`` and ``attribute``), in one transaction, and record it.

        Rows decide: the slot's ledger is rebuilt from the rows that remain, so a deleted version
        leaves a gap; the value it superseded does not come back. ``dry_run`` lists what would go
        and changes nothing. :class:`NotFound` when there is no such version or slot."""
        tenant, memory_id, attribute = self._memory_target(tenant, memory_id, subject, attribute)
        actor_, reason = self._audit(actor, reason)
        if memory_id is not None:
            found = self.store.read(*self._subject_of({"tenant": tenant, "memory_id": memory_id}))
            if not found:
                raise missing_memory(tenant, memory_id)
            subject = found[0]["subject"]
        steps = self._slot_deletion(tenant, str(subject), attribute, memory_id, dry_run, actor_, reason)
        return self.store.inspect(steps) if dry_run else self.store.transact(steps)

    def delete_episode(self, tenant: str, episode_id: str, *, dry_run: bool = False,
                       actor: str | None = None, reason: str | None = None) -> DeletionReport:
        """Delete an episode and what only it supports, in one transaction, and record it.

        Facts it alone supports go (candidates too); facts with other support lose its pointers
        (support, source, the statement that retired or confirmed them). Its quarantine entries
        go, and entities it alone brought in. ``dry_run`` lists what would go and changes nothing."""
        tenant = self._tenant(tenant)
        actor_, reason = self._audit(actor, reason)
        steps = self._episode_deletion(tenant, self._id(episode_id, "episode id"), dry_run, actor_, reason)
        return self.store.inspect(steps) if dry_run else self.store.transact(steps)

    def export_subject(self, tenant: str, subject: str, principal: str | None = None) -> dict[str, Any]:
        """Everything the store holds about ``subject`` as JSON-ready data (a subject access
        request): facts with full history and provenance, facts pointing at it, the episodes that
        mention it, its statements, candidates, quarantine entries and deletion records; read as
        ``principal`` (``"*"``: everything). :class:`NotFound` when the tenant holds nothing about it."""
        from .export import jsonable

        data = jsonable(self.store.inspect(self._export(tenant, subject, principal)))
        self._audited(self._disclosure("export_subject", {"tenant": tenant, "principal": principal,
                                                          "subject": subject}, data))
        return data

    def forget_subject(self, tenant: str, subject: str, *, dry_run: bool = False, actor: str | None = None,
                       reason: str | None = None) -> ForgetReport:
        """Erase a subject completely and tombstone it (see :mod:`sgam.graph.forget`).

        Its entity, its facts both ways, its values, statements and refusals go; so do other
        subjects' facts whose value names it. Episodes it was the only subject of are deleted;
        every other text naming it (by id, name or, in its episodes, an erased value) is redacted,
        queued work included. Afterwards :meth:`residue` is empty, and facts about the subject
        from episodes that occurred before now are refused. The tombstone records when, ``actor``
        (who) and ``reason``, never what was erased; ``dry_run`` reports what would go and
        changes nothing.
        """
        return self.store.run(self._forget_op(tenant, subject, dry_run, actor, reason))

    def purge(self, tenant: str, *, now: Instant | None = None,
              on_progress: Callable[[int, int], None] | None = None) -> PurgeReport:
        """Remove facts whose retention class expired (TTL since last confirmation), with what the
        class says goes with them (orphaned value nodes, uncited episodes); records a PurgeRun."""
        return self.store.run(self._purge_op(tenant, now, on_progress))

    def apply_schema(self, schema: Schema | str | Path, *, dry_run: bool = False, batch_size: int = 1000,
                     on_progress: Callable[[StepReport, int], None] | None = None) -> MigrationReport:
        """Apply a new schema version (a :class:`Schema`, a shipped name or a YAML/JSON file) with its
        declared migration, over every tenant: rename, rename_relation, split, retype; history
        included. ``dry_run`` counts and checks without writing. See :mod:`sgam.graph.evolution`."""
        new, op = self._migrate_op(schema, dry_run, batch_size, on_progress)
        for placed in self.targets.all()[1:]:   # every other target holds tenants of this schema too
            placed.run(self._migrate_op(new, dry_run, batch_size, on_progress)[1])
        return self._migrated(new, self.store.run(op))

    def residue(self, tenant: str, subject: str, *, forgotten: bool = False) -> list[dict[str, Any]]:
        """What is left of ``subject`` in ``tenant``: every node, fact, property and full-text index
        hit that names it (``where``, ``id``, ``property``, ``found``), checked independently of the
        erasure (see :mod:`sgam.graph.residue`). With ``forgotten``, the subject must have been
        forgotten (else :class:`NotFound`); its tombstone then also lets the check find its names
        and erased values."""
        return self.store.inspect(self._residue(tenant, subject, forgotten))

    def record_episode(self, episode: Episode | None = None, **fields: Any) -> Episode:
        """Store a raw episode before anything is extracted from it; returns it under its stored id.

        Idempotent per id; an episode whose content hash the tenant already holds is not stored
        again and comes back with the existing episode's id (``graph.recording``). ``speaker`` may
        stand for ``actor``; without an ``id``, one is derived from the content hash.
        """
        episode = model_arg(episode, Episode, fields)
        [recorded] = self.store.run(self._record_op([episode]))
        return self._stored(episode, recorded)

    def record_episodes(self, episodes: Sequence[Episode]) -> dict[str, str]:
        """Store raw episodes; returns ``{id: "created" | "existing" | "duplicate"}``."""
        store, episodes = self._items_store(episodes)
        return {r.id: r.outcome for r in store.run(self._record_op(items_arg(episodes, Episode, "episodes")))}

    def ingest(self, episode: Episode | None = None, *, deltas: Iterable[Any] = (),
               extractors: Sequence[Extractor] | None = None, remember: bool = False,
               strict: bool = False, **fields: Any) -> IngestReport:
        """Record an episode and run the ingest pipeline on it (``sgam.ingest.pipeline``).

        Real time when the agent gives ``deltas``, says ``remember=True`` or the message starts
        with "remember": written before this returns. Anything else is queued for ``sgam worker``
        (``report.queued``). ``extractors`` default to the event mapping; candidates that fail
        validation go to the quarantine (``report.quarantined``). With ``strict=True`` a given
        delta that :meth:`write` would refuse raises that error instead, and none of the given
        deltas is written; the raw episode stays recorded (``sgam.ingest.pipeline.ingest``).
        """
        episode = model_arg(episode, Episode, fields)
        chosen = default_extractors(self.schema) if extractors is None else extractors_arg(extractors)
        return self.store.run(submit_op(self.store, episode, chosen, deltas=deltas, remember=remember, strict=strict))

    def quarantine(self, tenant: str, *, status: str | None = "open",
                   principal: str | None = None) -> list[QuarantineEntry]:
        """Refused candidates of ``tenant``, oldest first (``status``: open, resolved or None).

        Like every read, only what ``principal`` may read: a candidate of a private attribute
        reaches its readers only (``None``: shared entries only; ``"*"``: all).
        """
        return list_quarantine(self, self._tenant(tenant), status=status, principal=principal)

    def replay_quarantine(self, tenant: str, extractors: Sequence[Extractor] | None = None) -> QuarantineReplay:
        """Re-validate open quarantine entries against the current schema; write those that pass."""
        chosen = default_extractors(self.schema) if extractors is None else extractors_arg(extractors)
        tenant = self._tenant(tenant)
        entries = self.quarantine(tenant, status="open", principal=ALL_PRINCIPALS)
        return self.store.run(replay_quarantine_op(self.store, tenant, entries, chosen))

    def rebuild(self, tenant: str, extractors: Sequence[Extractor] | None = None, *, into: str | None = None,
                dry_run: bool = False) -> RebuildReport:
        """Re-extract ``tenant``'s stored episodes (in the order they occurred) into the fresh tenant
        ``into`` with ``extractors`` (default: the event mapping) and report the slots added,
        changed and missing compared with ``tenant`` now; ``dry_run`` writes nothing
        (:mod:`sgam.ingest.rebuild`)."""
        chosen = default_extractors(self.schema) if extractors is None else extractors_arg(extractors)
        return self.store.run(rebuild_op(self.store, self._tenant(tenant), chosen, into=into, dry_run=dry_run))

    def import_graphiti(self, mapping: GraphitiMapping | str | Path, tenant: str, *,
                        group_ids: Sequence[str] | None = None, dry_run: bool = False) -> GraphitiImportReport:
        """Import the Graphiti graph in this database (its ``RELATES_TO`` facts and ``Episodic``
        episodes, optionally of ``group_ids`` only) into ``tenant`` through a mapping file or
        :class:`~sgam.ingest.graphiti.importer.GraphitiMapping`; idempotent (see that module)."""
        rules = self._graphiti_mapping(mapping)
        return import_graphiti(self, rules, self._tenant(tenant), group_ids=group_ids, dry_run=dry_run)

    def write(self, delta: MemoryDelta | None = None, **fields: Any) -> DeltaResult:
        """Validate, reconcile and persist one delta; raises the error if it is rejected."""
        return self.store.run(self._write_op([model_arg(delta, MemoryDelta, fields)], atomic=True)).results[0]

    def write_many(self, deltas: Iterable[MemoryDelta], *, atomic: bool = False,
                   batch_size: int = DEFAULT_BATCH, workers: int = DEFAULT_WORKERS) -> BatchResult:
        """Write many deltas in batched transactions (``UNWIND``), same semantics as :meth:`write`.

        Rejected deltas are reported in the result and the rest are applied; with ``atomic=True``
        the first error is raised and nothing is written (one transaction). Otherwise up to
        ``workers`` lanes of batches (two by default, never more than there are batches), split by
        subject, run side by side: a subject's deltas stay in order in one lane. A transient error
        such as a deadlock is retried by the driver after a pause and counted in :attr:`retries`.
        """
        store, deltas = self._items_store(deltas)
        ops = self._lanes(deltas, atomic, batch_size, workers)
        if len(ops) <= 1:
            return merged(store.run(ops[0]) if ops else [])
        with prompt_handoffs(), ThreadPoolExecutor(max_workers=len(ops)) as pool:
            return merged(done for lane in pool.map(store.run, ops) for done in lane)

    def import_history(self, deltas: Iterable[MemoryDelta], *, chunk_size: int = DEFAULT_CHUNK,
                       on_progress: Any = None, on_unfinished: OnUnfinished = "resume") -> ImportResult:
        """Load a whole history into tenants that hold no entities yet, faster than
        :meth:`write_many` for a big backlog and with the same result (the same reconciliation,
        in transactions of whole subjects of about ``chunk_size`` deltas).

        Every delta is checked before anything is written and the first bad one raises; a tenant
        that already has entities raises :class:`~sgam.graph.errors.Conflict`; if a transaction
        fails midway, what was imported is removed again. Record the episodes first.
        ``on_progress(done, total)`` is called after each chunk.

        The import records itself as it goes (an ``ImportRun`` node per tenant), so one stopped by
        a crash or a kill is found by the next call into its tenants. ``on_unfinished="resume"``
        (the default) continues it after its last committed chunk when ``deltas`` is the same
        stream (``result.resumed_from`` says from which chunk), and refuses a different stream
        with :class:`~sgam.graph.errors.Conflict`; ``on_unfinished="undo"`` first removes what
        the unfinished import wrote (``result.undone``), then imports ``deltas`` from the start.

        Memory stays bounded when ``deltas`` is a ``Sequence`` that builds each delta on access
        (it is read twice by index, never copied); any other iterable is made a list first. The
        result holds one outcome per delta (``results[i].outcome``, ``count``, ``written``), not
        the new rows' ids: at millions of deltas those would outweigh the import itself.
        """
        store, deltas = self._items_store(deltas)
        return store.run(self._import_op(deltas, chunk_size, on_progress, on_unfinished))

    # -- reads -----------------------------------------------------------------------------

    def query(self, name: str, **params: Any) -> list[dict[str, Any]]:
        """Run a named query from ``queries/`` in READ mode.

        Queries that return fact values take ``principal``, the reader (see :meth:`current`).
        An unknown ``attribute`` (or relation) raises :class:`~sgam.graph.errors.UnknownAttribute`
        listing the known ones. An empty answer is checked once more: a tenant that holds nothing
        raises :class:`~sgam.graph.errors.UnknownTenant`, a subject never stored
        :class:`~sgam.graph.errors.UnknownSubject`, an erased one
        :class:`~sgam.graph.errors.ForgottenSubject`; a stored subject with no fact that matches
        gives ``[]``.
        """
        return self._answer(name, None, **params)

    def _answer(self, name: str, columns: tuple[str, ...] | None, **params: Any) -> list[dict[str, Any]]:
        """:meth:`query`; with ``columns``, the records hold only those (see :meth:`_checked`)."""
        records = self.store.inspect(self._checked(name, params, columns), traced=telemetry.named(name, params))
        self._audited(self._disclosure(name, params, records))
        return records

    def _audited(self, found: Disclosure | None) -> None:
        """Write the read audit record a read owes; a failure is logged and counted, not raised."""
        if found is not None:
            try:
                self.store.run(audit_op(found, self.clock()))
            except Exception as exc:  # the read was answered: losing it over its audit helps nobody
                failed(found, exc)

    def read_audit(self, tenant: str, *, subject: str | None = None, principal: str | None = None,
                   limit: int = 1000) -> list[dict[str, Any]]:
        """The read audit log of ``tenant``, newest first: who (``principal``) read which
        ``subject``'s private ``attributes``, ``at`` when, by which ``operation``; optionally of one
        subject or one reader. See :mod:`sgam.graph.audit`."""
        return self._audit_rows(self.store.read(READ_AUDIT, self._read_audit(tenant, subject, principal, limit)))

    def current(self, tenant: str, subject: str, attribute: str | None = None, *,
                principal: str | None = None, include_candidates: bool = False,
                memory_types: str | Sequence[str] | None = None) -> list[Fact]:
        """Facts valid now and believed now (the default question).

        Every read takes the reader's ``principal`` (``user:mira``, ``agent:hr``): private facts
        come back only to the principals their attribute names as readers. Without one, only
        shared facts are read; ``"*"`` reads every fact (trusted admin or analyst use).
        Pending candidates (values waiting for recurrence or confirmation) are left out unless
        ``include_candidates``; then they come too, with ``status`` candidate.
        ``memory_types`` (every read takes it): only facts of these memory types (``"preference"``,
        ``["profile", "task_state"]``; the schema's ``memory_type`` of each attribute); ``None``
        reads every type, an unknown type raises :class:`SchemaViolation` listing the known ones.
        """
        return _facts(self._answer("current", FACT_COLUMNS, **self._slot(tenant, subject, attribute, principal),
                                 **self._statuses(include_candidates), memory_types=memory_types))

    def current_many(self, tenant: str, subjects: Sequence[str], attribute: str | None = None, *,
                     principal: str | None = None, include_candidates: bool = False,
                     memory_types: str | Sequence[str] | None = None,
                     errors: str = "raise") -> dict[str, list[Fact]]:
        """:meth:`current` of each of ``subjects`` (each once), by subject, in one statement: one
        round trip and one plan however many subjects (an agent reading the people in a thread,
        or ``sgam serve`` answering concurrent reads together).

        The same answers as one :meth:`current` a subject: the same filters, the same read audit
        records. A subject that is unknown, forgotten or merged raises as :meth:`current` raises;
        with ``errors="return"`` its entry is that :class:`SgamError` instead, and the other
        subjects are still answered.
        """
        reads = self._many(tenant, subjects, attribute, principal, include_candidates, memory_types, errors)
        if not reads:
            return {}
        answers = self.store.inspect(self._each_checked("current", reads, FACT_COLUMNS),
                                     traced=telemetry.named("current", reads[0]))
        for params, answer in zip(reads, answers):
            if not isinstance(answer, SgamError):
                self._audited(self._disclosure("current", params, answer))
        return self._by_subject(reads, answers, errors)

    def as_of(self, tenant: str, subject: str, attribute: str | None = None, *,
              valid_at: Instant, known_at: Instant | None = None,
              principal: str | None = None, include_candidates: bool = False,
              memory_types: str | Sequence[str] | None = None) -> list[Fact]:
        """What was true at ``valid_at`` (as believed now, or as believed at ``known_at``).

        Times are aware datetimes or ISO 8601 strings with a zone (``"2026-06-01T12:00:00Z"``); a
        date alone (``"2026-06-02"``) is midnight UTC. A time without a zone is refused."""
        return _facts(self._answer("as-of", FACT_COLUMNS, **self._as_of(tenant, subject, attribute, valid_at, known_at,
                                                        principal, include_candidates),
                                 memory_types=memory_types))

    def confirm(self, tenant: str, subject: str, attribute: str, value: Any = None, *, actor: str,
                episode: str, valid_from: datetime | None = None) -> DeltaResult:
        """Confirm a pending candidate (``value`` may be left out when only one is pending).

        The candidate is promoted and applies as a confirmed write at its own ``valid_from``.
        ``episode`` is the recorded episode in which ``actor`` confirmed it. A sensitive attribute
        accepts only the actors its schema lists as ``confirmers`` (:class:`NotAllowed` otherwise);
        :class:`NotFound` when no such candidate is pending. Replaying a confirmation is a no-op.
        """
        return self.write(self._confirmation(tenant, subject, attribute, value, actor, episode, valid_from))

    def candidates(self, tenant: str, subject: str | None = None, attribute: str | None = None, *,
                   principal: str | None = None) -> list[Fact]:
        """Pending candidates of ``tenant`` (optionally of one subject / attribute), best supported first."""
        return _facts(self._answer("candidates", FACT_COLUMNS, tenant=self._tenant(tenant), subject=subject,
                                 attribute=attribute, principal=principal))

    def history(self, tenant: str, subject: str, attribute: str | None = None, *,
                current_only: bool = False, principal: str | None = None,
                memory_types: str | Sequence[str] | None = None) -> list[Fact]:
        """Every stored version, retired ones included; with ``current_only``, only the rows
        believed now (``expired_at`` is None): every valid-time version, past and future, that we
        hold today."""
        return _facts(self._answer("history", FACT_COLUMNS, **self._history(tenant, subject, attribute, current_only,
                                                            principal), memory_types=memory_types))

    def timeline(self, tenant: str, subject: str, attribute: str | None = None, *,
                 principal: str | None = None) -> Any:
        """The subject's :meth:`history` as a matplotlib ``Figure`` (needs ``sgam[timeline]``):
        each version a bar over valid time, layered by when the store believed it, so a correction
        shows the old bar retired at the moment it was corrected (see :mod:`sgam.timeline`)."""
        from .timeline import figure

        return figure(self.history(tenant, subject, attribute, principal=principal), subject, now=self.clock())

    def provenance(self, tenant: str, *ids: str, memory_id: str | None = None, subject: str | None = None,
                   principal: str | None = None) -> Provenance | None:
        """Episode, speaker, and the versions this one superseded / was superseded by, or None.

        ``provenance(tenant, memory_id)``; the older ``provenance(tenant, subject, memory_id)``
        still works, and then the fact must be about ``subject``."""
        params = self._provenance_params(tenant, ids, memory_id, subject, principal)
        if params["subject"] is None:
            found = self.store.read(*self._subject_of(params))
            params["subject"] = found[0]["subject"] if found else None
        return _provenance(self.query("provenance", **params))

    def doctor(self, tenant: str) -> list[dict[str, Any]]:
        """Invariant violations in ``tenant`` (an empty list when the store is sound)."""
        return self.query("doctor", **self._doctor(tenant))

    def context(self, tenant: str, question: str, *, subjects: str | Sequence[str] | None = None,
                valid_at: Instant | None = None, budget_tokens: int = 800,
                principal: str | None = None, as_of: Instant | None = None,
                asked_at: Instant | None = None, memory_types: str | Sequence[str] | None = None,
                **options: Any) -> Context:
        """The smallest context that answers ``question``: the exact facts (valid now or at
        ``valid_at``, believed now) first, then labelled evidence from expansion, all cited, as
        ``principal`` may read them; see :func:`sgam.queries.context.context_steps` for
        ``attributes``, ``expand``, ``embedder``, ``question_vector``, ``k``. ``as_of`` is the
        deprecated old name of ``valid_at``.

        Without ``valid_at``, a time the question names ("last June", "in 2024", "two weeks
        ago"; :mod:`sgam.queries.temporal`), read relative to ``asked_at`` (default now), sets the
        window: ``ctx.valid_window``, ``ctx.time_phrase`` and a note say so; a phrase it cannot
        pin down ("recently", "in May" between two equally near Mays) is a note, and the context
        answers for ``asked_at``. ``memory_types`` as in :meth:`current`."""
        instant = optional_instant(renamed(valid_at, as_of, "context"), "valid_at")
        unread = self._unread(context_options(options))
        if unread:
            self._require_attributes(self.store.read(UNALIASED, {"names": unread}))
        result = self.store.run(context_steps(
            tenant, question, subjects=None if subjects is None else names_arg(subjects, "subjects"),
            valid_at=instant, budget_tokens=budget_tokens,
            now=self.clock(), schema=self.schema, principal=self._principal(principal),
            asked_at=optional_instant(asked_at, "asked_at"), memory_types=memory_types, **options))
        if result.empty:   # nothing found: say so if the tenant or a subject given is unknown
            self._require_known(tenant, self.store.read(*self._context_known(tenant, subjects)))
        self._audited(self._disclosure("context", {"tenant": tenant, "principal": principal},
                                       result.model_dump()))
        return result

    def embed(self, tenant: str, *, embedder: Embedder | None = None, batch_size: int = 64,
              on_progress: Any = None) -> EmbedReport:
        """Backfill the embeddings of ``tenant``'s episodes, entities and fact statements
        (needs ``sgam[embeddings]``); ``on_progress(kind, done, total)`` after each batch."""
        return self.store.run(backfill_steps(self._tenant(tenant), require_embedder(embedder),
                                                    batch_size, callback_arg(on_progress, "on_progress")))

    def traverse(self, tenant: str, subject: str, relations: Sequence[str], *,
                 valid_at: Instant | None = None, known_at: Instant | None = None,
                 principal: str | None = None) -> list[TraversalPath]:
        """Paths along ``relations`` (e.g. ``["holds", "covered_by"]``), every hop valid at ``valid_at``
        and readable by ``principal``."""
        return _paths(self._answer("traverse", PATH_COLUMNS, **self._traverse(tenant, subject, relations, valid_at,
                                                              known_at, principal)))

    def to_networkx(self, tenant: str, valid_at: Instant | None = None, known_at: Instant | None = None,
                    subjects: Sequence[str] | None = None, hops: int = 1,
                    principal: str | None = None, *, as_of: Instant | None = None) -> Any:
        """The subgraph valid at ``valid_at`` (default now) and believed at ``known_at`` (default
        now) as ``principal`` may read it, as a ``networkx.MultiDiGraph`` (see :mod:`sgam.export`).
        ``as_of`` is the deprecated old name of ``valid_at``."""
        from .export import to_networkx

        return to_networkx(self, tenant, renamed(valid_at, as_of, "to_networkx"), known_at,
                           subjects=subjects, hops=hops, principal=principal)

    # -- entity resolution (graph/aliases.py, graph/merge.py, graph/candidates.py) -------------

    def add_alias(self, tenant: str, subject: str, *names: str, actor: str | None = None) -> dict[str, list[str]]:
        """Give ``subject`` other names it goes by (searched by ``search-entities``, used by ingest
        to find the subject). Returns, per alias key, the other entities the alias also names:
        merge candidates, never merged by themselves."""
        return self.store.run(self._add_alias_op(tenant, subject, names, actor))

    def merge_entities(self, tenant: str, kept: str, dropped: str, *, dry_run: bool = False,
                       actor: str | None = None, reason: str | None = None,
                       dropped_tenant: str | None = None) -> MergeReport:
        """Merge ``dropped`` into ``kept`` in one transaction (see :mod:`sgam.graph.merge`): its
        statements join ``kept``'s slots, which are derived again; relations pointing at it, its
        aliases, id, name and episode links move; history stays exact (``as_of`` before the merge
        answers as before for both ids) and a ``(:Merge)`` record keeps who, when, why and what
        moved. ``dry_run`` reports what would change (conflicts included) and writes nothing.
        Refused across tenants (``dropped_tenant``), into itself, or between two entity types."""
        return self.store.run(self._merge_op(tenant, kept, dropped, dry_run, actor, reason, dropped_tenant))

    def split_entities(self, tenant: str, kept: str, dropped: str, *, dry_run: bool = False,
                       actor: str | None = None, reason: str | None = None) -> MergeReport:
        """Undo the last merge of ``dropped`` into ``kept``: both get back the statements they had
        (what was written to ``kept`` since stays with it), their aliases and episode links; the
        merge record says when and by whom it was split. ``dry_run`` writes nothing."""
        return self.store.run(self._split_op(tenant, kept, dropped, dry_run, actor, reason))

    def merges(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's merge records, oldest first (who merged what, when, why; split or not)."""
        return self.store.run(merges_op(self._tenant(tenant)))

    def merge_candidates(self, tenant: str, *, limit: int = 50) -> list[MergeCandidate]:
        """Pairs of entities that may be one, best first, with the reasons (see
        :mod:`sgam.graph.candidates`). Nothing is merged."""
        return self.store.run(candidates_op(self._tenant(tenant), limit))


class AsyncMemoryGraph(_Queries):
    """The async twin of :class:`MemoryGraph`, for agents on asyncio."""

    store: AsyncStore
    targets: AsyncStores

    def __init__(self, store: AsyncStore, targets: AsyncStores | None = None) -> None:
        self.store = store
        self.schema = store.schema
        self.clock = store.clock
        self.targets = targets or AsyncStores(store, None, Placement(), bootstrap=False, retry_seconds=0)
        load_queries()  # parsed once a process, here rather than in its first read (3-4 ms)
        # The gauges count on it through the loop its driver runs on; a graph made outside a
        # running loop has none yet and is not counted.
        with contextlib.suppress(RuntimeError):
            telemetry.watch(store, asyncio.get_running_loop())

    @classmethod
    async def connect(cls, uri: str | None = None, auth: tuple[str, str] | None = None, *,
                      database: str | None = None, schema: Schema | None = None,
                      settings: Settings | None = None, clock: Clock = utcnow,
                      bootstrap: bool = True, bookmarks: Iterable[str] = ()) -> AsyncMemoryGraph:
        """See :meth:`MemoryGraph.connect`."""
        settings = settings or Settings()
        uri, auth = _connection(uri, auth, settings)
        store = await AsyncStore.connect(uri, auth, schema or default_schema(),
                                         database or settings.neo4j_database, clock, settings.neo4j_retry_seconds,
                                         allow_plaintext=settings.allow_plaintext)
        store.max_future = timedelta(days=settings.max_future_days)
        try:
            await store.catch_up(bookmarks)
            if bootstrap:
                await store.run(bootstrap_op(store.schema, store.clock))
            await store.notice_migrations()
        except BaseException:
            await store.close()
            raise
        graph = cls(store, AsyncStores(store, auth, settings.placement_map(), bootstrap=bootstrap,
                                       retry_seconds=settings.neo4j_retry_seconds,
                                       allow_plaintext=settings.allow_plaintext))
        graph.audit_reads = settings.read_audit
        return graph

    async def close(self) -> None:
        telemetry.unwatch(self.store)
        await self.targets.close()
        await self.store.close()

    async def _items_store(self, items: Any) -> tuple[AsyncStore, Any]:
        """See :meth:`MemoryGraph._items_store`."""
        if not self.targets.placement.tenants:
            return self.store, items
        items, tenants = item_tenants(items)
        return (self.store if not tenants else await self.targets.of(tenants)), items

    @property
    def retries(self) -> Retries:
        """See :attr:`MemoryGraph.retries`."""
        return self.store.retries

    async def bookmarks(self) -> list[str]:
        """See :meth:`MemoryGraph.bookmarks`."""
        return await self.store.bookmarks()

    async def catch_up(self, bookmarks: Iterable[str]) -> None:
        """See :meth:`MemoryGraph.catch_up`."""
        await self.store.catch_up(bookmarks)

    async def __aenter__(self) -> AsyncMemoryGraph:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def record_episode(self, episode: Episode | None = None, **fields: Any) -> Episode:
        """See :meth:`MemoryGraph.record_episode`."""
        episode = model_arg(episode, Episode, fields)
        [recorded] = await self.store.run(self._record_op([episode]))
        return self._stored(episode, recorded)

    async def record_episodes(self, episodes: Sequence[Episode]) -> dict[str, str]:
        """See :meth:`MemoryGraph.record_episodes`."""
        store, episodes = await self._items_store(episodes)
        recorded = await store.run(self._record_op(items_arg(episodes, Episode, "episodes")))
        return {r.id: r.outcome for r in recorded}

    async def delete_tenant(self, tenant: str, *, dry_run: bool = False, actor: str | None = None,
                            reason: str | None = None) -> DeletionReport:
        """See :meth:`MemoryGraph.delete_tenant`."""
        return await self.store.run(self._delete_tenant_op(tenant, dry_run, actor, reason))

    async def forget_subject(self, tenant: str, subject: str, *, dry_run: bool = False,
                             actor: str | None = None, reason: str | None = None) -> ForgetReport:
        """See :meth:`MemoryGraph.forget_subject`."""
        return await self.store.run(self._forget_op(tenant, subject, dry_run, actor, reason))

    async def purge(self, tenant: str, *, now: Instant | None = None,
                    on_progress: Callable[[int, int], None] | None = None) -> PurgeReport:
        """See :meth:`MemoryGraph.purge`."""
        return await self.store.run(self._purge_op(tenant, now, on_progress))

    async def apply_schema(self, schema: Schema | str | Path, *, dry_run: bool = False, batch_size: int = 1000,
                           on_progress: Callable[[StepReport, int], None] | None = None) -> MigrationReport:
        """See :meth:`MemoryGraph.apply_schema`."""
        new, op = self._migrate_op(schema, dry_run, batch_size, on_progress)
        for placed in (await self.targets.all())[1:]:   # see MemoryGraph.apply_schema
            await placed.run(self._migrate_op(new, dry_run, batch_size, on_progress)[1])
        return self._migrated(new, await self.store.run(op))

    async def residue(self, tenant: str, subject: str, *, forgotten: bool = False) -> list[dict[str, Any]]:
        """See :meth:`MemoryGraph.residue`."""
        return await self.store.inspect(self._residue(tenant, subject, forgotten))

    async def import_graphiti(self, mapping: GraphitiMapping | str | Path, tenant: str, *,
                              group_ids: Sequence[str] | None = None,
                              dry_run: bool = False) -> GraphitiImportReport:
        """See :meth:`MemoryGraph.import_graphiti` (the importer runs in a thread)."""
        rules = self._graphiti_mapping(mapping)
        tenant = self._tenant(tenant)
        loop = asyncio.get_running_loop()
        return await asyncio.to_thread(import_graphiti, _GraphitiGraph(self, loop), rules, tenant,
                                       group_ids=group_ids, dry_run=dry_run)

    async def ingest(self, episode: Episode | None = None, *, deltas: Iterable[Any] = (),
                     extractors: Sequence[Extractor] | None = None, remember: bool = False,
                     strict: bool = False, **fields: Any) -> IngestReport:
        """:meth:`MemoryGraph.ingest` on asyncio: the same pipeline, with extractors (which may call a
        model and block) in a thread and every Cypher statement on this graph's async driver."""
        episode = model_arg(episode, Episode, fields)
        chosen = default_extractors(self.schema) if extractors is None else extractors_arg(extractors)
        return await self.store.run(submit_op(self.store, episode, chosen, deltas=list(deltas),
                                              remember=remember, strict=strict))

    async def quarantine(self, tenant: str, *, status: str | None = "open",
                         principal: str | None = None) -> list[QuarantineEntry]:
        """See :meth:`MemoryGraph.quarantine`."""
        tenant = self._tenant(tenant)
        params = quarantine_params(tenant, status=status, principal=principal)
        return quarantine_entries(await self.query("quarantine", **params), tenant)

    async def replay_quarantine(self, tenant: str,
                                extractors: Sequence[Extractor] | None = None) -> QuarantineReplay:
        """See :meth:`MemoryGraph.replay_quarantine`."""
        chosen = default_extractors(self.schema) if extractors is None else extractors_arg(extractors)
        tenant = self._tenant(tenant)
        entries = await self.quarantine(tenant, status="open", principal=ALL_PRINCIPALS)
        return await self.store.run(replay_quarantine_op(self.store, tenant, entries, chosen))

    async def rebuild(self, tenant: str, extractors: Sequence[Extractor] | None = None, *,
                      into: str | None = None, dry_run: bool = False) -> RebuildReport:
        """See :meth:`MemoryGraph.rebuild`."""
        chosen = default_extractors(self.schema) if extractors is None else extractors_arg(extractors)
        return await self.store.run(rebuild_op(self.store, self._tenant(tenant), chosen, into=into,
                                               dry_run=dry_run))

    async def write(self, delta: MemoryDelta | None = None, **fields: Any) -> DeltaResult:
        """See :meth:`MemoryGraph.write`."""
        return (await self.store.run(self._write_op([model_arg(delta, MemoryDelta, fields)], atomic=True))).results[0]

    async def write_many(self, deltas: Iterable[MemoryDelta], *, atomic: bool = False,
                         batch_size: int = DEFAULT_BATCH, workers: int = DEFAULT_WORKERS) -> BatchResult:
        store, deltas = await self._items_store(deltas)
        done = await asyncio.gather(*(store.run(op) for op in self._lanes(deltas, atomic, batch_size, workers)))
        return merged(item for lane in done for item in lane)

    async def import_history(self, deltas: Iterable[MemoryDelta], *, chunk_size: int = DEFAULT_CHUNK,
                             on_progress: Any = None, on_unfinished: OnUnfinished = "resume") -> ImportResult:
        """See :meth:`MemoryGraph.import_history`."""
        store, deltas = await self._items_store(deltas)
        return await store.run(self._import_op(deltas, chunk_size, on_progress, on_unfinished))

    async def query(self, name: str, **params: Any) -> list[dict[str, Any]]:
        """See :meth:`MemoryGraph.query`."""
        return await self._answer(name, None, **params)

    async def _answer(self, name: str, columns: tuple[str, ...] | None, **params: Any) -> list[dict[str, Any]]:
        records = await self.store.inspect(self._checked(name, params, columns),
                                           traced=telemetry.named(name, params))
        await self._audited(self._disclosure(name, params, records))
        return records

    async def _audited(self, found: Disclosure | None) -> None:
        if found is not None:
            try:
                await self.store.run(audit_op(found, self.clock()))
            except Exception as exc:  # see MemoryGraph._audited
                failed(found, exc)

    async def read_audit(self, tenant: str, *, subject: str | None = None, principal: str | None = None,
                         limit: int = 1000) -> list[dict[str, Any]]:
        """See :meth:`MemoryGraph.read_audit`."""
        return self._audit_rows(await self.store.read(READ_AUDIT,
                                                      self._read_audit(tenant, subject, principal, limit)))

    async def current(self, tenant: str, subject: str, attribute: str | None = None, *,
                      principal: str | None = None, include_candidates: bool = False,
                      memory_types: str | Sequence[str] | None = None) -> list[Fact]:
        return _facts(await self._answer("current", FACT_COLUMNS, **self._slot(tenant, subject, attribute, principal),
                                       **self._statuses(include_candidates), memory_types=memory_types))

    async def current_many(self, tenant: str, subjects: Sequence[str], attribute: str | None = None, *,
                           principal: str | None = None, include_candidates: bool = False,
                           memory_types: str | Sequence[str] | None = None,
                           errors: str = "raise") -> dict[str, list[Fact]]:
        """See :meth:`MemoryGraph.current_many`."""
        reads = self._many(tenant, subjects, attribute, principal, include_candidates, memory_types, errors)
        if not reads:
            return {}
        answers = await self.store.inspect(self._each_checked("current", reads, FACT_COLUMNS),
                                           traced=telemetry.named("current", reads[0]))
        for params, answer in zip(reads, answers):
            if not isinstance(answer, SgamError):
                await self._audited(self._disclosure("current", params, answer))
        return self._by_subject(reads, answers, errors)

    async def as_of(self, tenant: str, subject: str, attribute: str | None = None, *,
                    valid_at: Instant, known_at: Instant | None = None,
                    principal: str | None = None, include_candidates: bool = False,
                    memory_types: str | Sequence[str] | None = None) -> list[Fact]:
        return _facts(await self._answer("as-of", FACT_COLUMNS, **self._as_of(tenant, subject, attribute, valid_at,
                                                              known_at, principal, include_candidates),
                                       memory_types=memory_types))

    async def confirm(self, tenant: str, subject: str, attribute: str, value: Any = None, *, actor: str,
                      episode: str, valid_from: datetime | None = None) -> DeltaResult:
        return await self.write(self._confirmation(tenant, subject, attribute, value, actor, episode,
                                                   valid_from))

    async def candidates(self, tenant: str, subject: str | None = None, attribute: str | None = None, *,
                         principal: str | None = None) -> list[Fact]:
        return _facts(await self._answer("candidates", FACT_COLUMNS, tenant=self._tenant(tenant), subject=subject,
                                       attribute=attribute, principal=principal))

    async def history(self, tenant: str, subject: str, attribute: str | None = None, *,
                      current_only: bool = False, principal: str | None = None,
                      memory_types: str | Sequence[str] | None = None) -> list[Fact]:
        return _facts(await self._answer("history", FACT_COLUMNS,
                                         **self._history(tenant, subject, attribute, current_only, principal),
                                         memory_types=memory_types))

    async def provenance(self, tenant: str, *ids: str, memory_id: str | None = None,
                         subject: str | None = None, principal: str | None = None) -> Provenance | None:
        """See :meth:`MemoryGraph.provenance`."""
        params = self._provenance_params(tenant, ids, memory_id, subject, principal)
        if params["subject"] is None:
            found = await self.store.read(*self._subject_of(params))
            params["subject"] = found[0]["subject"] if found else None
        return _provenance(await self.query("provenance", **params))

    async def doctor(self, tenant: str) -> list[dict[str, Any]]:
        return await self.query("doctor", **self._doctor(tenant))

    async def delete_memory(self, tenant: str, memory_id: str | None = None, *, subject: str | None = None,
                            attribute: str | None = None, dry_run: bool = False, actor: str | None = None,
                            reason: str | None = None) -> DeletionReport:
        """See :meth:`MemoryGraph.delete_memory`."""
        tenant, memory_id, attribute = self._memory_target(tenant, memory_id, subject, attribute)
        actor_, reason = self._audit(actor, reason)
        if memory_id is not None:
            found = await self.store.read(*self._subject_of({"tenant": tenant, "memory_id": memory_id}))
            if not found:
                raise missing_memory(tenant, memory_id)
            subject = found[0]["subject"]
        steps = self._slot_deletion(tenant, str(subject), attribute, memory_id, dry_run, actor_, reason)
        return await (self.store.inspect(steps) if dry_run else self.store.transact(steps))

    async def delete_episode(self, tenant: str, episode_id: str, *, dry_run: bool = False,
                             actor: str | None = None, reason: str | None = None) -> DeletionReport:
        """See :meth:`MemoryGraph.delete_episode`."""
        tenant = self._tenant(tenant)
        actor_, reason = self._audit(actor, reason)
        steps = self._episode_deletion(tenant, self._id(episode_id, "episode id"), dry_run, actor_, reason)
        return await (self.store.inspect(steps) if dry_run else self.store.transact(steps))

    async def export_subject(self, tenant: str, subject: str, principal: str | None = None) -> dict[str, Any]:
        """See :meth:`MemoryGraph.export_subject`."""
        from .export import jsonable

        data = jsonable(await self.store.inspect(self._export(tenant, subject, principal)))
        await self._audited(self._disclosure("export_subject", {"tenant": tenant, "principal": principal,
                                                                "subject": subject}, data))
        return data

    async def context(self, tenant: str, question: str, *, subjects: str | Sequence[str] | None = None,
                      valid_at: Instant | None = None, budget_tokens: int = 800,
                      principal: str | None = None, as_of: Instant | None = None,
                      asked_at: Instant | None = None, memory_types: str | Sequence[str] | None = None,
                      **options: Any) -> Context:
        instant = optional_instant(renamed(valid_at, as_of, "context"), "valid_at")
        unread = self._unread(context_options(options))
        if unread:
            self._require_attributes(await self.store.read(UNALIASED, {"names": unread}))
        result = await self.store.run(context_steps(
            tenant, question, subjects=None if subjects is None else names_arg(subjects, "subjects"),
            valid_at=instant, budget_tokens=budget_tokens,
            now=self.clock(), schema=self.schema, principal=self._principal(principal),
            asked_at=optional_instant(asked_at, "asked_at"), memory_types=memory_types, **options))
        if result.empty:
            self._require_known(tenant, await self.store.read(*self._context_known(tenant, subjects)))
        await self._audited(self._disclosure("context", {"tenant": tenant, "principal": principal},
                                             result.model_dump()))
        return result

    async def embed(self, tenant: str, *, embedder: Embedder | None = None, batch_size: int = 64,
                    on_progress: Any = None) -> EmbedReport:
        return await self.store.run(backfill_steps(
            self._tenant(tenant), require_embedder(embedder), batch_size, callback_arg(on_progress, "on_progress")))

    async def traverse(self, tenant: str, subject: str, relations: Sequence[str], *,
                       valid_at: Instant | None = None, known_at: Instant | None = None,
                       principal: str | None = None) -> list[TraversalPath]:
        return _paths(await self._answer("traverse", PATH_COLUMNS,
                                         **self._traverse(tenant, subject, relations, valid_at, known_at, principal)))

    async def timeline(self, tenant: str, subject: str, attribute: str | None = None, *,
                       principal: str | None = None) -> Any:
        """See :meth:`MemoryGraph.timeline`."""
        from .timeline import figure

        return figure(await self.history(tenant, subject, attribute, principal=principal), subject,
                      now=self.clock())

    async def to_networkx(self, tenant: str, valid_at: Instant | None = None, known_at: Instant | None = None,
                          subjects: Sequence[str] | None = None, hops: int = 1,
                          principal: str | None = None, *, as_of: Instant | None = None) -> Any:
        """See :meth:`MemoryGraph.to_networkx`."""
        from .export import subgraph, subgraph_params

        params = subgraph_params(self, tenant, renamed(valid_at, as_of, "to_networkx"), known_at,
                                 subjects=subjects, hops=hops, principal=principal)
        return subgraph(await self.query("subgraph", **params), params)

    async def add_alias(self, tenant: str, subject: str, *names: str,
                        actor: str | None = None) -> dict[str, list[str]]:
        """See :meth:`MemoryGraph.add_alias`."""
        return await self.store.run(self._add_alias_op(tenant, subject, names, actor))

    async def merge_entities(self, tenant: str, kept: str, dropped: str, *, dry_run: bool = False,
                             actor: str | None = None, reason: str | None = None,
                             dropped_tenant: str | None = None) -> MergeReport:
        """See :meth:`MemoryGraph.merge_entities`."""
        return await self.store.run(self._merge_op(tenant, kept, dropped, dry_run, actor, reason, dropped_tenant))

    async def split_entities(self, tenant: str, kept: str, dropped: str, *, dry_run: bool = False,
                             actor: str | None = None, reason: str | None = None) -> MergeReport:
        """See :meth:`MemoryGraph.split_entities`."""
        return await self.store.run(self._split_op(tenant, kept, dropped, dry_run, actor, reason))

    async def merges(self, tenant: str) -> list[dict[str, Any]]:
        """See :meth:`MemoryGraph.merges`."""
        return await self.store.run(merges_op(self._tenant(tenant)))

    async def merge_candidates(self, tenant: str, *, limit: int = 50) -> list[MergeCandidate]:
        """See :meth:`MemoryGraph.merge_candidates`."""
        return await self.store.run(candidates_op(self._tenant(tenant), limit))


class _GraphitiGraph:
    """What the (synchronous) Graphiti importer asks of a graph, for an :class:`AsyncMemoryGraph`
    seen from a worker thread: each call runs on the graph's event loop and is waited for. The
    importer reads a whole foreign graph and maps it in Python, so it runs off the loop."""

    def __init__(self, graph: AsyncMemoryGraph, loop: asyncio.AbstractEventLoop) -> None:
        self._graph = graph
        self._loop = loop
        self.schema = graph.schema
        self.clock = graph.clock
        self.store = self

    def _wait(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def read(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self._wait(self._graph.store.read(query, params))  # type: ignore[no-any-return]

    def run(self, op: Operation[R]) -> R:
        return self._wait(self._graph.store.run(op))  # type: ignore[no-any-return]

    def write_many(self, deltas: Iterable[MemoryDelta], *, workers: int = DEFAULT_WORKERS) -> BatchResult:
        return self._wait(self._graph.write_many(list(deltas), workers=workers))  # type: ignore[no-any-return]

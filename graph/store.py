"""The one module that executes Cypher: sync :class:`Store` and async :class:`AsyncStore`.

Both drive the same statement generators (``writes.write_steps``, migrations, reads), so there is
one write path. Driver exceptions are translated here, at the only I/O seam, into SGAM errors.
Reads run in READ access mode: the server refuses a write attempted through them.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import neo4j
from neo4j import exceptions as neo4j_errors

from .bulk import DEFAULT_CHUNK, UNDO, ImportResult, OnUnfinished, import_requests
from .episodes import Recorded, record_steps
from .evolution import (
    DEFAULT_BATCH as MIGRATION_BATCH,
    DROP_LEDGERS,
    FAIL,
    FINISH,
    GET_MIGRATION,
    LATEST_SCHEMA,
    START_MIGRATION,
    MigrationPlan,
    MigrationReport,
    StepReport,
    check_values,
    convert_batch,
    count_statement,
    move_batch,
    plan_migration,
    values_statement,
)
from .errors import Conflict, InvalidDelta, InvalidSetting, SchemaViolation, SgamError, StoreUnavailable
from .deletion import (
    COUNT_TENANT,
    DeletionReport,
    TENANT_LABELS,
    new_record_id,
    tenant_counts,
    tenant_finished,
    tenant_record,
    tenant_report,
)
from . import telemetry
from .forget import ForgetReport, forget_steps
from .retention import BATCH, PurgeReport, count_expired, expiring_classes, purge_batch, purge_refusals_batch
from .migrations import APPLIED, AWAIT_INDEXES, RECORD, RECORD_SCHEMA, pending
from .models import Episode, MemoryDelta, utcnow
from .schema import Schema
from .reconcile import DEFAULT_MAX_FUTURE

# The recorded migration that gave the slots of an older store their ledgers.
LEDGER_BACKFILL = "0008-ledger-backfill"
QUARANTINE_READERS = "0010-quarantine-readers"

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
from .writes import (
    RESTRICT_EPISODES, BatchResult, Records, Statement, WriteSteps, backfill_steps, prepare, write_steps,
)

Clock = Callable[[], datetime]
T = TypeVar("T")

INDEX_TIMEOUT_S = 300
# How long a transaction that keeps failing for a transient reason (the server went away, a
# deadlock) is retried before the error is raised (Settings.neo4j_retry_seconds); the driver's own
# default is 30 s. The last pause may run past it (pauses double from 1 s), so the wait is at most
# about twice this. It is also the time allowed to open a connection.
DEFAULT_RETRY_SECONDS = 15.0
BOLT_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def check_bolt_uri(uri: object, setting: str = "uri") -> str:
    """``uri`` if its scheme is one the driver speaks, else :class:`InvalidSetting` naming
    ``setting`` and the fix (the Browser's http address is the usual paste)."""
    scheme, sep, rest = uri.partition("://") if isinstance(uri, str) else ("", "", "")
    if sep and scheme.lower() in BOLT_SCHEMES:
        return uri  # type: ignore[return-value]
    host = rest.split("/")[0].rsplit(":", 1)[0] if sep and rest else "127.0.0.1"
    hint = (" (that is the HTTP address of Neo4j Browser)" if scheme.lower() in ("http", "https") else "")
    raise InvalidSetting(
        f"{setting} {uri!r} is not a Bolt address{hint}: use bolt://{host}:7687 (or your server's Bolt "
        f"port); the scheme must be one of {', '.join(BOLT_SCHEMES)}")


def _driver_options(retry_seconds: float) -> dict[str, Any]:
    return {"notifications_min_severity": "OFF", "max_transaction_retry_time": retry_seconds,
            "connection_timeout": max(retry_seconds, 1.0)}

# Label by label, so each scan uses the tenant's index; batched so a big tenant cannot exhaust memory.
# Facts first (relationship by relationship), then the nodes: DETACH DELETE of 2,000 hot subjects
# with long histories at once exceeded the transaction memory pool at 1M facts.
DELETE_TENANT = (
    "MATCH (:Entity {tenant_id: $tenant})-[f]->() CALL (f) { DELETE f } IN TRANSACTIONS OF 10000 ROWS",
    *(f"MATCH (n:{label} {{tenant_id: $tenant}}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 2000 ROWS"
      for label in TENANT_LABELS),
)


@contextlib.contextmanager
def translated(uri: str) -> Iterator[None]:
    """Turn driver exceptions into SGAM errors that say what to do."""
    try:
        yield
    except SgamError:
        raise
    except neo4j_errors.AuthError as exc:
        raise StoreUnavailable(
            f"Neo4j at {uri} refused the credentials ({exc.message}); check NEO4J_USER/NEO4J_PASSWORD "
            "or the local server's credentials file (`sgam neo4j status`)"
        ) from exc
    except (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired, OSError) as exc:
        raise StoreUnavailable(
            f"Neo4j is not reachable at {uri}: start the local server with `sgam neo4j up`, "
            "or point NEO4J_URI at a running one"
        ) from exc
    except neo4j_errors.ConstraintError as exc:
        raise Conflict(f"the write broke a uniqueness constraint: {exc.message}") from exc
    except neo4j_errors.CypherTypeError as exc:
        raise InvalidDelta(f"Neo4j rejected a value: {exc.message}") from exc
    except neo4j_errors.TransientError as exc:
        # Deadlocks, lock time-outs, a leader switch: still failing after the driver's own retries.
        raise StoreUnavailable(
            f"Neo4j could not complete the transaction (transient error {exc.code}: {exc.message}); "
            "retry later"
        ) from exc
    except neo4j_errors.Neo4jError as exc:
        raise SgamError(f"Neo4j error {exc.code}: {exc.message}") from exc
    except neo4j_errors.DriverError as exc:
        raise StoreUnavailable(f"Neo4j driver error talking to {uri}: {exc}") from exc


@contextlib.contextmanager
def _sendable() -> Iterator[None]:
    """The driver refuses, while packing a statement's parameters, a text with a lone surrogate
    (UnicodeEncodeError), an integer beyond 64 bits (OverflowError) or a type it has no Bolt value
    for (ValueError, TypeError): a caller's bad value, said as such."""
    try:
        yield
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidDelta(f"a value cannot be sent to Neo4j ({exc}): texts must be valid Unicode (no lone "
                           "surrogates), integers must fit in 64 bits, values must be text, numbers, "
                           "booleans, times or lists of them") from None


def _drive(tx: Any, steps: WriteSteps) -> Any:
    try:
        statement = next(steps)
        while True:
            with _sendable():
                records = [dict(record) for record in tx.run(statement.query, statement.params)]
            statement = steps.send(records)
    except StopIteration as stop:
        return stop.value


async def _adrive(tx: Any, steps: WriteSteps) -> Any:
    try:
        statement = next(steps)
        while True:
            with _sendable():
                result = await tx.run(statement.query, statement.params)
                records = [dict(record) async for record in result]
            statement = steps.send(records)
    except StopIteration as stop:
        return stop.value


def _single(statement: Statement) -> WriteSteps:
    records = yield statement
    return records  # type: ignore[return-value]


@dataclass(frozen=True)
class Retries:
    """Write transactions that the driver ran again after a transient error (a deadlock, a lock
    time-out, a leader switch): ``transactions`` needed more than one attempt, ``attempts`` counts
    the extra attempts they took in all. A retried transaction that then succeeded is no error."""

    transactions: int = 0
    attempts: int = 0


class _Attempts:
    """A transaction function that counts its calls: the driver calls it once per attempt."""

    def __init__(self, work: Callable[[Any], Any]) -> None:
        self.work = work
        self.calls = 0

    def __call__(self, tx: Any) -> Any:
        self.calls += 1
        return self.work(tx)


class _Base:
    def __init__(self, driver: Any, uri: str, schema: Schema, database: str = "neo4j",
                 clock: Clock = utcnow) -> None:
        self.driver = driver
        self.uri = uri
        self.schema = schema
        self.database = database
        self.clock = clock
        # How far after now a valid_from may lie (Settings.max_future_days; an attribute's own
        # max_future_days wins).
        self.max_future = DEFAULT_MAX_FUTURE
        self._retries = Retries()
        # write_many's lanes and callers' threads share one store.
        self._retries_lock = threading.Lock()

    @property
    def retries(self) -> Retries:
        """The write transactions retried after transient errors since this store connected."""
        return self._retries

    def _count(self, attempt: _Attempts) -> None:
        if attempt.calls > 1:
            with self._retries_lock:
                self._retries = Retries(self._retries.transactions + 1,
                                        self._retries.attempts + attempt.calls - 1)

    def _batch(self, deltas: Sequence[MemoryDelta], atomic: bool) -> Callable[[], WriteSteps]:
        ready, rejected = prepare(deltas, self.schema)
        if atomic and rejected:
            raise rejected[0].error  # type: ignore[misc]
        return lambda: write_steps(ready, rejected, self.schema, self.clock, atomic,
                                   max_future=self.max_future)


class Store(_Base):
    """Synchronous access to one Neo4j database."""

    @classmethod
    def connect(cls, uri: str, auth: tuple[str, str] | None, schema: Schema,
                database: str = "neo4j", clock: Clock = utcnow,
                retry_seconds: float = DEFAULT_RETRY_SECONDS) -> Store:
        check_bolt_uri(uri)
        with translated(uri):
            driver = neo4j.GraphDatabase.driver(uri, auth=auth, **_driver_options(retry_seconds))
            try:
                driver.verify_connectivity()
            except Exception:
                driver.close()
                raise
        return cls(driver, uri, schema, database, clock)

    def close(self) -> None:
        self.driver.close()

    def _write(self, make_steps: Callable[[], WriteSteps]) -> Any:
        """Run the steps in one write transaction; the driver re-runs them whole (fresh steps)
        after a transient error, which is counted in :attr:`retries`."""
        attempt = _Attempts(lambda tx: _drive(tx, make_steps()))
        try:
            with translated(self.uri), self.driver.session(database=self.database) as session:
                return session.execute_write(attempt)
        finally:
            self._count(attempt)

    def read(self, query: str, params: dict[str, Any]) -> Records:
        """Run a read query in READ access mode and return its records as dicts."""
        return self.inspect(lambda: _single(Statement(query, params)), traced=params)

    def inspect(self, make_steps: Callable[[], Generator[Statement, Records, T]], *,
                traced: dict[str, Any] | None = None) -> T:
        """Drive a statement generator in one READ transaction (a dry run: the server refuses a write).
        ``traced``: the parameters of a read to record as a read span (a named query's)."""
        if traced is not None:
            with telemetry.read(traced) as span:
                records = self.inspect(make_steps)
                telemetry.rows(span, records)  # type: ignore[arg-type]
                return records
        with translated(self.uri), self.driver.session(
            database=self.database, default_access_mode=neo4j.READ_ACCESS
        ) as session:
            return session.execute_read(lambda tx: _drive(tx, make_steps()))  # type: ignore[arg-type]

    def run_write(self, query: str, params: dict[str, Any]) -> Records:
        """Run one statement in a write transaction and return its records as dicts."""
        return self._write(lambda: _single(Statement(query, params)))

    def explain(self, query: str) -> Any:
        """The server's plan for ``query`` (``EXPLAIN``), without running it."""
        with translated(self.uri), self.driver.session(database=self.database) as session:
            return session.run("EXPLAIN " + query).consume().plan

    def _ddl(self, session: Any, schema: Schema) -> list[str]:
        applied = {r["id"] for r in session.run(APPLIED)}
        done = []
        for migration in pending(applied, schema):
            for statement in migration.statements:
                session.run(statement).consume()
            session.run(RECORD, id=migration.id, statements=list(migration.statements)).consume()
            done.append(migration.id)
        session.run(AWAIT_INDEXES, timeout=INDEX_TIMEOUT_S).consume()
        return done

    def bootstrap(self) -> list[str]:
        """Apply the schema's pending migrations, record them, and wait for indexes to be online.

        A schema that declares a migration from the stored version is refused here: its facts
        must move first (``sgam schema apply``).
        """
        with translated(self.uri), self.driver.session(database=self.database) as session:
            latest = session.run(LATEST_SCHEMA, name=self.schema.name).single()
            if latest is not None and latest["version"] < self.schema.version \
                    and self.schema.migration_from(latest["version"]) is not None:
                raise SchemaViolation(
                    f"schema {self.schema.name!r} v{self.schema.version} declares a migration from the "
                    f"stored v{latest['version']}, which has not been applied: run `sgam schema apply "
                    "FILE` (or MemoryGraph.apply_schema) first"
                )
            done = self._ddl(session, self.schema)
            if self._backfill_ledgers(session):
                done.append(LEDGER_BACKFILL)
            if self._backfill_quarantine_readers(session):
                done.append(QUARANTINE_READERS)
            stored = session.run(RECORD_SCHEMA, name=self.schema.name, version=self.schema.version,
                                 definition=self.schema.definition()).single()["stored"]
            if not self.schema.same_definition(stored):
                raise SchemaViolation(
                    f"schema {self.schema.name!r} v{self.schema.version} is already stored with a "
                    "different definition: give the changed schema a new version"
                )
            return done

    def _backfill_ledgers(self, session: Any, batch: int = 2000) -> bool:
        """Once per store: give every slot written before ledgers existed its ledger, rebuilt from
        its believed rows (idempotent, in batches; a slot a write reaches first rebuilds its own).
        Returns whether it ran now."""
        if session.run("MATCH (m:Migration {id: $id}) RETURN m", id=LEDGER_BACKFILL).single():
            return False
        after: str | None = ""
        while after is not None:
            _, after = session.execute_write(
                lambda tx: _drive(tx, backfill_steps(self.schema, after, batch, self.clock())))  # noqa: B023
        session.run(RECORD, id=LEDGER_BACKFILL, statements=[]).consume()
        return True

    def _backfill_quarantine_readers(self, session: Any, batch: int = 2000) -> bool:
        """Once per store: give each quarantine entry of a private attribute stored before entries
        carried their readers its ``visible_to``, and restrict its episode to them (as storing it
        now does). Returns whether it ran now."""
        if session.run("MATCH (m:Migration {id: $id}) RETURN m", id=QUARANTINE_READERS).single():
            return False
        after = ""
        while True:
            rows = session.run(UNSTAMPED_QUARANTINE, after=after, batch=batch).data()
            if not rows:
                break
            after = rows[-1]["eid"]
            stamped = []
            for r in rows:
                try:
                    readers = self.schema.readers_of(json.loads(r["candidate"] or "null"))
                except ValueError:
                    continue
                if readers is not None:
                    stamped.append({**r, "id": r["episode_id"], "readers": list(readers)})
            if stamped:
                session.execute_write(lambda tx: (tx.run(STAMP_QUARANTINE, rows=stamped).consume(),  # noqa: B023
                                                  tx.run(RESTRICT_EPISODES, episodes=stamped).consume()))
        session.run(RECORD, id=QUARANTINE_READERS, statements=[]).consume()
        return True

    def apply_schema(self, new: Schema, *, dry_run: bool = False, batch_size: int = MIGRATION_BATCH,
                     on_progress: Callable[[StepReport, int], None] | None = None) -> MigrationReport:
        """Apply schema version ``new`` with its declared migration, in bounded batches (see ``evolution``).

        Every check (version, coverage, functions, every stored value) runs before anything is
        written. ``on_progress(step, done)`` is called after each committed batch. Re-applying an
        applied version is a no-op; a run that stopped midway resumes.
        """
        if batch_size < 1:
            raise SchemaViolation(f"batch_size must be at least 1, not {batch_size}")
        latest = self.read(LATEST_SCHEMA, {"name": new.name})
        old = Schema.model_validate_json(latest[0]["definition"]) if latest else None
        plan = plan_migration(old, new)
        report = MigrationReport(plan.id, plan.name, plan.from_version, plan.to_version,
                                 "dry-run" if dry_run else "applied",
                                 [StepReport(s.kind, s.attribute, s.to, s.function) for s in plan.steps],
                                 plan.new_rel_types, plan.aliases, plan.dual_read_until)
        if plan.unchanged:
            report.status = "unchanged"
            return report
        for step, step_report in zip(plan.steps, report.steps):
            for source in step.sources:
                statement = count_statement(step, source)
                step_report.facts += self.read(statement.query, statement.params)[0]["facts"]
                if step.kind in ("retype", "split"):
                    statement = values_statement(step, source)
                    check_values(step, new, [r["value"] for r in self.read(statement.query, statement.params)])
        if dry_run:
            return report
        with translated(self.uri), self.driver.session(database=self.database) as session:
            self._ddl(session, new)
        if not plan.steps:
            self._finish(plan, new)
            report.status = "recorded"
            return report
        prior = self.read(GET_MIGRATION, {"id": plan.id})
        if prior:
            report.status = "resumed"
        self._run_migration(plan, new, report, batch_size, on_progress)
        return report

    def _run_migration(self, plan: MigrationPlan, new: Schema, report: MigrationReport, batch_size: int,
                       on_progress: Callable[[StepReport, int], None] | None) -> None:
        self.run_write(START_MIGRATION, {
            "id": plan.id, "name": plan.name, "from_version": plan.from_version,
            "to_version": plan.to_version, "steps": [s.label for s in plan.steps],
            "zeros": [0] * len(plan.steps), "aliases": list(plan.aliases),
            "dual_read_until": plan.dual_read_until, "now": self.clock()})
        try:
            for index, (step, step_report) in enumerate(zip(plan.steps, report.steps)):
                run = move_batch if step.kind in ("rename", "rename_relation") else convert_batch
                step_report.facts, after = 0, ""
                while True:
                    done, after = self._write(
                        lambda: run(plan, index, step, new, batch_size, self.clock(), after))
                    if done:
                        report.batches += 1
                        step_report.facts += done
                        if on_progress is not None:
                            on_progress(step_report, step_report.facts)
                    if done < batch_size:
                        break
        except BaseException as exc:
            with contextlib.suppress(Exception):
                self.run_write(FAIL, {"id": plan.id, "error": f"{type(exc).__name__}: {exc}",
                                      "now": self.clock()})
            raise
        self._finish(plan, new)

    def _finish(self, plan: MigrationPlan, new: Schema) -> None:
        if plan.steps:
            touched = sorted({a for step in plan.steps for a in (step.attribute, *step.to)})
            self.run_write(DROP_LEDGERS, {"attributes": touched})
            self.run_write(FINISH, {"id": plan.id, "steps": len(plan.steps), "name": new.name,
                                    "version": new.version, "definition": new.definition(),
                                    "now": self.clock()})
        else:
            self.run_write(RECORD_SCHEMA, {"name": new.name, "version": new.version,
                                           "definition": new.definition()})
        self.schema = new

    def delete_tenant(self, tenant: str, *, dry_run: bool = False, actor: str = "unknown",
                      reason: str | None = None) -> DeletionReport:
        """Remove every node and fact of ``tenant`` but its deletion records, in bounded
        transactions, recorded by a ``(:Deletion {grain: 'tenant'})`` that stays (see ``deletion``).
        ``dry_run`` only counts. A tenant holding nothing is left without a record."""
        now = self.clock()
        counts = tenant_counts(self.read(COUNT_TENANT, {"tenant": tenant}))
        if dry_run or not any(counts.values()):
            return tenant_report(tenant, now, actor, reason, counts, dry_run, None)
        record_id = new_record_id()
        record = tenant_record(tenant, record_id, now, actor, reason, counts)
        self.run_write(record.query, record.params)
        with translated(self.uri), self.driver.session(database=self.database) as session:
            for statement in DELETE_TENANT:
                session.run(statement, tenant=tenant).consume()
        finished = tenant_finished(tenant, record_id, self.clock(), counts)
        self.run_write(finished.query, finished.params)
        return tenant_report(tenant, now, actor, reason, counts, False, record_id)

    def purge(self, tenant: str, now: datetime,
              on_progress: Callable[[int, int], None] | None = None) -> PurgeReport:
        """Remove expired facts class by class in bounded transactions; see ``retention``.

        ``on_progress(done, total)`` is called after each batch.
        """
        report = PurgeReport(tenant, now)
        classes = expiring_classes(self.schema)
        counts = [count_expired(tenant, name, ttl, now) for name, (ttl, _) in classes.items()]
        total = sum(self.read(c.query, c.params)[0]["n"] for c in counts)
        for name, (ttl, also_remove) in classes.items():
            while True:
                removed = self._write(lambda: purge_batch(tenant, name, ttl, also_remove, now))
                report.facts[name] = report.facts.get(name, 0) + removed["facts"]
                report.values += removed["values"]
                report.episodes += removed["episodes"]
                if on_progress is not None:
                    on_progress(report.total_facts, total)
                if removed["facts"] < BATCH:
                    break
            while True:
                refusals = self._write(lambda: purge_refusals_batch(tenant, name, ttl, now))
                report.refusals += refusals
                if refusals < BATCH:
                    break
        return report

    def forget(self, tenant: str, subject: str, *, dry_run: bool = False, actor: str | None = None,
               reason: str | None = None) -> ForgetReport:
        """Erase ``subject`` in one transaction and leave a tombstone (see ``forget``); a dry run
        reads only."""
        steps = lambda: forget_steps(tenant, subject, self.clock(), dry_run=dry_run,  # noqa: E731
                                     actor=actor, reason=reason)
        return self.inspect(steps) if dry_run else self._write(steps)

    def transact(self, make_steps: Callable[[], Generator[Statement, Records, T]]) -> T:
        """Drive a statement generator in one write transaction (re-run whole on a transient error)."""
        return self._write(make_steps)  # type: ignore[arg-type]

    def record(self, episodes: Sequence[Episode], status: str = "recorded") -> list[Recorded]:
        """Store raw episodes, deduplicated by content hash per tenant (see ``graph.episodes``)."""
        if not episodes:
            return []
        return self._write(lambda: record_steps(episodes, self.clock(), status))  # type: ignore[arg-type]

    def record_episodes(self, episodes: Sequence[Episode]) -> dict[str, str]:
        """Store raw episodes; returns ``{id: "created" | "existing" | "duplicate"}``."""
        return {r.id: r.outcome for r in self.record(episodes)}

    def write(self, deltas: Sequence[MemoryDelta], atomic: bool = False) -> BatchResult:
        """Reconcile and persist ``deltas`` in one transaction."""
        with telemetry.write_batch(deltas, atomic) as span:
            result = self._write(self._batch(deltas, atomic))
            telemetry.written(span, result)
            return result

    def import_history(self, deltas: Sequence[MemoryDelta], chunk_size: int = DEFAULT_CHUNK,
                       on_progress: Callable[[int, int], None] | None = None,
                       on_unfinished: OnUnfinished = "resume") -> ImportResult:
        """Load a whole history into tenants without entities, in chunks of whole subjects
        (see ``bulk``); on a failure the imported part is removed again and the error raised.

        An import interrupted by a crash is found by the next one: ``on_unfinished="resume"``
        continues it when the stream is the same (and refuses a different one), ``"undo"``
        removes it first. ``deltas`` is read twice by index (validation, then chunk by chunk) and
        never copied, so a lazy sequence that builds each delta on access keeps memory bounded.
        ``on_progress(done, total)`` is called after each chunk with counts of deltas.
        """
        requests = import_requests(deltas, self.schema, self.clock, chunk_size, on_progress, on_unfinished,
                                   self.max_future)
        try:
            request = next(requests)
            while True:
                try:
                    answer = self._serve(*request)
                except BaseException as exc:
                    request = requests.throw(exc)
                else:
                    request = requests.send(answer)
        except StopIteration as stop:
            return stop.value

    def _serve(self, kind: str, payload: Any) -> Any:
        """One request of ``bulk.import_requests``."""
        if kind == "read":
            return self.read(payload.query, payload.params)
        if kind == "write":
            return self._write(payload)
        with translated(self.uri), self.driver.session(database=self.database) as session:
            for tenant in payload:
                for statement in UNDO:
                    session.run(statement, tenant=tenant).consume()
        return None


class AsyncStore(_Base):
    """The async twin of :class:`Store`, on the driver's async API."""

    @classmethod
    async def connect(cls, uri: str, auth: tuple[str, str] | None, schema: Schema,
                      database: str = "neo4j", clock: Clock = utcnow,
                      retry_seconds: float = DEFAULT_RETRY_SECONDS) -> AsyncStore:
        check_bolt_uri(uri)
        with translated(uri):
            driver = neo4j.AsyncGraphDatabase.driver(uri, auth=auth, **_driver_options(retry_seconds))
            try:
                await driver.verify_connectivity()
            except Exception:
                await driver.close()
                raise
        return cls(driver, uri, schema, database, clock)

    async def close(self) -> None:
        await self.driver.close()

    async def _write(self, make_steps: Callable[[], WriteSteps]) -> Any:
        attempt = _Attempts(lambda tx: _adrive(tx, make_steps()))
        try:
            with translated(self.uri):
                async with self.driver.session(database=self.database) as session:
                    return await session.execute_write(attempt)
        finally:
            self._count(attempt)

    async def read(self, query: str, params: dict[str, Any]) -> Records:
        return await self.inspect(lambda: _single(Statement(query, params)), traced=params)

    async def inspect(self, make_steps: Callable[[], Generator[Statement, Records, T]], *,
                      traced: dict[str, Any] | None = None) -> T:
        if traced is not None:
            with telemetry.read(traced) as span:
                records = await self.inspect(make_steps)
                telemetry.rows(span, records)  # type: ignore[arg-type]
                return records
        with translated(self.uri):
            async with self.driver.session(
                database=self.database, default_access_mode=neo4j.READ_ACCESS
            ) as session:
                return await session.execute_read(lambda tx: _adrive(tx, make_steps()))  # type: ignore[arg-type]

    async def run_write(self, query: str, params: dict[str, Any]) -> Records:
        return await self._write(lambda: _single(Statement(query, params)))

    async def transact(self, make_steps: Callable[[], Generator[Statement, Records, T]]) -> T:
        return await self._write(make_steps)  # type: ignore[arg-type]

    async def record(self, episodes: Sequence[Episode], status: str = "recorded") -> list[Recorded]:
        if not episodes:
            return []
        return await self._write(lambda: record_steps(episodes, self.clock(), status))  # type: ignore[arg-type]

    async def record_episodes(self, episodes: Sequence[Episode]) -> dict[str, str]:
        return {r.id: r.outcome for r in await self.record(episodes)}

    async def write(self, deltas: Sequence[MemoryDelta], atomic: bool = False) -> BatchResult:
        with telemetry.write_batch(deltas, atomic) as span:
            result = await self._write(self._batch(deltas, atomic))
            telemetry.written(span, result)
            return result

    async def import_history(self, deltas: Sequence[MemoryDelta], chunk_size: int = DEFAULT_CHUNK,
                             on_progress: Callable[[int, int], None] | None = None,
                             on_unfinished: OnUnfinished = "resume") -> ImportResult:
        """The async twin of :meth:`Store.import_history` (the same plan, run record and chunks)."""
        requests = import_requests(deltas, self.schema, self.clock, chunk_size, on_progress, on_unfinished,
                                   self.max_future)
        try:
            request = next(requests)
            while True:
                try:
                    answer = await self._serve(*request)
                except BaseException as exc:
                    request = requests.throw(exc)
                else:
                    request = requests.send(answer)
        except StopIteration as stop:
            return stop.value

    async def _serve(self, kind: str, payload: Any) -> Any:
        if kind == "read":
            return await self.read(payload.query, payload.params)
        if kind == "write":
            return await self._write(payload)
        with translated(self.uri):
            async with self.driver.session(database=self.database) as session:
                for tenant in payload:
                    for statement in UNDO:
                        await (await session.run(statement, tenant=tenant)).consume()
        return None

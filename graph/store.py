"""The one module that executes Cypher: sync :class:`Store` and async :class:`AsyncStore`.

Both are executors of the operations of ``steps`` (``run(op)``): every operation, one transaction
or many, is a generator in its own module (``writes.write_op``, ``evolution.migrate_op``,
``retention.purge_op``...), so the two stores share all logic and differ only in how they wait.
Driver exceptions are translated here, at the only I/O seam, into SGAM errors, and read spans are
recorded here. Reads run in READ access mode: the server refuses a write attempted through them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import neo4j
from neo4j import exceptions as neo4j_errors

from . import telemetry
from .errors import Conflict, InvalidDelta, InvalidSetting, SgamError, StoreUnavailable
from .models import utcnow
from .reconcile import DEFAULT_MAX_FUTURE
from .schema import Schema
from .steps import Auto, Blocking, InTx, Operation, Read, Records, Request, Statement, Steps, Write, adrive, drive, one

Clock = Callable[[], datetime]
T = TypeVar("T")

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


def _run(tx: Any, statement: Statement) -> Records:
    with _sendable():
        return [dict(record) for record in tx.run(statement.query, statement.params)]


async def _arun(tx: Any, statement: Statement) -> Records:
    with _sendable():
        result = await tx.run(statement.query, statement.params)
        return [dict(record) async for record in result]


def _as_transaction(request: Read | Write) -> InTx[Records]:
    """A one-statement request as the transaction that answers it (a read traced as a read span)."""
    read = isinstance(request, Read)
    return InTx(lambda: one(request.statement), read=read, traced=request.statement.params if read else None)


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


class Store(_Base):
    """Synchronous access to one Neo4j database: runs operations (``steps.Operation``) on it."""

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

    def run(self, op: Operation[T]) -> T:
        """Run an operation: answer each of its requests (see ``steps``)."""
        return drive(op, self._answer)

    def _answer(self, request: Request) -> Any:
        if isinstance(request, Blocking):
            return request.work()
        if isinstance(request, Auto):
            with translated(self.uri), self.driver.session(database=self.database) as session:
                return _run(session, request.statement)
        if not isinstance(request, InTx):
            request = _as_transaction(request)
        if request.traced is not None:
            with telemetry.read(request.traced) as span:
                records = self._transaction(request.make_steps, request.read)
                telemetry.rows(span, records)
                return records
        return self._transaction(request.make_steps, request.read)

    def _transaction(self, make_steps: Callable[[], Steps[T]], read: bool) -> T:
        """Run the steps in one transaction; the driver re-runs them whole (fresh steps) after a
        transient error, which is counted in :attr:`retries` for a write."""
        attempt = _Attempts(lambda tx: drive(make_steps(), partial(_run, tx)))
        if read:
            with translated(self.uri), self.driver.session(
                database=self.database, default_access_mode=neo4j.READ_ACCESS
            ) as session:
                return session.execute_read(attempt)  # type: ignore[no-any-return]
        try:
            with translated(self.uri), self.driver.session(database=self.database) as session:
                return session.execute_write(attempt)  # type: ignore[no-any-return]
        finally:
            self._count(attempt)

    def read(self, query: str, params: dict[str, Any]) -> Records:
        """Run a read query in READ access mode and return its records as dicts."""
        return self.run(one(Read(Statement(query, params))))

    def inspect(self, make_steps: Callable[[], Steps[T]], *, traced: dict[str, Any] | None = None) -> T:
        """Drive a statement generator in one READ transaction (a dry run: the server refuses a write).
        ``traced``: the parameters of a read to record as a read span (a named query's)."""
        return self.run(one(InTx(make_steps, read=True, traced=traced)))  # type: ignore[no-any-return]

    def transact(self, make_steps: Callable[[], Steps[T]]) -> T:
        """Drive a statement generator in one write transaction (re-run whole on a transient error)."""
        return self.run(one(InTx(make_steps)))  # type: ignore[no-any-return]

    def run_write(self, query: str, params: dict[str, Any]) -> Records:
        """Run one statement in a write transaction and return its records as dicts."""
        return self.run(one(Write(Statement(query, params))))

    def explain(self, query: str) -> Any:
        """The server's plan for ``query`` (``EXPLAIN``), without running it."""
        with translated(self.uri), self.driver.session(database=self.database) as session:
            return session.run("EXPLAIN " + query).consume().plan


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

    async def run(self, op: Operation[T]) -> T:
        """See :meth:`Store.run`."""
        return await adrive(op, self._answer)

    async def _answer(self, request: Request) -> Any:
        if isinstance(request, Blocking):
            return await asyncio.to_thread(request.work)
        if isinstance(request, Auto):
            with translated(self.uri):
                async with self.driver.session(database=self.database) as session:
                    return await _arun(session, request.statement)
        if not isinstance(request, InTx):
            request = _as_transaction(request)
        if request.traced is not None:
            with telemetry.read(request.traced) as span:
                records = await self._transaction(request.make_steps, request.read)
                telemetry.rows(span, records)
                return records
        return await self._transaction(request.make_steps, request.read)

    async def _transaction(self, make_steps: Callable[[], Steps[T]], read: bool) -> T:
        attempt = _Attempts(lambda tx: adrive(make_steps(), partial(_arun, tx)))
        if read:
            with translated(self.uri):
                async with self.driver.session(
                    database=self.database, default_access_mode=neo4j.READ_ACCESS
                ) as session:
                    return await session.execute_read(attempt)  # type: ignore[no-any-return]
        try:
            with translated(self.uri):
                async with self.driver.session(database=self.database) as session:
                    return await session.execute_write(attempt)  # type: ignore[no-any-return]
        finally:
            self._count(attempt)

    async def read(self, query: str, params: dict[str, Any]) -> Records:
        """See :meth:`Store.read`."""
        return await self.run(one(Read(Statement(query, params))))

    async def inspect(self, make_steps: Callable[[], Steps[T]], *, traced: dict[str, Any] | None = None) -> T:
        """See :meth:`Store.inspect`."""
        return await self.run(one(InTx(make_steps, read=True, traced=traced)))  # type: ignore[no-any-return]

    async def transact(self, make_steps: Callable[[], Steps[T]]) -> T:
        """See :meth:`Store.transact`."""
        return await self.run(one(InTx(make_steps)))  # type: ignore[no-any-return]

    async def run_write(self, query: str, params: dict[str, Any]) -> Records:
        """See :meth:`Store.run_write`."""
        return await self.run(one(Write(Statement(query, params))))

    async def explain(self, query: str) -> Any:
        """See :meth:`Store.explain`."""
        with translated(self.uri):
            async with self.driver.session(database=self.database) as session:
                return (await (await session.run("EXPLAIN " + query)).consume()).plan

"""The one module that executes Cypher: sync :class:`Store` and async :class:`AsyncStore`.

Both are executors of the operations of ``steps`` (``run(op)``): every operation, one transaction
or many, is a generator in its own module (``writes.write_op``, ``evolution.migrate_op``,
``retention.purge_op``...), so the two stores share all logic and differ only in how they wait.
Driver exceptions are translated here, at the only I/O seam, into SGAM errors, and read spans are
recorded here. Reads run in READ access mode: the server refuses a write attempted through them,
and a routing driver (``neo4j://``) sends them to a secondary of a cluster; writes and auto-commit
statements (DDL, ``CALL {} IN TRANSACTIONS``) go to the leader, and the driver re-runs a write
transaction after a leader change. Every session of a store shares its bookmark manager, so each
transaction sees every earlier one of the same store (causal consistency on a cluster), and
:meth:`Store.catch_up` adds the bookmarks of another process's writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import random
import re
import reprlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

import neo4j
from neo4j import exceptions as neo4j_errors

from . import telemetry
from .evolution import IN_FORCE, MigrationWatch
from .errors import Conflict, InvalidDelta, InvalidSetting, ProvisioningError, SgamError, StoreUnavailable
from .handoffs import collector_paused
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
PLAINTEXT_SCHEMES = ("bolt", "neo4j")   # the others encrypt (+s verifies the certificate, +ssc not)
ALLOW_PLAINTEXT = "SGAM_ALLOW_PLAINTEXT"
# The read that waits until the server holds every write named by a session's bookmarks.
CAUGHT_UP = "RETURN 1 AS caught_up"
INVALID_BOOKMARK = "Neo.ClientError.Transaction.InvalidBookmark"
BOOKMARK_TIMEOUT = "Neo.TransientError.Transaction.BookmarkTimeout"


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


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine: ``localhost``, 127.0.0.0/8 or ::1 (also IPv4-mapped)."""
    if not host:
        return False
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def check_transport(uri: str, auth: object, allow_plaintext: bool, setting: str = "uri") -> None:
    """Refuse to send credentials unencrypted (``bolt://``, ``neo4j://``) to a server that is not
    on this machine, unless ``allow_plaintext`` (:class:`InvalidSetting` naming ``uri``, ``setting``
    and both fixes). Loopback traffic never leaves the machine; anything else may be read on the way.
    """
    scheme, _, _ = uri.partition("://")
    if auth is None or allow_plaintext or scheme.lower() not in PLAINTEXT_SCHEMES:
        return
    try:
        host = urlsplit(uri).hostname
    except ValueError:
        host = None
    if is_loopback(host):
        return
    secure = f"{scheme.lower()}+s"
    raise InvalidSetting(
        f"{setting} {uri!r} would send the password unencrypted to {host or 'a server'} that is not on "
        f"this machine: use {secure}:// (or {secure}sc:// for a self-signed certificate), or, on a "
        f"network you trust (e.g. docker compose's own), set {ALLOW_PLAINTEXT}=1 "
        "(Settings(allow_plaintext=True))")


def checked_bookmarks(bookmarks: object) -> list[str]:
    """``bookmarks`` as a list of strings, or :class:`InvalidDelta` saying what they must be (a
    single string would otherwise be read as one bookmark per character)."""
    if isinstance(bookmarks, (str, bytes)) or not isinstance(bookmarks, Iterable):
        raise InvalidDelta(f"bookmarks must be a list of the strings bookmarks() returned, not a "
                           f"{type(bookmarks).__name__}")
    given = list(bookmarks)
    # The driver sends bookmarks as ASCII (they are base64-like): anything else is not one.
    bad = [b for b in given if not isinstance(b, str) or not b.strip() or not b.isascii()]
    if bad:
        raise InvalidDelta(f"bookmarks must be non-empty ASCII strings as bookmarks() returned them; got "
                           f"{reprlib.repr(bad)}")
    return given


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
        if exc.code == BOOKMARK_TIMEOUT:
            raise StoreUnavailable(
                f"Neo4j at {uri} has not caught up with the bookmarks given ({exc.message}): retry "
                "later; bookmarks name transactions of the database they came from") from exc
        # Deadlocks, lock time-outs, a leader switch: still failing after the driver's own retries.
        raise StoreUnavailable(
            f"Neo4j could not complete the transaction (transient error {exc.code}: {exc.message}); "
            "retry later"
        ) from exc
    except neo4j_errors.Neo4jError as exc:
        if exc.code == INVALID_BOOKMARK:
            raise InvalidDelta(
                f"Neo4j at {uri} cannot read the bookmarks given ({exc.message}): pass the strings "
                "bookmarks() returned, unchanged") from exc
        if re.search(r"Unknown (function|procedure) '?apoc\.", exc.message or ""):
            raise ProvisioningError(
                f"the server at {uri} has no APOC core, which this query needs: restart the local "
                "server (`sgam neo4j down`, then `sgam neo4j up` installs it), or install APOC core "
                "(Docker: NEO4J_PLUGINS='[\"apoc\"]') and allow apoc.create.*") from exc
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
        return [dict(record) for record in tx.run(*statement.sent())]


async def _arun(tx: Any, statement: Statement) -> Records:
    with _sendable():
        result = await tx.run(*statement.sent())
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
    # neo4j.GraphDatabase or neo4j.AsyncGraphDatabase: the bookmark manager must match the driver.
    _api: ClassVar[Any]

    def __init__(self, driver: Any, uri: str, schema: Schema, database: str = "neo4j",
                 clock: Clock = utcnow, retry_seconds: float = DEFAULT_RETRY_SECONDS) -> None:
        self.driver = driver
        self.uri = uri
        self.schema = schema
        self.database = database
        self.clock = clock
        # How long a read is tried again after transient errors (writes: the driver's own retries).
        self.retry_seconds = retry_seconds
        # How far after now a valid_from may lie (Settings.max_future_days; an attribute's own
        # max_future_days wins).
        self.max_future = DEFAULT_MAX_FUTURE
        self._retries = Retries()
        # write_many's lanes and callers' threads share one store.
        self._retries_lock = threading.Lock()
        # The bookmarks of this store's latest transactions, passed to every session it opens.
        self.bookmark_manager = self._api.bookmark_manager()
        # Whether a schema migration's dual read is in force: reads leave its aliases out while not.
        self.migrations = MigrationWatch()

    def _lean(self, statement: Statement, in_force: bool) -> Statement:
        """``statement`` as it is sent: without the migration aliases if it has such a form and no
        migration's dual read is in force."""
        if statement.unmigrated is None or in_force:
            return statement
        return Statement(statement.unmigrated, statement.params, statement.packed)

    @property
    def retries(self) -> Retries:
        """The write transactions retried after transient errors since this store connected."""
        return self._retries

    def _session(self, read: bool = False, bookmarks: list[str] | None = None) -> Any:
        """A session on the store's database and bookmark manager; READ access mode if ``read``
        (routed to a secondary on a cluster), else WRITE (the leader). ``bookmarks``: writes of
        others to wait for, on top of the manager's."""
        return self.driver.session(
            database=self.database, bookmark_manager=self.bookmark_manager,
            default_access_mode=neo4j.READ_ACCESS if read else neo4j.WRITE_ACCESS,
            bookmarks=neo4j.Bookmarks.from_raw_values(bookmarks) if bookmarks else None)

    def _pauses(self) -> Iterator[float | None]:
        """The waits between the attempts of a read: doubling from 0.1 s with jitter, while
        :attr:`retry_seconds` lasts; then ``None`` (give up)."""
        deadline, pause = time.monotonic() + self.retry_seconds, 0.1
        while True:
            left = deadline - time.monotonic()
            yield min(pause * random.uniform(0.8, 1.2), left) if left > 0 else None
            pause *= 2

    def _count(self, attempt: _Attempts) -> None:
        if attempt.calls > 1:
            with self._retries_lock:
                self._retries = Retries(self._retries.transactions + 1,
                                        self._retries.attempts + attempt.calls - 1)


class Store(_Base):
    """Synchronous access to one Neo4j database: runs operations (``steps.Operation``) on it."""

    _api = neo4j.GraphDatabase

    @classmethod
    def connect(cls, uri: str, auth: tuple[str, str] | None, schema: Schema,
                database: str = "neo4j", clock: Clock = utcnow,
                retry_seconds: float = DEFAULT_RETRY_SECONDS, *,
                allow_plaintext: bool = False) -> Store:
        check_bolt_uri(uri)
        check_transport(uri, auth, allow_plaintext)
        with translated(uri):
            driver = neo4j.GraphDatabase.driver(uri, auth=auth, **_driver_options(retry_seconds))
            try:
                driver.verify_connectivity()
            except Exception:
                driver.close()
                raise
        return cls(driver, uri, schema, database, clock, retry_seconds)

    def close(self) -> None:
        self.driver.close()

    def run(self, op: Operation[T]) -> T:
        """Run an operation: answer each of its requests (see ``steps``)."""
        return drive(op, self._answer)

    def _answer(self, request: Request) -> Any:
        if isinstance(request, Blocking):
            return request.work()
        if isinstance(request, Auto):
            with translated(self.uri), self._session() as session:
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
        transient error, which is counted in :attr:`retries` for a write. Reads: see :meth:`_read`.

        No cyclic garbage collection while a write transaction runs (:func:`collector_paused`):
        a batch's records, rows and plans are alive until it commits, so each pass of the collector
        found them alive and moved them to older generations, and every few batches a full pass
        went over everything the process holds (0.2 s each beside the scale benchmark's stream).
        Reference counting frees them at the end; the pause lasts one transaction."""
        if read:
            return self._read(make_steps)
        attempt = _Attempts(lambda tx: drive(make_steps(), partial(_run, tx)))
        try:
            with translated(self.uri), collector_paused(), self._session() as session:
                return session.execute_write(attempt)  # type: ignore[no-any-return]
        finally:
            self._count(attempt)

    def _read(self, make_steps: Callable[[], Steps[T]]) -> T:
        """Run a read's statements as auto-commit transactions in READ access mode: a statement is
        one round trip instead of three (BEGIN, RUN, COMMIT), and costs the driver about 40% less
        CPU. Nothing is lost: Neo4j reads committed data statement by statement inside a
        transaction too, and a READ session refuses a write either way. A transient error runs
        the read again whole, as the driver's managed transactions would, for
        :attr:`retry_seconds`."""
        with translated(self.uri):
            for pause in self._pauses():
                try:
                    with self._session(read=True) as session:
                        return drive(make_steps(), partial(self._run_read, session))
                except (neo4j_errors.Neo4jError, neo4j_errors.DriverError) as exc:
                    if pause is None or not exc.is_retryable():
                        raise
                time.sleep(pause)
        raise AssertionError("unreachable: the pauses end with None")

    def _run_read(self, session: Any, statement: Statement) -> Records:
        if statement.unmigrated is not None:
            asked = self.migrations.due()
            if asked is not None:
                self.migrations.learn(_run(session, Statement(IN_FORCE))[0]["in_force"], asked)
            statement = self._lean(statement, self.migrations.in_force)
        return _run(session, statement)

    def read(self, query: str, params: dict[str, Any]) -> Records:
        """Run a read query in READ access mode and return its records as dicts."""
        return self.run(one(Read(Statement(query, params))))

    def notice_migrations(self) -> None:
        """Ask now whether a schema migration's dual read is in force, as a read does when the
        answer it holds is older than ``NOTICE_SECONDS``: a graph asks when it connects, so that
        its first reads do not (a round trip on a new process's first read)."""
        asked = self.migrations.due()
        if asked is not None:
            self.migrations.learn(self.read(IN_FORCE, {})[0]["in_force"], asked)

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
        with translated(self.uri), self._session() as session:
            return session.run("EXPLAIN " + query).consume().plan

    def bookmarks(self) -> list[str]:
        """The bookmarks of this store's latest transactions: another process that passes them to
        :meth:`catch_up` sees every write this store made before."""
        return sorted(self.bookmark_manager.get_bookmarks())

    def catch_up(self, bookmarks: Iterable[str]) -> None:
        """Wait until the server holds the writes ``bookmarks`` name (another store's
        :meth:`bookmarks`); this store's later transactions see them. Bookmarks Neo4j cannot read
        are refused here (:class:`InvalidDelta`), before any of them is kept."""
        given = checked_bookmarks(bookmarks)
        if given:
            with translated(self.uri), self._session(read=True, bookmarks=given) as session:
                session.execute_read(lambda tx: _run(tx, Statement(CAUGHT_UP)))


class AsyncStore(_Base):
    """The async twin of :class:`Store`, on the driver's async API."""

    _api = neo4j.AsyncGraphDatabase

    @classmethod
    async def connect(cls, uri: str, auth: tuple[str, str] | None, schema: Schema,
                      database: str = "neo4j", clock: Clock = utcnow,
                      retry_seconds: float = DEFAULT_RETRY_SECONDS, *,
                      allow_plaintext: bool = False) -> AsyncStore:
        check_bolt_uri(uri)
        check_transport(uri, auth, allow_plaintext)
        with translated(uri):
            driver = neo4j.AsyncGraphDatabase.driver(uri, auth=auth, **_driver_options(retry_seconds))
            try:
                await driver.verify_connectivity()
            except Exception:
                await driver.close()
                raise
        return cls(driver, uri, schema, database, clock, retry_seconds)

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
                async with self._session() as session:
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
        if read:
            return await self._read(make_steps)
        attempt = _Attempts(lambda tx: adrive(make_steps(), partial(_arun, tx)))
        try:
            # As Store._transaction: no cyclic collection until the transaction ends (other tasks
            # of the loop run without it meanwhile; reference counting still frees their objects).
            with translated(self.uri), collector_paused():
                async with self._session() as session:
                    return await session.execute_write(attempt)  # type: ignore[no-any-return]
        finally:
            self._count(attempt)

    async def _read(self, make_steps: Callable[[], Steps[T]]) -> T:
        """See :meth:`Store._read`."""
        with translated(self.uri):
            for pause in self._pauses():
                try:
                    async with self._session(read=True) as session:
                        return await adrive(make_steps(), partial(self._run_read, session))
                except (neo4j_errors.Neo4jError, neo4j_errors.DriverError) as exc:
                    if pause is None or not exc.is_retryable():
                        raise
                await asyncio.sleep(pause)
        raise AssertionError("unreachable: the pauses end with None")

    async def _run_read(self, session: Any, statement: Statement) -> Records:
        if statement.unmigrated is not None:
            asked = self.migrations.due()
            if asked is not None:
                self.migrations.learn((await _arun(session, Statement(IN_FORCE)))[0]["in_force"], asked)
            statement = self._lean(statement, self.migrations.in_force)
        return await _arun(session, statement)

    async def read(self, query: str, params: dict[str, Any]) -> Records:
        """See :meth:`Store.read`."""
        return await self.run(one(Read(Statement(query, params))))

    async def notice_migrations(self) -> None:
        """See :meth:`Store.notice_migrations`."""
        asked = self.migrations.due()
        if asked is not None:
            self.migrations.learn((await self.read(IN_FORCE, {}))[0]["in_force"], asked)

    async def inspect(self, make_steps: Callable[[], Steps[T]], *, traced: dict[str, Any] | None = None) -> T:
        """See :meth:`Store.inspect`."""
        return await self.run(one(InTx(make_steps, read=True, traced=traced)))

    async def transact(self, make_steps: Callable[[], Steps[T]]) -> T:
        """See :meth:`Store.transact`."""
        return await self.run(one(InTx(make_steps)))

    async def run_write(self, query: str, params: dict[str, Any]) -> Records:
        """See :meth:`Store.run_write`."""
        return await self.run(one(Write(Statement(query, params))))

    async def explain(self, query: str) -> Any:
        """See :meth:`Store.explain`."""
        with translated(self.uri):
            async with self._session() as session:
                return (await (await session.run("EXPLAIN " + query)).consume()).plan

    async def bookmarks(self) -> list[str]:
        """See :meth:`Store.bookmarks`."""
        return sorted(await self.bookmark_manager.get_bookmarks())

    async def catch_up(self, bookmarks: Iterable[str]) -> None:
        """See :meth:`Store.catch_up`."""
        given = checked_bookmarks(bookmarks)
        if given:
            with translated(self.uri):
                async with self._session(read=True, bookmarks=given) as session:
                    await session.execute_read(lambda tx: _arun(tx, Statement(CAUGHT_UP)))

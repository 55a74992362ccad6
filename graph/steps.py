"""The seam between the operations and Neo4j: what an operation asks for, and the two drivers.

Every store operation is a generator, so the sync and the async store run the same code and a
unit test runs it on scripted answers, without a server.

* One transaction is a generator of :class:`Statement`: it yields a statement, receives its
  records (:data:`Records`), and returns its result (``writes.write_steps``, ``forget_steps``...).
  The driver re-runs it whole, from a fresh generator, after a transient error.
* An operation (:data:`Operation`) yields requests and receives their answers:

  - :class:`InTx` runs a statement generator in one transaction (a READ one if ``read``) and is
    answered with the generator's result;
  - :class:`Read` runs one statement in its own READ transaction (a traced read span), and
    :class:`Write` in its own write transaction; both are answered with the records;
  - :class:`Auto` runs one statement outside a managed transaction: schema DDL and
    ``CALL {} IN TRANSACTIONS`` refuse to run inside one;
  - :class:`Blocking` runs blocking Python work (an extractor calling a model) and is answered
    with its result: the async store runs it in a thread, so the event loop never waits on it.

  A request that fails is thrown back into the operation, which may clean up and re-raise
  (``bulk``'s undo, ``evolution``'s failed-migration record).

:func:`drive` and :func:`adrive` are the only trampolines: the stores use them for operations
(answering each request) and inside a transaction (answering each statement). :func:`scripted`
runs an operation or a statement generator on a function of the statement instead of a server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Records = list[dict[str, Any]]
# The one map parameter of a packed statement (Statement.packed).
ARGS = "args"
T = TypeVar("T")
Y = TypeVar("Y")
S = TypeVar("S")


@dataclass(frozen=True)
class Statement:
    """One Cypher statement and its parameters.

    ``packed``: the query reads every parameter from one map, ``$args.name``
    (:func:`sgam.queries.loader.packed`), so the server is sent ``{"args": params}``. Neo4j keys
    its plan cache on each parameter's type, null-ness and size bucket (a string of 2-10
    characters, of 11-100, a list of 1, of 2-10...), so flat parameters give one query text a plan
    per combination of subject, tenant and attribute lengths, each planned on first use; a map
    carries no such hint and the text keeps one plan.
    """

    query: str
    params: dict[str, Any] = field(default_factory=dict)
    packed: bool = False
    # The same read without the schema migrations' aliases, sent instead when the store knows that
    # no migration's dual read is in force (graph.evolution.MigrationWatch); reads only.
    unmigrated: str | None = None

    def sent(self) -> tuple[str, dict[str, Any]]:
        """The query and the parameters as the server receives them (the query as
        :class:`UnloggedQuery`, lists and maps as :class:`UnloggedList` / :class:`UnloggedMap`)."""
        params = {ARGS: self.params} if self.packed else self.params
        return UnloggedQuery(self.query), {key: _unlogged(value) for key, value in params.items()}


class UnloggedQuery(str):
    """A query text whose ``repr`` is its first line, cut short, and its length.

    The driver (6.4) formats each statement's query with ``repr`` for its debug log on every run,
    whether the log is on or not: about 9 us for ``current``'s 2,500 characters, 1-2% of a read's
    wall time here, and more for the write path's longer statements. Sent exactly as the text."""

    __slots__ = ()

    def __str__(self) -> str:
        return self  # the driver takes str(query) before it logs: it keeps this type

    def __repr__(self) -> str:
        head = self[:60].split("\n", 1)[0]
        return f"<query of {len(self)} characters: {head}...>"


class UnloggedList(list[Any]):
    """A list parameter whose ``repr`` names its length, not its items.

    The driver (6.4) formats every statement's parameters with ``repr`` for its debug log before
    it knows whether the log is on: for a batch write of 5,000 fact rows that was about 50 ms of
    the client's time, as much as the server took to write them. Sent exactly as a list, and no
    tenant's data reaches a debug log."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<list of {len(self)}>"


class UnloggedMap(dict[str, Any]):
    """A map parameter whose ``repr`` names its keys only (see :class:`UnloggedList`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<map of {', '.join(map(str, self))}>"


def _unlogged(value: Any) -> Any:
    if type(value) is list:
        return UnloggedList(value)
    if type(value) is dict:
        return UnloggedMap(value)
    return value


# The statements of one transaction, answered with their records, returning T.
Steps = Generator[Statement, Records, T]


@dataclass(frozen=True)
class InTx(Generic[T]):
    """Run ``make_steps()`` in one transaction (READ mode if ``read``); answered with its result.
    ``traced``: the parameters of a read to record as a read span (a named query's)."""

    make_steps: Callable[[], Steps[T]]
    read: bool = False
    traced: dict[str, Any] | None = None


@dataclass(frozen=True)
class Read:
    """One statement in its own READ transaction; answered with the records."""

    statement: Statement


@dataclass(frozen=True)
class Write:
    """One statement in its own write transaction; answered with the records."""

    statement: Statement


@dataclass(frozen=True)
class Auto:
    """One statement in an auto-commit transaction (DDL, ``CALL {} IN TRANSACTIONS``); answered
    with the records."""

    statement: Statement


@dataclass(frozen=True)
class Blocking:
    """``work()``, which may block; answered with its result."""

    work: Callable[[], Any]


Request = InTx[Any] | Read | Write | Auto | Blocking
Operation = Generator[Request, Any, T]


def drive(gen: Generator[Y, S, T], answer: Callable[[Y], S]) -> T:
    """Run ``gen`` to its end, sending it ``answer(request)`` for each request it yields; an
    answer that raises is thrown back into it."""
    try:
        request = next(gen)
        while True:
            try:
                reply = answer(request)
            except BaseException as exc:
                request = gen.throw(exc)
            else:
                request = gen.send(reply)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(gen: Generator[Y, S, T], answer: Callable[[Y], Awaitable[S]]) -> T:
    """The async twin of :func:`drive`: each answer is awaited."""
    try:
        request = next(gen)
        while True:
            try:
                reply = await answer(request)
            except BaseException as exc:
                request = gen.throw(exc)
            else:
                request = gen.send(reply)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def one(item: Y) -> Generator[Y, Any, Any]:
    """An operation of one request, or a transaction of one statement: returns its answer."""
    return (yield item)


def scripted(gen: Generator[Any, Any, T], answer: Callable[[Statement], Records]
             ) -> tuple[T, list[Statement]]:
    """Run an operation or a statement generator on ``answer(statement)`` instead of a server (for
    tests): each statement, bare or in any request, is answered by ``answer``, an :class:`InTx`
    runs its steps on it and :class:`Blocking` work just runs. Returns the result and every
    statement, in order."""
    seen: list[Statement] = []

    def run(statement: Statement) -> Records:
        seen.append(statement)
        return answer(statement)

    def serve(request: Any) -> Any:
        if isinstance(request, InTx):
            return drive(request.make_steps(), run)
        if isinstance(request, Blocking):
            return request.work()
        return run(request if isinstance(request, Statement) else request.statement)

    return drive(gen, serve), seen


__all__ = ["Auto", "Blocking", "InTx", "Operation", "Read", "Records", "Request", "Statement", "Steps", "Write", "adrive",
           "drive", "one", "scripted"]

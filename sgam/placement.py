"""Tenant placement: which server and database each tenant's graph lives on (README, "Placement").

The map (:class:`~sgam.settings.Placement`, from the settings or ``SGAM_PLACEMENT_FILE``) names a
:class:`~sgam.settings.Target` per tenant; every other tenant lives on the graph's default
connection. A graph with a placement holds one store per distinct target (:class:`Stores`,
:class:`AsyncStores`), each opened, and bootstrapped if the graph was, when a tenant placed there
is first used, and closed with the graph. Every call runs on the store of its tenant; a call
whose tenants live on different targets (a merge across tenants, a batch of deltas) is refused
with :class:`~sgam.graph.errors.InvalidSetting`, since no transaction spans two servers.

:func:`move_tenant` moves a tenant: it copies the subgraph exactly (:mod:`sgam.graph.transfer`),
verifies the copy (counts and content digest on both sides), places the tenant on the new target
and only then deletes it from the old one. Until the placement is written the source is intact and
serves the tenant; a failed or interrupted copy is removed from the target again.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from sgam.graph.ddl import bootstrap_op
from sgam.graph.deletion import delete_tenant_op
from sgam.graph.errors import Conflict, InvalidSetting, UnknownTenant
from sgam.graph.store import AsyncStore, Store
from sgam.graph.transfer import Subgraph, clear_op, copy_op, drop_records_op, read_op

from .settings import DEFAULT_TARGET, Placement, Target, save_placement

S = TypeVar("S", Store, AsyncStore)
Key = tuple[str, str]
"""A target as the driver sees it: (uri, database)."""


@dataclass(frozen=True)
class Connection:
    """What opening a target's store takes."""

    uri: str
    auth: tuple[str, str] | None
    database: str


class _Targets(Generic[S]):
    """The placement and the stores opened for it; the sync and async twins differ in opening."""

    def __init__(self, default: S, auth: tuple[str, str] | None, placement: Placement, *,
                 bootstrap: bool, retry_seconds: float, allow_plaintext: bool = False) -> None:
        self.default: S = default
        self.auth = auth
        self.placement = placement
        self.bootstrap = bootstrap
        self.retry_seconds = retry_seconds
        self.allow_plaintext = allow_plaintext  # Settings.allow_plaintext, for every placed server too
        self.opened: dict[Key, S] = {(default.uri, default.database): default}

    def connection(self, target: Target) -> Connection:
        """The uri, credentials and database of ``target`` (its unset parts the default's)."""
        uri = target.uri or self.default.uri
        database = target.database or self.default.database
        auth = self.auth
        if target.password_env is not None:
            password = os.environ.get(target.password_env)
            if password is None:
                raise InvalidSetting(f"the placement of {target.describe()} takes its password from "
                                     f"{target.password_env}, which is not set: export it")
            auth = (target.user or (auth[0] if auth else "neo4j"), password)
        elif target.user is not None and auth is not None:
            auth = (target.user, auth[1])
        return Connection(uri, auth, database)

    def key(self, tenant: str) -> Key:
        target = self.placement.target(tenant)
        return (target.uri or self.default.uri, target.database or self.default.database)

    def target_of(self, tenants: Iterable[str]) -> Target:
        """The one target ``tenants`` share, or :class:`InvalidSetting` naming where each lives."""
        named = sorted(set(tenants))
        keys = {self.key(tenant) for tenant in named}
        if len(keys) > 1:
            where = ", ".join(f"{t!r} on {self.placement.target(t).describe()}" for t in named)
            raise InvalidSetting(f"these tenants live on different servers or databases ({where}): one call "
                                 "cannot span them; make one call per target, or move the tenants together "
                                 "(`sgam tenants move`)")
        return self.placement.target(named[0]) if named else DEFAULT_TARGET


class Stores(_Targets[Store]):
    """The stores of a :class:`~sgam.api.MemoryGraph` with a placement (thread-safe)."""

    def __init__(self, default: Store, auth: tuple[str, str] | None, placement: Placement, *,
                 bootstrap: bool, retry_seconds: float, allow_plaintext: bool = False) -> None:
        super().__init__(default, auth, placement, bootstrap=bootstrap, retry_seconds=retry_seconds,
                         allow_plaintext=allow_plaintext)
        self._lock = threading.Lock()

    def of(self, tenants: Iterable[str]) -> Store:
        """The store of the target ``tenants`` live on (opened now if it is not yet)."""
        return self.open(self.target_of(tenants))

    def open(self, target: Target, *, bootstrap: bool = False) -> Store:
        """The store of ``target``, opened now if it is not yet; bootstrapped when opened if the
        graph was, and now in any case with ``bootstrap`` (a move's target needs its constraints)."""
        c = self.connection(target)
        with self._lock:
            store = self.opened.get((c.uri, c.database))
            if store is None:
                store = Store.connect(c.uri, c.auth, self.default.schema, c.database, self.default.clock,
                                      self.retry_seconds, allow_plaintext=self.allow_plaintext)
                store.max_future = self.default.max_future
                try:
                    if self.bootstrap or bootstrap:
                        store.run(bootstrap_op(store.schema, store.clock))
                except BaseException:
                    store.close()
                    raise
                self.opened[(c.uri, c.database)] = store
            elif bootstrap:
                store.run(bootstrap_op(store.schema, store.clock))
        return store

    def scopes(self, tenants: Sequence[str] | None) -> list[tuple[Store, list[str] | None]]:
        """Each target's store with those of ``tenants`` that live there (``None``: all tenants,
        every target); a target none of them lives on is left out (a worker asks no server about
        tenants it does not hold)."""
        if tenants is None:
            return [(store, None) for store in self.all()]
        grouped: dict[Key, list[str]] = {}
        for tenant in tenants:
            grouped.setdefault(self.key(tenant), []).append(tenant)
        return [(self.open(self.placement.target(named[0])), named) for named in grouped.values()]

    def all(self) -> list[Store]:
        """Every target's store: the default one and each placed target's (opened now)."""
        stores = [self.default]
        for target in self.placement.tenants.values():
            store = self.open(target)
            if store not in stores:
                stores.append(store)
        return stores

    def close(self) -> None:
        """Close every store but the default one (its graph closes that)."""
        with self._lock:
            for store in self.opened.values():
                if store is not self.default:
                    store.close()
            self.opened = {(self.default.uri, self.default.database): self.default}


class AsyncStores(_Targets[AsyncStore]):
    """The stores of an :class:`~sgam.api.AsyncMemoryGraph` with a placement."""

    def __init__(self, default: AsyncStore, auth: tuple[str, str] | None, placement: Placement, *,
                 bootstrap: bool, retry_seconds: float, allow_plaintext: bool = False) -> None:
        super().__init__(default, auth, placement, bootstrap=bootstrap, retry_seconds=retry_seconds,
                         allow_plaintext=allow_plaintext)
        self._lock = asyncio.Lock()

    async def of(self, tenants: Iterable[str]) -> AsyncStore:
        """See :meth:`Stores.of`."""
        return await self.open(self.target_of(tenants))

    async def open(self, target: Target) -> AsyncStore:
        c = self.connection(target)
        async with self._lock:
            if (c.uri, c.database) not in self.opened:
                store = await AsyncStore.connect(c.uri, c.auth, self.default.schema, c.database,
                                                 self.default.clock, self.retry_seconds,
                                                 allow_plaintext=self.allow_plaintext)
                store.max_future = self.default.max_future
                try:
                    if self.bootstrap:
                        await store.run(bootstrap_op(store.schema, store.clock))
                except BaseException:
                    await store.close()
                    raise
                self.opened[(c.uri, c.database)] = store
            return self.opened[(c.uri, c.database)]

    async def all(self) -> list[AsyncStore]:
        """See :meth:`Stores.all`."""
        stores = [self.default]
        for target in self.placement.tenants.values():
            store = await self.open(target)
            if store not in stores:
                stores.append(store)
        return stores

    async def close(self) -> None:
        """See :meth:`Stores.close`."""
        async with self._lock:
            for store in self.opened.values():
                if store is not self.default:
                    await store.close()
            self.opened = {(self.default.uri, self.default.database): self.default}


@dataclass(frozen=True)
class MoveReport:
    """A finished move: from where to where, what was copied (``counts`` per label and ``:TYPE``,
    the same on both sides, as is ``digest``) and the source's deletion record."""

    tenant: str
    source: str
    target: str
    counts: dict[str, int]
    digest: str
    deletion_id: str | None


def move_tenant(graph: Any, tenant: str, target: Target, placement_file: Path, *,
                batch_size: int = 2000, actor: str = "sgam tenants move",
                on_progress: Callable[[int, int], None] | None = None) -> MoveReport:
    """Move ``tenant`` of ``graph`` (a :class:`~sgam.api.MemoryGraph`) to ``target`` and write the
    new placement to ``placement_file`` (see the module docstring). The tenant must hold something,
    the target nothing of it but deletion records, and nothing may write to the tenant meanwhile."""
    stores: Stores = graph.targets
    source = stores.of([tenant])
    destination = stores.open(target, bootstrap=True)
    if destination is source:
        raise InvalidSetting(f"tenant {tenant!r} already lives on {target.describe()}: nothing to move")
    before = source.run(read_op(tenant))
    if before.empty:
        raise UnknownTenant(f"tenant {tenant!r} holds nothing on {stores.placement.target(tenant).describe()}: "
                            "nothing to move (check the tenant id)")
    there = destination.run(read_op(tenant))
    if not there.records_only():
        raise Conflict(f"{target.describe()} already holds data of tenant {tenant!r}: a tenant lives on one "
                       "target; delete it there first (`sgam delete tenant` with that server's settings)")
    _copy(destination, tenant, before, there, batch_size, on_progress)
    placed = stores.placement.placed(tenant, target)
    save_placement(placement_file, placed)
    stores.placement = placed
    report = source.run(delete_tenant_op(tenant, source.clock, actor=actor,
                                         reason=f"moved to {target.describe()}"))
    if report.record_id is not None:
        source.run(drop_records_op(tenant, report.record_id))
    return MoveReport(tenant, f"{source.uri}/{source.database}", f"{destination.uri}/{destination.database}",
                      before.counts(), before.digest(), report.record_id)


def _copy(destination: Store, tenant: str, subgraph: Subgraph, there: Subgraph, batch_size: int,
          on_progress: Callable[[int, int], None] | None) -> None:
    """Copy and verify (the copy and the deletion records ``there`` was, exactly), or leave the
    destination as it was."""
    expected = subgraph.union(there)
    try:
        destination.run(copy_op(subgraph, batch_size, on_progress))
        after = destination.run(read_op(tenant))
        if after.counts() != expected.counts() or after.digest() != expected.digest():
            raise Conflict(f"the copy of tenant {tenant!r} differs from its source (counts {after.counts()} "
                           f"against {expected.counts()}): was it written to during the move? It was removed "
                           "from the target; the tenant stays where it was")
    except BaseException:
        destination.run(clear_op(tenant, there.record_ids()))
        raise

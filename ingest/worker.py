"""The background worker: claims queued episodes from Neo4j and runs the pipeline on them.

Safe to run as several processes at once: each batch is claimed with a lease in one write
transaction (:mod:`sgam.ingest.queue`), so no two workers hold the same episode, and a worker
that dies (even ``kill -9``) only delays its batch until the lease expires. Processing is
idempotent (delta keys, quarantine entry ids), so an episode processed again after a crash
changes nothing: every episode is processed exactly once in effect.

Per episode: success -> ``done``; a transient error (``SgamError.transient``: Neo4j unavailable,
a model endpoint timing out) -> back to ``pending`` after an exponential backoff, until
``max_attempts`` claims have been used; anything else -> ``failed`` (the dead letter) with the
error. A worker renews its leases while it works through a batch, and on a clean stop hands the
episodes it has not started back to the queue.

Episodes of one tenant are applied in occurrence order even with several workers: the queue hands
a tenant to one worker at a time, oldest episode first (:mod:`sgam.ingest.queue`), and when an
episode is sent back for a retry, the worker hands back the rest of that tenant's batch too, so
nothing newer is applied before it. Workers run different tenants side by side. An episode deferred
from a real-time write carries the agent's deltas; the worker writes them along with what its own
extractors find.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sgam.graph.errors import SgamError, StoreUnavailable
from sgam.graph.store import Store

from . import queue
from .extract import Extractor
from .pipeline import StructuredDeltas, process_op

log = logging.getLogger("sgam.worker")

@dataclass(frozen=True)
class WorkerOptions:
    batch_size: int = 10
    lease: timedelta = timedelta(seconds=60)
    max_attempts: int = 5
    backoff: timedelta = timedelta(seconds=2)
    max_backoff: timedelta = timedelta(minutes=5)
    poll: float = 1.0
    """Seconds to wait when nothing is due."""
    tenant: str | Sequence[str] | None = None
    """Only this tenant's (or these tenants') episodes; all tenants when ``None``."""

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.max_attempts < 1 or self.lease <= timedelta(0):
            raise ValueError("batch_size and max_attempts must be >= 1 and the lease positive")

    @property
    def tenants(self) -> list[str] | None:
        if self.tenant is None:
            return None
        return [self.tenant] if isinstance(self.tenant, str) else list(self.tenant) or None

    def backoff_for(self, attempts: int) -> timedelta:
        """The wait before attempt ``attempts + 1``: doubling from ``backoff``, capped."""
        return min(self.max_backoff, self.backoff * (2 ** max(0, attempts - 1)))


@dataclass
class WorkerStats:
    batches: int = 0
    claimed: int = 0
    done: int = 0
    retried: int = 0
    failed: int = 0
    lost: int = 0
    """Episodes whose lease another worker took over before this one finished (harmless)."""
    written: int = 0
    quarantined: int = 0
    errors: list[str] = field(default_factory=list)


def combined(stats: Sequence[WorkerStats]) -> WorkerStats:
    """The stats of workers run side by side (one per target of a placement) added up."""
    total = WorkerStats()
    for one in stats:
        for name, value in vars(one).items():
            setattr(total, name, getattr(total, name) + value)
    return total


def default_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class Worker:
    """Processes the queue with ``extractors`` (see the module docstring)."""

    def __init__(self, store: Store, extractors: Sequence[Extractor], options: WorkerOptions | None = None,
                 name: str | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.store = store
        self.extractors = list(extractors)
        self.options = options or WorkerOptions()
        self.name = name or default_name()
        self.stats = WorkerStats()
        self._sleep = sleep

    def run(self, *, until_idle: bool = False, max_batches: int | None = None,
            should_stop: Callable[[], bool] = lambda: False) -> WorkerStats:
        """Process batches until stopped; ``until_idle`` stops once nothing is pending or claimed."""
        while not should_stop() and (max_batches is None or self.stats.batches < max_batches):
            try:
                claimed = self.run_once(should_stop)
            except StoreUnavailable as exc:
                log.warning("worker %s: %s; retrying in %.1fs", self.name, exc, self.options.poll)
                self._sleep(self.options.poll)
                continue
            if claimed:
                continue
            if until_idle and self.backlog() == 0:
                break
            self._sleep(self.options.poll)
        return self.stats

    def backlog(self) -> int:
        """Episodes pending or claimed (by anyone) in this worker's scope."""
        rows = self.store.read(queue.BACKLOG, {"tenants": self.options.tenants})
        return rows[0]["n"]

    def run_once(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """Claim one batch and process it; returns how many episodes were claimed."""
        o = self.options
        started = self.store.clock()
        batch = self.store.transact(lambda: queue.claim_steps(
            self.name, o.batch_size, o.lease, o.max_attempts, started, o.tenants))
        if not batch:
            return 0
        self.stats.batches += 1
        self.stats.claimed += len(batch)
        log.info("worker %s claimed %d episode(s)", self.name, len(batch))
        waiting: set[str] = set()
        for index, item in enumerate(batch):
            if should_stop():
                self._release([c for c in batch[index:] if c.episode.tenant_id not in waiting])
                break
            if item.episode.tenant_id in waiting:
                continue  # handed back below: an older episode of its tenant waits for a retry
            started = self._renew_if_due(batch[index:], started)
            if not self._handle(item):
                waiting.add(item.episode.tenant_id)
                self._release([c for c in batch[index + 1:] if c.episode.tenant_id == item.episode.tenant_id])
        return len(batch)

    def _renew_if_due(self, rest: list[queue.Claimed], since: datetime) -> datetime:
        now = self.store.clock()
        if now - since < self.options.lease / 2:
            return since
        ids = [[c.episode.tenant_id, c.episode.id] for c in rest]
        self.store.run_write(queue.RENEW, {"ids": ids, "worker": self.name,
                                     "lease_until": now + self.options.lease})
        return now

    def _release(self, rest: list[queue.Claimed]) -> None:
        keys = [(c.episode.tenant_id, c.episode.id) for c in rest]
        self.store.transact(lambda: queue.release_steps(self.name, keys))

    def _settle(self, query: str, item: queue.Claimed, **params: object) -> None:
        ok = self.store.transact(lambda: queue.settle_steps(
            query, tenant=item.episode.tenant_id, id=item.episode.id, worker=self.name,
            now=self.store.clock(), **params))
        if not ok:
            self.stats.lost += 1
            log.warning("worker %s: lease on %s/%s was taken over before it finished", self.name,
                        item.episode.tenant_id, item.episode.id)

    def _handle(self, item: queue.Claimed) -> bool:
        """Process one claimed episode; ``False`` if it was sent back for a retry."""
        episode = item.episode
        extractors = self.extractors
        if item.deltas:
            extractors = [StructuredDeltas(item.deltas), *extractors]
        try:
            report = self.store.run(process_op(self.store, episode, extractors, mark_done=False))
        except SgamError as exc:
            if exc.transient and item.attempts < self.options.max_attempts:
                wait = self.options.backoff_for(item.attempts)
                self.stats.retried += 1
                log.info("worker %s: %s/%s failed transiently (%s); retry in %s", self.name,
                         episode.tenant_id, episode.id, exc, wait)
                self._settle(queue.RETRY, item, error=f"{type(exc).__name__}: {exc}",
                             not_before=self.store.clock() + wait)
                return False
            self._dead_letter(item, exc)
            return True
        except Exception as exc:  # noqa: BLE001 - any other failure is terminal: dead-letter it
            self._dead_letter(item, exc)
            return True
        self.stats.done += 1
        self.stats.written += report.written
        self.stats.quarantined += len(report.quarantined)
        self._settle(queue.DONE, item, written=report.written, quarantined=len(report.quarantined))
        return True

    def _dead_letter(self, item: queue.Claimed, exc: BaseException) -> None:
        message = f"{type(exc).__name__}: {exc}"
        if getattr(exc, "transient", False):
            message = f"gave up after {item.attempts} attempts: {message}"
        self.stats.failed += 1
        self.stats.errors.append(f"{item.episode.tenant_id}/{item.episode.id}: {message}")
        log.error("worker %s: %s/%s dead-lettered: %s", self.name, item.episode.tenant_id,
                  item.episode.id, message)
        self._settle(queue.FAIL, item, error=message)


__all__ = ["Worker", "WorkerOptions", "WorkerStats", "default_name"]

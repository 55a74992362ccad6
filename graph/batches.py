"""``write_many``: a stream of deltas in batched write transactions, in lanes split by subject.

A subject's deltas all go to one lane, in their original order, so every slot sees its deltas in
order; lanes touch disjoint subjects, so they may run side by side (the caller decides how: the
sync graph in threads, the async one as tasks). Each batch is one :func:`writes.write_op`; the
results come back under the deltas' original indices. The ingest pipeline writes through the
same operation (:func:`write_many_op`, one lane).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta

from .errors import InvalidDelta
from .handoffs import collector_paused
from .models import MemoryDelta
from .reconcile import DEFAULT_MAX_FUTURE
from .schema import Schema
from .steps import Operation
from .writes import BatchResult, DeltaResult, write_op

# Batches of 4,000 deltas: the scale stream's 20k after 80k took 13.4-13.7 s in two lanes against
# 14.3-14.6 s at 2,000 (8,000: 13.0-13.5 s; 1,000: 15.2-16.7 s), and 15.0-15.3 s in one lane
# against 16.6-16.8 s. A larger batch re-reads its hot slots' ledgers fewer times (57,582 ledger
# entries read against 77,476) and pays fewer round trips and commits; sgam/bench/README.md.
DEFAULT_BATCH = 4000
# Two lanes by default: on the 2-core reference machine they wrote the scale benchmark's windows
# 10-19% faster than one lane (20k after 80k, 280k and 980k facts), with no deadlock retried. A
# batch takes the entities it writes (its relation targets too) in one sorted pass (writes.py), so
# lanes that share targets wait for each other instead of deadlocking. Lanes never outnumber the
# batches: a write of one batch or less stays one transaction.
DEFAULT_WORKERS = 2
MAX_WORKERS = 64

Chunk = tuple[list[int], list[MemoryDelta]]
Lane = list[Chunk]
Done = list[tuple[list[int], BatchResult]]


def lanes(deltas: Sequence[MemoryDelta], size: int, atomic: bool, workers: int) -> list[Lane]:
    """Split a write into lanes of batches that may run side by side (see the module docstring).
    Each chunk keeps the deltas' original indices."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise InvalidDelta(f"batch_size must be a whole number of at least 1, not {size!r:.40}")
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= MAX_WORKERS:
        raise InvalidDelta(f"workers must be a whole number from 1 to {MAX_WORKERS}, not {workers!r:.40}")
    if atomic:
        return [[(list(range(len(deltas))), list(deltas))]]
    batches = -(-len(deltas) // size)
    split: list[list[tuple[int, MemoryDelta]]] = [[] for _ in range(max(1, min(workers, batches)))]
    # Without the cyclic collector: this pass makes two small objects a delta, and in a process
    # that holds much (the scale benchmark's stream) the full passes they set off took 0.28 s of
    # a 20k-delta write_many (3%), more than the split itself.
    with collector_paused():
        for index, delta in enumerate(deltas):
            lane = zlib.crc32(f"{delta.tenant_id}\x1f{delta.subject}".encode()) % len(split)
            split[lane].append((index, delta))
        return [
            [([i for i, _ in lane[k:k + size]], [d for _, d in lane[k:k + size]])
             for k in range(0, len(lane), size)]
            for lane in split if lane
        ]


def lane_op(lane: Lane, schema: Schema, clock: Callable[[], datetime], atomic: bool = False,
            max_future: timedelta = DEFAULT_MAX_FUTURE) -> Operation[Done]:
    """One lane's batches, one transaction each, in order."""
    done: Done = []
    for indices, chunk in lane:
        done.append((indices, (yield from write_op(chunk, schema, clock, atomic, max_future))))
    return done


def merged(done: Iterable[tuple[list[int], BatchResult]]) -> BatchResult:
    """The lanes' results as one, each under its delta's original index."""
    results = [
        DeltaResult(indices[r.index], r.outcome, r.memory_ids, r.message, r.error)
        for indices, batch in done for r in batch.results
    ]
    return BatchResult(tuple(sorted(results, key=lambda r: r.index)))


def write_many_op(deltas: Sequence[MemoryDelta], schema: Schema, clock: Callable[[], datetime], *,
                  atomic: bool = False, batch_size: int = DEFAULT_BATCH,
                  max_future: timedelta = DEFAULT_MAX_FUTURE) -> Operation[BatchResult]:
    """``write_many`` in one lane: batches of ``batch_size`` deltas, one transaction each (one
    for all of them if ``atomic``)."""
    done: Done = []
    for lane in lanes(deltas, batch_size, atomic, 1):
        done += yield from lane_op(lane, schema, clock, atomic, max_future)
    return merged(done)


__all__ = ["DEFAULT_BATCH", "DEFAULT_WORKERS", "MAX_WORKERS", "Chunk", "Lane", "lane_op", "lanes", "merged",
           "write_many_op"]

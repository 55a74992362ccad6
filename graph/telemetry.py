"""OpenTelemetry traces and metrics at the store seam; off unless the application turns them on.

SGAM calls only the OpenTelemetry API (the ``otel`` extra). Without an SDK configured by the
process (``opentelemetry-instrument``, which reads the standard ``OTEL_*`` environment variables,
or the application's own ``TracerProvider``/``MeterProvider``) the API hands out no-op tracers and
meters; without the API installed nothing here is imported at all. So tracing costs nothing until
someone asks for it.

What is recorded: one ``sgam.write_batch`` span per write transaction of deltas and one
``sgam.read`` span per read query, with the tenant, counts and outcomes (timing is the span's
own); the counters ``sgam.writes`` (by outcome), ``sgam.refusals`` (by error type) and the
histograms ``sgam.write.duration`` and ``sgam.read.duration``; a read span of a named query
carries its name (``sgam.query``). ``sgam.audit.failures`` counts read audit records that could
not be written (:mod:`sgam.graph.audit`). The observable gauges ``sgam.quarantine.open`` and
``sgam.queue.depth`` (episodes pending or claimed) are counted per tenant by one cheap query each
on every graph that :func:`watch` was given, sync or async, when the metric reader collects. Never a value, a subject id, an
error message (messages quote values) or episode text: spans often leave the trust boundary of
the memory itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from .errors import SgamError, StoreUnavailable
from .models import MemoryDelta

try:
    from opentelemetry import metrics, trace
    from opentelemetry.trace import Status, StatusCode
except ImportError:  # the otel extra is not installed: nothing is traced or counted
    trace = None  # type: ignore[assignment]

SCOPE = "sgam"
QUERY = "query"
"""The key of a named query's name among the parameters a read span is given."""

if trace is not None:
    # Proxies too: they start recording once the process installs a provider, whenever that is.
    _tracer = trace.get_tracer(SCOPE)
    _meter = metrics.get_meter(SCOPE)
    _writes = _meter.create_counter("sgam.writes", unit="{delta}",
                                    description="Deltas written, by outcome (created, superseded, unchanged, ...)")
    _refusals = _meter.create_counter("sgam.refusals", unit="{delta}",
                                      description="Deltas the write path refused, by error type")
    _write_seconds = _meter.create_histogram("sgam.write.duration", unit="s",
                                             description="Time of one write transaction of deltas")
    _read_seconds = _meter.create_histogram("sgam.read.duration", unit="s",
                                            description="Time of one read query")
    _audit_failures = _meter.create_counter("sgam.audit.failures", unit="{read}",
                                            description="Read audit records not written, by error type")


class _Noop:
    """The span handed out when the OpenTelemetry API is not installed."""

    def is_recording(self) -> bool:
        return False

    def set_attribute(self, key: str, value: Any) -> None:
        pass


_NOOP = _Noop()
# What the seam enters while nothing records: reusable, no generator, no span.
_OFF = contextlib.nullcontext(_NOOP)


# Providers of the API package itself (its proxies and no-ops) throw every span and measurement
# away; only one from an SDK, installed by the process at any time, records.
_API_PROVIDERS = ("opentelemetry.trace", "opentelemetry.metrics")


def _on() -> bool:
    """Whether anything records: while not, the seam makes no span and no measurement at all."""
    return trace is not None and not (
        type(trace.get_tracer_provider()).__module__.startswith(_API_PROVIDERS)
        and type(metrics.get_meter_provider()).__module__.startswith(_API_PROVIDERS))


def _tenant_attributes(tenants: set[str]) -> dict[str, Any]:
    if len(tenants) == 1:
        return {"sgam.tenant": next(iter(tenants))}
    return {"sgam.tenants": sorted(tenants)}


@contextlib.contextmanager
def _span(name: str, attributes: dict[str, Any], seconds: Any, kind: str) -> Iterator[Any]:
    start = time.perf_counter()
    # The SDK's defaults would copy the exception's message into the span: SGAM's messages quote
    # values, so only the error's type is recorded.
    with _tracer.start_as_current_span(name, attributes=attributes, record_exception=False,
                                       set_status_on_exception=False) as span:
        error: str | None = None
        try:
            yield span
        except BaseException as exc:
            error = type(exc).__name__
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, error))
            raise
        finally:
            seconds.record(time.perf_counter() - start,
                           {"sgam.operation": kind, **({"error.type": error} if error else {})})


def write_batch(deltas: Sequence[MemoryDelta], atomic: bool) -> AbstractContextManager[Any]:
    """The span of one write transaction of ``deltas``; pass the batch result to :func:`written`.

    An atomic batch refused as a whole (an :class:`SgamError` other than the store being
    unavailable) counts its deltas as refusals."""
    return _write_batch(deltas, atomic) if _on() else _OFF


@contextlib.contextmanager
def _write_batch(deltas: Sequence[MemoryDelta], atomic: bool) -> Iterator[Any]:
    attributes = {**_tenant_attributes({d.tenant_id for d in deltas}),
                  "sgam.deltas": len(deltas), "sgam.atomic": atomic, "db.system": "neo4j"}
    try:
        with _span("sgam.write_batch", attributes, _write_seconds, "write") as span:
            yield span
    except SgamError as exc:
        if not isinstance(exc, StoreUnavailable):
            _refusals.add(len(deltas), {"error.type": type(exc).__name__})
        raise


def written(span: Any, result: Any) -> None:
    """Record a :class:`~sgam.graph.writes.BatchResult` on its span and in the counters."""
    if not _on():
        return
    outcomes = Counter(r.outcome for r in result.results if r.ok)
    refused = Counter(type(r.error).__name__ for r in result.results if not r.ok)
    for outcome, n in outcomes.items():
        _writes.add(n, {"sgam.outcome": outcome})
    for error, n in refused.items():
        _refusals.add(n, {"error.type": error})
    if span.is_recording():
        span.set_attribute("sgam.written", result.written)
        span.set_attribute("sgam.refused", sum(refused.values()))
        for outcome, n in outcomes.items():
            span.set_attribute(f"sgam.outcome.{outcome}", n)


def read(params: dict[str, Any]) -> AbstractContextManager[Any]:
    """The span of one read query; its tenant is the ``tenant`` parameter when there is one.
    Pass the records to :func:`rows`."""
    if not _on():
        return _OFF
    tenant, query = params.get("tenant"), params.get(QUERY)
    attributes = {"db.system": "neo4j", **({"sgam.tenant": tenant} if isinstance(tenant, str) else {}),
                  **({"sgam.query": query} if isinstance(query, str) else {})}
    return _span("sgam.read", attributes, _read_seconds, "read")


def named(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """What a named query's read span is given (:func:`read`): its tenant and its name. Never
    the other parameters: they hold subject ids and values."""
    return {"tenant": params.get("tenant"), QUERY: name}


def rows(span: Any, records: Sequence[Any]) -> None:
    if span.is_recording():
        span.set_attribute("sgam.rows", len(records))


def audit_failed(error: str) -> None:
    if _on():
        _audit_failures.add(1, {"error.type": error})


# -- gauges -------------------------------------------------------------------------------------

# Per tenant, over the whole database: open quarantine entries, and episodes waiting in the
# background queue (``sgam.ingest.queue``); the second is a seek on the episode status index.
QUARANTINE_OPEN = """
MATCH (q:Quarantine) WHERE q.status = 'open'
RETURN q.tenant_id AS tenant, count(q) AS n
"""
QUEUE_DEPTH = """
MATCH (e:Episode) WHERE e.status IN ['pending', 'claimed']
RETURN e.tenant_id AS tenant, count(e) AS n
"""

# What the gauges count on: a graph's store (its ``read(query, params)``), weakly held, so a
# graph that is garbage collected stops being counted without anyone unwatching it; for an async
# store, the event loop its driver runs on.
_watched: weakref.WeakSet[Any] = weakref.WeakSet()
_loops: weakref.WeakKeyDictionary[Any, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()
_reported: dict[str, set[str]] = {}
GAUGE_READ_SECONDS = 10.0
"""How long a collection waits for an async store's count."""


def watch(reader: Any, loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Count the gauges on ``reader`` from now on: a store with a synchronous ``read``, or, given
    ``loop``, an async store whose ``read`` runs on that event loop."""
    if loop is not None:
        _loops[reader] = loop
    _watched.add(reader)


def unwatch(reader: Any) -> None:
    _watched.discard(reader)
    _loops.pop(reader, None)


def _read(reader: Any, query: str) -> Any:
    loop = _loops.get(reader)
    if loop is None:
        return reader.read(query, {})
    # A metric reader collects in a thread of its own: the async store's read runs on its loop
    # and this thread waits for it. On that loop's own thread the wait would block the very read
    # it waits for, so the store is not counted there.
    try:
        on_loop = asyncio.get_running_loop() is loop
    except RuntimeError:
        on_loop = False
    if on_loop:
        raise RuntimeError("collected on the event loop of an async store")
    return asyncio.run_coroutine_threadsafe(reader.read(query, {}), loop).result(GAUGE_READ_SECONDS)


def _counts(query: str) -> Iterator[Any]:
    from opentelemetry.metrics import Observation

    totals: Counter[str] = Counter()
    seen: set[tuple[Any, Any]] = set()
    for reader in list(_watched):
        database = (getattr(reader, "uri", None), getattr(reader, "database", None))
        if database in seen:  # two graphs on one database: counted once
            continue
        seen.add(database)
        try:
            for row in _read(reader, query):
                totals[row["tenant"]] += row["n"]
        except Exception as exc:  # an unreachable store must not break the export of the rest
            logging.getLogger(__name__).warning("gauge not counted on a store (%s)", type(exc).__name__)
    # A tenant whose count fell to zero is reported as 0 once (a drained queue must read 0, not
    # keep its last value), then no more: the query only finds tenants with something to count.
    for tenant in _reported.get(query, set()) - set(totals):
        totals[tenant] = 0
    _reported[query] = {tenant for tenant, n in totals.items() if n}
    for tenant, n in sorted(totals.items()):
        yield Observation(n, {"sgam.tenant": tenant})


if trace is not None:
    _meter.create_observable_gauge("sgam.quarantine.open", [lambda options: _counts(QUARANTINE_OPEN)],
                                   unit="{entry}", description="Open quarantine entries, per tenant")
    _meter.create_observable_gauge("sgam.queue.depth", [lambda options: _counts(QUEUE_DEPTH)],
                                   unit="{episode}", description="Episodes pending or claimed, per tenant")

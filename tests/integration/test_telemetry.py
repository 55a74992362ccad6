"""OpenTelemetry at the store seam, recorded by the SDK's in-memory exporter and metric reader,
against a real Neo4j; and `sgam stats`, a tenant's counts."""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, MemoryDelta, MemoryGraph
from sgam.cli import app
from sgam.graph import telemetry
from sgam.graph.errors import InvalidDelta

SECRET = "Rua-Secreta-42"  # a value that must never reach a span


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def otel() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """The process-wide providers, installed once (OpenTelemetry allows one of each per process)."""
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return exporter, reader


@pytest.fixture
def spans(otel) -> Iterator[InMemorySpanExporter]:
    otel[0].clear()
    yield otel[0]


def points(reader: InMemoryMetricReader, name: str) -> dict[tuple, float]:
    """Sum (counters) or count (histograms) of metric ``name`` by attribute set."""
    found: dict[tuple, float] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for p in metric.data.data_points:
                        value = getattr(p, "value", None)
                        found[tuple(sorted(p.attributes.items()))] = p.count if value is None else value
    return found


def episode(graph: MemoryGraph, tenant: str, eid: str, content: str = "noted") -> None:
    graph.record_episode(tenant_id=tenant, id=eid, content=content, occurred_at=utc(2026, 1, 1), actor="user:mira")


def deltas(tenant: str) -> list[MemoryDelta]:
    common = dict(tenant_id=tenant, source_episode_id="e1", asserted_by="user:mira", valid_from=utc(2026, 1, 1))
    return [MemoryDelta(subject="mira", attribute="home_city", value=SECRET, **common),
            MemoryDelta(subject="mira", attribute="response_style", value="concise", **common),
            MemoryDelta(subject="ada", subject_type="Customer", attribute="address", value=SECRET, **common),
            MemoryDelta(subject="mira", attribute="passport_deadline", value="soon", **common)]  # refused


def no_values(span) -> None:
    text = json.dumps({k: str(v) for k, v in span.attributes.items()}) + span.name + str(span.status.description)
    for forbidden in (SECRET, "concise", "soon", "mira", "ada", "noted", "moved"):
        assert forbidden not in text, (forbidden, span.name, text)


def test_write_many_and_current_make_spans_with_counts_and_no_values(
        graph: MemoryGraph, tenant: str, spans: InMemorySpanExporter, otel) -> None:
    episode(graph, tenant, "e1", f"Mira moved to {SECRET}")
    before_writes = points(otel[1], "sgam.writes")
    result = graph.write_many(deltas(tenant))
    assert (result.written, len(result.rejected)) == (3, 1)
    [batch] = [s for s in spans.get_finished_spans() if s.name == "sgam.write_batch"]
    assert batch.attributes["sgam.tenant"] == tenant
    assert (batch.attributes["sgam.deltas"], batch.attributes["sgam.written"], batch.attributes["sgam.refused"]) == (4, 3, 1)
    assert batch.attributes["sgam.outcome.created"] == 3 and batch.attributes["sgam.atomic"] is False
    assert batch.end_time > batch.start_time
    no_values(batch)

    spans.clear()
    [fact] = graph.current(tenant, "mira", "home_city")
    assert fact.value == SECRET
    [read] = [s for s in spans.get_finished_spans() if s.name == "sgam.read"]
    assert (read.attributes["sgam.tenant"], read.attributes["sgam.rows"]) == (tenant, 1)
    no_values(read)

    writes = points(otel[1], "sgam.writes")
    created = (("sgam.outcome", "created"),)
    assert writes[created] - before_writes.get(created, 0) == 3
    assert points(otel[1], "sgam.refusals")[(("error.type", "InvalidDelta"),)] >= 1
    assert points(otel[1], "sgam.read.duration")[(("sgam.operation", "read"),)] >= 1


def test_a_refused_atomic_write_records_the_error_type_only(graph: MemoryGraph, tenant: str,
                                                            spans: InMemorySpanExporter) -> None:
    episode(graph, tenant, "e1")
    with pytest.raises(InvalidDelta):
        graph.write(deltas(tenant)[-1])
    [batch] = [s for s in spans.get_finished_spans() if s.name == "sgam.write_batch"]
    assert batch.status.status_code == trace.StatusCode.ERROR
    assert batch.attributes["error.type"] == "InvalidDelta" and not batch.events  # no exception message
    no_values(batch)


def test_the_async_store_makes_the_same_spans(neo4j_connection, graph: MemoryGraph, tenant: str,
                                              spans: InMemorySpanExporter) -> None:
    episode(graph, tenant, "e1")

    async def go() -> None:
        agraph = await AsyncMemoryGraph.connect(*neo4j_connection, bootstrap=False)
        try:
            await agraph.write_many(deltas(tenant)[:2])
            assert len(await agraph.current(tenant, "mira")) == 2
        finally:
            await agraph.close()

    asyncio.run(go())
    names = {s.name: s for s in spans.get_finished_spans()}
    assert names["sgam.write_batch"].attributes["sgam.written"] == 2
    assert names["sgam.read"].attributes["sgam.rows"] == 2
    for span in names.values():
        no_values(span)


# -- sgam stats --------------------------------------------------------------------------------


def test_stats_counts_a_known_tenant(graph: MemoryGraph, tenant: str, env: None) -> None:
    # A tenant that holds nothing is named, not counted as zeros (a typo must not look like an answer).
    empty = CliRunner().invoke(app, ["stats", "-t", tenant, "--json"])
    assert empty.exit_code == 4 and "holds nothing" in empty.output, empty.output
    episode(graph, tenant, "e1")
    episode(graph, tenant, "e2", "mira moved")
    graph.write_many(deltas(tenant))  # 3 facts on 2 entities; the refused one is not stored
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto",
                valid_from=utc(2026, 3, 1), source_episode_id="e2", asserted_by="user:mira")
    graph.write(tenant_id=tenant, subject="mira", attribute="export_format", value="csv",
                valid_from=utc(2026, 3, 1), source_episode_id="e2", asserted_by="user:mira")  # a candidate
    graph.ingest(tenant_id=tenant, id="e3", content="I might move again", occurred_at=utc(2026, 4, 1),
                 actor="user:mira")  # queued
    graph.ingest(tenant_id=tenant, id="e4", kind="event", content='{"type": "nothing_known"}',
                 occurred_at=utc(2026, 4, 2), actor="tool:crm", remember=True)  # quarantined
    history = graph.history(tenant, "mira") + graph.history(tenant, "ada")
    believed = [f for f in history if f.expired_at is None]
    result = CliRunner().invoke(app, ["stats", "-t", tenant, "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["entities"] == 2 and stats["candidates"] == 1
    assert stats["facts"] == [
        {"status": "candidate", "facts": 1},
        {"status": "confirmed", "facts": sum(1 for f in believed if f.status == "confirmed")},
        {"status": "retired", "facts": len(history) - len(believed)},
    ]
    assert stats["facts"][1]["facts"] == 4 and stats["facts"][2]["facts"] == 1  # Lisbon closed on 03-01
    assert (stats["quarantine_open"], stats["quarantine_total"]) == (1, 1)
    queue = {r["status"]: r["episodes"] for r in stats["queue"]}
    assert queue.get("pending") == 1 and sum(queue.values()) == 4
    last = max(t for f in history for t in (f.recorded_at, f.expired_at) if t is not None)
    assert datetime.fromisoformat(stats["last_write"]) == last
    text = CliRunner().invoke(app, ["stats", "-t", tenant])
    assert "4 confirmed" in text.output and "1 open of 1" in text.output and "pending" in text.output


# -- query names on read spans, gauges, audit failures ------------------------------------------


def test_a_named_read_span_carries_the_query_name_and_no_values(graph: MemoryGraph, tenant: str,
                                                                spans: InMemorySpanExporter) -> None:
    episode(graph, tenant, "e1")
    graph.write_many(deltas(tenant)[:2])
    spans.clear()
    graph.current(tenant, "mira", "home_city", principal="*")
    graph.history(tenant, "mira")
    graph.query("as-of", tenant=tenant, subject="mira", attribute=None, valid_at=utc(2026, 2, 1),
                known_at=None, principal=None, statuses=None)
    reads = [s for s in spans.get_finished_spans() if s.name == "sgam.read"]
    assert [s.attributes.get("sgam.query") for s in reads] == ["current", "history", "as-of"]
    for span in reads:
        assert set(span.attributes) <= {"db.system", "sgam.tenant", "sgam.query", "sgam.rows"}
        no_values(span)


def test_the_gauges_count_open_quarantine_and_queue_depth_per_tenant(graph: MemoryGraph, tenant: str,
                                                                     otel) -> None:
    key = (("sgam.tenant", tenant),)
    assert key not in points(otel[1], "sgam.quarantine.open")
    episode(graph, tenant, "e1")
    graph.ingest(tenant_id=tenant, id="e2", content="I might move again", occurred_at=utc(2026, 4, 1),
                 actor="user:mira")  # queued
    graph.ingest(tenant_id=tenant, id="e3", content="and again", occurred_at=utc(2026, 4, 2),
                 actor="user:mira")  # queued
    graph.ingest(tenant_id=tenant, id="e4", kind="event", content='{"type": "nothing_known"}',
                 occurred_at=utc(2026, 4, 2), actor="tool:crm", remember=True)  # quarantined
    assert points(otel[1], "sgam.quarantine.open")[key] == 1
    assert points(otel[1], "sgam.queue.depth")[key] == 2
    graph.delete_tenant(tenant)
    assert points(otel[1], "sgam.queue.depth")[key] == 0   # drained: 0 once, then not reported
    assert key not in points(otel[1], "sgam.queue.depth")


def test_a_failed_audit_write_is_counted(graph: MemoryGraph, tenant: str, otel,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import sgam.api
    from sgam.graph.errors import StoreUnavailable

    def refused(*args):
        raise StoreUnavailable("the server went away")

    graph.record_episode(tenant_id=tenant, id="e1", content="noted", occurred_at=utc(2026, 1, 1))
    graph.write(tenant_id=tenant, subject="ada", attribute="date_of_birth", value="1990-04-01",
                valid_from=utc(2026, 1, 1), source_episode_id="e1")
    failures = (("error.type", "StoreUnavailable"),)
    before = points(otel[1], "sgam.audit.failures").get(failures, 0)
    monkeypatch.setattr(sgam.api, "audit_op", refused)
    assert len(graph.current(tenant, "ada", principal="agent:kyc")) == 1
    assert points(otel[1], "sgam.audit.failures")[failures] == before + 1


def test_the_gauges_count_on_an_async_graph(neo4j_connection, graph: MemoryGraph, tenant: str, otel,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """An async graph, as `sgam serve` holds one, is counted through its own event loop (here in a
    thread, as the service's runs while an SDK's metric reader collects from a thread of its own)."""
    key = (("sgam.tenant", tenant),)
    graph.ingest(tenant_id=tenant, id="e1", content="I might move", occurred_at=utc(2026, 4, 1),
                 actor="user:mira")  # queued
    # Only the async graph is watched: every sync graph of the session is on the same database.
    monkeypatch.setattr(telemetry, "_watched", weakref.WeakSet())
    assert key not in points(otel[1], "sgam.queue.depth")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        agraph = asyncio.run_coroutine_threadsafe(
            AsyncMemoryGraph.connect(*neo4j_connection, bootstrap=False), loop).result()
        try:
            assert points(otel[1], "sgam.queue.depth")[key] == 1

            async def on_the_loop() -> dict[tuple, float]:
                return points(otel[1], "sgam.queue.depth")   # cannot wait for its own loop: skipped

            assert asyncio.run_coroutine_threadsafe(on_the_loop(), loop).result(timeout=30).get(key, 0) == 0
            assert points(otel[1], "sgam.queue.depth")[key] == 1
        finally:
            asyncio.run_coroutine_threadsafe(agraph.close(), loop).result()
        assert points(otel[1], "sgam.queue.depth")[key] == 0   # closed: no longer counted
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

"""The ingest pipeline end to end, part two: a transcript through a scripted model endpoint, the async
API, real-time writes that hit a transient failure, and the order of a tenant's episodes when several
workers run. Real Neo4j; the model endpoint is the loopback replay server of tests/llm_replay.py."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from sgam import AsyncMemoryGraph, ExtractionError, MemoryGraph, StoreUnavailable, UnknownSubject
from sgam.graph.models import Episode
from sgam.graph.steps import InTx, Request
from sgam.graph.store import Store
from sgam.graph.writes import CHECK_STORED
from sgam.ingest import episodes as ep
from sgam.ingest import queue
from sgam.ingest.extractors.events import EventMapper
from sgam.ingest.extractors.llm import OpenAICompatibleExtractor
from sgam.ingest.worker import Worker, WorkerOptions
from tests.integration.test_ingest import logged, queue_events, statuses, values, worker_process
from tests.llm_replay import Replay, fixture, server  # noqa: F401 (a fixture)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.fixture
def clean(graph: MemoryGraph, tenant: str) -> Iterator[str]:
    yield tenant
    graph.delete_tenant(tenant)


def completion(*candidates: dict[str, Any]) -> dict[str, Any]:
    """A replay step: a chat completion whose content is an SGR extraction result."""
    content = json.dumps({"candidates": list(candidates)})
    return {"status": 200, "headers": {"Content-Type": "application/json"}, "body": {
        "id": "chatcmpl-e2e", "object": "chat.completion", "created": 1779872400, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}]}}


def candidate(quote: str, attribute: str, value: Any, *, decision: str = "new",
              compared_with: Any = None) -> dict[str, Any]:
    return {"evidence": [quote], "subject": "mira", "subject_type": None, "attribute": attribute,
            "compared_with": compared_with, "decision": decision,
            "delta": {"value": value, "op": "assert", "valid_from": None}}


TRANSCRIPT = [  # (speaker, occurred_at, text)
    ("user:mira", "2026-05-20T09:00:00Z", "Hi, this is mira. My passport deadline is July 15, 2026."),
    ("agent:assistant", "2026-05-20T09:00:05Z", "Noted, I will keep that in mind."),
    ("user:mira", "2026-06-10T14:30:00Z", "mira again: the consulate moved my passport deadline to June 30, 2026."),
    ("user:mira", "2026-06-10T14:31:00Z", "Also, I prefer concise answers."),
    ("user:mira", "2026-06-10T14:32:00Z", "By the way, my passport deadline moved from July 15 to June 30, 2026."),
    ("user:mira", "2026-06-10T14:33:00Z", "Remember that my home city is Porto."),
]


def test_transcript_through_a_model_endpoint_to_current_and_as_of(graph: MemoryGraph, clean: str,
                                                                  server: Replay) -> None:
    tenant = clean
    model = OpenAICompatibleExtractor(server.url, "gpt-4o-mini", timeout=0.5, max_retries=1, backoff=0.01,
                                      sleep=lambda _: None)
    # The explicit "remember" is real time: its model call times out twice, so it is queued instead.
    server.script += [{**completion(), "delay": 3}, {**completion(), "delay": 3}]
    reports = [graph.ingest(ep.message(tenant, text, speaker=speaker, occurred_at=at, session_id="s1"),
                            extractors=[model]) for speaker, at, text in TRANSCRIPT]
    assert [r.queued for r in reports] == [True] * 6
    assert [r.deferred for r in reports[:5]] == [None] * 5
    assert reports[5].deferred is not None and "TransientExtractionError" in reports[5].deferred
    with pytest.raises(UnknownSubject):  # nothing is written before the worker runs
        graph.current(tenant, "mira")

    server.script += [
        completion(candidate("My passport deadline is July 15, 2026", "passport_deadline", "2026-07-15")),
        completion(),  # the agent's acknowledgement: nothing memorable
        fixture("error_500"),  # retried by the extractor
        completion(candidate("moved my passport deadline to June 30, 2026", "passport_deadline", "2026-06-30",
                             decision="change", compared_with="2026-07-15")),
        fixture("malformed_json"),  # not JSON: quarantined with the raw answer
        fixture("schema_violation"),  # breaks the reasoning schema: quarantined with the problems
        completion(candidate("my home city is Porto", "home_city", "Porto")),
    ]
    options = WorkerOptions(tenant=tenant, poll=0.05, backoff=timedelta(milliseconds=100))
    stats = Worker(graph.store, [model], options).run(until_idle=True)
    assert (stats.done, stats.failed, stats.quarantined) == (6, 0, 2)
    assert statuses(graph, tenant) == {"done": 6}

    [now] = graph.current(tenant, "mira", "passport_deadline")
    assert now.value == date(2026, 6, 30) and now.source_episode_id == reports[2].episode_id
    assert now.asserted_by == "user:mira"
    [then] = graph.as_of(tenant, "mira", "passport_deadline", valid_at=utc(2026, 6, 1))
    assert then.value == date(2026, 7, 15) and then.source_episode_id == reports[0].episode_id
    assert values(graph.current(tenant, "mira", "home_city")) == ["Porto"]
    # The model was told what is stored for mira when she changed it.
    asked = [r["body"]["messages"][-1]["content"] for r in server.requests]
    assert len(asked) == 2 + 7 and "2026-07-15" in asked[5] and "2026-07-15" not in asked[2]

    entries = {e.episode_id: e for e in graph.quarantine(tenant)}
    assert set(entries) == {reports[3].episode_id, reports[4].episode_id}
    broken, violating = entries[reports[3].episode_id], entries[reports[4].episode_id]
    assert broken.stage == "extract" and "JSON" in broken.reason
    assert "passport_dead" in json.loads(broken.candidate)["raw"]  # the raw answer is kept
    assert violating.stage == "extract" and "passport_expiry" in violating.reason
    assert graph.doctor(tenant) == []


# -- the async API ---------------------------------------------------------------------------------

def test_async_api_mirrors_the_sync_one(neo4j_connection, graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    uri, auth = neo4j_connection
    loop_ran = threading.Event()

    class Waits:
        """An extractor that needs the event loop to keep running while it extracts."""

        name = "waits"

        def extract(self, episode: Episode, current):
            assert loop_ran.wait(10), "the event loop was blocked while an extractor ran"
            return [{"subject": "mira", "attribute": "home_city", "value": "Porto"}]

    async def scenario() -> None:
        async with await AsyncMemoryGraph.connect(uri, auth, bootstrap=False) as agraph:
            said = await agraph.record_episode(tenant_id=tenant, content="Hello there.", speaker="user:mira",
                                               occurred_at=utc(2026, 1, 1))
            assert said.id.startswith("ep-")

            async def tick() -> None:
                await asyncio.sleep(0.05)
                loop_ran.set()

            report, _ = await asyncio.gather(
                agraph.ingest(tenant_id=tenant, speaker="user:mira", content="Remember that I live in Porto.",
                              occurred_at=utc(2026, 1, 2), extractors=[Waits()]), tick())
            assert not report.queued and report.written == 1
            assert values(await agraph.current(tenant, "mira", "home_city")) == ["Porto"]

            deltas = await agraph.ingest(
                ep.message(tenant, "I wear size 42.", speaker="user:mira", occurred_at=utc(2026, 1, 3)),
                deltas=[{"subject": "mira", "attribute": "shoe_size", "value": 42},
                        {"subject": "mira", "attribute": "response_style", "value": "concise"}])
            assert deltas.written == 1 and len(deltas.quarantined) == 1
            event = await agraph.ingest(ep.event(tenant, {"type": "address_changed", "customer_id": "cust-ada",
                                                          "address": "1 Road", "occurred_at": "2026-01-04T00:00:00Z"}))
            assert event.queued and event.deferred is None
            [entry] = await agraph.quarantine(tenant)
            assert "shoe_size" in entry.reason
            replay = await agraph.replay_quarantine(tenant)
            assert replay.failing and not replay.resolved
            assert await agraph.record_episodes([said]) == {said.id: "existing"}

    asyncio.run(scenario())
    assert statuses(graph, tenant) == {"recorded": 1, "done": 2, "pending": 1}


# -- real-time writes that hit a transient failure -------------------------------------------------

def outage(store: Store, down: Callable[[Request], bool]) -> Store:
    """A copy of ``store`` on which the requests ``down`` picks fail as if Neo4j had gone away."""
    broken = copy.copy(store)

    def answer(request: Request) -> Any:
        if down(request):
            raise StoreUnavailable("Neo4j is not reachable at bolt://test: simulated outage")
        return store._answer(request)  # noqa: SLF001 - the executor's side, as a fault injector

    broken._answer = answer  # type: ignore[method-assign]
    return broken


def writes_facts(request: Request) -> bool:
    """A write transaction of facts (``writes.write_steps`` checks its episodes first)."""
    return isinstance(request, InTx) and not request.read and next(request.make_steps()).query == CHECK_STORED


def test_realtime_write_in_an_outage_is_queued_with_its_deltas(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    said = ep.message(tenant, "Remember that my home city is Porto.", speaker="user:mira",
                      occurred_at=utc(2026, 2, 1))
    report = MemoryGraph(outage(graph.store, writes_facts)).ingest(said, deltas=[{"subject": "mira", "attribute": "home_city",
                                                       "value": "Porto"}])
    assert report.queued and report.deferred.startswith("StoreUnavailable: ")
    assert report.written == 0
    with pytest.raises(UnknownSubject):
        graph.current(tenant, "mira")
    rows = graph.store.read("MATCH (e:Episode {tenant_id: $t}) RETURN e.status AS s, e.deltas AS d, "
                            "e.last_error AS err, e.content AS c", {"t": tenant})
    [row] = rows
    assert row["s"] == "pending" and "simulated outage" in row["err"] and row["c"] == said.content
    assert json.loads(row["d"])[0]["value"] == "Porto"

    # The worker writes the agent's stored deltas (no extractor of its own needed) once it is due.
    stats = Worker(graph.store, [], WorkerOptions(tenant=tenant, poll=0.05)).run(until_idle=True)
    assert stats.done == 1 and stats.written == 1
    [fact] = graph.current(tenant, "mira", "home_city")
    assert fact.value == "Porto" and fact.source_episode_id == report.episode_id
    assert statuses(graph, tenant) == {"done": 1}


def test_realtime_write_that_cannot_even_be_queued_says_the_episode_is_kept(graph: MemoryGraph,
                                                                            clean: str) -> None:
    tenant = clean
    answered: list[Request] = []

    def after_recording(request: Request) -> bool:  # recording works, everything after it fails
        answered.append(request)
        return len(answered) > 1

    store = outage(graph.store, after_recording)
    said = ep.message(tenant, "Remember that my home city is Faro.", speaker="user:mira",
                      occurred_at=utc(2026, 2, 2))
    with pytest.raises(StoreUnavailable, match=r"is stored \(raw\) but could neither be processed") as caught:
        MemoryGraph(store).ingest(said, deltas=[{"subject": "mira", "attribute": "home_city", "value": "Faro"}])
    assert "idempotent" in str(caught.value)
    assert statuses(graph, tenant) == {"recorded": 1}
    # Calling again once Neo4j answers does it.
    report = graph.ingest(said, deltas=[{"subject": "mira", "attribute": "home_city", "value": "Faro"}])
    assert report.recorded == "existing" and report.written == 1 and not report.queued
    assert values(graph.current(tenant, "mira", "home_city")) == ["Faro"]


# -- several workers and the order of a tenant's episodes -------------------------------------------

def accounts(tenant: str, n: int) -> list[dict]:
    """n accounts opened then closed a second later: a close applied before its open is a Conflict."""
    rows = []
    for i in range(n):
        opened = utc(2026, 1, 1) + timedelta(minutes=i)
        account = f"acc-{tenant}-{i}"  # episode ids derive from content: keep the tenants' apart
        rows.append({"type": "account_opened", "occurred_at": opened.isoformat(),
                     "customer_id": "cust-1", "account_id": account})
        rows.append({"type": "account_closed", "occurred_at": (opened + timedelta(seconds=1)).isoformat(),
                     "customer_id": "cust-1", "account_id": account})
    return rows


def test_two_workers_keep_each_tenants_order_and_share_tenants(graph: MemoryGraph, clean: str,
                                                               tmp_path: Path, neo4j_connection) -> None:
    tenants = [clean, clean + "-b"]
    try:
        for tenant in tenants:
            queue_events(graph, tenant, accounts(tenant, 12))
        log = tmp_path / "workers.log"
        workers = [worker_process(neo4j_connection, tenants[0], log, "-t", tenants[1], "--batch", "2",
                                  "--until-idle", delay=0.03) for _ in range(2)]
        for worker in workers:
            _, errors = worker.communicate(timeout=60)
            assert worker.returncode == 0, errors
        handled = logged(log)
        assert len(handled) == 48 and len({e for _, e in handled}) == 48  # each extracted once
        for tenant in tenants:
            assert statuses(graph, tenant) == {"done": 24}
            assert graph.quarantine(tenant) == []  # no close was applied before its open
            assert graph.current(tenant, "cust-1", "holds") == []
            assert len([f for f in graph.history(tenant, "cust-1", "holds") if f.expired_at is None]) == 12
            assert graph.doctor(tenant) == []
        # Each tenant's episodes were extracted in occurrence order, whichever worker took them.
        for tenant in tenants:
            occurred = _occurred(graph, tenant)
            seen = [occurred[e] for _, e in handled if e in occurred]
            assert len(seen) == 24 and seen == sorted(seen)
        assert len(Counter(pid for pid, _ in handled)) == 2  # both workers had a tenant to run
    finally:
        graph.delete_tenant(tenants[1])


def _occurred(graph: MemoryGraph, tenant: str) -> dict[str, Any]:
    rows = graph.store.read("MATCH (e:Episode {tenant_id: $t}) RETURN e.id AS id, e.occurred_at AS at",
                            {"t": tenant})
    return {r["id"]: r["at"].to_native() for r in rows}


def test_a_tenant_is_claimed_by_one_worker_at_a_time_in_order(graph: MemoryGraph, clean: str) -> None:
    tenant, other = clean, clean + "-b"
    try:
        first = queue_events(graph, tenant, accounts(tenant, 2))  # 4 episodes, older than the other's
        later = [dict(r, occurred_at=r["occurred_at"].replace("2026-01-01", "2026-01-02"))
                 for r in accounts(other, 1)]
        second = queue_events(graph, other, later)
        lease, now = timedelta(minutes=1), graph.clock()

        def claim(worker: str, limit: int = 3) -> list[str]:
            return [c.episode.id for c in graph.store.transact(lambda: queue.claim_steps(
                worker, limit, lease, 5, now, [tenant, other]))]

        assert claim("a") == first[:3]  # the oldest tenant, oldest first, one tenant per batch
        assert claim("b") == second  # the tenant a holds is not b's to take, even its 4th episode
        assert claim("c") == []
        assert claim("a") == first[3:]  # a holder may take more of its own tenant
    finally:
        graph.delete_tenant(other)


def test_nothing_newer_overtakes_an_episode_waiting_for_a_retry(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    ids = queue_events(graph, tenant, accounts(tenant, 2))  # open 0, close 0, open 1, close 1

    class FirstCallFails:
        name = "events"

        def __init__(self) -> None:
            self.inner = EventMapper(schema=graph.schema)
            self.calls: list[str] = []

        def extract(self, episode: Episode, current):
            self.calls.append(episode.id)
            if len(self.calls) == 1:
                error = ExtractionError("rate limited")
                error.transient = True
                raise error
            return self.inner.extract(episode, current)

    extractor = FirstCallFails()
    options = WorkerOptions(batch_size=4, tenant=tenant, backoff=timedelta(hours=1), poll=0.01)
    worker = Worker(graph.store, [extractor], options)
    assert worker.run_once() == 4 and extractor.calls == ids[:1]  # the rest of the batch handed back
    assert worker.run_once() == 0  # the newer three wait for the first one's retry
    assert statuses(graph, tenant) == {"pending": 4}
    with pytest.raises(UnknownSubject):
        graph.history(tenant, "cust-1")

    # Two hours later the first one is due again, and the four are applied in order.
    store = copy.copy(graph.store)
    store.clock = lambda: graph.clock() + timedelta(hours=2)
    Worker(store, [extractor], options).run(until_idle=True)
    assert extractor.calls == [ids[0], *ids]
    assert statuses(graph, tenant) == {"done": 4} and graph.quarantine(tenant) == []
    assert graph.current(tenant, "cust-1", "holds") == []
    assert len([f for f in graph.history(tenant, "cust-1", "holds") if f.expired_at is None]) == 2

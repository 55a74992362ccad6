"""The ingest pipeline end to end against the real Neo4j: episodes, quarantine, queue and workers."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sgam import (
    Conflict, ExtractionError, InvalidDelta, MemoryGraph, SchemaViolation, StoreUnavailable, UnknownSubject,
)
from sgam.cli import app
from sgam.graph.models import MAX_EPISODE_BYTES, Episode
from sgam.graph.schema import Schema, default_schema
from sgam.ingest import episodes as ep
from sgam.ingest.extractors.events import EventMapper, load_event_rules
from sgam.ingest.pipeline import ingest, list_quarantine
from sgam.ingest.worker import Worker, WorkerOptions

ROOT = Path(__file__).resolve().parents[2]
SGAM = Path(sys.executable).parent / "sgam"
runner = CliRunner()


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def statuses(graph: MemoryGraph, tenant: str) -> Counter[str]:
    rows = graph.store.read("MATCH (e:Episode {tenant_id: $t}) RETURN e.status AS s", {"t": tenant})
    return Counter(r["s"] for r in rows)


def values(facts) -> list[str]:
    return [str(f.value) for f in facts]


@pytest.fixture
def clean(graph: MemoryGraph, tenant: str) -> Iterator[str]:
    yield tenant
    graph.delete_tenant(tenant)


# -- a conversation transcript with the agent's structured deltas --------------------------------

TRANSCRIPT = [
    {"speaker": "user:mira", "occurred_at": "2026-05-20T09:00:00Z",
     "text": "My passport deadline is 2026-07-15.",
     "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "2026-07-15"}]},
    {"speaker": "agent:assistant", "occurred_at": "2026-05-20T09:00:05Z", "text": "Noted, Mira."},
    {"speaker": "user:mira", "occurred_at": "2026-06-10T14:30:00Z",
     "text": "Correction: my passport deadline is now 2026-06-30.",
     "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "2026-06-30"}]},
    {"speaker": "user:mira", "occurred_at": "2026-06-10T14:31:00Z", "text": "I wear size 42 shoes.",
     "deltas": [{"subject": "mira", "attribute": "shoe_size", "value": 42}]},
]


def test_conversation_transcript_to_current_and_as_of(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    reports = []
    for line in TRANSCRIPT:
        episode = ep.message(tenant, line["text"], speaker=line["speaker"], occurred_at=line["occurred_at"],
                             session_id="s1")
        reports.append(graph.ingest(episode, deltas=line.get("deltas", ())))
    assert [r.queued for r in reports] == [False, True, False, False]  # no deltas: background
    assert [r.written for r in reports] == [1, 0, 1, 0]
    [refused] = reports[3].quarantined
    assert refused.stage == "write" and "shoe_size" in refused.reason

    [now] = graph.current(tenant, "mira", "passport_deadline")
    assert now.value == date(2026, 6, 30) and now.source_episode_id == reports[2].episode_id
    assert now.asserted_by == "user:mira"
    [then] = graph.as_of(tenant, "mira", "passport_deadline", valid_at=utc(2026, 6, 2))
    assert then.value == date(2026, 7, 15) and then.source_episode_id == reports[0].episode_id
    assert statuses(graph, tenant) == {"done": 3, "pending": 1}
    # The episodes are linked to what they are about, and keep their session and speaker.
    linked = graph.store.read(
        "MATCH (e:Episode {tenant_id: $t})-[:MENTIONS]->(m:Entity) RETURN e.id AS e, m.id AS m, "
        "e.session_id AS s, e.actor AS a", {"t": tenant})
    assert {(r["e"], r["m"], r["s"], r["a"]) for r in linked} == {
        (reports[0].episode_id, "mira", "s1", "user:mira"), (reports[2].episode_id, "mira", "s1", "user:mira")}


def test_remember_is_readable_by_the_next_call(graph: MemoryGraph, clean: str) -> None:
    tenant = clean

    class Remembering:
        """Stands in for a model: reads "remember that my home city is X"."""

        name = "fake-model"

        def extract(self, episode: Episode, current):
            city = episode.content.rsplit(" ", 1)[-1].rstrip(".")
            return [{"subject": "mira", "attribute": "home_city", "value": city}]

    said = ep.message(tenant, "Remember that my home city is Porto.", speaker="user:mira",
                      occurred_at=utc(2026, 1, 5))
    report = graph.ingest(said, extractors=[Remembering()])
    assert not report.queued
    assert values(graph.current(tenant, "mira", "home_city")) == ["Porto"]
    # An agent's direct delta is real time too, even for a tool result.
    tool = ep.tool_result(tenant, {"email": "Mira@Example.org"}, tool="crm", occurred_at=utc(2026, 1, 6))
    report = graph.ingest(tool, deltas=[{"subject": "mira", "subject_type": "Person", "attribute": "email",
                                         "value": "Mira@Example.org"}])
    assert report.written == 1 and not report.quarantined
    assert values(graph.current(tenant, "mira", "email")) == ["mira@example.org"]
    # Keyword fields work as for record_episode (the README's example).
    graph.ingest(tenant_id=tenant, speaker="user:mira", content="Remember that I like concise answers.",
                 occurred_at=utc(2026, 1, 6, 1),
                 deltas=[{"subject": "mira", "attribute": "response_style", "value": "concise"}])
    assert values(graph.current(tenant, "mira", "response_style")) == ["concise"]
    # The extractor is told what is stored for the known entities the episode names.
    seen = {}

    class Looking:
        name = "looking"

        def extract(self, episode: Episode, current):
            seen.update(current)
            return []

    graph.ingest(ep.message(tenant, "Remember: mira moved?", speaker="agent:a", occurred_at=utc(2026, 1, 7)),
                 extractors=[Looking()])
    assert seen[("mira", "home_city")] == "Porto" and seen[("mira", "email")] == "mira@example.org"


# -- a stream of business events -----------------------------------------------------------------

EVENTS = [
    {"type": "address_changed", "occurred_at": "2026-01-10T10:00:00Z", "customer_id": "cust-ada",
     "address": "1 Old Road"},
    {"type": "account_opened", "occurred_at": "2026-01-15T10:00:00Z", "customer_id": "cust-ada",
     "account_id": "acc-1001", "policy_id": "pol-basic"},
    {"type": "policy_renewed", "occurred_at": "2026-02-01T00:00:00Z", "policy_id": "pol-basic",
     "monthly_premium": 19.5, "plan": "Basic"},
    {"type": "address_changed", "occurred_at": "2026-03-05T10:00:00Z", "customer_id": "cust-ada",
     "address": "2 New Street", "effective_at": "2026-03-01T00:00:00Z"},
    {"type": "policy_upgraded", "occurred_at": "2026-04-01T00:00:00Z", "account_id": "acc-1001",
     "policy_id": "pol-plus", "plan": "Plus"},
    {"type": "ticket_closed", "occurred_at": "2026-04-02T08:00:00Z", "customer_id": "cust-ada",
     "closed_at": "2026-04-02T08:00:00Z"},
    {"type": "address_changed", "occurred_at": "2026-04-03T00:00:00Z", "customer_id": "cust-ada"},
    {"type": "parcel_lost", "occurred_at": "2026-04-04T00:00:00Z", "customer_id": "cust-ada"},
    {"occurred_at": "2026-04-05T00:00:00Z", "customer_id": "cust-ada"},
]


def write_jsonl(path: Path, rows: Sequence[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_business_events_through_cli_queue_and_worker(env, graph: MemoryGraph, clean: str,
                                                      tmp_path: Path) -> None:
    tenant = clean
    events = write_jsonl(tmp_path / "events.jsonl", EVENTS)
    queued = runner.invoke(app, ["ingest", str(events), "-t", tenant, "--kind", "event", "--json"])
    assert queued.exit_code == 0, queued.output
    assert all(row["queued"] for row in json.loads(queued.stdout)["episodes"])
    assert statuses(graph, tenant) == {"pending": len(EVENTS)}

    worked = runner.invoke(app, ["worker", "-t", tenant, "--until-idle", "--poll", "0.05", "--batch", "4"])
    assert worked.exit_code == 0, worked.output
    assert "done=9" in worked.stdout and "failed=0" in worked.stdout
    assert statuses(graph, tenant) == {"done": len(EVENTS)}

    assert values(graph.current(tenant, "cust-ada", "address")) == ["2 New Street"]
    assert values(graph.as_of(tenant, "cust-ada", "address", valid_at=utc(2026, 2, 1))) == ["1 Old Road"]
    # effective_at wins over the event's own time: the new address held from March 1st.
    assert values(graph.as_of(tenant, "cust-ada", "address", valid_at=utc(2026, 3, 2))) == ["2 New Street"]
    [path_now] = graph.traverse(tenant, "cust-ada", ["holds", "covered_by"])
    assert path_now.entities == ("cust-ada", "acc-1001", "pol-plus")
    [path_feb] = graph.traverse(tenant, "cust-ada", ["holds", "covered_by"], valid_at=utc(2026, 2, 1))
    assert path_feb.entities == ("cust-ada", "acc-1001", "pol-basic")
    assert values(graph.current(tenant, "pol-plus", "plan")) == ["Plus"]
    assert [f.value for f in graph.current(tenant, "pol-basic", "monthly_premium")] == [19.5]
    assert values(graph.current(tenant, "acc-1001", "account_status")) == ["open"]
    [contacted] = graph.current(tenant, "cust-ada", "last_contacted_at")
    assert contacted.value == utc(2026, 4, 2, 8)
    assert graph.doctor(tenant) == []

    listed = runner.invoke(app, ["quarantine", "list", "-t", tenant, "--json"])
    reasons = sorted(row["reason"] for row in json.loads(listed.stdout))
    assert len(reasons) == 3
    assert "missing field 'address'" in reasons[0]
    assert "has no 'type' field" in reasons[1]
    assert "no rule for event type 'parcel_lost'" in reasons[2]
    assert all(row["stage"] == "extract" and row["extractor"] == "events"
               for row in json.loads(listed.stdout))


def test_events_now_mode_and_rules_replay(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    mapper = EventMapper(load_event_rules(), schema=graph.schema)
    report = ingest(graph.store, ep.event(tenant, {"type": "contact_preference_changed", "customer_id": "cust-bo",
                                             "occurred_at": "2026-02-01T00:00:00Z"}), [mapper])
    [refused] = report.quarantined
    assert "missing field 'channel'" in refused.reason and refused.stage == "extract"
    # A schema/rules change: the channel now defaults to email. Replaying re-extracts and writes it.
    rules = load_event_rules()
    changed = rules.model_copy(update={"events": {
        **rules.events, "contact_preference_changed": rules.events["contact_preference_changed"].model_copy(
            update={"deltas": (rules.events["contact_preference_changed"].deltas[0].model_copy(
                update={"value": "email"}),)})}})
    replay = graph.replay_quarantine(tenant, [EventMapper(changed, schema=graph.schema)])
    assert replay.resolved == [refused.id] and not replay.failing
    assert values(graph.current(tenant, "cust-bo", "contact_preference")) == ["email"]
    assert graph.quarantine(tenant) == []
    [resolved] = graph.quarantine(tenant, status="resolved")
    assert resolved.id == refused.id


# -- the quarantine --------------------------------------------------------------------------------

def extended_schema() -> Schema:
    """The default schema plus a shoe size, under a name that changes whenever its definition does."""
    data = default_schema().model_dump(mode="json")
    data["attributes"]["shoe_size"] = {"value_type": "int", "subject_types": ["Person"]}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
    data["name"] = f"test-ingest-{digest}"
    return Schema.from_data(data)


def test_quarantine_and_replay_after_a_schema_change(env, graph: MemoryGraph, clean: str,
                                                     neo4j_connection) -> None:
    tenant = clean
    said = ep.message(tenant, "I wear size 42, and my email is mira@example.org.", speaker="user:mira",
                      occurred_at=utc(2026, 3, 1))
    report = graph.ingest(said, deltas=[
        {"subject": "mira", "attribute": "shoe_size", "value": 42},
        {"subject": "mira", "subject_type": "Person", "attribute": "email", "value": "mira@example.org"},
        {"subject": "mira", "attribute": "home_city", "value": "x", "valid_from": "2026-03-01T00:00:00"},
        {"subject": "mira", "attribute": "home_city", "value": "Porto"},
        {"subject": "mira", "attribute": "response_style", "value": "concise", "confidence": 7},
        {"subject": "mira", "attribute": "home_city", "value": "Lisbon", "op": "retract"},
        {"subject": "mira", "attribute": "home_city", "value": "Faro", "tenant_id": "someone-else"},
    ])
    # The retract of Lisbon, which never held, is kept as a change point (docs/temporal-semantics.md).
    assert report.written == 3
    by_reason = {e.reason: e for e in report.quarantined}
    assert len(by_reason) == 4
    assert any("unknown attribute 'shoe_size'" in r for r in by_reason)
    assert any("naive datetime" in r for r in by_reason)
    assert any("confidence" in r for r in by_reason)
    assert any("must stay in tenant" in r for r in by_reason)
    stored = list_quarantine(graph, tenant)
    assert {e.id for e in stored} == {e.id for e in report.quarantined}
    shoe = next(e for e in stored if "shoe_size" in e.reason)
    assert json.loads(shoe.candidate)["source_episode_id"] == report.episode_id
    assert (shoe.stage, shoe.extractor, shoe.status) == ("write", "structured", "open")

    # Processing the same episode again stores no second entry.
    graph.ingest(said, deltas=[{"subject": "mira", "attribute": "shoe_size", "value": 42}])
    assert len(list_quarantine(graph, tenant)) == 4

    # With the old schema nothing passes; with a schema that knows shoe_size, that one does.
    assert runner.invoke(app, ["quarantine", "replay", "-t", tenant]).exit_code == 0
    assert len(list_quarantine(graph, tenant)) == 4
    uri, auth = neo4j_connection
    with MemoryGraph.connect(uri, auth, schema=extended_schema()) as newer:
        replay = newer.replay_quarantine(tenant)
        assert replay.resolved == [shoe.id] and len(replay.failing) == 3
        assert [f.value for f in newer.current(tenant, "mira", "shoe_size")] == [42]
    [resolved] = graph.quarantine(tenant, status="resolved")
    assert resolved.id == shoe.id
    rows = graph.query("quarantine", tenant=tenant, status="resolved")
    assert rows[0]["attempts"] == 2 and rows[0]["resolved_at"] is not None


def test_extractor_failures_keep_the_episode(graph: MemoryGraph, clean: str) -> None:
    from sgam.ingest.extractors.sgr import InvalidModelOutput

    tenant = clean

    class Model:
        name = "model"

        def __init__(self, error: Exception) -> None:
            self.error = error

        def extract(self, episode: Episode, current):
            raise self.error

    said = ep.message(tenant, "My city is Porto.", speaker="user:mira", occurred_at=utc(2026, 3, 1))
    refusal = InvalidModelOutput("not grounded", raw='{"candidates": []}', problems=["quote not found"])
    report = graph.ingest(said, extractors=[Model(refusal)], remember=True)
    [entry] = report.quarantined
    assert (entry.stage, entry.extractor, entry.error) == ("extract", "model", "InvalidModelOutput")
    assert "quote not found" in entry.reason
    assert json.loads(entry.candidate) == {"raw": '{"candidates": []}', "problems": ["quote not found"]}
    # A transient failure in real time queues the episode for the worker, and the report says so.
    outage = ExtractionError("endpoint timed out")
    outage.transient = True
    later = ep.message(tenant, "My city is Faro.", speaker="user:mira", occurred_at=utc(2026, 3, 2))
    deferred = graph.ingest(later, extractors=[Model(outage)], remember=True)
    assert deferred.queued and deferred.deferred == "ExtractionError: endpoint timed out"
    assert statuses(graph, tenant) == {"done": 1, "pending": 1}
    # A terminal failure that is not an extractor's is raised; the raw episode is kept all the same.
    third = ep.message(tenant, "My city is Braga.", speaker="user:mira", occurred_at=utc(2026, 3, 3))
    with pytest.raises(RuntimeError, match="bug"):
        graph.ingest(third, extractors=[Model(RuntimeError("extractor bug"))], remember=True)
    assert statuses(graph, tenant) == {"done": 1, "pending": 1, "recorded": 1}


def test_forget_takes_the_subjects_quarantine_entries(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    graph.ingest(ep.message(tenant, "Mira lives in Porto; size 42.", speaker="user:mira",
                            occurred_at=utc(2026, 3, 1)),
                 deltas=[{"subject": "mira", "attribute": "home_city", "value": "Porto"},
                         {"subject": "mira", "attribute": "shoe_size", "value": 42}])
    assert len(graph.quarantine(tenant)) == 1
    graph.forget_subject(tenant, "mira")
    assert graph.quarantine(tenant, status=None) == []
    assert graph.residue(tenant, "mira") == []


# -- deduplication and bad input -------------------------------------------------------------------

def test_dedupe_by_content_hash(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    first = graph.record_episode(tenant_id=tenant, id="crm-1", content="Ada moved.", speaker="tool:crm",
                                 occurred_at=utc(2026, 1, 1))
    again = graph.record_episode(tenant_id=tenant, id="crm-1-retry", content="Ada moved.", actor="tool:crm",
                                 occurred_at=utc(2026, 1, 1))
    assert first.id == "crm-1" and again.id == "crm-1"  # the duplicate comes back as the stored one
    derived = graph.record_episode(tenant_id=tenant, content="Ada moved.", actor="tool:crm",
                                   occurred_at=utc(2026, 1, 1))
    assert derived.id == "crm-1"
    other_time = graph.record_episode(tenant_id=tenant, content="Ada moved.", actor="tool:crm",
                                      occurred_at=utc(2026, 1, 2))
    assert other_time.id.startswith("ep-")
    with pytest.raises(Conflict, match="already recorded"):
        graph.record_episode(tenant_id=tenant, id="crm-1", content="Ada moved again.", actor="tool:crm",
                             occurred_at=utc(2026, 1, 1))
    assert graph.record_episodes([first, Episode(**{**first.model_dump(), "id": "crm-x"})]) == {
        "crm-1": "existing", "crm-x": "duplicate"}
    # Deltas given with a duplicate are written against the stored episode.
    report = graph.ingest(Episode(**{**first.model_dump(), "id": "crm-2"}),
                          deltas=[{"subject": "cust-ada", "attribute": "address", "value": "2 New Street"}])
    assert report.recorded == "duplicate" and report.episode_id == "crm-1"
    [fact] = graph.current(tenant, "cust-ada", "address")
    assert fact.source_episode_id == "crm-1"
    count = graph.store.read("MATCH (e:Episode {tenant_id: $t}) RETURN count(e) AS n", {"t": tenant})
    assert count[0]["n"] == 2
    # Another tenant may hold the same content.
    elsewhere = graph.record_episode(tenant_id=tenant + "-b", id="b-1", content="Ada moved.",
                                     actor="tool:crm", occurred_at=utc(2026, 1, 1))
    assert elsewhere.id == "b-1"
    graph.delete_tenant(tenant + "-b")


def test_concurrent_duplicates_store_one_episode(neo4j_connection, clean: str) -> None:
    tenant = clean
    uri, auth = neo4j_connection
    ids: list[str] = []
    barrier = threading.Barrier(6)

    def deliver(n: int) -> None:
        with MemoryGraph.connect(uri, auth, bootstrap=False) as g:
            barrier.wait()
            ids.append(g.record_episode(tenant_id=tenant, id=f"hook-{n}", content="webhook payload",
                                        actor="system:hook", occurred_at=utc(2026, 1, 1)).id)

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and len(ids) == 6
    with MemoryGraph.connect(uri, auth, bootstrap=False) as g:
        rows = g.store.read("MATCH (e:Episode {tenant_id: $t}) RETURN count(e) AS n", {"t": tenant})
        assert rows[0]["n"] == 1
        g.delete_tenant(tenant)


def test_size_limit_and_empty_episodes(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    assert MAX_EPISODE_BYTES == 100_000
    at_limit = graph.record_episode(tenant_id=tenant, content="é" * (MAX_EPISODE_BYTES // 2),
                                    occurred_at=utc(2026, 1, 1))
    assert at_limit.id.startswith("ep-")
    with pytest.raises(InvalidDelta, match="100001 bytes of UTF-8, over the 100000-byte limit"):
        graph.record_episode(tenant_id=tenant, content="x" * (MAX_EPISODE_BYTES + 1), occurred_at=utc(2026, 1, 1))
    with pytest.raises(InvalidDelta, match="content is empty"):
        graph.ingest(ep.message(tenant, "   \n", speaker="user:mira", occurred_at=utc(2026, 1, 1)))
    with pytest.raises(InvalidDelta, match="naive"):
        ep.message(tenant, "hi", speaker="user:mira", occurred_at="2026-01-01T00:00:00")
    with pytest.raises(InvalidDelta, match="no occurrence time"):
        ep.event(tenant, {"type": "ticket_closed", "customer_id": "cust-ada"})
    assert statuses(graph, tenant) == {"recorded": 1}


def test_cli_rejects_bad_files_and_keeps_the_good(env, graph: MemoryGraph, clean: str, tmp_path: Path) -> None:
    tenant = clean
    good = tmp_path / "policy.txt"
    good.write_text("Ada's policy covers water damage.", encoding="utf-8")
    latin = tmp_path / "latin.txt"
    address = "Adresse: Rua São Bento"
    latin.write_bytes(address.encode("latin-1"))
    big = tmp_path / "big.txt"
    big.write_text("x" * (MAX_EPISODE_BYTES + 1), encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    result = runner.invoke(app, ["ingest", str(good), str(latin), str(big), str(empty), "-t", tenant,
                                 "--kind", "document", "--occurred-at", "2026-02-01", "--json"])
    assert result.exit_code == 2, result.output
    report = json.loads(result.stdout)
    errors = {Path(e["source"]).name: e["message"] for e in report["errors"]}
    assert f"not UTF-8 text: byte 0xe3 at offset {address.index('ã')}" in errors["latin.txt"]
    assert "100000-byte limit" in errors["big.txt"] and "empty" in errors["empty.txt"]
    assert [r["queued"] for r in report["episodes"]] == [True]

    lines = tmp_path / "chat.jsonl"
    lines.write_bytes(b"\n".join([
        json.dumps({"speaker": "user:mira", "text": "hello", "occurred_at": "2026-02-01T00:00:00Z"}).encode(),
        b'{"speaker": "user:mira", "text": "caf\xe9", "occurred_at": "2026-02-01T00:00:01Z"}',
        b"{not json",
        json.dumps({"speaker": "user:mira", "text": "x", "occurred_at": "2026-02-01T00:00:02"}).encode(),
        json.dumps({"speaker": "user:mira", "text": "y", "when": "2026-02-01T00:00:02Z"}).encode(),
        json.dumps({"speaker": "user:mira", "text": "Remember that I live in Porto.",
                    "occurred_at": "2026-02-01T00:00:03Z",
                    "deltas": [{"subject": "mira", "attribute": "home_city", "value": "Porto"}]}).encode(),
    ]))
    result = runner.invoke(app, ["ingest", str(lines), "-t", tenant, "--json"])
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    errors = {e["source"].rsplit(":", 1)[1]: e["message"] for e in report["errors"]}
    assert set(errors) == {"2", "3", "4", "5"}
    assert "not UTF-8" in errors["2"] and "JSON" in errors["3"] and "naive" in errors["4"]
    assert "unknown field when" in errors["5"]
    assert [r["written"] if not r["queued"] else "queued" for r in report["episodes"]] == ["queued", 1]
    assert values(graph.current(tenant, "mira", "home_city")) == ["Porto"]


# -- the worker: retries, dead letters, crashes, concurrency ----------------------------------------

class Flaky:
    """Fails transiently on the first call for each episode, then maps events."""

    name = "events"

    def __init__(self, schema: Schema) -> None:
        self.inner = EventMapper(schema=schema)
        self.seen: Counter[str] = Counter()

    def extract(self, episode: Episode, current):
        self.seen[episode.id] += 1
        if "boom" in episode.content:
            raise RuntimeError("extractor bug")
        if "down" in episode.content:
            raise StoreUnavailable("model endpoint unreachable")
        if self.seen[episode.id] == 1:
            error = ExtractionError("rate limited")
            error.transient = True
            raise error
        return self.inner.extract(episode, current)


def queue_events(graph: MemoryGraph, tenant: str, rows: Sequence[dict]) -> list[str]:
    return [graph.ingest(ep.event(tenant, row)).episode_id for row in rows]


def test_worker_retries_transient_errors_and_dead_letters_terminal_ones(env, graph: MemoryGraph,
                                                                        clean: str) -> None:
    tenant = clean
    ok = queue_events(graph, tenant, [
        {"type": "address_changed", "occurred_at": f"2026-01-0{i}T00:00:00Z", "customer_id": f"c-{i}",
         "address": f"{i} Road"} for i in range(1, 4)])
    [boom, down] = queue_events(graph, tenant, [
        {"type": "boom", "occurred_at": "2026-01-05T00:00:00Z"},
        {"type": "down", "occurred_at": "2026-01-06T00:00:00Z"}])
    flaky = Flaky(graph.schema)
    options = WorkerOptions(batch_size=2, tenant=tenant, backoff=timedelta(0), max_attempts=3, poll=0.01)
    stats = Worker(graph.store, [flaky], options).run(until_idle=True)
    assert stats.done == 3 and stats.failed == 2
    assert all(flaky.seen[e] == 2 for e in ok)  # one transient failure, then done
    assert flaky.seen[boom] == 1 and flaky.seen[down] == 3  # terminal at once; transient 3 times
    assert statuses(graph, tenant) == {"done": 3, "failed": 2}
    queue = {r["status"]: r for r in graph.query("queue", tenant=tenant)}
    errors = " | ".join(queue["failed"]["errors"])
    assert "RuntimeError: extractor bug" in errors and "gave up after 3 attempts" in errors
    assert values(graph.current(tenant, "c-2", "address")) == ["2 Road"]

    assert "requeued 2" in runner.invoke(app, ["queue", "retry", "-t", tenant]).stdout
    assert statuses(graph, tenant) == {"done": 3, "pending": 2}


def test_backoff_delays_the_retry(graph: MemoryGraph, clean: str) -> None:
    tenant = clean
    [episode_id] = queue_events(graph, tenant, [
        {"type": "address_changed", "occurred_at": "2026-01-01T00:00:00Z", "customer_id": "c-1",
         "address": "1 Road"}])
    options = WorkerOptions(tenant=tenant, backoff=timedelta(hours=1), max_backoff=timedelta(hours=2), poll=0.01)
    worker = Worker(graph.store, [Flaky(graph.schema)], options)
    assert worker.run_once() == 1 and worker.stats.retried == 1
    assert worker.run_once() == 0  # not due for an hour
    rows = graph.store.read("MATCH (e:Episode {tenant_id: $t, id: $i}) RETURN e.status AS s, "
                            "e.not_before > datetime() + duration('PT50M') AS later, e.last_error AS err",
                            {"t": tenant, "i": episode_id})
    assert rows == [{"s": "pending", "later": True, "err": "ExtractionError: rate limited"}]


def worker_process(neo4j_connection, tenant: str, log: Path, *args: str, delay: float = 0.0) -> subprocess.Popen:
    uri, (user, password) = neo4j_connection
    environment = {**os.environ, "NEO4J_URI": uri, "NEO4J_USER": user, "NEO4J_PASSWORD": password,
                   "SGAM_TEST_LOG": str(log), "SGAM_TEST_DELAY": str(delay),
                   "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [str(SGAM), "worker", "-t", tenant, "--poll", "0.05", "-x",
         "tests.integration.ingest_helpers:LoggedEvents", *args],
        cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def logged(log: Path) -> list[tuple[str, str]]:
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]


def stream(tenant: str, n: int) -> list[dict]:
    """n address changes over n // 3 customers, plus one event with a missing field per 10."""
    rows = []
    for i in range(n):
        row = {"type": "address_changed", "occurred_at": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
               "customer_id": f"cust-{i % (n // 3)}", "address": f"{i} Main Street"}
        if i % 10 == 9:
            del row["address"]
        rows.append(row)
    return rows


def check_stream(graph: MemoryGraph, tenant: str, rows: list[dict]) -> None:
    """Every event took effect exactly once: one version per address, one quarantine entry per bad one."""
    expected: dict[str, list[str]] = {}
    for row in rows:
        if "address" in row:
            expected.setdefault(row["customer_id"], []).append(row["address"])
    for customer, addresses in expected.items():
        history = graph.history(tenant, customer, "address")
        believed = [f for f in history if f.expired_at is None]
        assert sorted(values(believed)) == sorted(addresses), customer
        assert values(graph.current(tenant, customer, "address")) == [addresses[-1]]
        assert all(f.support_count == 1 for f in believed)
    assert len(graph.quarantine(tenant)) == sum(1 for r in rows if "address" not in r)
    assert statuses(graph, tenant) == {"done": len(rows)}
    assert graph.doctor(tenant) == []


def test_killed_worker_loses_nothing_and_duplicates_nothing(graph: MemoryGraph, clean: str, tmp_path: Path,
                                                            neo4j_connection) -> None:
    tenant = clean
    rows = stream(tenant, 30)
    queue_events(graph, tenant, rows)
    log = tmp_path / "worker.log"
    first = worker_process(neo4j_connection, tenant, log, "--batch", "5", "--lease", "2", delay=0.15)
    try:
        deadline = time.monotonic() + 20
        while len(logged(log)) < 7 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.02)
        assert len(logged(log)) >= 7, "the first worker processed too little before the deadline"
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    claimed = statuses(graph, tenant)["claimed"]
    assert claimed > 0  # killed in the middle of a batch, its claims still held
    assert statuses(graph, tenant)["done"] < len(rows)

    second = worker_process(neo4j_connection, tenant, log, "--batch", "5", "--until-idle")
    out, errors = second.communicate(timeout=25)
    assert second.returncode == 0, errors
    check_stream(graph, tenant, rows)
    handled = Counter(episode for _, episode in logged(log))
    assert set(handled) == set(graph.store.read(
        "MATCH (e:Episode {tenant_id: $t}) RETURN collect(e.id) AS ids", {"t": tenant})[0]["ids"])
    attempts = graph.store.read("MATCH (e:Episode {tenant_id: $t}) RETURN max(e.attempts) AS n", {"t": tenant})
    assert attempts[0]["n"] == 2  # the killed worker's batch was claimed a second time


def test_two_workers_share_the_queue_without_double_processing(graph: MemoryGraph, clean: str,
                                                               tmp_path: Path, neo4j_connection) -> None:
    tenant = clean
    rows = stream(tenant, 60)
    queue_events(graph, tenant, rows)
    log = tmp_path / "workers.log"
    workers = [worker_process(neo4j_connection, tenant, log, "--batch", "3", "--until-idle", delay=0.05)
               for _ in range(2)]
    for worker in workers:
        _, errors = worker.communicate(timeout=25)
        assert worker.returncode == 0, errors
    check_stream(graph, tenant, rows)
    handled = logged(log)
    assert len(handled) == len(rows)  # each episode extracted once, by one of them
    assert len({episode for _, episode in handled}) == len(rows)
    # One tenant is served by one worker at a time, in occurrence order (several tenants run side by
    # side: tests/integration/test_ingest_e2e.py).
    occurred = {r["id"]: r["at"] for r in graph.store.read(
        "MATCH (e:Episode {tenant_id: $t}) RETURN e.id AS id, e.occurred_at AS at", {"t": tenant})}
    seen = [occurred[episode] for _, episode in handled]
    assert seen == sorted(seen)


def test_strict_ingest_raises_what_write_raises_and_writes_nothing(graph: MemoryGraph,
                                                                   clean: str) -> None:
    tenant = clean
    said = ep.message(tenant, "My passport deadline is 2026-07-15 and I wear size 42 shoes.",
                      speaker="user:mira", occurred_at=utc(2026, 5, 20, 9))
    good = {"subject": "mira", "attribute": "passport_deadline", "value": "2026-07-15"}
    unknown = {"subject": "mira", "attribute": "shoe_size", "value": 42}
    recorded = graph.record_episode(said)
    # What write() raises for the attribute the schema does not know ...
    with pytest.raises(SchemaViolation) as by_write:
        graph.write(tenant_id=tenant, source_episode_id=recorded.id, subject_type="Person",
                    valid_from=said.occurred_at, **unknown)
    # ... a strict ingest raises too, after the valid delta in the same call: nothing is written.
    with pytest.raises(type(by_write.value)) as by_ingest:
        graph.ingest(said, deltas=[good, unknown], strict=True)
    assert isinstance(by_ingest.value, type(by_write.value))
    assert "shoe_size" in str(by_ingest.value)
    with pytest.raises(UnknownSubject):  # nothing of mira was written
        graph.current(tenant, "mira")
    assert list_quarantine(graph, tenant, status=None, principal="*") == []
    assert statuses(graph, tenant) == {"recorded": 1}  # the raw episode is kept
    # A delta that is not valid at all is InvalidDelta, as for write(); still nothing written.
    with pytest.raises(InvalidDelta, match="value"):
        graph.ingest(said, deltas=[good, {"subject": "mira", "attribute": "passport_deadline"}],
                     strict=True)
    with pytest.raises(InvalidDelta, match="tenant"):
        graph.ingest(said, deltas=[{**good, "tenant_id": "elsewhere"}], strict=True)
    with pytest.raises(UnknownSubject):
        graph.current(tenant, "mira")
    assert list_quarantine(graph, tenant, status=None, principal="*") == []
    # Corrected, the same episode (found by its content) is written and done.
    report = graph.ingest(said, deltas=[good], strict=True)
    assert report.episode_id == recorded.id and report.written == 1 and not report.quarantined
    assert values(graph.current(tenant, "mira", "passport_deadline")) == ["2026-07-15"]
    assert statuses(graph, tenant) == {"done": 1}
    # Without strict the same refusal is quarantined and the call returns.
    other = ep.message(tenant, "I wear size 42 shoes.", speaker="user:mira",
                       occurred_at=utc(2026, 5, 21))
    [entry] = graph.ingest(other, deltas=[unknown]).quarantined
    assert entry.stage == "write" and entry.error == type(by_write.value).__name__

"""The graphiti-core bridge through the real pipeline: its facts land in SGAM's history through the
same validation and reconciliation as every extractor; what it cannot map is quarantined."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from sgam import MemoryGraph
from sgam.graph.models import Episode
from sgam.ingest.graphiti.extractor import GraphitiExtractor, TransientGraphitiError
from sgam.ingest.pipeline import ingest, load_episode
from tests.graphiti_scripted import ScriptedLLM, fixture

WHEN = datetime(2026, 5, 1, tzinfo=timezone.utc)


def episode(tenant: str, name: str, eid: str = "e1") -> tuple[Episode, GraphitiExtractor]:
    script = fixture(name)
    ep = Episode(tenant_id=tenant, id=eid, content=script["episode"], occurred_at=WHEN, actor="user:mira")
    return ep, GraphitiExtractor(ScriptedLLM(script))


def test_extracted_facts_are_reconciled_by_sgam(graph: MemoryGraph, tenant: str) -> None:
    ep, extractor = episode(tenant, "good")
    report = ingest(graph.store, ep, [extractor])
    assert report.candidates == 5
    assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Lisbon"]
    porto = graph.as_of(tenant, "mira", "home_city", valid_at=datetime(2026, 2, 1, tzinfo=timezone.utc))
    assert [f.value for f in porto] == ["Porto"]
    [deadline] = graph.current(tenant, "mira", "passport_deadline")
    assert deadline.value == date(2026, 7, 15) and deadline.valid_from == WHEN
    assert deadline.source_episode_id == "e1" and deadline.asserted_by == "user:mira"
    [entry] = graph.quarantine(tenant)
    assert entry.extractor == "graphiti" and entry.stage == "validate"
    assert "LIKES_CITY" in entry.reason and "Mira likes Lisbon" in entry.candidate
    again = ingest(graph.store, ep, [extractor])  # a replay writes nothing and stores no second entry
    assert again.written == 0 and len(graph.quarantine(tenant)) == 1
    assert graph.replay_quarantine(tenant, []).failing[0]["reason"] == entry.reason
    assert graph.doctor(tenant) == []


@pytest.mark.parametrize("name", ["malformed", "not_an_object", "refusal"])
def test_unusable_output_is_quarantined_and_the_episode_kept(graph: MemoryGraph, tenant: str, name: str) -> None:
    ep, extractor = episode(tenant, name)
    report = ingest(graph.store, ep, [extractor])
    assert report.written == 0
    [entry] = graph.quarantine(tenant)
    assert entry.stage == "extract" and entry.error == "GraphitiOutputError" and entry.candidate != "null"
    assert load_episode(graph.store, tenant, "e1") == ep  # the raw episode is kept


def test_write_refusals_are_quarantined(graph: MemoryGraph, tenant: str) -> None:
    ep, extractor = episode(tenant, "unmappable")
    report = ingest(graph.store, ep, [extractor])
    assert report.written == 0 and len(report.quarantined) == 2
    assert {e.error for e in graph.quarantine(tenant)} == {"UnmappableCandidate"}


def test_transient_failure_defers_the_episode_to_the_worker(graph: MemoryGraph, tenant: str) -> None:
    ep, extractor = episode(tenant, "dropped_connection")
    with pytest.raises(TransientGraphitiError):
        extractor.extract(ep, {})  # the bridge itself reports a dropped connection as transient
    report = ingest(graph.store, ep, [extractor])  # a real-time ingest keeps the episode and queues it
    assert report.queued and "TransientGraphitiError" in (report.deferred or "")
    assert graph.quarantine(tenant) == []
    assert load_episode(graph.store, tenant, "e1") == ep

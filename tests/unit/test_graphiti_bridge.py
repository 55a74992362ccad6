"""Contract tests of the graphiti-core bridge with a scripted graphiti LLM client (no network)."""

from __future__ import annotations

import os
from datetime import datetime, timezone

import pytest

from sgam.graph.models import Episode
from sgam.graph.schema import default_schema
from sgam.ingest.extract import REFUSED_KEY
from sgam.ingest.graphiti.extractor import (
    GraphitiExtractor,
    GraphitiOutputError,
    TransientGraphitiError,
    edge_types,
    entity_types,
    slug_id,
)
from tests.graphiti_scripted import ScriptedLLM, fixture

WHEN = datetime(2026, 5, 1, tzinfo=timezone.utc)


def run(name: str) -> tuple[list[dict], ScriptedLLM]:
    script = fixture(name)
    llm = ScriptedLLM(script)
    episode = Episode(tenant_id="t1", id="e1", content=script["episode"], occurred_at=WHEN, actor="user:mira")
    return list(GraphitiExtractor(llm).extract(episode, {})), llm


def test_types_are_generated_from_the_schema() -> None:
    schema = default_schema()
    assert set(entity_types(schema)) == set(schema.entity_types)
    types, signatures = edge_types(schema)
    assert set(types) == {schema.rel_type(a) for a in schema.attributes}
    assert signatures[("Customer", "Account")] == ["HOLDS"]
    assert "PASSPORT_DEADLINE" in signatures[("Person", "Entity")]
    assert "passport" in (types["PASSPORT_DEADLINE"].__doc__ or "")


def test_import_shim_turns_telemetry_off() -> None:
    assert os.environ["GRAPHITI_TELEMETRY_ENABLED"] == "false"


@pytest.mark.parametrize(("name", "expected"), [
    ("Mira Okafor", "mira-okafor"), ("  Zoë  ", "zoe"), ("C-17", "c-17"), ("a@b.org", "a@b.org"),
])
def test_slug_id(name: str, expected: str) -> None:
    assert slug_id(name) == expected


def test_slug_id_refuses_names_without_id_characters() -> None:
    with pytest.raises(ValueError, match="'!!!'"):
        slug_id("!!!")


def test_good_output_maps_to_candidates_and_the_prompt_carries_the_schema() -> None:
    candidates, llm = run("good")
    assert "PASSPORT_DEADLINE" in llm.prompts["ExtractedEdges"]
    assert "Person" in llm.prompts["ExtractedEntities"]
    plain = [c for c in candidates if REFUSED_KEY not in c]
    assert [(c["attribute"], c["value"], c.get("op", "assert")) for c in plain] == [
        ("passport_deadline", "2026-07-15", "assert"),
        ("home_city", "Porto", "assert"),
        ("home_city", "Porto", "retract"),
        ("home_city", "Lisbon", "assert"),
    ]
    assert all(c["subject"] == "mira" and c["subject_type"] == "Person" for c in plain)
    assert plain[2]["valid_from"] == datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert "valid_from" not in plain[0]  # no valid_at: the episode's time is implied
    assert plain[3]["evidence"] == ["Mira moved to Lisbon"]
    [refused] = [c for c in candidates if REFUSED_KEY in c]
    assert "'LIKES_CITY' is not a schema attribute" in refused[REFUSED_KEY]
    assert refused["graphiti"]["fact"] == "Mira likes Lisbon"


def test_unmappable_edges_are_refused_with_the_reason() -> None:
    candidates, _ = run("unmappable")
    reasons = [c[REFUSED_KEY] for c in candidates]
    assert len(reasons) == 2
    assert "invalid_at 2026-02-01T00:00:00+00:00 is not after valid_at" in reasons[0]
    assert "'!!!'" in reasons[1]


@pytest.mark.parametrize("name", ["malformed", "not_an_object"])
def test_malformed_output_is_a_terminal_error_with_the_raw_answer(name: str) -> None:
    with pytest.raises(GraphitiOutputError) as caught:
        run(name)
    assert not caught.value.transient
    assert caught.value.raw


def test_refusal_is_terminal_and_a_dropped_connection_transient() -> None:
    with pytest.raises(GraphitiOutputError, match="RefusalError: I cannot help"):
        run("refusal")
    with pytest.raises(TransientGraphitiError, match="ConnectError") as caught:
        run("dropped_connection")
    assert caught.value.transient


def test_from_settings_uses_the_configured_endpoint_without_calling_it() -> None:
    from sgam.graph.errors import ExtractionError
    from sgam.settings import Settings

    built = GraphitiExtractor.from_settings(Settings(llm_base_url="http://127.0.0.1:9/v1", llm_model="tiny"))
    assert built.llm_client.model == "tiny" and built.name == "graphiti"
    assert "127.0.0.1:9" in str(built.llm_client.client.base_url)
    with pytest.raises(ExtractionError, match="SGAM_LLM_BASE_URL"):
        GraphitiExtractor.from_settings(Settings(llm_base_url=None, llm_model=None))

"""The SGR reasoning schema: its strict JSON Schema, and the checks a grammar cannot do."""

from __future__ import annotations

import copy
import json
from datetime import date, datetime, timezone
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError

from sgam.graph.models import Episode
from sgam.graph.schema import default_schema
from sgam.ingest.extractors.sgr import (
    DECISIONS,
    CandidateReasoning,
    DeltaProposal,
    ExtractionResult,
    InvalidModelOutput,
    evidence_problems,
    parse_result,
    response_format,
    response_schema,
    to_raw_candidates,
)

SCHEMA = default_schema()
EPISODE = Episode(
    tenant_id="demo",
    id="e2",
    occurred_at=datetime(2026, 6, 2, 9, 30, tzinfo=timezone.utc),
    actor="user:mira",
    content="Quick update: my passport deadline moved from July 15 to June 30, 2026,\nthe consulate "
    "brought it forward. I still live in Porto. And please keep your answers concise.",
)
CURRENT = {("mira", "passport_deadline"): date(2026, 7, 15), ("mira", "home_city"): "Porto"}


def candidate(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "evidence": ["my passport deadline moved from July 15 to June 30, 2026"],
        "subject": "mira",
        "subject_type": "Person",
        "attribute": "passport_deadline",
        "compared_with": "2026-07-15",
        "decision": "change",
        "delta": {"value": "2026-06-30", "op": "assert", "valid_from": None},
    }
    base.update(overrides)
    return base


def sample() -> dict[str, Any]:
    return {
        "candidates": [
            candidate(),
            candidate(
                evidence=["I still live in Porto"], subject_type=None, attribute="home_city",
                compared_with="Porto", decision="same",
                delta={"value": "Porto", "op": None, "valid_from": None},
            ),
            candidate(
                evidence=["please keep your answers concise"], subject_type=None,
                attribute="response_style", compared_with=None, decision="new",
                delta={"value": "concise", "op": "assert", "valid_from": "2026-06-02"},
            ),
        ]
    }


def _walk(node: Any, path: str = "$") -> Any:
    if isinstance(node, dict):
        yield path, node
        for key, child in node.items():
            yield from _walk(child, f"{path}.{key}")
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield from _walk(child, f"{path}[{i}]")


def test_response_schema_is_a_valid_strict_json_schema() -> None:
    schema = response_schema(SCHEMA)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"  # strict mode: the root is an object, not anyOf
    objects = [(p, n) for p, n in _walk(schema) if n.get("type") == "object"]
    assert len(objects) == 3
    for path, node in objects:
        assert node["additionalProperties"] is False, path
        assert node["required"] == list(node["properties"]), path  # all required, in order
    for path, node in _walk(schema):
        assert "$ref" not in node and "default" not in node and "minLength" not in node, path
    json.dumps(schema)  # plain JSON


def test_property_order_is_the_reasoning_order() -> None:
    item = response_schema(SCHEMA)["properties"]["candidates"]["items"]
    assert list(item["properties"]) == list(CandidateReasoning.model_fields) == [
        "evidence", "subject", "subject_type", "attribute", "compared_with", "decision", "delta",
    ]
    assert list(item["properties"]["delta"]["properties"]) == list(DeltaProposal.model_fields)


def test_enums_come_from_the_schema() -> None:
    item = response_schema(SCHEMA)["properties"]["candidates"]["items"]["properties"]
    assert item["attribute"]["enum"] == sorted(SCHEMA.attributes)
    assert item["subject_type"]["anyOf"][0]["enum"] == list(SCHEMA.entity_types)
    assert item["decision"]["enum"] == list(DECISIONS)
    fmt = response_format(SCHEMA)
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True


def test_samples_validate_against_json_schema_and_pydantic_alike() -> None:
    validator = jsonschema.Draft202012Validator(response_schema(SCHEMA))
    good = sample()
    validator.validate(good)
    ExtractionResult.model_validate(good)
    validator.validate({"candidates": []})

    def bad(mutate: Any) -> dict[str, Any]:
        data = copy.deepcopy(good)
        mutate(data["candidates"][0])
        return data

    rejected = [
        bad(lambda c: c.update(attribute="passport_expiry")),
        bad(lambda c: c.update(decision="updated")),
        bad(lambda c: c.update(subject_type="Robot")),
        bad(lambda c: c.update(extra="x")),
        bad(lambda c: c.pop("compared_with")),
        bad(lambda c: c.update(evidence=[])),
        bad(lambda c: c.update(subject="Mira Sousa")),
        bad(lambda c: c["delta"].update(op="retract")),
        bad(lambda c: c["delta"].pop("valid_from")),
        {"candidates": [], "note": "extra"},
    ]
    for data in rejected:
        assert not validator.is_valid(data), data
        # Pydantic catches the shape errors; names outside the schema are parse_result's job.
        c = data["candidates"][0] if data["candidates"] else None
        if c is None or c.get("attribute") != "passport_expiry" and c.get("subject_type") != "Robot":
            with pytest.raises(ValidationError):
                ExtractionResult.model_validate(data)


def test_op_must_follow_the_decision() -> None:
    for decision, op in [("correction", "assert"), ("change", "correct"), ("new", None),
                         ("same", "assert"), ("not_memorable", "assert")]:
        data = candidate(decision=decision, delta={"value": "2026-06-30", "op": op, "valid_from": None})
        with pytest.raises(ValidationError, match="needs delta.op"):
            CandidateReasoning.model_validate(data)
    with pytest.raises(ValidationError, match="must not be null"):
        CandidateReasoning.model_validate(candidate(delta={"value": None, "op": "assert", "valid_from": None}))
    with pytest.raises(ValidationError, match="no timezone"):
        CandidateReasoning.model_validate(
            candidate(delta={"value": "2026-06-30", "op": "assert", "valid_from": "2026-06-01T10:00:00"})
        )


def test_evidence_must_be_quoted_from_the_episode() -> None:
    real = CandidateReasoning.model_validate(candidate())
    assert evidence_problems(real, EPISODE) == []
    # a quote across the line break, written with a space, is still verbatim
    across = CandidateReasoning.model_validate(candidate(evidence=["June 30, 2026, the consulate brought it"]))
    assert evidence_problems(across, EPISODE) == []
    invented = CandidateReasoning.model_validate(
        candidate(evidence=["my passport deadline moved from July 15 to June 30, 2026",
                            "my passport expires at the end of June"])
    )
    problems = evidence_problems(invented, EPISODE)
    assert len(problems) == 1 and "my passport expires at the end of June" in problems[0]
    paraphrase = CandidateReasoning.model_validate(candidate(evidence=["the deadline moved to June 30"]))
    assert evidence_problems(paraphrase, EPISODE)


def _parse(data: dict[str, Any]) -> ExtractionResult:
    return parse_result(json.dumps(data), schema=SCHEMA, episode=EPISODE, current=CURRENT)


def test_parse_result_accepts_grounded_reasoning_and_compares_like_the_store() -> None:
    result = _parse(sample())
    assert [c.decision for c in result.candidates] == ["change", "same", "new"]


def test_parse_result_rejects_invented_quotes_with_the_raw_text() -> None:
    data = sample()
    data["candidates"][0]["evidence"] = ["my passport expires at the end of June"]
    text = json.dumps(data)
    with pytest.raises(InvalidModelOutput) as caught:
        parse_result(text, schema=SCHEMA, episode=EPISODE, current=CURRENT)
    assert caught.value.raw == text and caught.value.transient is False
    assert caught.value.problems[0].startswith("candidates[0]: evidence")


def test_parse_result_rejects_a_comparison_with_a_value_not_stored() -> None:
    data = sample()
    data["candidates"][0]["compared_with"] = "2026-08-01"
    with pytest.raises(InvalidModelOutput, match="is not the stored value \"2026-07-15\""):
        _parse(data)
    data["candidates"][0]["compared_with"] = None
    with pytest.raises(InvalidModelOutput, match="compared_with null"):
        _parse(data)


def test_parse_result_rejects_unknown_names_and_bad_json() -> None:
    data = sample()
    data["candidates"][1]["attribute"] = "shoe_size"
    with pytest.raises(InvalidModelOutput, match="unknown attribute 'shoe_size'"):
        _parse(data)
    with pytest.raises(InvalidModelOutput, match="not valid JSON") as caught:
        parse_result('{"candidates": [', schema=SCHEMA, episode=EPISODE, current=CURRENT)
    assert caught.value.raw == '{"candidates": ['


def test_to_raw_candidates_skips_non_writes_and_keeps_evidence() -> None:
    data = sample()
    data["candidates"].append(candidate(
        evidence=["Quick update"], attribute="home_city", subject_type=None, compared_with="Porto",
        decision="not_memorable", delta={"value": None, "op": None, "valid_from": None},
    ))
    data["candidates"].append(candidate(
        decision="correction", delta={"value": "2026-06-30", "op": "correct", "valid_from": None},
    ))
    raws = to_raw_candidates(_parse(data), EPISODE)
    assert [(r["attribute"], r["op"], r["decision"]) for r in raws] == [
        ("passport_deadline", "assert", "change"),
        ("response_style", "assert", "new"),
        ("passport_deadline", "correct", "correction"),
    ]
    assert raws[0]["evidence"] == ["my passport deadline moved from July 15 to June 30, 2026"]
    assert raws[0]["subject_type"] == "Person" and "subject_type" not in raws[1]
    assert "valid_from" not in raws[0]  # the episode's time applies
    assert raws[1]["valid_from"] == datetime(2026, 6, 2, tzinfo=timezone.utc)


def test_to_raw_candidates_refuses_ungrounded_candidates() -> None:
    data = sample()
    data["candidates"][0]["evidence"] = ["invented"]
    result = ExtractionResult.model_validate(data)  # bypassing parse_result
    with pytest.raises(InvalidModelOutput, match="not grounded"):
        to_raw_candidates(result, EPISODE)

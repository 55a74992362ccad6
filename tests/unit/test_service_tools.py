"""Tool definitions from the schema registry: valid JSON Schemas, every attribute offered with its
value type, the same tools in the three dialects, and no field naming a tenant or a principal."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from sgam.graph.schema import SHIPPED, load_schema
from sgam.service.requests import OPERATIONS
from sgam.service.tools import DIALECTS, input_schema, tool_definitions


def _remember(schema_name: str) -> Draft202012Validator:
    schema = load_schema(schema_name)
    [op] = [op for op in OPERATIONS if op.name == "remember"]
    return Draft202012Validator(input_schema(op, schema), format_checker=Draft202012Validator.FORMAT_CHECKER)


@pytest.mark.parametrize("schema_name", SHIPPED)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_tool_has_a_valid_object_schema(schema_name: str, dialect: str) -> None:
    tools = tool_definitions(load_schema(schema_name), dialect)  # type: ignore[arg-type]
    assert [t.get("name") or t["function"]["name"] for t in tools] == [op.name for op in OPERATIONS]
    for tool in tools:
        parameters = {"openai": lambda t: t["function"]["parameters"], "anthropic": lambda t: t["input_schema"],
                      "mcp": lambda t: t["inputSchema"]}[dialect](tool)
        Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object" and parameters["additionalProperties"] is False
        text = json.dumps(parameters)
        for forbidden in ("tenant", "principal", "actor", "asserted_by"):
            assert f'"{forbidden}' not in text, f"{forbidden} must come from the key, not the caller"
        json.dumps(tool)   # plain JSON, printable by `sgam tools`


@pytest.mark.parametrize("schema_name", SHIPPED)
def test_remember_offers_exactly_the_schema_attributes(schema_name: str) -> None:
    schema = load_schema(schema_name)
    [op] = [op for op in OPERATIONS if op.name == "remember"]
    facts = input_schema(op, schema)["properties"]["deltas"]["items"]["anyOf"]
    assert sorted(f["properties"]["attribute"]["const"] for f in facts) == sorted(schema.attributes)
    for fact in facts:
        spec = schema.attributes[fact["properties"]["attribute"]["const"]]
        if spec.value_type == "enum":
            assert fact["properties"]["value"]["enum"] == list(spec.values)
        if spec.subject_types:
            assert fact["properties"]["subject_type"]["enum"] == list(spec.subject_types)
        assert fact["properties"]["attribute"]["const"] in tool_definitions(schema)[0]["description"]


def test_remember_schema_accepts_the_seed_story_and_refuses_bad_values() -> None:
    validator = _remember("default")
    good = {"content": "Correction: my passport deadline is now 2026-06-30.",
            "occurred_at": "2026-06-10T14:30:00Z",
            "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "2026-06-30"},
                       {"subject": "mira", "attribute": "home_city", "op": "retract"}]}
    validator.validate(good)
    bad = [
        {"content": "x", "deltas": [{"subject": "mira", "attribute": "no_such_thing", "value": "a"}]},
        {"content": "x", "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "soon"}]},
        {"content": "x", "deltas": [{"subject": "mira", "attribute": "vip", "value": "yes"}]},
        {"content": "x", "deltas": [{"subject": "c1", "attribute": "contact_preference", "value": "fax"}]},
        {"content": "x", "deltas": [{"subject": "mira", "attribute": "home_city"}]},   # no value, not a retract
        {"content": "x", "tenant_id": "other"},
        {"content": "x", "deltas": [{"subject": "mira", "attribute": "home_city", "value": "Porto",
                                     "asserted_by": "user:someone-else"}]},
    ]
    for instance in bad:
        with pytest.raises(ValidationError):
            validator.validate(instance)


def test_read_tools_name_only_known_attributes_relations_and_memory_types() -> None:
    schema = load_schema("default")
    tools = {t["name"]: t["inputSchema"] for t in tool_definitions(schema, "mcp")}
    relations = tools["traverse"]["properties"]["relations"]["items"]["enum"]
    assert relations == sorted(n for n, s in schema.attributes.items() if s.value_type == "entity")
    current = Draft202012Validator(tools["current"])
    current.validate({"subject": "mira", "attribute": "passport_deadline", "memory_types": ["task_state"]})
    for bad in ({"subject": "mira", "attribute": "passport"}, {"subject": "mira", "memory_types": ["nope"]},
                {"attribute": "email"}, {"subject": 5}):
        with pytest.raises(ValidationError):
            current.validate(bad)


def test_private_attributes_name_their_readers() -> None:
    schema = load_schema("default")
    text = tool_definitions(schema, "anthropic")[0]["description"]
    private = [n for n, s in schema.attributes.items() if s.visibility == "private"]
    assert private, "the default schema has a private attribute to show"
    for name in private:
        line = next(line for line in text.splitlines() if line.startswith(f"- {name} "))
        assert "private: read only by" in line


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="openai, anthropic, mcp"):
        tool_definitions(load_schema("default"), "gemini")  # type: ignore[arg-type]


@pytest.mark.parametrize(("host", "local"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                             ("127.0.0.2", True), ("0.0.0.0", False), ("::", False),
                                             ("192.168.1.5", False), ("example.org", False)])
def test_serve_tells_loopback_hosts(host: str, local: bool) -> None:
    from sgam.service.settings import loopback

    assert loopback(host) is local

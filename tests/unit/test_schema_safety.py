"""Schemas as data: shipped examples load, and no identifier payload reaches Cypher."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgam.graph import SchemaViolation
from sgam.graph.schema import SHIPPED, default_schema, load_schema, quote_identifier

PAYLOADS = [
    "Person`) DETACH DELETE n //",
    "Person` {x: 1}",
    "HOLDS]->() DELETE r //",
    "a'b",
    'a"b',
    "name})-[",
    "Ρerson",  # Greek capital rho, looks like P
    "Persоn",  # Cyrillic o
    "per son",
    "X" * 65,
    "",
    "1abc",
    "snake\u200bcase",  # zero-width space
]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_schemas_load(name: str) -> None:
    schema = load_schema(name)
    assert schema.attributes and schema.version >= 1


def test_examples_are_parts_of_the_default() -> None:
    default = default_schema()
    for name in ("personal-assistant", "customer-support"):
        part = load_schema(name)
        assert set(part.entity_types) <= set(default.entity_types)
        assert set(part.attributes) <= set(default.attributes)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_identifier_payloads_are_refused_everywhere(payload: str) -> None:
    base = default_schema().model_dump(mode="json")
    with pytest.raises(SchemaViolation):
        quote_identifier(payload)
    attacks = [
        {**base, "entity_types": [*base["entity_types"], payload]},
        {**base, "attributes": {**base["attributes"], payload: {"value_type": "string"}}},
        {**base, "attributes": {**base["attributes"], "x_attr": {"value_type": "string", "rel_type": payload}}},
        {**base, "attributes": {**base["attributes"], "x_attr": {"value_type": "entity", "target": payload}}},
        {**base, "attributes": {**base["attributes"], "x_attr": {"value_type": "string", "subject_types": [payload]}}},
    ]
    for data in attacks:
        with pytest.raises(SchemaViolation) as caught:
            load_schema_data(data)
        assert "not a valid SGAM schema" in str(caught.value)


def load_schema_data(data: dict) -> None:
    from sgam.graph.schema import Schema

    Schema.from_data(data, origin="attack")


@given(st.text(min_size=1, max_size=80))
def test_quote_identifier_accepts_only_plain_ascii(name: str) -> None:
    try:
        quoted = quote_identifier(name)
    except SchemaViolation:
        return
    assert quoted == f"`{name}`" and name.isascii() and "`" not in name and " " not in name


def test_unknown_names_list_the_known_ones() -> None:
    schema = default_schema()
    with pytest.raises(SchemaViolation, match="knows: .*passport_deadline"):
        schema.attribute("shoe_size")
    with pytest.raises(SchemaViolation, match="known: Person, Customer"):
        schema.check_entity_type("Pet")
    with pytest.raises(SchemaViolation, match="no schema 'nope'"):
        load_schema("nope")

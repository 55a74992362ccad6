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
    "abc\u202edcba",  # right-to-left override
    "Ｐerson",  # fullwidth P
    "Pe\u0301rson",  # combining accent
    "Person\nMATCH (n) DETACH DELETE n",
    "Person\x00",
    "Person\n",  # a trailing newline slips through a regex anchored with $
    "Y" * 10_000,
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
    attacks += [
        {**base, "retention": {**base["retention"], payload: {}}},
        {**base, "attributes": {**base["attributes"], "x_attr": {"value_type": "string", "retention": payload}}},
        {**base, "attributes": {**base["attributes"], "x_attr": {
            "value_type": "string", "visibility": "private", "readers": [f"{payload}:x"]}}},
    ]
    for data in attacks:
        with pytest.raises(SchemaViolation) as caught:
            load_schema_data(data)
        assert "not a valid SGAM schema" in str(caught.value)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_identifier_payloads_in_a_write_are_refused_before_any_cypher(payload: str) -> None:
    """``prepare`` is the pure step before the write transaction: nothing is built for these."""
    from datetime import datetime, timezone

    from sgam.graph.models import MemoryDelta
    from sgam.graph.writes import prepare

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    deltas = [
        MemoryDelta.model_construct(tenant_id="t", subject="mira", attribute=payload, value="x",
                                    valid_from=at, source_episode_id="e1", subject_type=None),
        MemoryDelta(tenant_id="t", subject="mira", attribute="home_city", value="x", valid_from=at,
                    source_episode_id="e1", subject_type=payload),
        MemoryDelta(tenant_id="t", subject="ada", attribute="holds", value="acc-1", valid_from=at,
                    source_episode_id="e1", subject_type=payload),
    ]
    ready, rejected = prepare(deltas, default_schema())
    assert ready == [] and [r.index for r in rejected] == [0, 1, 2]
    assert all(isinstance(r.error, SchemaViolation) for r in rejected)


@pytest.mark.parametrize(("text", "words"), [
    ("entity_types: [Person\nattributes: {", ["could not be read"]),
    ("- just\n- a list\n", ["not a valid SGAM schema", "dictionary"]),
    ("", ["not a valid SGAM schema"]),
    ("entity_types: [Person]\nattributes: {x: {value_type: colour}}\n", ["attributes.x.value_type", "string"]),
    ("entity_types: [Person]\nattributes: {}\nsurprise: 1\n", ["surprise"]),
])
def test_a_schema_file_that_does_not_parse_names_the_file_and_the_problem(tmp_path, text: str,
                                                                         words: list[str]) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SchemaViolation) as caught:
        load_schema(path)
    assert "broken.yaml" in str(caught.value)
    for word in words:
        assert word in str(caught.value)
    (tmp_path / "broken.json").write_text("{\"entity_types\": [", encoding="utf-8")
    with pytest.raises(SchemaViolation, match="broken.json could not be read"):
        load_schema(tmp_path / "broken.json")


def test_cli_shows_a_broken_schema_file_as_one_clear_error(tmp_path) -> None:
    from typer.testing import CliRunner

    from sgam.cli import app

    path = tmp_path / "broken.yaml"
    path.write_text("entity_types: [Person\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["schema", "show", str(path)])
    assert result.exit_code != 0
    assert "broken.yaml" in result.output and "Traceback" not in result.output


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


@pytest.mark.parametrize("bad", ["mira\n", "mi ra", "mira`", "", "m" * 129])
def test_ids_tenants_and_principals_with_a_trailing_newline_or_junk_are_refused(bad: str) -> None:
    from sgam.graph.models import check_id, check_principal, check_tenant

    for check in (check_id, check_tenant, check_principal):
        with pytest.raises(ValueError):
            check(bad)
    with pytest.raises(ValueError):
        check_principal(f"user:{bad}")

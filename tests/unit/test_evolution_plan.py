"""The migration planner and the value transforms, without a database."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgam.graph.errors import SchemaViolation
from sgam.graph.evolution import derived_memory_id, plan_migration
from sgam.graph.schema import Schema, load_schema
from sgam.graph.transforms import (
    date_to_datetime,
    iso_country,
    split_full_name,
    split_street_city,
    str_to_int,
    upcaster,
)

V1: dict[str, Any] = {
    "name": "p", "version": 1, "entity_types": ["Customer", "Account"],
    "attributes": {
        "email": {"value_type": "string", "subject_types": ["Customer"]},
        "name": {"value_type": "string", "subject_types": ["Customer"]},
        "zip": {"value_type": "string", "subject_types": ["Customer"]},
        "holds": {"value_type": "entity", "target": "Account", "cardinality": "many"},
    },
}


def v2(steps: list[dict[str, Any]], **attributes: Any) -> Schema:
    drop = attributes.pop("drop", ())
    attrs = {k: v for k, v in V1["attributes"].items() if k not in drop}
    attrs.update(attributes)
    return Schema.from_data({**V1, "version": 2, "attributes": attrs,
                             "migrations": [{"from_version": 1, "steps": steps}]})


OLD = Schema.from_data(V1)
S = {"value_type": "string", "subject_types": ["Customer"]}


def test_steps_run_in_a_fixed_order_with_aliases_both_ways() -> None:
    new = v2([{"kind": "retype", "attribute": "postcode", "upcaster": "str_to_int"},
              {"kind": "split", "attribute": "name", "into": ["given", "family"], "splitter": "full_name"},
              {"kind": "rename", "attribute": "zip", "to": "postcode"},
              {"kind": "rename_relation", "attribute": "holds", "to": "OWNS"}],
             drop=("zip", "name"), postcode={**S, "value_type": "int"}, given=S, family=S,
             holds={**V1["attributes"]["holds"], "rel_type": "OWNS"})
    plan = plan_migration(OLD, new)
    assert [s.kind for s in plan.steps] == ["rename", "rename_relation", "split", "retype"]
    assert plan.steps[0].from_type == "ZIP" and plan.steps[0].to_types == ("POSTCODE",)
    # the retype reads the renamed facts wherever they are when it runs
    assert set(plan.steps[3].sources) == {("postcode", "POSTCODE"), ("zip", "ZIP")}
    assert "zip>postcode" in plan.aliases and "given>name" in plan.aliases
    assert set(plan.new_rel_types) == {"POSTCODE", "GIVEN", "FAMILY", "OWNS"}
    assert plan.id == "p@1->2"


@pytest.mark.parametrize(("steps", "attrs", "message"), [
    ([{"kind": "rename", "attribute": "zip", "to": "email"}], {"drop": ("zip",)},
     "'email' already exists in v1"),
    ([{"kind": "rename", "attribute": "zip", "to": "postcode"}], {"postcode": S},
     "v2 still has 'zip'"),
    ([{"kind": "rename", "attribute": "zip", "to": "postcode"}], {"drop": ("zip",), "postcode": {**S, "value_type": "int"}},
     "zip -> postcode changes value_type without a retype step"),
    ([{"kind": "rename_relation", "attribute": "holds", "to": "OWNS"}], {},
     "stores 'holds' as HOLDS, not OWNS"),
    ([{"kind": "split", "attribute": "holds", "into": ["a", "b"], "splitter": "full_name"}],
     {"drop": ("holds",), "a": S, "b": S}, "'holds' is a relation"),
    ([{"kind": "retype", "attribute": "email", "upcaster": "no_such"}], {}, "unknown upcaster 'no_such'"),
    ([{"kind": "retype", "attribute": "ghost", "upcaster": "lower"}], {}, "'ghost' is not in v2; it knows"),
    ([{"kind": "rename", "attribute": "email", "to": "mail"}], {"drop": ("email",), "mail": S, "zip": {"value_type": "int"}},
     r"attribute zip.value_type \(changed"),
])
def test_refusals_name_the_element(steps: list, attrs: dict, message: str) -> None:
    with pytest.raises(SchemaViolation, match=message):
        plan_migration(OLD, v2(steps, **attrs))


def test_versions_and_undeclared_changes() -> None:
    assert plan_migration(None, OLD).steps == ()
    assert plan_migration(OLD, OLD).unchanged
    with pytest.raises(SchemaViolation, match="not newer than the stored v1"):
        plan_migration(OLD, Schema.from_data({**V1, "attributes": {"email": S}}))
    compatible = Schema.from_data({**V1, "version": 2, "attributes": {**V1["attributes"], "phone": S}})
    assert plan_migration(OLD, compatible).steps == () and plan_migration(OLD, compatible).new_rel_types == ("PHONE",)
    with pytest.raises(SchemaViolation, match=r"declare `migrations: \[\{from_version: 1"):
        plan_migration(OLD, Schema.from_data({**V1, "version": 2, "attributes": {"email": S}}))
    with pytest.raises(SchemaViolation, match="from_version 2 must be below version 2"):
        Schema.from_data({**V1, "version": 2, "migrations": [{"from_version": 2, "steps": [
            {"kind": "rename", "attribute": "zip", "to": "postcode"}]}]})
    with pytest.raises(SchemaViolation, match="dual_read_until is a naive datetime"):
        Schema.from_data({**V1, "version": 2, "migrations": [{"from_version": 1, "dual_read_until": "2027-01-01T00:00",
                                                              "steps": [{"kind": "x"}]}]})


def test_shipped_example_plans_against_the_shipped_v1() -> None:
    plan = plan_migration(load_schema("customer-support"), load_schema("customer-support-v3"))
    assert [(s.kind, s.attribute, s.to) for s in plan.steps] == [
        ("rename", "email", ("email_address",)), ("rename_relation", "holds", ("holds",)),
        ("split", "address", ("street", "city")), ("retype", "plan", ("plan",))]


@given(st.lists(st.text(alphabet="abcdefghij-'", min_size=1, max_size=8), min_size=2, max_size=4))
def test_full_name_split_keeps_every_word(words: list[str]) -> None:
    given_name, family = split_full_name("  ".join(words))
    assert f"{given_name} {family}".split() == words and family == words[-1]


@given(st.text(alphabet="abc 12", min_size=1).filter(str.strip), st.text(alphabet="xyz ", min_size=1).filter(str.strip))
def test_street_city_split_at_the_last_comma(street: str, city: str) -> None:
    assert split_street_city(f"{street}, {city}") == (street.strip(), city.strip())


@given(st.integers(-10**12, 10**12))
def test_str_to_int_round_trips(n: int) -> None:
    assert str_to_int(f" {n} ") == n


def test_transforms_convert_or_refuse() -> None:
    assert iso_country("Germany") == "DE" and iso_country("deu") == "DE" and iso_country("pt") == "PT"
    with pytest.raises(ValueError):
        iso_country("Atlantis")
    with pytest.raises(ValueError):
        str_to_int("4.2")
    assert date_to_datetime(date(2026, 6, 30)) == datetime(2026, 6, 30, tzinfo=timezone.utc)
    assert split_full_name("Cher") == ("Cher", None)
    with pytest.raises(SchemaViolation, match="registered: .*iso_country"):
        upcaster("country")
    assert derived_memory_id("m-1", "a") == derived_memory_id("m-1", "a") != derived_memory_id("m-1", "b")


def test_schema_show_lists_the_declared_migration() -> None:
    from typer.testing import CliRunner

    from sgam.cli import app

    shown = CliRunner().invoke(app, ["schema", "show", "customer-support-v3"])
    assert shown.exit_code == 0
    assert "migration from v2, old names readable until 2027-01-01" in shown.output
    assert "split address -> street, city (street_city)" in shown.output
    assert "retype plan (lower)" in shown.output

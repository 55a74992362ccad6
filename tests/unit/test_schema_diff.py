"""Schema diff: additions are safe, retyping or removing stored attributes needs a migration."""

from __future__ import annotations

from typer.testing import CliRunner

from sgam.cli import app
from sgam.graph.schema import Schema, default_schema, load_schema
from sgam.graph.schema_diff import diff


def test_no_differences_with_itself() -> None:
    assert diff(default_schema(), default_schema()) == []


def test_breaking_and_safe_changes_are_told_apart() -> None:
    old = default_schema()
    data = old.model_dump(mode="json")
    data["attributes"]["loyalty_points"]["value_type"] = "float"
    data["attributes"]["nickname"] = {"value_type": "string", "subject_types": ["Person"]}
    del data["attributes"]["vip"]
    data["version"] = old.version + 1
    changes = {(c.kind, c.element): c.breaking for c in diff(old, Schema.from_data(data))}
    assert changes == {
        ("changed", "attribute loyalty_points.value_type"): True,
        ("added", "attribute nickname"): False,
        ("removed", "attribute vip"): True,
    }


def test_cli_diff_and_show(tmp_path) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["schema", "show", "customer-support"])
    assert shown.exit_code == 0 and "covered_by" in shown.output and "-> Policy" in shown.output
    same = runner.invoke(app, ["schema", "diff", "default", "default"])
    assert same.exit_code == 0 and "no differences" in same.output
    narrower = runner.invoke(app, ["schema", "diff", "default", "customer-support"])
    assert narrower.exit_code == 1 and "yes" in narrower.output and "removed" in narrower.output
    assert load_schema("customer-support").name == "customer-support"

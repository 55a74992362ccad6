"""The README's table of attributes per entity type is the shipped schema's, so it cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from sgam.cli import app
from sgam.graph.schema import default_schema
from sgam.cli.tables import attribute_table

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- attribute table: sgam schema show --markdown"


def readme_table() -> list[str]:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(MARKER)) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end]


def test_readme_table_is_what_schema_show_prints() -> None:
    printed = CliRunner().invoke(app, ["schema", "show", "--markdown"])
    assert printed.exit_code == 0, printed.output
    assert readme_table() == printed.output.strip().splitlines()
    assert readme_table() == attribute_table(default_schema()).splitlines()


def test_readme_table_places_every_attribute_as_the_yaml_says() -> None:
    # Read from the YAML itself, not through Schema: every attribute sits in the row of each of
    # its subject types and in no other row.
    shipped = yaml.safe_load((ROOT / "graph" / "schemas" / "default.yaml").read_text(encoding="utf-8"))
    rows = {}
    for line in readme_table()[2:]:
        entity_type, cell = (part.strip() for part in line.strip("|").split("|"))
        rows[entity_type] = set(re.findall(r"`([a-z_]+)`", cell))
    assert set(rows) == set(shipped["entity_types"])
    for entity_type, names in rows.items():
        expected = {name for name, spec in shipped["attributes"].items()
                    if entity_type in spec["subject_types"]}
        assert names == expected, entity_type

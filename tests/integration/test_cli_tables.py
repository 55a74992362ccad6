"""`sgam query` tables show the columns an analyst reads, one readable row each; --json keeps all."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sgam import MemoryGraph
from sgam.cli import common as cli  # the console the tables print on
from sgam.cli import app

from .demo_data import replay_demo

runner = CliRunner()
WIDTH = 120
# (query arguments, the table's columns): what an analyst reads, per the issue (18.4)
TABLES = {
    "customer-policies": (["--valid-at", "2026-05-01"],
                          ["customer", "customer_name", "account", "policy", "plan", "holds", "covered",
                           "episodes"]),
    "traverse": (["-s", "cust-ada", "--relations", "holds,covered_by", "--valid-at", "2026-05-01"],
                 ["entities", "types", "hops"]),
    "neighbourhood": (["-s", "cust-ada", "-p", "hops=2", "--valid-at", "2026-05-01"],
                      ["entity", "type", "name", "distance", "hops"]),
    "history-chain": (["-s", "mira", "-a", "passport_deadline"],
                      ["value", "valid", "known", "op", "episode", "memory_id", "lineage"]),
    "history": (["-s", "mira"], ["attribute", "value", "valid", "known", "op", "episode", "memory_id"]),
    "current": (["-s", "cust-ada"],
                ["attribute", "value", "valid", "status", "episode", "asserted_by", "memory_id"]),
}


@pytest.fixture
def demo_tenant(graph: MemoryGraph, tenant: str) -> str:
    replay_demo(graph, tenant)
    return tenant


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's console as a terminal of WIDTH columns."""
    monkeypatch.setattr(cli, "console", Console(width=WIDTH))


def header(output: str) -> list[str]:
    line = next(line for line in output.splitlines() if line.startswith("┃"))
    return [name.strip() for name in line.strip("┃").split("┃")]


def run_json(name: str, tenant: str, args: list[str]) -> list[dict]:
    result = runner.invoke(app, ["query", name, "-t", tenant, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_table_shows_the_analyst_columns_and_fits(env, wide, demo_tenant: str, name: str) -> None:
    args, columns = TABLES[name]
    result = runner.invoke(app, ["query", name, "-t", demo_tenant, *args])
    assert result.exit_code == 0, result.output
    assert header(result.stdout) == columns
    lines = result.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= WIDTH
    assert '{"' not in result.stdout, "no property map dumped as JSON"
    rows = run_json(name, demo_tenant, args)
    assert rows and f"{name}: {len(rows)} row(s)" in result.stdout
    # ids are never cut in two at this width: each can be pasted into the next command
    for row in rows:
        for key in ("memory_id", "episode", "entity", "account", "policy"):
            if key in columns and row.get(key):
                assert row[key] in result.stdout, (key, row[key])


def test_windows_show_valid_and_known_time(env, demo_tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "console", Console(width=400))  # no cell wrapped: whole texts
    result = runner.invoke(app, ["query", "history-chain", "-t", demo_tenant, "-s", "mira",
                                 "-a", "passport_deadline"])
    text = result.stdout
    # the closed copy of e1's row: valid from its statement to the correction's
    assert "2026-05-20 09:00 →" in text and "2026-06-10 14:30" in text
    traverse = runner.invoke(app, ["query", "traverse", "-t", demo_tenant, "-s", "cust-ada",
                                   "--relations", "holds,covered_by", "--valid-at", "2026-02-01"])
    text = traverse.stdout
    assert "cust-ada → acc-1001 → pol-basic" in text
    assert "holds = acc-1001, valid 2026-01-05 10:00 →, crm-1 by tool:crm" in text
    assert "covered_by = pol-basic, valid 2026-01-05 10:00 → 2026-04-01 12:00, crm-1 by tool:crm" in text


def test_provenance_is_one_field_a_line(env, wide, demo_tenant: str) -> None:
    [current] = run_json("current", demo_tenant, ["-s", "mira", "-a", "passport_deadline"])
    result = runner.invoke(app, ["query", "provenance", "-t", demo_tenant, "--memory-id",
                                 current["memory_id"]])
    assert result.exit_code == 0, result.output
    fields = {line.split("│")[1].strip(): line.split("│")[2].strip()
              for line in result.stdout.splitlines() if line.startswith("│")}
    assert fields["value"] == "2026-06-30" and fields["memory_id"] == current["memory_id"]
    assert fields["episode"] == "e2 at 2026-06-10 14:30 by user:mira"
    assert fields["said"] == "Correction: my passport deadline is now 2026-06-30."
    assert fields["superseded"].startswith("passport_deadline = 2026-07-15, valid 2026-05-20 09:00 →")
    assert max(len(line) for line in result.stdout.splitlines()) <= WIDTH


@pytest.mark.parametrize("name", sorted(TABLES) + ["provenance"])
def test_json_keeps_every_property(env, graph: MemoryGraph, demo_tenant: str, name: str) -> None:
    args = TABLES[name][0] if name in TABLES else \
        ["--memory-id", run_json("current", demo_tenant, ["-s", "mira"])[0]["memory_id"]]
    rows = run_json(name, demo_tenant, args)
    # the same rows, every column and every fact property, as the Python API returns them
    params = {"customer-policies": {"valid_at": "2026-05-01"},
              "traverse": {"subject": "cust-ada", "relations": "holds,covered_by", "valid_at": "2026-05-01"},
              "neighbourhood": {"subject": "cust-ada", "hops": "2", "valid_at": "2026-05-01"},
              "history-chain": {"subject": "mira", "attribute": "passport_deadline"},
              "history": {"subject": "mira"}, "current": {"subject": "cust-ada"},
              "provenance": {"memory_id": args[-1]}}[name]
    expected = graph.query(name, tenant=demo_tenant, **params)
    assert rows == [{k: cli.jsonable(v) for k, v in record.items()} for record in expected]
    facts = [f for row in rows for f in ([row["fact"]] if "fact" in row else row.get("facts", []))]
    assert facts and all({"recorded_at", "memory_id", "asserted_by", "source_episode_id"} <= set(f)
                         for f in facts)

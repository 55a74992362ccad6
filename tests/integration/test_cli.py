"""The CLI, end to end against the real server (NEO4J_URI points it at the test server)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sgam import MemoryGraph, UnknownTenant
from sgam.cli import app

runner = CliRunner()


def jsonl(tenant: str, path: Path, *, bad: bool) -> Path:
    lines = [
        {"tenant_id": tenant, "id": "e1", "occurred_at": "2026-05-20T09:00:00Z", "actor": "user:mira",
         "content": "My passport deadline is 2026-07-15.",
         "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "2026-07-15"}]},
        {"tenant_id": tenant, "id": "e2", "occurred_at": "2026-06-10T14:30:00Z", "actor": "user:mira",
         "content": "It is now 2026-06-30.",
         "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "2026-06-30"}]},
    ]
    text = [json.dumps(line) for line in lines]
    if bad:
        text.insert(1, json.dumps({"tenant_id": tenant, "id": "e9", "occurred_at": "2026-06-01T00:00:00",
                                   "content": "naive time", "deltas": []}))
        text.append(json.dumps({"tenant_id": tenant, "id": "e3", "occurred_at": "2026-06-11T00:00:00Z",
                                "content": "x", "deltas": [{"subject": "mira", "attribute": "shoe_size",
                                                            "value": 42}]}))
        text.append("{not json")
    path.write_text("# a comment line\n" + "\n".join(text) + "\n", encoding="utf-8")
    return path


def test_replay_reports_bad_lines_and_applies_good_ones(env, graph: MemoryGraph, tenant: str,
                                                        tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", str(jsonl(tenant, tmp_path / "r.jsonl", bad=True)), "--json"])
    assert result.exit_code == 2, result.output
    report = json.loads(result.stdout)
    assert report["written"] == 2 and report["rejected"] == 3
    lines = {e["line"]: e["error"] for e in report["errors"]}
    assert set(lines) == {3, 5, 6}
    assert "naive" in lines[3] and "shoe_size" in lines[5] and "JSON" in lines[6]
    assert [str(f.value) for f in graph.current(tenant, "mira", "passport_deadline")] == ["2026-06-30"]


def test_atomic_replay_applies_nothing(env, graph: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["replay", str(jsonl(tenant, tmp_path / "r.jsonl", bad=True)), "--atomic"])
    assert result.exit_code == 1
    assert "line 3" in result.output and "nothing was written" in result.output
    with pytest.raises(UnknownTenant):   # not even the episodes
        graph.history(tenant, "mira")


def test_query_commands(env, tenant: str, tmp_path: Path) -> None:
    assert runner.invoke(app, ["replay", str(jsonl(tenant, tmp_path / "r.jsonl", bad=False))]).exit_code == 0
    current = runner.invoke(app, ["query", "current", "-t", tenant, "-s", "mira", "--json"])
    assert current.exit_code == 0, current.output
    assert [row["value"] for row in json.loads(current.stdout)] == ["2026-06-30"]
    as_of = runner.invoke(app, ["query", "as-of", "-t", tenant, "-s", "mira", "-a", "passport_deadline",
                                "--valid-at", "2026-06-02", "--json"])
    assert [row["value"] for row in json.loads(as_of.stdout)] == ["2026-07-15"]
    history = runner.invoke(app, ["query", "history", "-t", tenant, "-s", "mira"])
    # e1's deadline until e2's date, and e2's: one replay batch writes no version it retires at once
    assert history.exit_code == 0 and "history: 2 row(s)" in history.stdout
    memory_id = json.loads(current.stdout)[0]["memory_id"]
    provenance = runner.invoke(app, ["query", "provenance", "-t", tenant, "-s", "mira",
                                     "--memory-id", memory_id, "--json"])
    [row] = json.loads(provenance.stdout)
    assert row["episode"]["id"] == "e2" and row["superseded"][0]["value"] == "2026-07-15"


def test_query_errors_are_clear(env) -> None:
    unknown = runner.invoke(app, ["query", "nope"])
    assert unknown.exit_code == 1 and "known queries: as-of," in unknown.output and "current" in unknown.output
    missing = runner.invoke(app, ["query", "as-of", "-t", "x", "-s", "mira"])
    assert missing.exit_code == 1 and "valid_at" in missing.output
    bad_date = runner.invoke(app, ["query", "as-of", "-t", "x", "-s", "mira", "--valid-at", "soon"])
    assert bad_date.exit_code == 1 and "valid_at" in bad_date.output and "datetime" in bad_date.output


def test_query_list_and_print() -> None:
    listed = runner.invoke(app, ["query", "--list"])
    for name in ("current", "as-of", "history", "provenance", "traverse"):
        assert name in listed.stdout
    printed = runner.invoke(app, ["query", "as-of", "--print"])
    assert ":param valid_at => datetime('2026-06-02T00:00:00Z');" in printed.stdout and "MATCH" in printed.stdout
    assert ":param {" not in printed.stdout  # Browser's map form would not evaluate datetime(...)


def test_every_command_has_help() -> None:
    for args in (["--help"], ["neo4j", "--help"], ["neo4j", "up", "--help"], ["neo4j", "down", "--help"],
                 ["neo4j", "status", "--help"], ["replay", "--help"], ["query", "--help"],
                 ["demo", "--help"], ["bench", "--help"], ["doctor", "--help"], ["forget", "--help"], ["export", "--help"], ["purge", "--help"], ["schema", "show", "--help"], ["schema", "diff", "--help"], ["browser", "--help"],
                 ["browser", "help", "--help"], ["browser", "export", "--help"], ["browser", "guide", "--help"],
                 ["import-graphiti", "--help"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, args
        assert "Usage" in result.output


def test_status_of_a_home_without_server(tmp_path: Path) -> None:
    result = runner.invoke(app, ["neo4j", "status", "--home", str(tmp_path), "--bolt-port", "17999"])
    assert result.exit_code == 3 and "not running" in result.output


def test_demo_answers(graph: MemoryGraph) -> None:
    from sgam import demo

    answers = demo.run(graph, Console(file=io.StringIO(), width=120))
    assert answers == {
        "naive": "2026-07-15",
        "current": "2026-06-30",
        "as_of": "2026-07-15",
        "city": "Porto",
        "city_before_correction": "Lisbon",
        "policy_now": "cust-ada -> acc-1001 -> pol-plus",
        "policy_february": "cust-ada -> acc-1001 -> pol-basic",
    }


def test_demo_command(env) -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert "SGAM current" in result.output and "2026-06-30" in result.output
    assert "Paste this into Neo4j Browser" in result.output


def test_browser_export_and_help(tmp_path: Path) -> None:
    exported = runner.invoke(app, ["browser", "export", str(tmp_path)])
    assert exported.exit_code == 0, exported.output
    assert {p.name for p in tmp_path.iterdir()} >= {"sgam.grass", "sgam-favorites.zip", "sgam-guide.html"}
    shown = runner.invoke(app, ["browser", "help", "--http-port", "7475", "--dir", str(tmp_path / "style")])
    assert shown.exit_code == 0 and ":style" in shown.output and "7475/browser/" in shown.output


def test_forget_and_doctor_commands(env, tenant: str, tmp_path: Path) -> None:
    assert runner.invoke(app, ["replay", str(jsonl(tenant, tmp_path / "r.jsonl", bad=False))]).exit_code == 0
    refused = runner.invoke(app, ["forget", "-t", tenant, "-s", "mira"], input="n\n")
    assert refused.exit_code == 1
    done = runner.invoke(app, ["forget", "-t", tenant, "-s", "mira", "--yes"])
    assert done.exit_code == 0 and "2 episodes deleted" in done.output and "nothing left of 'mira'" in done.output
    checked = runner.invoke(app, ["doctor", "-t", tenant, "--forgotten", "mira"])
    assert checked.exit_code == 0 and "nothing left of 'mira'" in checked.output


def test_purge_command(env, tenant: str, tmp_path: Path) -> None:
    assert runner.invoke(app, ["replay", str(jsonl(tenant, tmp_path / "r.jsonl", bad=False))]).exit_code == 0
    result = runner.invoke(app, ["purge", "-t", tenant, "--now", "2099-01-01"])
    assert result.exit_code == 0, result.output
    # passport_deadline is "operational" (365 days): both versions written now are long expired in 2099
    assert "operational: 2 facts removed" in result.output


def test_history_current_only_and_provenance_by_id(env, tenant: str, tmp_path: Path) -> None:
    assert runner.invoke(app, ["replay", str(jsonl(tenant, tmp_path / "r.jsonl", bad=False))]).exit_code == 0
    every = runner.invoke(app, ["query", "history", "-t", tenant, "-s", "mira", "--json"])
    believed = runner.invoke(app, ["query", "history", "-t", tenant, "-s", "mira", "--current-only", "--json"])
    assert believed.exit_code == 0, believed.output
    assert sorted(r["memory_id"] for r in json.loads(believed.stdout)) == sorted(
        r["memory_id"] for r in json.loads(every.stdout) if r["expired_at"] is None)
    assert sorted((r["value"], r["valid_to"]) for r in json.loads(believed.stdout)) == [
        ("2026-06-30", None), ("2026-07-15", "2026-06-10T14:30:00+00:00")]
    same = runner.invoke(app, ["query", "history", "-t", tenant, "-s", "mira", "-p", "current_only=true", "--json"])
    assert json.loads(same.stdout) == json.loads(believed.stdout)
    [latest] = [r for r in json.loads(believed.stdout) if r["valid_to"] is None]
    provenance = runner.invoke(app, ["query", "provenance", "-t", tenant, "--memory-id", latest["memory_id"], "--json"])
    assert provenance.exit_code == 0, provenance.output
    [row] = json.loads(provenance.stdout)
    assert row["episode"]["id"] == "e2" and row["superseded"][0]["value"] == "2026-07-15"


def test_an_option_the_query_does_not_take_is_an_error(env, tenant: str) -> None:
    # --valid-at on `current` used to be dropped silently: the answer was for now
    result = runner.invoke(app, ["query", "current", "-t", tenant, "-s", "mira", "--valid-at", "2026-06-02"])
    assert result.exit_code == 1 and "query 'current' has no parameter valid_at" in result.output
    result = runner.invoke(app, ["query", "as-of", "-t", tenant, "-s", "mira", "--valid-at", "2026-06-02",
                                 "--current-only"])
    assert result.exit_code == 1 and "has no parameter current_only" in result.output


def test_times_on_the_command_line(env, tenant: str, tmp_path: Path) -> None:
    assert runner.invoke(app, ["replay", str(jsonl(tenant, tmp_path / "r.jsonl", bad=False))]).exit_code == 0
    question = ["context", "-t", tenant, "-s", "mira", "When is the passport deadline?", "--no-expand", "--json"]
    new = runner.invoke(app, [*question, "--valid-at", "2026-06-02"])
    assert new.exit_code == 0, new.output
    assert json.loads(new.stdout)["as_of"] == "2026-06-02T00:00:00Z"
    assert [f["value"] for f in json.loads(new.stdout)["facts"]] == ["2026-07-15"]
    old = runner.invoke(app, [*question, "--as-of", "2026-06-02"])
    assert old.exit_code == 0 and json.loads(old.stdout)["facts"] == json.loads(new.stdout)["facts"]
    assert "--as-of is deprecated; use --valid-at" in old.stderr
    both = runner.invoke(app, [*question, "--as-of", "2026-06-02", "--valid-at", "2026-06-02"])
    assert both.exit_code == 2 and "give --valid-at only" in both.output
    for args, flag in (([*question, "--valid-at", "soon"], "--valid-at"),
                       (["export", "-t", tenant, "--format", "json", "--known-at", "2026-06-02T10:00"], "--known-at"),
                       (["purge", "-t", tenant, "--now", "yesterday"], "--now")):
        bad = runner.invoke(app, args)
        assert bad.exit_code == 1 and f"error: {flag} " in bad.output and "Traceback" not in bad.output, args
        assert "2026-06-02T12:00:00Z" in bad.output or "has no timezone" in bad.output
    help_text = runner.invoke(app, ["context", "--help"]).output
    assert "--valid-at" in help_text and "--as-of" not in help_text

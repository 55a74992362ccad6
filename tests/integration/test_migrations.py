"""Schema migrations against a real Neo4j: rename, split, retype, relation-type rename, history
included; dry run, idempotence, crash and resume, the dual-read window, refusals.

A migration applies to every tenant of the database, and the test database is shared, so each test
migrates its own copy of the shipped example (``customer-support-v3.yaml``) whose attribute names
and relationship types carry a per-test suffix.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import date, datetime, timedelta, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, MemoryGraph
from sgam.cli import app
from sgam.graph.errors import SchemaViolation
from sgam.graph.evolution import derived_memory_id
from sgam.graph.schema import Schema, quote_identifier

KEEP = {"email", "address", "holds", "covered_by", "plan", "email_address", "street", "city"}
runner = CliRunner()
USED: set[str] = set()  # suffixes of this test, cleaned up after it


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def example(which: int, suffix: str, **changes: Any) -> dict[str, Any]:
    """The shipped customer-support schema (v1 or v2) restricted to the migrated attributes, with
    ``suffix`` on every attribute name and relationship type so the test owns its facts."""
    USED.add(suffix)
    name = "customer-support" + ("-v3" if which == 2 else "")
    data = yaml.safe_load((files("sgam.graph") / "schemas" / f"{name}.yaml").read_text("utf-8"))
    s = lambda attribute: f"{attribute}_{suffix}"  # noqa: E731
    data["name"] = f"cs-{suffix}"
    data["attributes"] = {
        s(k): {**v, **({"rel_type": f"{v['rel_type']}_{suffix.upper()}"} if v.get("rel_type") else {})}
        for k, v in data["attributes"].items() if k in KEEP
    }
    for migration in data.get("migrations", []):
        for step in migration["steps"]:
            step["attribute"] = s(step["attribute"])
            if step["kind"] == "rename":
                step["to"] = s(step["to"])
            elif step["kind"] == "rename_relation":
                step["to"] = f"{step['to']}_{suffix.upper()}"
            elif step["kind"] == "split":
                step["into"] = [s(t) for t in step["into"]]
    data.update(changes)
    return data


@pytest.fixture
def suffix() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(autouse=True)
def cleanup(shared_graph: MemoryGraph, tenant: str):
    """Drop what a test made: its tenants, schema records, and the indexes of its suffixed types."""
    USED.clear()
    yield
    store = shared_graph.store
    for name in (tenant, f"{tenant}-a", f"{tenant}-b", f"{tenant}-x"):
        shared_graph.delete_tenant(name)
    for suffix in USED:
        store.run_write("MATCH (n) WHERE (n:SchemaVersion OR n:SchemaMigration) AND n.name = $name "
                        "OR n:Migration AND n.id ENDS WITH $tail DETACH DELETE n",
                        {"name": f"cs-{suffix}", "tail": f"_{suffix.upper()}"})
        for kind, listing in (("CONSTRAINT", "CONSTRAINTS"), ("INDEX", "INDEXES")):
            for row in store.read(f"SHOW {listing} YIELD name WHERE name ENDS WITH $tail RETURN name",
                                  {"tail": f"_{suffix}"}):
                store.run_write(f"DROP {kind} {quote_identifier(row['name'])} IF EXISTS", {})


@pytest.fixture
def connect(neo4j_connection):
    opened: list[MemoryGraph] = []

    def make(schema: dict[str, Any] | Schema, **options: Any) -> MemoryGraph:
        uri, auth = neo4j_connection
        loaded = schema if isinstance(schema, Schema) else Schema.from_data(schema)
        graph = MemoryGraph.connect(uri, auth, schema=loaded, **options)
        opened.append(graph)
        return graph

    yield make
    for graph in opened:
        graph.close()


def seed(graph: MemoryGraph, tenant: str, suffix: str, customers: int = 1) -> None:
    """History with supersession and a correction, a relation path, and a free-text plan."""
    a = lambda name: f"{name}_{suffix}"  # noqa: E731
    for eid, when in (("e1", utc(2026, 1, 1)), ("e2", utc(2026, 3, 1)), ("e3", utc(2026, 4, 1))):
        graph.record_episode(tenant_id=tenant, id=eid, content=f"episode {eid}", occurred_at=when, actor="agent")

    def write(subject: str, attribute: str, value: Any, eid: str, when: datetime, op: str = "assert") -> None:
        graph.write(tenant_id=tenant, subject=subject, attribute=a(attribute), value=value, valid_from=when,
                    source_episode_id=eid, asserted_by="agent", op=op)

    for n in range(customers):
        c = f"cust-{n}"
        write(c, "email", f"ada{n}@old.example", "e1", utc(2026, 1, 1))
        write(c, "email", f"ada{n}@new.example", "e2", utc(2026, 3, 1))
        write(c, "email", f"ada{n}@fixed.example", "e3", utc(2026, 3, 1), op="correct")
        write(c, "address", f"{n} Old Rd, Leeds", "e1", utc(2026, 1, 1))
        write(c, "address", f"{n} New St, York", "e2", utc(2026, 3, 1))
        write(c, "holds", f"acc-{n}", "e1", utc(2026, 1, 1))
    write("acc-0", "covered_by", "pol-0", "e1", utc(2026, 1, 1))
    write("pol-0", "plan", "Plus", "e1", utc(2026, 1, 1))
    write("pol-0", "plan", " Basic", "e2", utc(2026, 3, 1))


def snapshot(graph: MemoryGraph, tenant: str) -> list[dict[str, Any]]:
    """Every fact of the tenant with every property, and its relationship type."""
    rows = graph.store.read(
        "MATCH (s:Entity {tenant_id: $tenant})-[f]->(o) WHERE f.memory_id IS NOT NULL "
        "RETURN type(f) AS type, properties(f) AS props, labels(o) AS labels ORDER BY f.memory_id",
        {"tenant": tenant})
    return [{"type": r["type"], "labels": sorted(r["labels"]), **r["props"]} for r in rows]


def test_rename_split_retype_and_relation_round_trip(connect, tenant: str, suffix: str) -> None:
    a = lambda name: f"{name}_{suffix}"  # noqa: E731
    old = connect(example(1, suffix))
    seed(old, tenant, suffix)
    feb, mar15 = utc(2026, 2, 1), utc(2026, 3, 15)
    before_email = old.history(tenant, "cust-0", a("email"))
    [fixed] = [f for f in before_email if f.value == "ada0@new.example" and f.expired_at]
    before_fix = fixed.expired_at - timedelta(microseconds=1)  # what we believed before the correction
    believed_before_fix = old.as_of(tenant, "cust-0", a("email"), valid_at=mar15, known_at=before_fix)
    before_address = old.history(tenant, "cust-0", a("address"))
    before_plan = old.history(tenant, "pol-0", a("plan"))
    assert [f.value for f in old.current(tenant, "cust-0", a("email"))] == ["ada0@fixed.example"]

    report = old.apply_schema(Schema.from_data(example(2, suffix)))
    assert report.status == "applied" and report.from_version == 2 and report.to_version == 3
    counts = {(s.kind, s.attribute): s.facts for s in report.steps}
    assert counts == {("rename", a("email")): len(before_email), ("split", a("address")): len(before_address),
                      ("rename_relation", a("holds")): 1, ("retype", a("plan")): len(before_plan)}
    assert f"OWNS_{suffix.upper()}" in report.new_rel_types
    constraints = {r["name"] for r in old.store.read("SHOW CONSTRAINTS YIELD name RETURN name", {})}
    assert {f"sgam_fact_id_owns_{suffix}", f"sgam_fact_id_street_{suffix}"} <= constraints
    new = connect(example(2, suffix))

    # rename: every version moved (closed, corrected), ids, times and provenance kept
    after_email = new.history(tenant, "cust-0", a("email_address"))
    assert [(f.memory_id, f.value, f.valid_from, f.valid_to, f.recorded_at, f.expired_at, f.schema_version)
            for f in after_email] == [
        (f.memory_id, f.value, f.valid_from, f.valid_to, f.recorded_at, f.expired_at, f.schema_version)
        for f in before_email]
    assert {f.attribute for f in after_email} == {a("email_address")}
    assert [f.value for f in new.current(tenant, "cust-0", a("email_address"))] == ["ada0@fixed.example"]
    assert [f.value for f in new.as_of(tenant, "cust-0", a("email_address"), valid_at=feb)] == ["ada0@old.example"]
    believed = new.as_of(tenant, "cust-0", a("email_address"), valid_at=mar15, known_at=before_fix)
    assert [f.value for f in believed] == [f.value for f in believed_before_fix] == ["ada0@new.example"]

    # split: two facts per version, same times, chains re-linked through derived ids
    streets = new.history(tenant, "cust-0", a("street"))
    cities = new.history(tenant, "cust-0", a("city"))
    assert [f.value for f in streets] == [f.value.split(", ")[0] for f in before_address]
    assert [f.value for f in cities] == [f.value.split(", ")[1] for f in before_address]
    assert [(f.valid_from, f.valid_to, f.recorded_at) for f in streets] == \
        [(f.valid_from, f.valid_to, f.recorded_at) for f in before_address]
    assert streets[0].memory_id == derived_memory_id(before_address[0].memory_id, a("street"))
    assert [f.supersedes_memory_id for f in streets] == [
        derived_memory_id(f.supersedes_memory_id, a("street")) for f in before_address]
    assert any(f.supersedes_memory_id for f in streets)
    assert [f.value for f in new.as_of(tenant, "cust-0", a("city"), valid_at=feb)] == ["Leeds"]
    assert [f.value for f in new.current(tenant, "cust-0", a("street"))] == ["0 New St"]

    # retype: values through the upcaster, now an enum
    plans = new.history(tenant, "pol-0", a("plan"))
    assert [(f.value, f.value_type) for f in plans] == [(f.value.lower(), "enum") for f in before_plan]
    assert {f.value for f in plans} == {"plus", "basic"}
    assert [f.value for f in new.as_of(tenant, "pol-0", a("plan"), valid_at=feb)] == ["plus"]

    # relation type renamed: traversal still works, nothing left under the old type
    [path] = new.traverse(tenant, "cust-0", [a("holds"), a("covered_by")])
    assert path.entities == ("cust-0", "acc-0", "pol-0")
    types = {r["type"] for r in snapshot(new, tenant) if r["attribute"] == a("holds")}
    assert types == {f"OWNS_{suffix.upper()}"}
    # the named query follows the attribute names too (it once matched the type HOLDS)
    [row] = new.query("customer-policies", tenant=tenant, customer="cust-0", valid_at=feb,
                      relations=[a("holds"), a("covered_by")], plan_attribute=a("plan"))
    assert (row["account"], row["policy"], row["plan"]) == ("acc-0", "pol-0", "plus")

    # migrated facts are marked; no old value node or fact is left; the invariants hold
    facts = snapshot(new, tenant)
    assert all(f["migrated_by"] and f["schema_version"] == 2 for f in facts if f["attribute"] != a("covered_by"))
    assert not [f for f in facts if f["attribute"] in (a("email"), a("address"))]
    left = new.store.read("MATCH (v:Value {tenant_id: $t}) WHERE v.attribute IN $old OR NOT EXISTS { ()-->(v) } "
                          "RETURN count(v) AS n", {"t": tenant, "old": [a("email"), a("address")]})
    assert left[0]["n"] == 0
    assert new.doctor(tenant) == []

    # writes under the new version reconcile with the migrated history
    [held] = new.current(tenant, "cust-0", a("email_address"))
    new.record_episode(tenant_id=tenant, id="e4", content="new mail", occurred_at=utc(2026, 5, 1), actor="agent")
    new.write(tenant_id=tenant, subject="cust-0", attribute=a("email_address"), value="ada@newest.example",
              valid_from=utc(2026, 5, 1), source_episode_id="e4", asserted_by="agent")
    [latest] = new.current(tenant, "cust-0", a("email_address"))
    closed = {f.memory_id: f for f in new.history(tenant, "cust-0", a("email_address"))}[latest.supersedes_memory_id]
    assert latest.value == "ada@newest.example"
    assert (closed.value, closed.valid_from, closed.valid_to) == (held.value, held.valid_from, latest.valid_from)


def test_dry_run_writes_nothing_and_apply_is_idempotent(connect, tenant: str, suffix: str) -> None:
    graph = connect(example(1, suffix))
    seed(graph, tenant, suffix, customers=2)
    before = snapshot(graph, tenant)
    per = {name: sum(1 for f in before if f["attribute"] == f"{name}_{suffix}")
           for name in ("email", "holds", "address", "plan")}
    v2 = Schema.from_data(example(2, suffix))
    dry = graph.apply_schema(v2, dry_run=True)
    assert dry.status == "dry-run"
    assert [(s.kind, s.facts) for s in dry.steps] == [("rename", per["email"]), ("rename_relation", per["holds"]),
                                                      ("split", per["address"]), ("retype", per["plan"])]
    assert per["email"] == 2 * len(graph.history(tenant, "cust-0", f"email_{suffix}"))
    assert snapshot(graph, tenant) == before
    stored = graph.store.read("MATCH (m:SchemaMigration {name: $n}) RETURN count(m) AS m", {"n": v2.name})
    assert stored[0]["m"] == 0
    assert graph.store.read("MATCH (s:SchemaVersion {name: $n}) RETURN max(s.version) AS v",
                            {"n": v2.name})[0]["v"] == 2

    applied = graph.apply_schema(v2)
    after = snapshot(graph, tenant)
    assert applied.status == "applied" and applied.facts == sum(per.values())
    again = graph.apply_schema(v2)
    assert again.status == "unchanged" and again.facts == 0
    assert snapshot(graph, tenant) == after
    [record] = graph.store.read("MATCH (m:SchemaMigration {name: $n}) RETURN m.status AS status, "
                                "m.counts AS counts, m.finished_at IS NOT NULL AS finished", {"n": v2.name})
    assert record == {"status": "done", "finished": True,
                      "counts": [per["email"], per["holds"], per["address"], per["plan"]]}


def test_the_async_graph_applies_a_migration_as_the_sync_one_plans_it(connect, neo4j_connection, tenant: str,
                                                                     suffix: str) -> None:
    graph = connect(example(1, suffix))
    seed(graph, tenant, suffix, customers=2)
    v2 = Schema.from_data(example(2, suffix))
    dry = graph.apply_schema(v2, dry_run=True)
    uri, auth = neo4j_connection

    async def scenario() -> tuple[Any, Any, int, list[int]]:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=Schema.from_data(example(1, suffix))) as agraph:
            seen: list[int] = []
            applied = await agraph.apply_schema(v2, on_progress=lambda step, done: seen.append(done))
            again = await agraph.apply_schema(v2)
            return applied, again, agraph.schema.version, seen

    applied, again, version, seen = asyncio.run(scenario())
    assert applied.status == "applied" and [s.facts for s in applied.steps] == [s.facts for s in dry.steps]
    assert again.status == "unchanged" and version == v2.version != graph.schema.version and seen
    [record] = graph.store.read("MATCH (m:SchemaMigration {name: $n}) RETURN m.status AS status", {"n": v2.name})
    assert record == {"status": "done"}


def normalised(graph: MemoryGraph, tenant: str, suffix: str) -> list[tuple]:
    """A tenant's facts without the per-test suffix and random memory ids (chains checked apart)."""
    facts = snapshot(graph, tenant)
    ids = {f["memory_id"] for f in facts}
    assert all(f.get("supersedes_memory_id") in ids | {None} for f in facts)
    return sorted(
        (f["type"].replace(f"_{suffix.upper()}", ""), f["attribute"].replace(f"_{suffix}", ""), f["subject"],
         str(f["value"]), f["value_type"], str(f["valid_from"]), str(f.get("valid_to")), str(f["recorded_at"]),
         str(f.get("expired_at")), f["status"], f.get("supersedes_memory_id") is not None,
         len(f.get("migrated_by", [])))
        for f in facts)


class Stop(Exception):
    pass


def test_crash_midway_then_resume_ends_like_an_uninterrupted_run(connect, tenant: str) -> None:
    clock = lambda: utc(2026, 6, 1)  # noqa: E731 - equal transaction times in both runs
    calm, crashy = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    reference = connect(example(1, calm), clock=clock)
    seed(reference, tenant + "-a", calm, customers=5)
    reference.apply_schema(Schema.from_data(example(2, calm)), batch_size=2)

    graph = connect(example(1, crashy), clock=clock)
    seed(graph, tenant + "-b", crashy, customers=5)
    email, email_address = f"email_{crashy}", f"email_address_{crashy}"
    full = {c: graph.history(tenant + "-b", c, email) for c in ("cust-0", "cust-4")}
    batches = []

    def crash(step, done) -> None:
        batches.append((step.kind, done))
        if len(batches) == 3:
            raise Stop("killed after 3 batches")

    v2 = Schema.from_data(example(2, crashy))
    with pytest.raises(Stop):
        graph.apply_schema(v2, batch_size=2, on_progress=crash)
    [state] = graph.store.read("MATCH (m:SchemaMigration {name: $n}) RETURN m.status AS status, "
                               "m.counts AS counts, m.batches AS batches", {"n": v2.name})
    assert state["status"] == "failed" and state["batches"] == 3 and state["counts"][0] == 6
    assert graph.history(tenant + "-b", "cust-0", email_address) and graph.history(tenant + "-b", "cust-4", email)
    # half moved: a reader by either name still sees every version
    for c, versions in full.items():
        for name in (email, email_address):
            seen = graph.history(tenant + "-b", c, name)
            assert sorted(f.memory_id for f in seen) == sorted(f.memory_id for f in versions)
    with pytest.raises(SchemaViolation, match="has not been applied"):
        connect(example(2, crashy))  # an agent on v2 must not start before the data moved

    resumed = graph.apply_schema(v2, batch_size=2)
    assert resumed.status == "resumed"
    assert normalised(graph, tenant + "-b", crashy) == normalised(reference, tenant + "-a", calm)
    assert graph.apply_schema(v2).status == "unchanged"


def test_dual_read_window(connect, tenant: str, suffix: str) -> None:
    old = connect(example(1, suffix))
    seed(old, tenant, suffix)
    versions = len(old.history(tenant, "cust-0", f"email_{suffix}"))
    old.apply_schema(Schema.from_data(example(2, suffix)))
    # an agent built against v1 keeps reading by the old names until dual_read_until (2027-01-01)
    legacy = connect(example(1, suffix))
    [mail] = legacy.current(tenant, "cust-0", f"email_{suffix}")
    assert mail.value == "ada0@fixed.example" and mail.attribute == f"email_address_{suffix}"
    assert {f.value for f in legacy.current(tenant, "cust-0", f"address_{suffix}")} == {"0 New St", "York"}
    assert [f.value for f in legacy.as_of(tenant, "cust-0", f"email_{suffix}", valid_at=utc(2026, 2, 1))] == \
        ["ada0@old.example"]
    assert len(legacy.history(tenant, "cust-0", f"email_{suffix}")) == versions

    other = uuid.uuid4().hex[:8]
    closed = connect(example(1, other))
    seed(closed, tenant + "-x", other)
    v2 = example(2, other)
    v2["migrations"][0]["dual_read_until"] = "2020-01-01T00:00:00Z"
    closed.apply_schema(Schema.from_data(v2))
    assert closed.current(tenant + "-x", "cust-0", f"email_{other}") == []
    assert len(closed.current(tenant + "-x", "cust-0", f"email_address_{other}")) == 1


def test_refusals_name_the_element_and_apply_nothing(connect, tenant: str, suffix: str, tmp_path: Path) -> None:
    graph = connect(example(1, suffix))
    seed(graph, tenant, suffix)
    before = snapshot(graph, tenant)

    def refused(data: dict[str, Any], match: str) -> None:
        with pytest.raises(SchemaViolation, match=match):
            graph.apply_schema(Schema.from_data(data))

    def step(kind: str, **changes: Any) -> dict[str, Any]:
        data = example(2, suffix)
        for s in data["migrations"][0]["steps"]:
            if s["kind"] == kind:
                s.update(changes)
        return data

    refused(step("retype", upcaster="nope"), "unknown upcaster 'nope'; registered: .*str_to_int")
    refused(step("split", splitter="nope"), "unknown splitter 'nope'; registered: .*full_name")
    refused(step("rename", attribute="mail"), "attribute 'mail' is not in the stored v2; it knows: ")
    refused(example(2, suffix, version=2, migrations=[]), "not newer than the stored v2")
    no_migration = example(2, suffix)
    del no_migration["migrations"]
    refused(no_migration, rf"incompatible changes: attribute address_{suffix} \(removed.*declare `migrations")
    partial = example(2, suffix)
    partial["migrations"][0]["steps"] = [s for s in partial["migrations"][0]["steps"] if s["kind"] != "retype"]
    refused(partial, rf"attribute plan_{suffix}.value_type .*step kinds: rename, rename_relation, retype, split")
    # a stored value the upcaster cannot convert: refused before anything is written
    graph.write(tenant_id=tenant, subject="pol-0", attribute=f"plan_{suffix}", value="Gold",
                valid_from=utc(2026, 4, 1), source_episode_id="e3", asserted_by="agent")
    before = snapshot(graph, tenant)
    refused(example(2, suffix), r"cannot convert 1 stored value\(s\) of 'plan_.*'Gold'")

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(SchemaViolation, match="could not be read"):
        graph.apply_schema(bad)
    assert snapshot(graph, tenant) == before
    assert graph.store.read("MATCH (m:SchemaMigration {name: $n}) RETURN count(m) AS m",
                            {"n": f"cs-{suffix}"})[0]["m"] == 0


def test_cli_apply_dry_run_then_apply(env, connect, tenant: str, suffix: str, tmp_path: Path) -> None:
    graph = connect(example(1, suffix))
    seed(graph, tenant, suffix)
    before = snapshot(graph, tenant)
    moving = sum(1 for f in before if f["attribute"] != f"covered_by_{suffix}")
    path = tmp_path / "v2.yaml"
    path.write_text(yaml.safe_dump(example(2, suffix)), encoding="utf-8")

    dry = runner.invoke(app, ["schema", "apply", str(path), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "dry run" in dry.output and f"would move {moving} facts" in dry.output
    assert snapshot(graph, tenant) == before

    done = runner.invoke(app, ["schema", "apply", str(path), "--batch-size", "2"])
    assert done.exit_code == 0, done.output
    assert f"applied: moved {moving} facts in 4 steps" in done.output
    assert graph.current(tenant, "cust-0", f"city_{suffix}")[0].value == "York"
    again = runner.invoke(app, ["schema", "apply", str(path)])
    assert again.exit_code == 0 and "already applied" in again.output

    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(example(2, suffix, version=4, migrations=[
        {"from_version": 3, "steps": [{"kind": "retype", "attribute": f"plan_{suffix}", "upcaster": "x"}]}])),
        encoding="utf-8")
    refused = runner.invoke(app, ["schema", "apply", str(broken)])
    assert refused.exit_code == 1 and "unknown upcaster 'x'" in refused.output


def test_shipped_example_migrates_the_demo_values() -> None:
    """The example's functions convert the shipped demo's stored values (pure check)."""
    from sgam.graph.evolution import convert_value, plan_migration
    from sgam.graph.schema import load_schema

    plan = plan_migration(load_schema("customer-support"), load_schema("customer-support-v3"))
    steps = {s.kind: s for s in plan.steps}
    new = load_schema("customer-support-v3")
    assert convert_value(steps["split"], new, "12 Analytical St, London") == ["12 Analytical St", "London"]
    assert convert_value(steps["retype"], new, "Plus") == ["plus"]
    assert plan.aliases[:2] == ("email>email_address", "email_address>email")
    assert date(2027, 1, 1) == plan.dual_read_until.date()


KILLED_RUN = """
import json, os, sys, time
from sgam import MemoryGraph
from sgam.graph.schema import Schema

def progress(step, done):
    print(f"{step.kind} {done}", flush=True)
    time.sleep(0.2)  # room for the kill to land between batches

graph = MemoryGraph.connect(os.environ["MIG_URI"], (os.environ["MIG_USER"], os.environ["MIG_PASSWORD"]),
                            schema=Schema.from_file(sys.argv[1]), bootstrap=False)
graph.apply_schema(sys.argv[2], batch_size=1, on_progress=progress)
print("finished", flush=True)
"""


def test_sigkill_midway_then_resume(connect, neo4j_connection, tenant: str, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    clock = lambda: utc(2026, 6, 1)  # noqa: E731
    calm, killed = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    reference = connect(example(1, calm), clock=clock)
    seed(reference, tenant + "-a", calm, customers=3)
    reference.apply_schema(Schema.from_data(example(2, calm)))

    graph = connect(example(1, killed), clock=clock)
    seed(graph, tenant + "-b", killed, customers=3)
    for version in (1, 2):
        (tmp_path / f"v{version}.yaml").write_text(yaml.safe_dump(example(version, killed)), encoding="utf-8")
    uri, (user, password) = neo4j_connection
    with subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(tmp_path / "v1.yaml"), str(tmp_path / "v2.yaml")],
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "MIG_URI": uri, "MIG_USER": user, "MIG_PASSWORD": password},
    ) as child:
        assert child.stdout is not None
        seen = [child.stdout.readline() for _ in range(4)]
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL and all(line.startswith("rename") for line in seen)
    [state] = graph.store.read("MATCH (m:SchemaMigration {name: $n}) RETURN m.status AS status, "
                               "m.batches AS batches", {"n": f"cs-{killed}"})
    assert state["status"] == "running" and 4 <= state["batches"] < 20

    resumed = graph.apply_schema(Schema.from_data(example(2, killed)), batch_size=3)
    assert resumed.status == "resumed"
    assert normalised(graph, tenant + "-b", killed) == normalised(reference, tenant + "-a", calm)


def test_a_store_made_before_0016_loses_the_unused_fact_time_indexes(connect, suffix: str) -> None:
    """Stores bootstrapped before 0016 hold (tenant_id, valid_from) and (tenant_id, recorded_at)
    indexes per fact type that no read uses; connecting drops them and keeps the memory_id
    constraint."""
    schema = Schema.from_data(example(1, suffix))
    first = connect(schema)
    [rel_type, *_] = schema.fact_types()
    slug, quoted = rel_type.lower(), quote_identifier(rel_type)
    for name, key in ((f"sgam_fact_valid_{slug}", "valid_from"), (f"sgam_fact_recorded_{slug}", "recorded_at")):
        first.store.run_write(f"CREATE INDEX {name} IF NOT EXISTS FOR ()-[f:{quoted}]-() ON (f.tenant_id, f.{key})", {})
    first.store.run_write("MATCH (m:Migration {id: $id}) DELETE m", {"id": f"0016-fact-type-{rel_type}-no-time-indexes"})
    listed = "SHOW INDEXES YIELD name WHERE name ENDS WITH $tail RETURN name"
    assert {f"sgam_fact_valid_{slug}", f"sgam_fact_recorded_{slug}"} <= {
        r["name"] for r in first.store.read(listed, {"tail": slug})}

    again = connect(schema)
    names = {r["name"] for r in again.store.read(listed, {"tail": f"_{suffix}"})}
    assert not any(n.startswith(("sgam_fact_valid_", "sgam_fact_recorded_")) for n in names), names
    assert f"sgam_fact_id_{slug}" in names  # the constraint's index

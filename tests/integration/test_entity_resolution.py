"""Entity resolution: aliases (stored, searched, used by ingest), merge and split with exact history,
forget after a merge, and candidate merges; against the real server."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sgam import Conflict, MemoryDelta, MemoryGraph, MergedSubject, NotAllowed, SchemaViolation
from sgam.graph.errors import InvalidDelta


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def believed(graph: MemoryGraph, tenant: str, subject: str) -> list[tuple[Any, ...]]:
    """The valid-time history believed now: (attribute, value, from, to, status), sorted."""
    return sorted((f.attribute, str(f.value), f.valid_from, f.valid_to, f.status.value)
                  for f in graph.history(tenant, subject, current_only=True, principal="*"))


def snapshot(graph: MemoryGraph, tenant: str) -> list[Any]:
    """Every node and relationship of the tenant with all its properties."""
    nodes = graph.store.read("MATCH (n {tenant_id: $t}) RETURN labels(n) AS l, properties(n) AS p", {"t": tenant})
    rels = graph.store.read("MATCH (a {tenant_id: $t})-[r]->(b) RETURN type(r) AS t, properties(r) AS p, "
                            "elementId(a) AS a, elementId(b) AS b", {"t": tenant})
    return sorted(map(repr, nodes)) + sorted(map(repr, rels))


@pytest.fixture
def two_adas(graph: MemoryGraph, tenant: str) -> MemoryGraph:
    """``ada`` (Porto from January) and ``ada-lovelace`` (Lisbon from March, an e-mail): one person."""
    for eid, text, when in (("e1", "Ada lives in Porto.", utc(2026, 1, 1)),
                            ("e2", "Ada Lovelace moved to Lisbon; write to ada@example.org.", utc(2026, 3, 1)),
                            ("e3", "Ada's numbers: phone 1 and phone 2.", utc(2026, 1, 5))):
        graph.record_episode(tenant_id=tenant, id=eid, content=text, occurred_at=when)
    result = graph.write_many([
        MemoryDelta(tenant_id=tenant, subject="ada", subject_name="Ada", attribute="home_city", value="Porto",
                    valid_from=utc(2026, 1, 1), source_episode_id="e1"),
        MemoryDelta(tenant_id=tenant, subject="ada", attribute="contact", value="phone:1",
                    valid_from=utc(2026, 1, 5), source_episode_id="e3"),
        MemoryDelta(tenant_id=tenant, subject="ada-lovelace", subject_name="Ada Lovelace", attribute="home_city",
                    value="Lisbon", valid_from=utc(2026, 3, 1), source_episode_id="e2"),
        MemoryDelta(tenant_id=tenant, subject="ada-lovelace", attribute="email", subject_type="Person",
                    value="ada@example.org", valid_from=utc(2026, 3, 1), source_episode_id="e2"),
        MemoryDelta(tenant_id=tenant, subject="ada-lovelace", attribute="contact", value="phone:2",
                    valid_from=utc(2026, 1, 5), source_episode_id="e3"),
    ])
    assert not result.rejected
    graph.add_alias(tenant, "ada-lovelace", "Countess of Lovelace")
    return graph


def test_merge_keeps_as_of_before_the_merge_and_answers_the_union_now(two_adas: MemoryGraph, tenant: str) -> None:
    g = two_adas
    before = {s: believed(g, tenant, s) for s in ("ada", "ada-lovelace")}
    known = g.clock()
    report = g.merge_entities(tenant, "ada", "ada-lovelace", actor="user:ops", reason="same person")
    assert report.conflicts == ({"attribute": "home_city", "kept": "Porto", "dropped": "Lisbon", "result": "Lisbon"},)
    # Before the merge, each id answers as it did.
    assert [f.value for f in g.as_of(tenant, "ada-lovelace", "home_city", valid_at="2026-04-01", known_at=known)] \
        == ["Lisbon"]
    assert [f.value for f in g.as_of(tenant, "ada", "home_city", valid_at="2026-04-01", known_at=known)] == ["Porto"]
    assert [f.value for f in g.as_of(tenant, "ada", "email", valid_at="2026-04-01", known_at=known)] == []
    # Now: the union of the statements, under the attribute's rules.
    assert [(f.value, f.valid_from, f.valid_to) for f in g.history(tenant, "ada", "home_city", current_only=True)] \
        == [("Porto", utc(2026, 1, 1), utc(2026, 3, 1)), ("Lisbon", utc(2026, 3, 1), None)]
    assert [f.value for f in g.current(tenant, "ada", "email")] == ["ada@example.org"]
    assert sorted(f.value for f in g.current(tenant, "ada", "contact")) == ["phone:1", "phone:2"]
    with pytest.raises(MergedSubject, match="'ada-lovelace'.*merged into 'ada'"):
        g.current(tenant, "ada-lovelace")
    # Aliases, episode links and the record moved with it.
    hits = g.query("search-entities", tenant=tenant, text="countess", k=5)
    assert [h["id"] for h in hits] == ["ada"]
    assert {"Ada Lovelace", "ada-lovelace", "Countess of Lovelace"} <= set(hits[0]["aliases"])
    linked = g.store.read("MATCH (ep:Episode)-[:MENTIONS]->(e:Entity {tenant_id: $t}) RETURN ep.id AS ep, e.id AS e",
                          {"t": tenant})
    assert {r["e"] for r in linked} == {"ada"} and {r["ep"] for r in linked} == {"e1", "e2", "e3"}
    [record] = g.merges(tenant)
    assert (record["kept"], record["dropped"], record["merged_by"], record["reason"], record["status"]) == \
        ("ada", "ada-lovelace", "user:ops", "same person", "merged")
    assert before["ada-lovelace"] and g.doctor(tenant) == []


def test_a_dry_run_writes_nothing_and_reports_the_conflict(two_adas: MemoryGraph, tenant: str) -> None:
    before = snapshot(two_adas, tenant)
    report = two_adas.merge_entities(tenant, "ada", "ada-lovelace", dry_run=True)
    assert report.dry_run and report.merge_id is None and report.conflicts[0]["result"] == "Lisbon"
    assert report.retired > 0 and report.created > 0 and "Ada Lovelace" in report.aliases
    assert snapshot(two_adas, tenant) == before


def test_split_after_merge_restores_both_histories(two_adas: MemoryGraph, tenant: str) -> None:
    g = two_adas
    before = {s: believed(g, tenant, s) for s in ("ada", "ada-lovelace")}
    g.merge_entities(tenant, "ada", "ada-lovelace")
    assert believed(g, tenant, "ada") != before["ada"]
    dry = g.split_entities(tenant, "ada", "ada-lovelace", dry_run=True)
    assert dry.split and dry.dry_run
    g.split_entities(tenant, "ada", "ada-lovelace", actor="user:ops")
    assert {s: believed(g, tenant, s) for s in ("ada", "ada-lovelace")} == before
    assert [h["id"] for h in g.query("search-entities", tenant=tenant, text="countess", k=5)] == ["ada-lovelace"]
    assert [r["status"] for r in g.merges(tenant)] == ["split"]
    assert g.doctor(tenant) == []


def test_merge_then_forget_erases_the_merged_data_and_aliases(two_adas: MemoryGraph, tenant: str) -> None:
    g = two_adas
    g.merge_entities(tenant, "ada", "ada-lovelace")
    g.forget_subject(tenant, "ada")
    assert g.residue(tenant, "ada", forgotten=True) == []
    assert g.residue(tenant, "ada-lovelace", forgotten=True) == []
    left = g.store.read("MATCH (n {tenant_id: $t}) WHERE n:Alias OR n:Merge OR n:Entity OR n:Ledger "
                        "RETURN labels(n) AS l", {"t": tenant})
    assert left == []
    # An alias left behind is found by the independent residue check.
    g.store.run_write("CREATE (:Alias {tenant_id: $t, key: 'countess of lovelace', name: 'Countess of Lovelace'})",
                      {"t": tenant})
    found = g.residue(tenant, "ada", forgotten=True)
    assert found and {(f["where"].split()[-1], f["found"]) for f in found} == {("Alias", "name")}


def test_merge_refusals(two_adas: MemoryGraph, tenant: str, graph: MemoryGraph) -> None:
    with pytest.raises(NotAllowed, match="tenants are isolated"):
        two_adas.merge_entities(tenant, "ada", "ada-lovelace", dropped_tenant=f"{tenant}-other")
    with pytest.raises(Conflict, match="into itself"):
        two_adas.merge_entities(tenant, "ada", "ada")
    graph.record_episode(tenant_id=tenant, id="c", content="Customer ada-c.", occurred_at=utc(2026, 1, 1))
    graph.write(tenant_id=tenant, subject="ada-c", attribute="vip", value=True, valid_from=utc(2026, 1, 1),
                source_episode_id="c")
    with pytest.raises(SchemaViolation, match="is a Person"):
        two_adas.merge_entities(tenant, "ada", "ada-c")
    two_adas.merge_entities(tenant, "ada", "ada-lovelace")
    with pytest.raises(Conflict, match="already merged"):
        two_adas.merge_entities(tenant, "ada", "ada-lovelace")
    # The other tenant's entity of the same id is untouched: merges never reach across.
    other = f"{tenant}-x"
    graph.record_episode(tenant_id=other, id="e1", content="Ada.", occurred_at=utc(2026, 1, 1))
    graph.write(tenant_id=other, subject="ada-lovelace", attribute="home_city", value="Faro",
                valid_from=utc(2026, 1, 1), source_episode_id="e1")
    assert [f.value for f in graph.current(other, "ada-lovelace", "home_city")] == ["Faro"]


def test_relations_pointing_at_the_dropped_entity_follow_it(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="crm", content="c1 holds acc-one.", occurred_at=utc(2026, 1, 1))
    for subject, attribute, value in (("c1", "holds", "acc-one"), ("acc-one", "account_status", "open"),
                                      ("acc-1", "covered_by", "pol-1")):
        graph.write(tenant_id=tenant, subject=subject, attribute=attribute, value=value,
                    valid_from=utc(2026, 1, 1), source_episode_id="crm")
    graph.merge_entities(tenant, "acc-1", "acc-one")
    assert [f.value for f in graph.current(tenant, "c1", "holds")] == ["acc-1"]
    assert {f.attribute for f in graph.current(tenant, "acc-1")} == {"covered_by", "account_status"}
    graph.split_entities(tenant, "acc-1", "acc-one")
    assert [f.value for f in graph.current(tenant, "c1", "holds")] == ["acc-one"]
    assert graph.doctor(tenant) == []


def test_aliases_are_searched_and_used_by_ingest(two_adas: MemoryGraph, tenant: str) -> None:
    g = two_adas
    assert g.add_alias(tenant, "ada", "Countess of Lovelace") == {"countess of lovelace": ["ada-lovelace"]}
    g.add_alias(tenant, "ada", "ada@example.org")
    with pytest.raises(InvalidDelta, match="no letter or digit"):
        g.add_alias(tenant, "ada", "!!")
    assert [h["id"] for h in g.query("search-entities", tenant=tenant, text='"ada@example.org"', k=5)][:1] == ["ada"]
    # A subject given as an alias is the entity it names; a name becomes an alias.
    report = g.ingest(tenant_id=tenant, id="e9", content="ada@example.org: I moved to Faro.",
                      occurred_at=utc(2026, 6, 1),
                      deltas=[{"subject": "ada@example.org", "subject_name": "Ada L.", "attribute": "home_city",
                               "value": "Faro", "valid_from": "2026-06-01T00:00:00Z"}])
    assert "ada" in report.mentions and report.written == 1
    assert [f.value for f in g.current(tenant, "ada", "home_city")] == ["Faro"]
    assert "Ada L." in g.query("search-entities", tenant=tenant, text="ada", k=5)[0]["aliases"]
    # An alias naming two entities is not guessed: it is a merge candidate.
    candidates = g.merge_candidates(tenant)
    assert (candidates[0].a, candidates[0].b) == ("ada", "ada-lovelace")
    assert dict(candidates[0].reasons)["same alias"] == 1.0


def test_a_merged_id_is_resolved_by_ingest(two_adas: MemoryGraph, tenant: str) -> None:
    two_adas.merge_entities(tenant, "ada", "ada-lovelace")
    report = two_adas.ingest(tenant_id=tenant, id="e7", content="The Countess of Lovelace likes tea.",
                             occurred_at=utc(2026, 7, 1),
                             deltas=[{"subject": "ada-lovelace", "attribute": "home_city", "value": "Braga",
                                      "valid_from": "2026-07-01T00:00:00Z"}])
    assert report.written == 1 and report.mentions == ("ada",)
    assert [f.value for f in two_adas.current(tenant, "ada", "home_city")] == ["Braga"]


def test_candidates_by_email_and_name_words(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="e", content="people", occurred_at=utc(2026, 1, 1))
    for subject, name, attribute, value in (("p1", "Ada", "home_city", "Porto"),
                                            ("p2", "Ada Lovelace", "email", "ada.lovelace@example.org"),
                                            ("p3", "Grace Hopper", "email", "grace@example.org")):
        graph.write(tenant_id=tenant, subject=subject, subject_name=name, subject_type="Person", attribute=attribute,
                    value=value, valid_from=utc(2026, 1, 1), source_episode_id="e")
    found = {(c.a, c.b): dict(c.reasons) for c in graph.merge_candidates(tenant)}
    assert "name words" in found[("p1", "p2")]
    assert ("p1", "p3") not in found and ("p2", "p3") not in found
    assert graph.merges(tenant) == []  # proposed, never applied


STATEMENT = st.tuples(st.sampled_from(["home_city", "contact"]), st.sampled_from(["assert", "retract"]),
                      st.sampled_from(["Porto", "Lisbon", "Faro"]), st.integers(1, 6))


@settings(max_examples=12, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(first=st.lists(STATEMENT, min_size=1, max_size=5), second=st.lists(STATEMENT, min_size=1, max_size=5))
def test_merge_then_split_returns_the_original_histories(graph: MemoryGraph, first: list[Any],
                                                         second: list[Any]) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    graph.record_episode(tenant_id=tenant, id="e", content="x", occurred_at=utc(2026, 1, 1))
    deltas = []
    for subject, statements in (("a", first), ("b", second)):
        deltas.append(MemoryDelta(tenant_id=tenant, subject=subject, attribute="email", value=f"{subject}@x.org",
                                  subject_type="Person", valid_from=utc(2026, 1, 1), source_episode_id="e"))
        for attribute, op, value, month in statements:
            deltas.append(MemoryDelta(tenant_id=tenant, subject=subject, attribute=attribute, op=op,
                                      value=value if attribute == "contact" or op == "assert" else None,
                                      valid_from=utc(2026, month, 1), source_episode_id="e"))
    assert not graph.write_many(deltas).rejected
    before = {s: believed(graph, tenant, s) for s in "ab"}
    known = graph.clock()
    graph.merge_entities(tenant, "a", "b")
    merged_at = graph.clock() + timedelta(microseconds=1)
    graph.split_entities(tenant, "a", "b")
    assert {s: believed(graph, tenant, s) for s in "ab"} == before
    # Before the merge, and between merge and split, the store answers what it believed then.
    then = graph.as_of(tenant, "b", valid_at="2026-12-01", known_at=known, principal="*")
    assert sorted((f.attribute, str(f.value)) for f in then) == sorted(
        (a, v) for a, v, _, end, status in before["b"] if end is None and status == "confirmed")
    assert graph.as_of(tenant, "b", valid_at="2026-12-01", known_at=merged_at, principal="*") == []
    assert graph.doctor(tenant) == []


def test_the_cli_merges_with_a_dry_run_and_splits(env, two_adas: MemoryGraph, tenant: str) -> None:
    from typer.testing import CliRunner

    from sgam.cli import app

    runner = CliRunner()
    dry = runner.invoke(app, ["entities", "merge", "-t", tenant, "ada", "ada-lovelace", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would merge 'ada-lovelace' into 'ada'" in dry.output and "conflict on home_city" in dry.output
    assert two_adas.merges(tenant) == []
    listed = runner.invoke(app, ["entities", "candidates", "-t", tenant, "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout)[0]["a"] == "ada"
    done = runner.invoke(app, ["entities", "merge", "-t", tenant, "ada", "ada-lovelace", "--yes", "--json",
                               "--actor", "user:ops"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["merge_id"] == two_adas.merges(tenant)[0]["id"]
    split = runner.invoke(app, ["entities", "split", "-t", tenant, "ada", "ada-lovelace", "--yes"])
    assert split.exit_code == 0 and "split 'ada-lovelace' from 'ada'" in split.output
    missing = runner.invoke(app, ["entities", "merge", "-t", tenant, "ada", "nobody", "--yes"])
    assert missing.exit_code != 0 and "no entity 'nobody'" in missing.output


def test_a_direct_write_to_a_merged_id_is_refused(two_adas: MemoryGraph, tenant: str) -> None:
    two_adas.merge_entities(tenant, "ada", "ada-lovelace")
    result = two_adas.write_many([MemoryDelta(tenant_id=tenant, subject="ada-lovelace", attribute="home_city",
                                              value="Faro", valid_from=utc(2026, 8, 1), source_episode_id="e2")])
    assert "merged into 'ada'" in result.rejected[0].message
    with pytest.raises(MergedSubject):
        two_adas.current(tenant, "ada-lovelace")


def test_export_subject_lists_aliases_and_merge_records(two_adas: MemoryGraph, tenant: str) -> None:
    g = two_adas
    [alias] = g.export_subject(tenant, "ada-lovelace")["aliases"]
    assert (alias["name"], alias["key"]) == ("Countess of Lovelace", "countess of lovelace")
    g.merge_entities(tenant, "ada", "ada-lovelace", actor="user:ops", reason="same person")
    kept, dropped = g.export_subject(tenant, "ada", principal="*"), g.export_subject(tenant, "ada-lovelace")
    assert {"ada lovelace", "countess of lovelace"} <= {a["key"] for a in kept["aliases"]}
    assert dropped["aliases"] == []
    [record] = kept["merges"]
    assert dropped["merges"] == [record]
    assert (record["kept"], record["dropped"], record["status"], record["merged_by"], record["reason"]) \
        == ("ada", "ada-lovelace", "merged", "user:ops", "same person")
    assert "slots" not in record and record["split_at"] is None


def test_deleting_the_only_episode_of_an_entity_deletes_its_aliases(graph: MemoryGraph, tenant: str) -> None:
    graph.ingest(tenant_id=tenant, id="e9", content="Grace Hopper lives in Arlington.", occurred_at=utc(2026, 2, 1),
                 deltas=[{"subject": "grace", "subject_name": "Grace Hopper", "subject_type": "Person",
                          "attribute": "home_city", "value": "Arlington"}])
    aliases = "MATCH (a:Alias {tenant_id: $t}) RETURN a.key AS key"
    assert graph.store.read(aliases, {"t": tenant}) == [{"key": "grace hopper"}]
    report = graph.delete_episode(tenant, "e9", actor="test")
    assert report.entities == ("grace",)
    assert graph.store.read(aliases, {"t": tenant}) == []
    assert graph.doctor(tenant) == []


def test_doctor_notices_an_alias_that_names_no_entity(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="Ada.", occurred_at=utc(2026, 1, 1))
    graph.write(tenant_id=tenant, subject="ada", attribute="home_city", value="Porto", valid_from=utc(2026, 1, 1),
                source_episode_id="e1")
    assert graph.doctor(tenant) == []
    graph.store.run_write("CREATE (:Alias {tenant_id: $t, key: 'lost name', name: 'Lost Name'})", {"t": tenant})
    assert [(p["problem"], p["other"]) for p in graph.doctor(tenant)] == [("orphan alias", "Lost Name")]


def test_ingest_resolves_a_relation_value_through_an_alias(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="Account acc-1 is covered by pol-1.",
                         occurred_at=utc(2026, 1, 1))
    graph.write(tenant_id=tenant, subject="acc-1", subject_type="Account", attribute="covered_by", value="pol-1",
                valid_from=utc(2026, 1, 1), source_episode_id="e1")
    graph.add_alias(tenant, "acc-1", "Gold Account")
    report = graph.ingest(tenant_id=tenant, id="e2", content="Ada holds the gold account.",
                          occurred_at=utc(2026, 2, 1),
                          deltas=[{"subject": "ada", "subject_type": "Customer", "attribute": "holds",
                                   "value": "Gold Account"}])
    assert report.written == 1 and not report.quarantined
    assert [f.value for f in graph.current(tenant, "ada", "holds")] == ["acc-1"]
    # A value that is an entity id stays as it is, even when it is an alias of another entity too.
    graph.write(tenant_id=tenant, subject="acc-2", subject_type="Account", attribute="covered_by", value="pol-1",
                valid_from=utc(2026, 1, 1), source_episode_id="e1")
    graph.add_alias(tenant, "acc-1", "acc-2")
    graph.ingest(tenant_id=tenant, id="e3", content="Ada holds acc-2 too.", occurred_at=utc(2026, 2, 2),
                 deltas=[{"subject": "ada", "attribute": "holds", "value": "acc-2"}])
    assert sorted(f.value for f in graph.current(tenant, "ada", "holds")) == ["acc-1", "acc-2"]

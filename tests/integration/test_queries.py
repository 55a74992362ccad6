"""The analyst queries (queries/*.cypher) and the point-in-time export, against a real Neo4j.

Every fixture is written into a fresh tenant, so each answer below is known exactly.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

import neo4j
import neo4j.time
import networkx as nx
import pytest
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, MemoryDelta, MemoryGraph, UnknownSubject, UnknownTenant
from sgam.cli import app
from sgam.export import node_link, to_networkx
from sgam.graph.errors import InvalidDelta, SgamError
from sgam.graph.schema import default_schema
from sgam.graph.codec import native
from sgam.ingest.replay import replay
from sgam.queries import loader
from sgam.queries.docs import render_readme
from tests.conftest import plugins_for

runner = CliRunner()


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def episode(graph: MemoryGraph, tenant: str, eid: str, when: datetime, actor: str = "user:mira") -> None:
    graph.record_episode(tenant_id=tenant, id=eid, content=f"episode {eid}", occurred_at=when, actor=actor)


def write(graph: MemoryGraph, tenant: str, eid: str, subject: str, attribute: str, value: Any,
          when: datetime, op: str = "assert", confidence: float = 1.0) -> None:
    graph.write(tenant_id=tenant, subject=subject, attribute=attribute, value=value, valid_from=when,
                source_episode_id=eid, asserted_by="user:mira", op=op, confidence=confidence)


def rows(graph: MemoryGraph, name: str, tenant: str, **params: Any) -> list[dict[str, Any]]:
    return [{k: native(v) for k, v in r.items()} for r in graph.query(name, tenant=tenant, **params)]


def demo(graph: MemoryGraph, tenant: str) -> None:
    """The demo episodes (sgam/resources/demo*.jsonl) replayed into ``tenant``."""
    for resource in ("demo.jsonl", "demo-correction.jsonl"):
        text = (files("sgam") / "resources" / resource).read_text(encoding="utf-8")
        summary = replay(graph.store, text.replace('"tenant_id": "demo"', f'"tenant_id": "{tenant}"').splitlines())
        assert not summary.errors


@pytest.fixture
def deadline(graph: MemoryGraph, tenant: str) -> dict[str, datetime]:
    """Mira's passport deadline: 2026-07-15 from 05-20, then 2026-06-30 from 06-10 14:30.

    Returns the transaction-time instants around the two writes."""
    episode(graph, tenant, "e1", utc(2026, 5, 20))
    episode(graph, tenant, "e2", utc(2026, 6, 10, 14, 30))
    before = graph.clock()
    write(graph, tenant, "e1", "mira", "passport_deadline", "2026-07-15", utc(2026, 5, 20))
    between = graph.clock()
    write(graph, tenant, "e2", "mira", "passport_deadline", "2026-06-30", utc(2026, 6, 10, 14, 30))
    after = graph.clock()
    return {"before": before, "between": between, "after": after}


# -- as-of at the interval boundaries -----------------------------------------------------------


def test_as_of_at_interval_boundaries(graph: MemoryGraph, tenant: str, deadline) -> None:
    change = utc(2026, 6, 10, 14, 30)
    at = lambda t, k=None: [r["value"] for r in rows(graph, "as-of", tenant, subject="mira",  # noqa: E731
                                                       attribute="passport_deadline", valid_at=t, known_at=k)]
    # Exactly at the change: the new version's valid_from (included), the old one's valid_to (excluded).
    assert at(change) == [date(2026, 6, 30)]
    assert at(change - timedelta(microseconds=1)) == [date(2026, 7, 15)]
    assert at(utc(2026, 5, 20)) == [date(2026, 7, 15)]            # the first instant of the first version
    assert at(utc(2026, 5, 20) - timedelta(microseconds=1)) == []
    [old] = [r for r in rows(graph, "history", tenant, subject="mira", attribute="passport_deadline")
             if r["valid_to"] is not None]
    assert old["valid_to"] == change and old["value"] == date(2026, 7, 15)
    # Transaction time: believed from recorded_at (inclusive) until expired_at (exclusive).
    [new] = rows(graph, "current", tenant, subject="mira", attribute="passport_deadline")
    recorded = datetime.fromisoformat(new["fact"]["recorded_at"])
    assert at(utc(2026, 6, 20), recorded) == [date(2026, 6, 30)]
    assert at(utc(2026, 6, 20), recorded - timedelta(microseconds=1)) == [date(2026, 7, 15)]
    assert at(utc(2026, 6, 20), deadline["before"]) == []


# -- history-chain ----------------------------------------------------------------------------


def test_history_chain_walks_supersession_and_revision(graph: MemoryGraph, tenant: str, deadline) -> None:
    chain = rows(graph, "history-chain", tenant, subject="mira", attribute="passport_deadline")
    assert len(chain) == 3
    original, closed, current = sorted(chain, key=lambda r: (r["valid_from"], r["believed"], r["value"] == date(2026, 6, 30)))
    assert (original["believed"], original["valid_to"], original["value"]) == (False, None, date(2026, 7, 15))
    assert (closed["believed"], closed["valid_to"]) == (True, utc(2026, 6, 10, 14, 30))
    assert closed["revises"] == original["memory_id"] and original["revised_by"] == [closed["memory_id"]]
    assert current["supersedes"] == closed["memory_id"] and closed["superseded_by"] == [current["memory_id"]]
    assert current["chain"] == [current["memory_id"], closed["memory_id"], original["memory_id"]]
    assert current["chain_values"] == [date(2026, 6, 30), date(2026, 7, 15), date(2026, 7, 15)]
    assert original["chain"] == [original["memory_id"]]
    assert (current["episode"], current["fact"]["asserted_by"]) == ("e2", "user:mira")


def test_history_chain_of_a_correction(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e3", utc(2026, 3, 2))
    episode(graph, tenant, "e4", utc(2026, 6, 20))
    write(graph, tenant, "e3", "mira", "home_city", "Lisbon", utc(2026, 3, 2))
    write(graph, tenant, "e4", "mira", "home_city", "Porto", utc(2026, 3, 2), op="correct")
    chain = {r["value"]: r for r in rows(graph, "history-chain", tenant, subject="mira", attribute="home_city")}
    assert chain["Porto"]["chain_values"] == ["Porto", "Lisbon"] and chain["Porto"]["op"] == "correct"
    assert chain["Lisbon"]["believed"] is False and chain["Porto"]["believed"] is True
    assert rows(graph, "history-chain", tenant, subject="mira", attribute="passport_deadline") == []


# -- changes ----------------------------------------------------------------------------------


def test_changes_between_two_instants(graph: MemoryGraph, tenant: str, deadline) -> None:
    episode(graph, tenant, "e5", utc(2026, 6, 11))
    write(graph, tenant, "e5", "mira", "response_style", "concise", utc(2026, 6, 11))
    end = graph.clock()
    first = rows(graph, "changes", tenant, since=deadline["before"], until=deadline["between"])
    assert [(r["change"], r["value"], r["valid_to"]) for r in first] == [("recorded", date(2026, 7, 15), None)]
    second = rows(graph, "changes", tenant, since=deadline["between"], until=deadline["after"])
    assert sorted((r["change"], r["value"], r["valid_to"] is None) for r in second) == [
        ("recorded", date(2026, 6, 30), True),   # the new version
        ("recorded", date(2026, 7, 15), False),  # the closed copy of the old one
        ("retired", date(2026, 7, 15), True),    # the open row it replaced
    ]
    assert len({r["at"] for r in second}) == 1  # one transaction
    everything = rows(graph, "changes", tenant, since=deadline["before"], until=end)
    assert len(everything) == 5
    only_style = rows(graph, "changes", tenant, since=deadline["before"], until=end, attribute="response_style")
    assert [r["value"] for r in only_style] == ["concise"]
    with pytest.raises(UnknownSubject, match="no subject 'nobody'"):
        rows(graph, "changes", tenant, since=deadline["before"], until=end, subject="nobody")
    # The window is half-open: [since, until).
    at = first[0]["at"]
    assert len(rows(graph, "changes", tenant, since=at, until=at + timedelta(microseconds=1))) == 1
    assert rows(graph, "changes", tenant, since=deadline["before"], until=at) == []


# -- customer -> account -> policy, neighbourhood -----------------------------------------------


@pytest.fixture
def crm(graph: MemoryGraph, tenant: str) -> datetime:
    """Ada holds acc-1 (covered by pol-basic, then pol-plus from 04-01 12:00); Bob holds acc-1 too
    from 03-01; Cy holds acc-2 until 05-01. Returns an instant between the two CRM writes."""
    for eid, when in (("crm-1", utc(2026, 1, 5)), ("crm-2", utc(2026, 4, 1, 12)), ("crm-3", utc(2026, 3, 1)),
                      ("crm-4", utc(2026, 5, 1))):
        episode(graph, tenant, eid, when, actor="tool:crm")
    delta = lambda s, a, v, t, e, op="assert": MemoryDelta(  # noqa: E731
        tenant_id=tenant, subject=s, attribute=a, value=v, valid_from=t, source_episode_id=e, op=op)
    graph.write_many([
        delta("ada", "holds", "acc-1", utc(2026, 1, 5), "crm-1"),
        delta("acc-1", "covered_by", "pol-basic", utc(2026, 1, 5), "crm-1"),
        delta("pol-basic", "plan", "Basic", utc(2026, 1, 5), "crm-1"),
        delta("cy", "holds", "acc-2", utc(2026, 1, 5), "crm-1"),
        delta("acc-2", "covered_by", "pol-basic", utc(2026, 1, 5), "crm-1"),
    ], atomic=True)
    between = graph.clock()
    graph.write_many([
        delta("acc-1", "covered_by", "pol-plus", utc(2026, 4, 1, 12), "crm-2"),
        delta("pol-plus", "plan", "Plus", utc(2026, 4, 1, 12), "crm-2"),
        delta("bob", "holds", "acc-1", utc(2026, 3, 1), "crm-3"),
        delta("cy", "holds", "acc-2", utc(2026, 5, 1), "crm-4", op="retract"),
    ], atomic=True)
    return between


def test_customer_policies_every_hop_valid_at_the_instant(graph: MemoryGraph, tenant: str, crm) -> None:
    upgrade = utc(2026, 4, 1, 12)
    at = lambda t, customer=None, known=None: [  # noqa: E731
        (r["customer"], r["account"], r["policy"], r["plan"])
        for r in rows(graph, "customer-policies", tenant, customer=customer, valid_at=t, known_at=known)]
    assert at(utc(2026, 2, 1)) == [("ada", "acc-1", "pol-basic", "Basic"), ("cy", "acc-2", "pol-basic", "Basic")]
    assert at(upgrade, "ada") == [("ada", "acc-1", "pol-plus", "Plus")]             # exactly at valid_from
    assert at(upgrade - timedelta(microseconds=1), "ada") == [("ada", "acc-1", "pol-basic", "Basic")]
    assert at(utc(2026, 6, 1)) == [("ada", "acc-1", "pol-plus", "Plus"), ("bob", "acc-1", "pol-plus", "Plus")]
    # Cy stopped holding acc-2 on 05-01: the account is still covered, but the first hop is gone.
    assert at(utc(2026, 5, 1), "cy") == [] and at(utc(2026, 4, 30), "cy") == [("cy", "acc-2", "pol-basic", "Basic")]
    assert at(utc(2026, 1, 4)) == []
    # As believed before crm-2..4 were recorded: still pol-basic in June, no Bob, Cy still holding.
    assert at(utc(2026, 6, 1), known=crm) == [("ada", "acc-1", "pol-basic", "Basic"),
                                              ("cy", "acc-2", "pol-basic", "Basic")]
    [row] = rows(graph, "customer-policies", tenant, customer="ada", valid_at=utc(2026, 6, 1), known_at=None)
    assert row["episodes"] == ["crm-1", "crm-2"] and row["covered_from"] == upgrade


def test_neighbourhood_k_hops_at_a_date(graph: MemoryGraph, tenant: str, crm) -> None:
    def near(subject: str, hops: int, t: datetime, relations=None, known=None) -> dict[str, int]:
        found = rows(graph, "neighbourhood", tenant, subject=subject, hops=hops, valid_at=t,
                     known_at=known, relations=relations)
        return {r["entity"]: r["distance"] for r in found}

    feb, june = utc(2026, 2, 1), utc(2026, 6, 1)
    assert near("ada", 1, feb) == {"acc-1": 1}
    assert near("ada", 2, feb) == {"acc-1": 1, "pol-basic": 2}
    # 3 hops in February: pol-basic also covers acc-2, which Cy holds.
    assert near("ada", 4, feb) == {"acc-1": 1, "pol-basic": 2, "acc-2": 3, "cy": 4}
    assert near("ada", 2, june) == {"acc-1": 1, "pol-plus": 2, "bob": 2}
    assert near("ada", 4, june) == {"acc-1": 1, "pol-plus": 2, "bob": 2}
    assert near("ada", 2, june, relations=["holds"]) == {"acc-1": 1, "bob": 2}
    # As believed before crm-2..4 were recorded: no upgrade, no Bob, Cy still holds acc-2.
    assert near("ada", 2, june, known=crm) == {"acc-1": 1, "pol-basic": 2}
    assert near("ada", 4, june, known=crm) == {"acc-1": 1, "pol-basic": 2, "acc-2": 3, "cy": 4}
    assert near("pol-plus", 2, june) == {"acc-1": 1, "ada": 2, "bob": 2}
    [bob] = [r for r in rows(graph, "neighbourhood", tenant, subject="ada", hops=2, valid_at=june,
                             known_at=None, relations=None) if r["entity"] == "bob"]
    assert bob["via"] == ["ada", "acc-1", "bob"] and bob["relations"] == ["holds", "holds"]
    with pytest.raises(UnknownSubject):
        near("nobody", 2, june)
    with pytest.raises(InvalidDelta, match=r"'hops' must be int\[1\.\.4\]"):
        graph.query("neighbourhood", tenant=tenant, subject="ada", hops=5, valid_at=june)


# -- stale, low confidence, quarantine --------------------------------------------------------


def test_stale_facts_not_reconfirmed_for_n_days(neo4j_connection, graph: MemoryGraph, tenant: str) -> None:
    now = graph.clock()
    past = now - timedelta(days=100)
    uri, auth = neo4j_connection
    with MemoryGraph.connect(uri, auth, schema=default_schema(), clock=lambda: past, bootstrap=False) as old:
        episode(old, tenant, "e1", past - timedelta(days=10))
        write(old, tenant, "e1", "mira", "home_city", "Porto", past - timedelta(days=10))
        write(old, tenant, "e1", "mira", "response_style", "concise", past - timedelta(days=10))
        write(old, tenant, "e1", "mira", "contact", "ana", past - timedelta(days=10))
    episode(graph, tenant, "e2", now - timedelta(days=1))
    write(graph, tenant, "e2", "mira", "passport_deadline", "2027-01-31", now - timedelta(days=1))
    write(graph, tenant, "e2", "mira", "response_style", "concise", now - timedelta(days=1))  # reconfirmed
    stale = rows(graph, "stale", tenant, days=30, status=None)
    assert [(r["attribute"], r["value"]) for r in stale] == [("contact", "ana"), ("home_city", "Porto")]
    assert all(r["days_since"] == 100 and r["last_confirmed_at"] == past for r in stale)
    assert rows(graph, "stale", tenant, days=101, status=None) == []
    assert len(rows(graph, "stale", tenant, days=0, status=None)) == 4
    # A candidate (weak signal) that nobody confirmed: made behind SGAM's back, as an extractor will.
    with graph.store.driver.session() as session:
        session.run("MATCH (:Entity {tenant_id: $t, id: 'mira'})-[f:CONTACT]->() SET f.status = 'candidate'",
                    t=tenant).consume()
    assert [r["value"] for r in rows(graph, "stale", tenant, days=30, status="candidate")] == ["ana"]
    assert [r["value"] for r in rows(graph, "stale", tenant, days=30, status="confirmed")] == ["Porto"]


def test_low_confidence_facts(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e1", utc(2026, 1, 1))
    episode(graph, tenant, "e2", utc(2026, 2, 1))
    write(graph, tenant, "e1", "mira", "home_city", "Lisbon", utc(2026, 1, 1), confidence=0.2)
    write(graph, tenant, "e1", "mira", "response_style", "concise", utc(2026, 1, 1), confidence=0.6)
    write(graph, tenant, "e1", "mira", "contact", "ana", utc(2026, 1, 1), confidence=0.45)
    write(graph, tenant, "e1", "mira", "passport_deadline", "2027-01-31", utc(2026, 1, 1))
    low = lambda threshold, subject=None: [  # noqa: E731
        (r["attribute"], r["confidence"]) for r in rows(graph, "low-confidence", tenant, threshold=threshold,
                                                        subject=subject)]
    assert low(0.5) == [("home_city", 0.2), ("contact", 0.45)]
    assert low(0.6) == [("home_city", 0.2), ("contact", 0.45)]  # strictly below
    assert low(0.61) == [("home_city", 0.2), ("contact", 0.45), ("response_style", 0.6)]
    with pytest.raises(UnknownSubject):
        low(0.5, "someone-else")
    # Corrected with confidence: the retired low-confidence row is no longer believed.
    write(graph, tenant, "e2", "mira", "home_city", "Porto", utc(2026, 1, 1), op="correct", confidence=0.9)
    assert low(0.5) == [("contact", 0.45)]


@pytest.fixture
def quarantined(graph: MemoryGraph, tenant: str) -> Iterator[None]:
    """Quarantine nodes as the ingest path will write them (made directly here)."""
    entries = [
        {"tenant_id": tenant, "id": "q1", "episode_id": "e1", "reason": "unknown attribute shoe_size",
         "candidate": json.dumps({"subject": "mira", "attribute": "shoe_size", "value": 42}),
         "created_at": utc(2026, 6, 1)},
        {"tenant_id": tenant, "id": "q2", "episode_id": "e2", "reason": "naive datetime",
         "candidate": "{}", "created_at": utc(2026, 6, 2)},
        {"tenant_id": tenant + "-other", "id": "q3", "episode_id": "e1", "reason": "other tenant",
         "candidate": "{}", "created_at": utc(2026, 6, 3)},
    ]
    with graph.store.driver.session() as session:
        session.run("UNWIND $rows AS r CREATE (q:Quarantine) SET q = r", rows=entries).consume()
    yield
    with graph.store.driver.session() as session:
        session.run("MATCH (q:Quarantine) WHERE q.tenant_id IN [$t, $t + '-other'] DETACH DELETE q",
                    t=tenant).consume()


def test_quarantine_contents(graph: MemoryGraph, tenant: str, quarantined) -> None:
    found = rows(graph, "quarantine", tenant, episode=None, since=None)
    assert [(r["id"], r["episode"]) for r in found] == [("q2", "e2"), ("q1", "e1")]  # newest first
    assert json.loads(found[1]["candidate"])["attribute"] == "shoe_size"
    assert [r["id"] for r in rows(graph, "quarantine", tenant, episode="e1", since=None)] == ["q1"]
    assert [r["id"] for r in rows(graph, "quarantine", tenant, episode=None, since=utc(2026, 6, 2))] == ["q2"]


# -- every query: a tenant with no data is an empty answer; writes are refused -------------------


def _placeholder(param: loader.QueryParam) -> Any:
    if param.optional:
        return None
    return {"string": "nobody", "datetime": datetime.now(timezone.utc), "list": ["x"],
            "int": int(param.minimum or 1), "float": 0.5, "vector": [0.05] * 384}[param.type]


@pytest.mark.parametrize("name", sorted(loader.load_queries()))
def test_a_tenant_with_no_data_is_named_not_answered(graph: MemoryGraph, tenant: str, name: str,
                                                     request: pytest.FixtureRequest) -> None:
    query = loader.load_queries()[name]
    plugins_for(request, query.text)
    params = {p.name: _placeholder(p) for p in query.params}
    params["tenant"] = tenant
    params.update({k: v for k, v in (("attribute", "home_city"), ("relations", ["holds"])) if k in params})
    if name == "residue":   # its empty answer is its answer: nothing is left
        assert graph.query(name, **params) == []
        return
    try:
        answer = graph.query(name, **params)
    except UnknownTenant as exc:   # a typo must not look like "no facts"
        assert f"tenant {tenant!r} holds nothing" in str(exc)
        return
    # Queries that answer in one aggregated row (the kNN ones: hits plus how many index entries of
    # all tenants were read) are never empty: every list in it is.
    assert name.startswith("knn-"), answer
    for row in answer:
        lists = [value for value in row.values() if isinstance(value, list)]
        assert lists and not any(lists), answer


def test_a_write_in_a_query_file_is_refused_by_the_server(env, graph: MemoryGraph, tenant: str,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "evil.cypher"
    path.write_text(
        "// name: evil\n// doc: A query file that tries to write, to prove READ mode.\n"
        "// param: tenant string  the tenant id\n// example: :param {tenant: 'demo'}\n"
        "CREATE (n:Entity {tenant_id: $tenant, id: 'written'}) RETURN n.id AS id\n", encoding="utf-8")
    evil = loader.parse(path.read_text(encoding="utf-8"), str(path))
    with pytest.raises(SgamError, match="(?i)write"):
        graph.store.read(evil.text, evil.bind({"tenant": tenant}))
    # The same file through `sgam query` (which runs every named query in READ mode).
    known = loader.load_queries()
    monkeypatch.setattr(loader, "load_queries", lambda: {**known, "evil": evil})
    result = runner.invoke(app, ["query", "evil", "-t", tenant])
    assert result.exit_code == 1 and "write" in result.output.lower(), result.output
    assert graph.store.read("MATCH (n:Entity {tenant_id: $t}) RETURN count(n) AS n", {"t": tenant})[0]["n"] == 0


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_runs_the_new_queries(env, graph: MemoryGraph, tenant: str, crm) -> None:
    result = runner.invoke(app, ["query", "customer-policies", "-t", tenant, "--valid-at", "2026-02-01",
                                 "-p", "customer=ada", "--json"])
    assert result.exit_code == 0, result.output
    assert [(r["account"], r["policy"]) for r in json.loads(result.stdout)] == [("acc-1", "pol-basic")]
    result = runner.invoke(app, ["query", "neighbourhood", "-t", tenant, "-s", "ada", "-p", "hops=2",
                                 "--valid-at", "2026-06-01"])
    assert result.exit_code == 0 and "neighbourhood: 3 row(s)" in result.stdout, result.output
    result = runner.invoke(app, ["query", "subgraph", "-t", tenant, "--valid-at", "2026-06-01",
                                 "-p", "subjects=ada", "-p", "hops=1", "--json"])
    assert result.exit_code == 0, result.output
    subgraph = json.loads(result.stdout)
    assert {r["fact"]["attribute"] for r in subgraph if r["fact"]} == {"holds"}
    assert {r["subject"]["id"] for r in subgraph} == {"ada", "acc-1"}  # acc-1: no fact of its own inside
    result = runner.invoke(app, ["query", "changes", "-t", tenant, "-p", "since=2026-01-01",
                                 "-p", f"until={graph.clock().isoformat()}", "--json"])
    assert result.exit_code == 0 and len(json.loads(result.stdout)) >= 9, result.output


def test_cli_bad_input_is_explained(env, tenant: str) -> None:
    unknown = runner.invoke(app, ["query", "neighborhood", "-t", tenant])
    assert unknown.exit_code == 1 and "neighbourhood" in unknown.output and "stale" in unknown.output
    hops = runner.invoke(app, ["query", "neighbourhood", "-t", tenant, "-s", "ada", "-p", "hops=9",
                               "--valid-at", "2026-06-01"])
    assert hops.exit_code == 1 and "'hops' must be int[1..4]" in hops.output
    missing = runner.invoke(app, ["query", "stale", "-t", tenant])
    assert missing.exit_code == 1 and "'days'" in missing.output and "int[0..]" in missing.output
    date_ = runner.invoke(app, ["query", "changes", "-t", tenant, "-p", "since=last week", "-p", "until=2026-12-01"])
    assert date_.exit_code == 1 and "'since' must be datetime" in date_.output
    extra = runner.invoke(app, ["query", "stale", "-t", tenant, "-p", "days=3", "-p", "colour=red"])
    assert extra.exit_code == 1 and "no parameter colour" in extra.output
    empty = runner.invoke(app, ["query", "stale", "-t", tenant, "-p", "days=0", "--json"])
    assert empty.exit_code == 4 and f"tenant '{tenant}' holds nothing" in empty.stderr


def test_cli_readme_is_the_committed_one() -> None:
    result = runner.invoke(app, ["query", "--readme"])
    assert result.exit_code == 0 and result.stdout == render_readme()


# -- export -------------------------------------------------------------------------------------


def test_to_networkx_at_now_and_in_the_past(graph: MemoryGraph, tenant: str) -> None:
    demo(graph, tenant)
    now = graph.to_networkx(tenant)
    assert isinstance(now, nx.MultiDiGraph)
    entities = {n for n, a in now.nodes(data=True) if a["kind"] == "entity"}
    assert entities == {"mira", "cust-ada", "acc-1001", "pol-basic", "pol-plus"}
    assert (now.number_of_nodes(), now.number_of_edges()) == (15, 12)
    assert nx.shortest_path(now, "cust-ada", "pol-plus") == ["cust-ada", "acc-1001", "pol-plus"]
    assert not nx.has_path(now, "cust-ada", "pol-basic")
    february = to_networkx(graph, tenant, valid_at=utc(2026, 2, 1))
    assert (february.number_of_nodes(), february.number_of_edges()) == (7, 6)
    assert nx.shortest_path(february, "cust-ada", "pol-basic") == ["cust-ada", "acc-1001", "pol-basic"]
    # Edges carry every fact property, keyed by memory_id, instants as aware datetimes.
    [(_, _, key, holds)] = [e for e in now.edges("cust-ada", keys=True, data=True) if e[3]["attribute"] == "holds"]
    assert key == holds["memory_id"] and holds["rel_type"] == "HOLDS" and holds["kind"] == "relation"
    assert holds["valid_from"] == utc(2026, 1, 5, 10) and holds["valid_from"].tzinfo is not None
    assert holds["source_episode_id"] == "crm-1" and holds["support_episodes"] == ["crm-1"]
    assert now.nodes["cust-ada"]["type"] == "Customer" and now.nodes["cust-ada"]["name"] == "Ada Lovelace"
    [(_, deadline_node, deadline)] = [(u, v, a) for u, v, a in now.edges("mira", data=True)
                                      if a["attribute"] == "passport_deadline"]
    assert deadline["value"] == date(2026, 6, 30) and now.nodes[deadline_node]["kind"] == "value"


def test_to_networkx_retired_and_superseded_facts(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "e3", utc(2026, 3, 2))
    episode(graph, tenant, "e4", utc(2026, 6, 20))
    write(graph, tenant, "e3", "mira", "home_city", "Lisbon", utc(2026, 3, 2))
    before = graph.clock()
    write(graph, tenant, "e4", "mira", "home_city", "Porto", utc(2026, 3, 2), op="correct")
    city = lambda g: [a["value"] for _, _, a in g.edges("mira", data=True)]  # noqa: E731
    assert city(to_networkx(graph, tenant)) == ["Porto"]
    # The retired Lisbon row is absent now, present as believed before the correction.
    assert city(to_networkx(graph, tenant, known_at=before)) == ["Lisbon"]
    assert city(to_networkx(graph, tenant, valid_at=utc(2026, 3, 1))) == []


def test_to_networkx_neighbourhood_of_subjects(graph: MemoryGraph, tenant: str) -> None:
    demo(graph, tenant)
    one = graph.to_networkx(tenant, subjects=["cust-ada"], hops=1)
    assert (one.number_of_nodes(), one.number_of_edges()) == (5, 4)
    assert {a["attribute"] for _, _, a in one.edges(data=True)} == {"holds", "address", "contact_preference",
                                                                    "account_status"}
    two = graph.to_networkx(tenant, subjects="cust-ada", hops=2)
    assert (two.number_of_nodes(), two.number_of_edges()) == (8, 7)
    assert nx.shortest_path(two, "cust-ada", "pol-plus") == ["cust-ada", "acc-1001", "pol-plus"]
    alone = graph.to_networkx(tenant, subjects=["cust-ada"], hops=0)
    assert set(alone.successors("cust-ada")) <= set(alone.nodes) and "acc-1001" not in alone
    with pytest.raises(UnknownSubject):
        graph.to_networkx(tenant, subjects=["nobody"])
    with pytest.raises(UnknownTenant):
        graph.to_networkx(tenant + "-empty")
    with pytest.raises(InvalidDelta, match="hops"):
        graph.to_networkx(tenant, subjects=["cust-ada"], hops=7)
    with pytest.raises(InvalidDelta, match="valid_at"):
        graph.to_networkx(tenant, valid_at=datetime(2026, 2, 1))  # naive: refused, not shifted


def test_export_command_writes_graphml_and_json(env, graph: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    demo(graph, tenant)
    graphml = tmp_path / "demo.graphml"
    result = runner.invoke(app, ["export", "-t", tenant, "--format", "graphml", "-o", str(graphml)])
    assert result.exit_code == 0, result.output
    back = nx.read_graphml(graphml, force_multigraph=True)
    assert (back.number_of_nodes(), back.number_of_edges()) == (15, 12)
    [holds] = [a for _, _, a in back.edges(data=True) if a["attribute"] == "holds"]
    assert datetime.fromisoformat(holds["valid_from"]) == utc(2026, 1, 5, 10)
    assert json.loads(holds["support_episodes"]) == ["crm-1"]
    out = tmp_path / "feb.json"
    result = runner.invoke(app, ["export", "-t", tenant, "--valid-at", "2026-02-01", "-s", "cust-ada", "--hops", "2",
                                 "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["graph"]["as_of"] == "2026-02-01T00:00:00+00:00" and data["graph"]["subjects"] == ["cust-ada"]
    targets = {e["target"] for e in data["edges"] if e["attribute"] == "covered_by"}
    assert targets == {"pol-basic"}
    g = nx.node_link_graph(data, edges="edges")
    assert nx.shortest_path(g, "cust-ada", "pol-basic") == ["cust-ada", "acc-1001", "pol-basic"]
    stdout = runner.invoke(app, ["export", "-t", tenant, "--format", "json"])
    assert stdout.exit_code == 0 and len(json.loads(stdout.stdout)["edges"]) == 12
    bad = runner.invoke(app, ["export", "-t", tenant, "--format", "json", "--valid-at", "yesterday"])
    assert bad.exit_code == 1 and "--valid-at" in bad.output
    wrong = runner.invoke(app, ["export", "-t", tenant, "--format", "csv"])
    assert wrong.exit_code == 2 and "graphml" in wrong.output
    assert node_link(nx.MultiDiGraph())["edges"] == []


# -- every header's example :param line is valid Cypher and runs the query ------------------------


@pytest.mark.parametrize("name", sorted(loader.load_queries()))
def test_example_param_line_runs_the_query(graph: MemoryGraph, name: str, request: pytest.FixtureRequest) -> None:
    """What Browser does with `:param name => expression`: it evaluates `RETURN expression AS
    name` on the server, so a datetime stays a datetime and an integer an integer."""
    query = loader.load_queries()[name]
    plugins_for(request, query.text)
    params = {}
    for key, expression in query.example_params():
        [row] = graph.store.read(f"RETURN {expression} AS `{key}`", {})
        params[key] = row[key]
    assert sorted(params) == sorted(p.name for p in query.params)
    for param in query.params:
        value = params[param.name]
        if value is not None and param.type == "datetime":
            assert isinstance(value, neo4j.time.DateTime), (param.name, value)
        if value is not None and param.type == "int":
            assert isinstance(value, int) and not isinstance(value, bool), (param.name, value)
    if any(params[p.name] is None for p in query.params if not p.optional):
        pytest.skip(f"{name}: the example reads a required value from data this database lacks")
    graph.store.read(query.text, params)  # runs in READ mode without an error


# -- the read API as a new user meets it: current_only, provenance by id, one time vocabulary ----


def test_history_current_only_is_the_believed_rows(graph: MemoryGraph, tenant: str, deadline) -> None:
    everything = graph.history(tenant, "mira", "passport_deadline")
    believed = graph.history(tenant, "mira", "passport_deadline", current_only=True)
    # the contract: believed rows are expired_at IS NULL, a maximal run per value, and together
    # they say what held when: 07-15 until the 06-10 change, 06-30 from then on
    assert sorted(f.memory_id for f in believed) == sorted(f.memory_id for f in everything if f.expired_at is None)
    assert len(everything) > len(believed)
    assert sorted((f.value, f.valid_from, f.valid_to) for f in believed) == [
        (date(2026, 6, 30), utc(2026, 6, 10, 14, 30), None),
        (date(2026, 7, 15), utc(2026, 5, 20), utc(2026, 6, 10, 14, 30)),
    ]
    named = rows(graph, "history", tenant, subject="mira", attribute="passport_deadline", current_only="true")
    assert sorted(r["memory_id"] for r in named) == sorted(f.memory_id for f in believed)
    assert len(rows(graph, "history", tenant, subject="mira", current_only=False)) == len(everything)
    with pytest.raises(InvalidDelta, match="parameter 'current_only' must be bool"):
        graph.query("history", tenant=tenant, subject="mira", current_only="maybe")


def test_provenance_without_the_subject(graph: MemoryGraph, tenant: str, deadline, crm) -> None:
    [now] = graph.current(tenant, "mira", "passport_deadline")
    by_id = graph.provenance(tenant, now.memory_id)
    assert by_id is not None and by_id == graph.provenance(tenant, "mira", now.memory_id)
    assert by_id.episode["id"] == "e2" and [f.value for f in by_id.superseded] == [date(2026, 7, 15)]
    assert graph.provenance(tenant, memory_id=now.memory_id) == by_id
    assert graph.provenance(tenant, "mira", memory_id=now.memory_id) == by_id
    # the older form still checks the subject; an unknown id or another tenant finds nothing
    assert graph.provenance(tenant, "ada", now.memory_id) is None
    assert graph.provenance(tenant, "m-does-not-exist") is None
    with pytest.raises(UnknownTenant):
        graph.provenance(tenant + "x", now.memory_id)
    # a relation fact is found by its id alone too, and the named query scans without a subject
    [holds] = graph.current(tenant, "ada", "holds")
    found = graph.provenance(tenant, holds.memory_id)
    assert found is not None and found.fact.subject == "ada" and found.episode["id"] == "crm-1"
    [row] = graph.query("provenance", tenant=tenant, memory_id=holds.memory_id)
    assert row["fact"]["memory_id"] == holds.memory_id
    with pytest.raises(InvalidDelta, match=r"provenance takes \(tenant, memory_id\) or \(tenant, subject, memory_id\)"):
        graph.provenance(tenant, "a", "b", "c")
    with pytest.raises(InvalidDelta, match="no memory_id"):
        graph.provenance(tenant)


def test_provenance_without_the_subject_keeps_private_facts_private(graph: MemoryGraph, tenant: str) -> None:
    episode(graph, tenant, "kyc-1", utc(2026, 1, 5), actor="agent:kyc")
    graph.write(tenant_id=tenant, subject="ada", attribute="date_of_birth", value="1990-12-10",
                valid_from=utc(2026, 1, 5), source_episode_id="kyc-1", subject_type="Customer")
    [born] = graph.current(tenant, "ada", "date_of_birth", principal="user:ada")
    assert graph.provenance(tenant, born.memory_id) is None
    assert graph.provenance(tenant, born.memory_id, principal="user:bob") is None
    assert graph.provenance(tenant, born.memory_id, principal="user:ada").fact.memory_id == born.memory_id


def test_times_are_accepted_as_iso_strings_as_on_the_cli(graph: MemoryGraph, tenant: str, deadline, crm) -> None:
    between = deadline["between"]
    typed = graph.as_of(tenant, "mira", "passport_deadline", valid_at=utc(2026, 6, 11), known_at=between)
    assert [f.value for f in typed] == [date(2026, 7, 15)]   # what we believed before e2 arrived
    for valid_at in ("2026-06-11", date(2026, 6, 11), "2026-06-11T00:00:00Z", "2026-06-11T02:00:00+02:00"):
        for known_at in (between.isoformat(), between.isoformat().replace("+00:00", "Z")):
            assert graph.as_of(tenant, "mira", "passport_deadline", valid_at=valid_at, known_at=known_at) == typed
    # the README's example call: both instants as strings
    assert graph.as_of(tenant, "mira", valid_at="2026-06-02", known_at="2026-06-01T12:00:00Z") == graph.as_of(
        tenant, "mira", valid_at=utc(2026, 6, 2), known_at=utc(2026, 6, 1, 12))
    path = lambda paths: [p.entities for p in paths]  # noqa: E731
    typed_path = path(graph.traverse(tenant, "ada", ["holds", "covered_by"], valid_at=utc(2026, 2, 1)))
    assert typed_path == [("ada", "acc-1", "pol-basic")]
    assert path(graph.traverse(tenant, "ada", ["holds", "covered_by"], valid_at="2026-02-01")) == typed_path
    february = graph.to_networkx(tenant, valid_at="2026-02-01")
    assert february.graph["as_of"] == utc(2026, 2, 1)
    ctx = graph.context(tenant, "When is Mira's passport deadline?", subjects="mira", valid_at="2026-06-02",
                        expand=False, budget_tokens=600)
    assert ctx.as_of == utc(2026, 6, 2) and [f.value for f in ctx.facts] == [date(2026, 7, 15)]


@pytest.mark.parametrize("call", ["as_of", "traverse", "known_at", "context", "to_networkx"])
def test_a_bad_time_string_is_a_clear_error(graph: MemoryGraph, tenant: str, call: str) -> None:
    reads = {
        "as_of": lambda when: graph.as_of(tenant, "mira", valid_at=when),
        "traverse": lambda when: graph.traverse(tenant, "ada", ["holds"], valid_at=when),
        "known_at": lambda when: graph.as_of(tenant, "mira", valid_at="2026-06-02", known_at=when),
        "context": lambda when: graph.context(tenant, "deadline?", valid_at=when, expand=False),
        "to_networkx": lambda when: graph.to_networkx(tenant, valid_at=when),
    }
    name = "known_at" if call == "known_at" else "valid_at"
    with pytest.raises(InvalidDelta, match=rf"{name} 'soon' is not an ISO 8601 instant; e\.g\. '2026-06-02T12:00:00Z'"):
        reads[call]("soon")
    with pytest.raises(InvalidDelta, match=rf"{name} '2026-06-02T12:00' has no timezone; add one \(2026-06-02T12:00Z"):
        reads[call]("2026-06-02T12:00")
    with pytest.raises(InvalidDelta, match=rf"{name} must be a datetime or an ISO 8601 string, not int"):
        reads[call](20260602)


def test_as_of_is_a_deprecated_alias_of_valid_at(graph: MemoryGraph, tenant: str, crm) -> None:
    with pytest.warns(DeprecationWarning, match=r"to_networkx\(as_of=...\) is deprecated; use valid_at="):
        old = graph.to_networkx(tenant, as_of=utc(2026, 2, 1))
    assert sorted(old.edges(keys=True)) == sorted(graph.to_networkx(tenant, valid_at=utc(2026, 2, 1)).edges(keys=True))
    with pytest.warns(DeprecationWarning, match=r"to_networkx\(as_of=...\)"):
        assert sorted(to_networkx(graph, tenant, as_of="2026-02-01").edges(keys=True)) == sorted(old.edges(keys=True))
    question = "Which policy covers acc-1?"
    with pytest.warns(DeprecationWarning, match=r"context\(as_of=...\) is deprecated"):
        ctx = graph.context(tenant, question, subjects="acc-1", as_of=utc(2026, 2, 1), expand=False)
    assert ctx == graph.context(tenant, question, subjects="acc-1", valid_at=utc(2026, 2, 1), expand=False)
    assert [f.value for f in ctx.facts] == ["pol-basic"]
    with pytest.raises(InvalidDelta, match="give valid_at only"):
        graph.context(tenant, question, valid_at=utc(2026, 2, 1), as_of=utc(2026, 2, 1))


def test_async_graph_reads_the_same_way(neo4j_connection, graph: MemoryGraph, tenant: str, deadline) -> None:
    uri, auth = neo4j_connection
    [now] = graph.current(tenant, "mira", "passport_deadline")

    async def scenario() -> list[Any]:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as agraph:
            return [
                await agraph.provenance(tenant, now.memory_id),
                await agraph.provenance(tenant, "mira", now.memory_id),
                await agraph.history(tenant, "mira", "passport_deadline", current_only=True),
                await agraph.as_of(tenant, "mira", "passport_deadline", valid_at="2026-06-02",
                                   known_at=deadline["after"].isoformat()),
                await agraph.context(tenant, "passport deadline?", subjects="mira", valid_at="2026-06-02",
                                     expand=False),
            ]

    by_id, by_subject, believed, then, ctx = asyncio.run(scenario())
    assert by_id == by_subject == graph.provenance(tenant, now.memory_id)
    assert believed == graph.history(tenant, "mira", "passport_deadline", current_only=True)
    assert [f.value for f in then] == [date(2026, 7, 15)]
    assert [f.value for f in ctx.facts] == [date(2026, 7, 15)]


# Keys that only a schema migration writes: a store that never migrated has no such property key.
MIGRATION_ONLY_KEYS = ("dual_read_until", "aliases")
# The server's notifications of an unknown label, relationship type or property key, and the
# procedure that makes each known (a token: no node or relationship is written).
UNKNOWN_TOKEN = {"01N50": "db.createLabel", "01N51": "db.createRelationshipType", "01N52": "db.createProperty"}


def _make_known(driver: Any, text: str) -> None:
    """Make every label, relationship type and property key ``text`` names known to the server."""
    with driver.session() as session, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = session.run("EXPLAIN " + text).consume()
        for status in summary.gql_status_objects:
            procedure = UNKNOWN_TOKEN.get(status.gql_status)
            if procedure is not None:
                [token] = re.findall(r"`([^`]+)`", status.status_description)[:1]
                session.run(f"CALL {procedure}($token)", token=token).consume()


@pytest.mark.parametrize("name", sorted(loader.load_queries()))
def test_no_unknown_key_warning_on_a_store_that_never_migrated(neo4j_connection, name: str,
                                                               request: pytest.FixtureRequest) -> None:
    """The server warns (and Browser shows it on every run) when a query reads a property key the
    store has never held. The shared test server has migrated, so the migration-only keys are
    renamed to keys no store holds, which is what a fresh store sees; the query must stay quiet.
    Every other label, type and key the query names is made known first, as a store in use holds
    them (whatever test files ran before this one)."""
    uri, auth = neo4j_connection
    text = loader.load_queries()[name].text
    plugins_for(request, text)
    driver = neo4j.GraphDatabase.driver(uri, auth=auth, notifications_min_severity="WARNING")
    try:
        _make_known(driver, text)
    finally:
        driver.close()
    for key in MIGRATION_ONLY_KEYS:
        text = re.sub(rf"\b{key}\b", f"{key}_never_written_4f1c", text)
    driver = neo4j.GraphDatabase.driver(uri, auth=auth, notifications_min_severity="WARNING")
    try:
        with driver.session() as session, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            summary = session.run("EXPLAIN " + text).consume()
    finally:
        driver.close()
    unknown = [s.status_description for s in summary.gql_status_objects
               if s.gql_status in ("01N50", "01N51", "01N52")]  # unknown label, type, property key
    assert unknown == [], unknown
    assert [str(w.message) for w in caught] == []

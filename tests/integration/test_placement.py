"""Tenant placement over several servers (issue 16): the test server plus two local Neo4j servers
started here (their own homes and ports, small heaps), stopped at the end.

Every statement the graph runs is recorded with the server it ran on (``spy``), so "no query
touches another tenant's server" is checked on every statement, and each server is also asked
directly (a driver of its own) what it holds of each tenant.
"""

from __future__ import annotations

import contextvars
import json
import shutil
import socket
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from neo4j import GraphDatabase
from typer.testing import CliRunner

from sgam import MemoryDelta, MemoryGraph
from sgam.cli import app
from sgam.graph import store as store_module
from sgam.graph.errors import InvalidSetting
from sgam.graph.transfer import PLACED_LABELS
from sgam.ingest.worker import Worker, WorkerOptions
from sgam.placement import move_tenant
from sgam.settings import Placement, Settings, Target, load_placement, save_placement

pytestmark = pytest.mark.integration

if shutil.which("java") is None:
    pytest.skip("the extra local Neo4j servers need java on PATH", allow_module_level=True)

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
runner = CliRunner()
# What a tenant holds on one server, asked label by label (each scan on the tenant's index).
HOLDS = "CALL () {\n" + "\n UNION ALL ".join(
    f"MATCH (n:{label} {{tenant_id: $tenant}}) RETURN count(n) AS n" for label in PLACED_LABELS) + "\n} RETURN sum(n) AS n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _up(server: Any) -> Any:
    info = server.up()
    MemoryGraph.connect(info.uri, ("neo4j", server.credentials()[2])).close()
    return info


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, str, str]]]:
    """Two extra servers, started side by side: ``[(uri, password, env variable)]``. Only this
    module uses them: stopped after it, not left holding memory and CPU through the rest of the
    session."""
    from sgam.local.server import LocalServer

    locals_ = [LocalServer(Settings(home=tmp_path_factory.mktemp(f"placement-{name}"), bolt_port=_free_port(),
                                    http_port=_free_port(), heap_size="384m", pagecache_size="64m",
                                    start_timeout=240))
               for name in ("b", "c")]
    try:
        # The java launcher reads JDK_JAVA_OPTIONS. These servers live a few minutes and run each
        # statement a handful of times, so the JVM's second (C2) compiler never pays back: its
        # compiling competes with the first runs of every statement, which planned at twice the time.
        with ThreadPoolExecutor(len(locals_)) as pool, pytest.MonkeyPatch.context() as patch:
            patch.setenv("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
            # Started and bootstrapped (indexes, constraints) side by side: most of the file's time.
            infos = list(pool.map(_up, locals_))
        yield [(info.uri, server.credentials()[2], f"SGAM_TEST_PLACEMENT_{name}")  # type: ignore[index]
               for info, server, name in zip(infos, locals_, ("B", "C"))]
    finally:
        for server in locals_:
            server.down()


@pytest.fixture
def main(neo4j_connection: tuple[str, tuple[str, str]]) -> tuple[str, tuple[str, str]]:
    return neo4j_connection


@pytest.fixture
def passwords(servers: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    for _, password, variable in servers:
        monkeypatch.setenv(variable, password)


def target(server: tuple[str, str, str]) -> Target:
    uri, _, variable = server
    return Target(uri=uri, password_env=variable)


def held(uri: str, auth: tuple[str, str], tenant: str) -> int:
    """How many nodes of ``tenant`` the server at ``uri`` holds, asked directly."""
    with GraphDatabase.driver(uri, auth=auth) as driver:
        records, _, _ = driver.execute_query(HOLDS, tenant=tenant)
    return int(records[0]["n"])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


_SERVER: contextvars.ContextVar[str | None] = contextvars.ContextVar("test_server", default=None)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, set[str], str]]:
    """Every statement run through a store: (the store's uri, the strings among its parameters,
    the statement)."""
    seen: list[tuple[str, set[str], str]] = []
    answer, run = store_module.Store._answer, store_module._run

    def answering(self: Any, request: Any) -> Any:
        token = _SERVER.set(self.uri)
        try:
            return answer(self, request)
        finally:
            _SERVER.reset(token)

    def running(tx: Any, statement: Any) -> Any:
        seen.append((_SERVER.get() or "?", set(_strings(statement.params)), statement.query))
        return run(tx, statement)

    monkeypatch.setattr(store_module.Store, "_answer", answering)
    monkeypatch.setattr(store_module, "_run", running)
    return seen


def seed(graph: MemoryGraph, tenant: str) -> None:
    """Mira moved (two versions of home_city), Ada holds acc-1, covered by a policy."""
    for index, day in enumerate((0, 10)):
        graph.record_episode(tenant_id=tenant, id=f"e{index}", content=f"note {index} of {tenant}",
                             occurred_at=EPOCH + timedelta(days=day))
    delta = lambda s, a, v, day, e: MemoryDelta(tenant_id=tenant, subject=s, attribute=a, value=v,  # noqa: E731
                                                valid_from=EPOCH + timedelta(days=day), source_episode_id=e)
    graph.write(delta("mira", "home_city", "Porto", 0, "e0"))
    result = graph.write_many([delta("mira", "home_city", "Oslo", 10, "e1"), delta("ada", "holds", "acc-1", 0, "e0"),
                               delta("acc-1", "covered_by", "pol-basic", 0, "e0")], atomic=True)
    assert not result.rejected


def answers(graph: MemoryGraph, tenant: str, subjects: list[str]) -> dict[str, Any]:
    """The held-out-style questions: now, as of instants (and as believed before the last write),
    history, traversal and the provenance of every version."""
    out: dict[str, Any] = {}
    last = max(f.recorded_at for s in subjects for f in graph.history(tenant, s))
    for subject in subjects:
        history = graph.history(tenant, subject)
        out[subject] = {
            "current": graph.current(tenant, subject),
            "history": history,
            "as_of": [graph.as_of(tenant, subject, valid_at=EPOCH + timedelta(days=d)) for d in (0, 5, 15, 45)],
            "known": graph.as_of(tenant, subject, valid_at=EPOCH + timedelta(days=45),
                                 known_at=last - timedelta(microseconds=1)),
            "provenance": [graph.provenance(tenant, f.memory_id) for f in history],
            "traverse": graph.traverse(tenant, subject, ["holds", "covered_by"], valid_at=EPOCH + timedelta(days=45)),
        }
    return out


def test_two_servers_each_tenant_lands_on_its_own(main, servers, passwords, spy, tmp_path: Path) -> None:
    (uri, auth), b = main, servers[0]
    here, there = f"pl-{uuid.uuid4().hex[:10]}-a", f"pl-{uuid.uuid4().hex[:10]}-b"
    placement = Placement(tenants={there: target(b)})
    with MemoryGraph.connect(uri, auth, settings=Settings(placement=placement)) as graph:
        for tenant in (here, there):
            seed(graph, tenant)
            assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Oslo"]
            assert len(graph.history(tenant, "mira", "home_city")) == 3   # Porto, its closed copy, Oslo
            [path] = graph.traverse(tenant, "ada", ["holds", "covered_by"], valid_at=EPOCH + timedelta(days=1))
            assert path.entities == ("ada", "acc-1", "pol-basic")
            assert graph.doctor(tenant) == []
        assert graph.forget_subject(there, "mira", actor="test").facts == 3
        assert graph.residue(there, "mira", forgotten=True) == []
        assert [f.value for f in graph.current(here, "mira", "home_city")] == ["Oslo"]   # the other one kept it
        # No call spans two targets: a merge across them, or one batch of deltas for both.
        with pytest.raises(InvalidSetting, match="different servers"):
            graph.merge_entities(here, "ada", "ada", dropped_tenant=there)
        with pytest.raises(InvalidSetting, match="different servers"):
            graph.write_many([MemoryDelta(tenant_id=t, subject="zed", attribute="home_city", value="Lima",
                                          valid_from=EPOCH, source_episode_id="e0") for t in (here, there)])
        # The queue lives with the tenant: the worker of B's store processes B's episode.
        graph.ingest(tenant_id=there, id="q1", content="a note to process later", occurred_at=EPOCH)
        assert [s.uri for s in graph.targets.all()] == [uri, b[0]]
        scopes = graph.targets.scopes([here, there])
        assert [(s.uri, scope) for s, scope in scopes] == [(uri, [here]), (b[0], [there])]
        for store, scope in scopes:
            Worker(store, [], WorkerOptions(tenant=scope, poll=0.01)).run(until_idle=True)
        done = {r["status"]: r["episodes"] for r in graph.query("queue", tenant=there, principal="*")}
        assert done.get("done") == 1 and "pending" not in done
    # Directly on each server: each tenant is on its own server only.
    assert held(uri, auth, here) > 0 and held(b[0], ("neo4j", b[1]), there) > 0
    assert held(uri, auth, there) == 0 and held(b[0], ("neo4j", b[1]), here) == 0
    # And every statement that named a tenant ran on that tenant's server.
    assert [q for s, names, q in spy if here in names and s != uri] == []
    assert [q for s, names, q in spy if there in names and s != b[0]] == []
    assert {s for s, names, _ in spy if here in names or there in names} == {uri, b[0]}
    with MemoryGraph.connect(uri, auth, settings=Settings(placement=placement)) as graph:
        graph.delete_tenant(here)
        graph.delete_tenant(there)


def test_a_moved_tenant_answers_as_before_across_three_servers(main, servers, passwords, spy,
                                                                tmp_path: Path) -> None:
    (uri, auth), (b, c) = main, servers
    tenant = f"pl-{uuid.uuid4().hex[:10]}-m"
    file = tmp_path / "placement.json"
    with MemoryGraph.connect(uri, auth, settings=Settings(placement_file=file)) as graph:
        seed(graph, tenant)
        graph.forget_subject(tenant, "acc-1", actor="test")   # a tombstone moves too
        graph.add_alias(tenant, "ada", "Ada Lovelace")
        subjects = ["mira", "ada"]
        before = answers(graph, tenant, subjects)
        # main -> B -> C: each move re-places the tenant, and the old server keeps only the record.
        for server in (b, c):
            old_uri = graph.targets.of([tenant]).uri
            report = move_tenant(graph, tenant, target(server), file)
            assert report.counts.get("Tombstone") == 1 and report.counts.get("Alias") == 1
            assert load_placement(file).target(tenant) == target(server)
            assert answers(graph, tenant, subjects) == before
            old_auth = auth if old_uri == uri else ("neo4j", b[1])
            assert held(old_uri, old_auth, tenant) == 1   # the (:Deletion) record of the move only
    assert held(c[0], ("neo4j", c[1]), tenant) > 0 and held(b[0], ("neo4j", b[1]), tenant) == 1
    assert {s for s, names, _ in spy if tenant in names} == {uri, b[0], c[0]}
    # A new graph reads the placement from the file, and asks C alone.
    spy.clear()
    with MemoryGraph.connect(uri, auth, settings=Settings(placement_file=file)) as graph:
        assert answers(graph, tenant, subjects) == before
        graph.delete_tenant(tenant)
    assert {s for s, names, _ in spy if tenant in names} == {c[0]}


def test_an_interrupted_move_leaves_the_source_answering(main, servers, passwords, tmp_path: Path) -> None:
    (uri, auth), b = main, servers[0]
    tenant = f"pl-{uuid.uuid4().hex[:10]}-i"
    file = tmp_path / "placement.json"

    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with MemoryGraph.connect(uri, auth, settings=Settings(placement_file=file)) as graph:
        seed(graph, tenant)
        before = answers(graph, tenant, ["mira", "ada"])
        with pytest.raises(KeyboardInterrupt):
            move_tenant(graph, tenant, target(b), file, batch_size=2, on_progress=interrupt)
        assert not file.exists() and graph.targets.of([tenant]).uri == uri
        assert answers(graph, tenant, ["mira", "ada"]) == before
        assert held(b[0], ("neo4j", b[1]), tenant) == 0   # the partial copy was removed
        graph.delete_tenant(tenant)


# (subject, attribute, value): Mira's city (a Person), Ada's address and account (a Customer).
WRITES = [("mira", "home_city", city) for city in ("Porto", "Oslo", "Faro")] + [
    ("ada", "address", "Lima"), ("ada", "address", "Faro"), ("ada", "holds", "acc-1"), ("ada", "holds", "acc-2")]
rows = st.lists(st.tuples(st.sampled_from(WRITES), st.integers(0, 40)), min_size=1, max_size=8)


# Each example starts a move between two servers (seconds): a few, and no shrinking of a failure
# (the failing history is printed as it is).
@settings(max_examples=4, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows)
def test_any_history_moves_exactly(main, servers, passwords, tmp_path: Path, data) -> None:
    (uri, auth), b = main, servers[0]
    tenant = f"pl-{uuid.uuid4().hex[:10]}-h"
    file = tmp_path / f"{tenant}.json"
    with MemoryGraph.connect(uri, auth, settings=Settings(placement_file=file)) as graph:
        for index, ((subject, attribute, value), day) in enumerate(data):
            eid = graph.record_episode(tenant_id=tenant, id=f"e{index}", content=f"{subject} {value} {day}",
                                       occurred_at=EPOCH + timedelta(days=day)).id
            graph.write(tenant_id=tenant, subject=subject, attribute=attribute, value=value,
                        subject_type="Person" if subject == "mira" else "Customer",
                        valid_from=EPOCH + timedelta(days=day), source_episode_id=eid)
        subjects = sorted({subject for (subject, _, _), _ in data})
        before = answers(graph, tenant, subjects)
        move_tenant(graph, tenant, target(b), file)
        assert answers(graph, tenant, subjects) == before
        graph.delete_tenant(tenant)


def test_the_tenants_commands(main, servers, passwords, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (uri, auth), b = main, servers[0]
    file = tmp_path / "placement.json"
    monkeypatch.setenv("SGAM_PLACEMENT_FILE", str(file))
    monkeypatch.setenv("NEO4J_URI", uri)
    monkeypatch.setenv("NEO4J_USER", auth[0])
    monkeypatch.setenv("NEO4J_PASSWORD", auth[1])
    tenant, empty = f"pl-{uuid.uuid4().hex[:10]}-c", f"pl-{uuid.uuid4().hex[:10]}-e"
    with MemoryGraph.connect(uri, auth, settings=Settings(placement_file=file)) as graph:
        seed(graph, tenant)
    placed = runner.invoke(app, ["tenants", "place", empty, "--uri", b[0], "--password-env", b[2]])
    assert placed.exit_code == 0, placed.output
    moved = runner.invoke(app, ["tenants", "move", tenant, "--to", b[0], "--password-env", b[2], "--json"])
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.output)["counts"]["Episode"] == 2
    listed = runner.invoke(app, ["tenants", "list", "--json"])
    assert set(json.loads(listed.output)["tenants"]) == {tenant, empty}
    # Every command reads the placement: doctor and a named query go to B.
    doctor = runner.invoke(app, ["doctor", "-t", tenant])
    assert doctor.exit_code == 0, doctor.output
    assert held(uri, auth, tenant) == 1 and held(b[0], ("neo4j", b[1]), tenant) > 0
    wrong = runner.invoke(app, ["tenants", "place", empty, "--uri", "http://127.0.0.1:7474"])
    assert wrong.exit_code == 1 and "not a Bolt address" in wrong.output
    back = runner.invoke(app, ["tenants", "move", tenant])   # back to the default server
    assert back.exit_code == 0, back.output
    assert load_placement(file).target(tenant) == Target()
    with MemoryGraph.connect(uri, auth, settings=Settings(placement_file=file)) as graph:
        assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Oslo"]
        graph.delete_tenant(tenant)


def test_the_service_hands_out_the_bookmarks_of_the_tenants_own_server(main, servers, passwords,
                                                                      tmp_path: Path) -> None:
    """A tenant placed on B, written through ``sgam serve``: the answer's bookmarks are B's, so B
    waits for them and a client that sends them back reads its own write."""
    from neo4j import Bookmarks

    from sgam.service.keys import create_key, revoke_key
    from tests.integration.service_server import start

    (uri, auth), b = main, servers[0]
    tenant = f"pl-{uuid.uuid4().hex[:10]}-s"
    file = tmp_path / "placement.json"
    save_placement(file, Placement(tenants={tenant: target(b)}))
    with MemoryGraph.connect(uri, auth) as graph:
        key = create_key(graph.store, tenant, "user:mira", "write")
        try:
            for server in start(main, SGAM_PLACEMENT_FILE=str(file), **{b[2]: b[1]}):
                with server.client(key.key) as client:
                    said = client.post("/v1/remember", json={
                        "content": "Mira moved to Tromsø.", "occurred_at": "2026-03-01T09:00:00Z",
                        "deltas": [{"subject": "mira", "attribute": "home_city", "value": "Tromsø"}]})
                    assert said.status_code == 200, said.text
                    bookmarks = said.headers["X-SGAM-Bookmarks"].split(",")
                    read = client.post("/v1/current", json={"subject": "mira"},
                                       headers={"X-SGAM-Bookmarks": ",".join(bookmarks)})
                    assert [f["value"] for f in read.json()["facts"]] == ["Tromsø"], read.text
            with GraphDatabase.driver(b[0], auth=("neo4j", b[1])) as driver, \
                    driver.session(bookmarks=Bookmarks.from_raw_values(bookmarks)) as session:
                # B knows these transactions: it answers at once, and holds the write.
                assert session.run(HOLDS, tenant=tenant).single()[0] > 0
            assert held(uri, auth, tenant) == 0
        finally:
            revoke_key(graph.store, key.identity.key_id)
            with MemoryGraph.connect(uri, auth, settings=Settings(placement_file=file)) as placed:
                placed.delete_tenant(tenant)

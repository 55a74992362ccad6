"""Causal consistency and routing through the routing scheme (``neo4j://``), which a single server
also serves: every session carries the store's bookmark manager, bookmarks advance with each
write, another process that is handed them reads the write, reads run in READ access mode (a write
in one is refused), and bookmarks Neo4j cannot read are refused with a clear error."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import neo4j
import pytest

from sgam import AsyncMemoryGraph, ForgottenSubject, InvalidDelta, MemoryGraph, SgamError
from sgam.graph.schema import default_schema
from sgam.graph.steps import Statement, one
from sgam.graph.store import check_bolt_uri

WHEN = datetime(2026, 3, 1, tzinfo=timezone.utc)

# Process A writes a value and prints its graph's bookmarks; process B connects with them (argv)
# and prints what it reads. Both connect through the routing scheme.
WRITER = """
import json, sys
from datetime import datetime, timedelta, timezone
from sgam import MemoryGraph
tenant, city = sys.argv[1], sys.argv[2]
with MemoryGraph.connect(bootstrap=False) as graph:
    when = datetime(2026, 3, 1, tzinfo=timezone.utc)
    graph.record_episode(tenant_id=tenant, id="moved", content="Mira moved to " + city, occurred_at=when)
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value=city, valid_from=when,
                source_episode_id="moved")
    print(json.dumps(graph.bookmarks()))
"""
READER = """
import json, sys
from sgam import MemoryGraph
tenant, bookmarks = sys.argv[1], json.loads(sys.argv[2])
with MemoryGraph.connect(bootstrap=False, bookmarks=bookmarks) as graph:
    print(json.dumps([f.value for f in graph.current(tenant, "mira", "home_city")]))
"""


def routing(uri: str) -> str:
    """The routing-scheme address of the same server (bolt+s -> neo4j+s, ...)."""
    scheme, rest = uri.split("://", 1)
    return scheme.replace("bolt", "neo4j") + "://" + rest


@pytest.fixture(scope="module")
def routed(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[MemoryGraph]:
    uri, auth = neo4j_connection
    graph = MemoryGraph.connect(routing(uri), auth, schema=default_schema())
    yield graph
    graph.close()


def remember(graph: MemoryGraph, tenant: str, city: str, episode: str, day: int = 0) -> None:
    """Mira lives in ``city`` from ``day`` days after WHEN (a later day supersedes)."""
    when = WHEN + timedelta(days=day)
    graph.record_episode(tenant_id=tenant, id=episode, content=f"Mira lives in {city}", occurred_at=when)
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value=city, valid_from=when,
                source_episode_id=episode)


def test_the_routing_and_encrypted_schemes_are_accepted() -> None:
    for scheme in ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc"):
        assert check_bolt_uri(f"{scheme}://db.example.com:7687") == f"{scheme}://db.example.com:7687"


def test_the_whole_write_read_cycle_runs_through_the_routing_scheme(routed: MemoryGraph, tenant: str) -> None:
    assert routed.store.uri.startswith("neo4j")
    remember(routed, tenant, "Lisbon", "e1")
    assert [f.value for f in routed.current(tenant, "mira", "home_city")] == ["Lisbon"]
    remember(routed, tenant, "Porto", "e2", day=1)
    assert [f.value for f in routed.current(tenant, "mira", "home_city")] == ["Porto"]
    assert {f.value for f in routed.history(tenant, "mira", "home_city")} == {"Lisbon", "Porto"}
    assert routed.forget_subject(tenant, "mira").facts >= 1
    with pytest.raises(ForgottenSubject):
        routed.current(tenant, "mira", "home_city")


def test_every_session_carries_the_bookmark_manager_and_bookmarks_advance_with_each_write(
        routed: MemoryGraph, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = routed.store
    opened: list[dict[str, Any]] = []
    session = store.driver.session

    def recorded(**options: Any) -> Any:
        opened.append(options)
        return session(**options)

    monkeypatch.setattr(store.driver, "session", recorded)
    seen = [routed.bookmarks()]
    for i, city in enumerate(["Lisbon", "Porto", "Faro"]):
        remember(routed, tenant, city, f"e{i}", day=i)
        seen.append(routed.bookmarks())
        # The read right after the write, on the same graph, sees it.
        assert [f.value for f in routed.current(tenant, "mira", "home_city")] == [city]
    assert all(len(b) >= 1 and all(isinstance(s, str) for s in b) for b in seen[1:])
    assert all(before != after for before, after in zip(seen, seen[1:])), seen
    assert opened and all(o["bookmark_manager"] is store.bookmark_manager for o in opened)
    modes = {o["default_access_mode"] for o in opened}
    assert modes == {neo4j.READ_ACCESS, neo4j.WRITE_ACCESS}


def test_bookmarks_passed_between_two_processes_make_the_second_read_the_first_ones_write(
        routed: MemoryGraph, tenant: str, neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    uri, (user, password) = neo4j_connection
    env = {**os.environ, "NEO4J_URI": routing(uri), "NEO4J_USER": user, "NEO4J_PASSWORD": password}

    def python(code: str, *args: str) -> Any:
        done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    bookmarks = python(WRITER, tenant, "Coimbra")
    assert bookmarks and all(isinstance(b, str) and b for b in bookmarks)
    assert python(READER, tenant, json.dumps(bookmarks)) == ["Coimbra"]
    # The same bookmarks, handed to a graph already connected, are accepted and kept.
    routed.catch_up(bookmarks)
    assert set(routed.bookmarks())


def test_a_read_transaction_refuses_a_write_through_the_routing_driver(routed: MemoryGraph, tenant: str) -> None:
    write = Statement("CREATE (:Entity {tenant_id: $tenant, id: 'intruder'})", {"tenant": tenant})
    with pytest.raises(SgamError, match="(?i)read access mode"):
        routed.store.inspect(lambda: one(write))
    with pytest.raises(SgamError, match="(?i)read access mode"):
        routed.store.read(write.query, write.params)
    [row] = routed.store.read("MATCH (e:Entity {tenant_id: $tenant}) RETURN count(e) AS n", {"tenant": tenant})
    assert row["n"] == 0


@pytest.mark.parametrize("bookmarks", [["garbage"], ["FB:kcwQ"], ["FB:" + "A" * 40]])
def test_bookmarks_neo4j_cannot_read_are_refused_and_nothing_of_them_is_kept(
        routed: MemoryGraph, tenant: str, bookmarks: list[str]) -> None:
    remember(routed, tenant, "Braga", "e1")
    before = routed.bookmarks()
    with pytest.raises(InvalidDelta, match="bookmarks"):
        routed.catch_up(bookmarks)
    assert routed.bookmarks() == before
    assert [f.value for f in routed.current(tenant, "mira", "home_city")] == ["Braga"]


@pytest.mark.parametrize("bookmarks", ["FB:kcwQULmOptN3RsKYuvsT7VCHy8oACPakkA==", [""], [7], None, ["\ud800"], ["é"]])
def test_bookmarks_that_are_not_a_list_of_strings_are_refused_before_any_round_trip(
        routed: MemoryGraph, bookmarks: Any) -> None:
    with pytest.raises(InvalidDelta, match="bookmarks"):
        routed.catch_up(bookmarks)


def test_connect_with_garbage_bookmarks_is_refused(neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    uri, auth = neo4j_connection
    with pytest.raises(InvalidDelta, match="cannot read the bookmarks"):
        MemoryGraph.connect(routing(uri), auth, bootstrap=False, bookmarks=["not-a-bookmark"])


def test_the_async_graph_keeps_bookmarks_too(routed: MemoryGraph, tenant: str,
                                             neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    uri, auth = neo4j_connection
    remember(routed, tenant, "Evora", "e1")

    async def main() -> tuple[list[Any], list[str], list[str]]:
        graph = await AsyncMemoryGraph.connect(routing(uri), auth, bootstrap=False,
                                               bookmarks=routed.bookmarks())
        try:
            seen = [f.value for f in await graph.current(tenant, "mira", "home_city")]
            before = await graph.bookmarks()
            later = WHEN + timedelta(days=1)
            await graph.record_episode(tenant_id=tenant, id="e2", content="Mira lives in Faro", occurred_at=later)
            await graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Faro",
                              valid_from=later, source_episode_id="e2")
            after = await graph.bookmarks()
            with pytest.raises(InvalidDelta, match="cannot read the bookmarks"):
                await graph.catch_up(["garbage"])
            assert await graph.bookmarks() == after
            return seen, before, after
        finally:
            await graph.close()

    seen, before, after = asyncio.run(main())
    assert seen == ["Evora"]
    assert after and after != before
    routed.catch_up(after)
    assert [f.value for f in routed.current(tenant, "mira", "home_city")] == ["Faro"]

"""Test tiers and the real Neo4j every integration test runs against.

The tier marker comes from the folder (tests/unit, tests/integration), so the two cannot drift.
The server is, in order: ``NEO4J_URI`` if set; a testcontainers Neo4j when a Docker engine
answers; otherwise the locally provisioned server (started here on its own ports and home, and
stopped again if this session started it). Never a mock.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sgam import MemoryGraph
from sgam.graph.schema import default_schema
from sgam.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
NEO4J_IMAGE = "neo4j:5.26.31-community"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(str(item.fspath)).relative_to(ROOT / "tests").parts[0]
        if tier in ("unit", "integration", "browser"):
            item.add_marker(getattr(pytest.mark, tier))


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        probe = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return False
    return probe.returncode == 0


def neo4j_container_class() -> type:
    """testcontainers' Neo4j container: ``testcontainers.community.neo4j`` in testcontainers 4.x
    (``testcontainers.neo4j`` is deprecated there, and with warnings as errors its import fails)."""
    from testcontainers.community.neo4j import Neo4jContainer

    return Neo4jContainer


def server_settings() -> Settings:
    """Settings of the test server: its own home and ports, so a demo server can keep running."""
    return Settings(
        home=Path(os.environ.get("SGAM_TEST_HOME", ROOT / ".sgam" / "test-neo4j")),
        bolt_port=int(os.environ.get("SGAM_TEST_BOLT_PORT", "7688")),
        http_port=int(os.environ.get("SGAM_TEST_HTTP_PORT", "7475")),
        heap_size="1g",
        pagecache_size="512m",
        # Most test queries run fewer than ten times: compiling each one's expressions when it is
        # planned made the suite about 7% slower (sgam/bench/README.md, "Session 17").
        cypher_expressions="hot",
    )


@pytest.fixture(scope="session")
def neo4j_connection() -> Iterator[tuple[str, tuple[str, str]]]:
    """``(uri, auth)`` of a real Neo4j for this test session."""
    if os.environ.get("NEO4J_URI"):
        yield os.environ["NEO4J_URI"], (
            os.environ.get("NEO4J_USER", "neo4j"), os.environ.get("NEO4J_PASSWORD", "")
        )
        return
    if _docker_answers():
        with neo4j_container_class()(NEO4J_IMAGE) as container:
            yield container.get_connection_url(), ("neo4j", container.password)
        return
    from sgam.local.server import LocalServer

    server = LocalServer(server_settings())
    was_running = server.status().running
    info = server.up()
    uri, user, password = server.credentials()  # type: ignore[misc]
    try:
        yield info.uri, (user, password)
    finally:
        if not was_running:
            server.down()


@pytest.fixture(scope="session")
def shared_graph(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[MemoryGraph]:
    uri, auth = neo4j_connection
    graph = MemoryGraph.connect(uri, auth, schema=default_schema())
    yield graph
    graph.close()


@pytest.fixture
def graph(shared_graph: MemoryGraph) -> MemoryGraph:
    return shared_graph


@pytest.fixture(scope="session", autouse=True)
def _own_placement_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The session's placement map, not the user's ``~/.sgam/placement.json``: a tenant placed
    there by a test (the CLI walk fuzzes ``sgam tenants place``) would reach every later test and
    every later process on the machine."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SGAM_PLACEMENT_FILE", str(tmp_path_factory.mktemp("placement") / "placement.json"))
        yield


@pytest.fixture
def env(neo4j_connection: tuple[str, tuple[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Point the CLI (which reads its settings from the environment) at the test server, with a
    placement map of the test's own (what a command places stays in this test)."""
    uri, (user, password) = neo4j_connection
    monkeypatch.setenv("NEO4J_URI", uri)
    monkeypatch.setenv("NEO4J_USER", user)
    monkeypatch.setenv("NEO4J_PASSWORD", password)
    monkeypatch.setenv("SGAM_PLACEMENT_FILE", str(tmp_path / "placement.json"))


@pytest.fixture
def tenant() -> str:
    """A fresh tenant per test: tests share one database and never see each other's data."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def has_apoc(neo4j_connection: tuple[str, tuple[str, str]]) -> bool:
    """Whether the test server has APOC core, which the `picture` query needs. A local server
    started before `sgam neo4j up` provisioned APOC lacks it until restarted; CI starts its own
    server, so there a missing APOC fails the session instead of skipping."""
    from neo4j import GraphDatabase

    uri, auth = neo4j_connection
    with GraphDatabase.driver(uri, auth=auth) as driver:
        found, _, _ = driver.execute_query(
            "SHOW PROCEDURES YIELD name WHERE name = 'apoc.create.vRelationship' RETURN name")
    if not found and os.environ.get("CI"):
        pytest.fail("the test server has no APOC core (apoc.create.vRelationship): "
                    "`sgam neo4j up` should have put it into the server's plugins/")
    return bool(found)


def plugins_for(request: pytest.FixtureRequest, cypher: str) -> None:
    """Skip (outside CI) a test of a query that calls APOC on a server without it."""
    if "apoc." in cypher:
        request.getfixturevalue("apoc")


@pytest.fixture
def apoc(has_apoc: bool) -> None:
    """Skip a test that needs APOC core on a server without it (see ``has_apoc``)."""
    if not has_apoc:
        pytest.skip("the test server has no APOC core: restart it (`sgam neo4j down`, then up) so "
                    "`sgam neo4j up` puts APOC into its plugins/, or install APOC core on it")

"""The local Neo4j server, for real: Maven-resolved jars, a JVM, Bolt and HTTP.

Runs on non-default ports in a temporary home, so it never touches a server a developer already
runs on 7687/7474. The jar cache is the default one, so only the first run ever downloads.
The tests share one server and run in file order: up, use, up again, down.
"""

from __future__ import annotations

import json
import shutil
import socket
import stat
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError
from typer.testing import CliRunner

from sgam.cli import app
from sgam.graph.errors import ProvisioningError
from sgam.local.server import LocalServer, ServerInfo
from sgam.settings import resolve_connection
from sgam.settings import Settings

pytestmark = pytest.mark.integration

if shutil.which("java") is None or shutil.which("mvn") is None:
    pytest.skip("the local Neo4j needs java and mvn on PATH", allow_module_level=True)


def _free_port(preferred: int) -> int:
    """``preferred`` if nothing listens on it, else any free port (a parallel run holds it)."""
    for port in (preferred, 0):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise RuntimeError("no free port")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(
        home=tmp_path_factory.mktemp("neo4j-home"),
        bolt_port=_free_port(17687),
        http_port=_free_port(17474),
        # Small: the machine may already run another Neo4j and the build.
        heap_size="512m",
        pagecache_size="128m",
        start_timeout=90,
    )


@pytest.fixture(scope="module")
def server(settings: Settings) -> Iterator[LocalServer]:
    local = LocalServer(settings)
    yield local
    local.down()  # whatever a failing test left running


@pytest.fixture(scope="module")
def info(server: LocalServer) -> ServerInfo:
    return server.up()


def _get(url: str, accept: str = "application/json") -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read()


def _is_neo4j_process(pid: int) -> bool:
    try:
        return b"CommunityEntryPoint" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _conf_keys(server: LocalServer) -> list[str]:
    lines = (server.conf_dir / "neo4j.conf").read_text().splitlines()
    return [line.split("=", 1)[0] for line in lines if line and not line.startswith("#")]


def test_up_serves_discovery_and_browser(info: ServerInfo, settings: Settings) -> None:
    assert info.uri == f"bolt://127.0.0.1:{settings.bolt_port}"
    status, body = _get(info.http_url + "/")
    discovery = json.loads(body)
    assert status == 200
    # The advertised address, not the default 7687, or the Browser would connect elsewhere.
    assert discovery["bolt_direct"] == f"bolt://127.0.0.1:{settings.bolt_port}"
    assert discovery["neo4j_edition"] == "community"
    assert discovery["neo4j_version"].startswith("5.26")

    status, body = _get(info.browser_url, accept="text/html")
    assert status == 200
    assert b"<html" in body.lower()


def test_credentials_are_private_and_work(info: ServerInfo) -> None:
    mode = stat.S_IMODE(info.credentials_path.stat().st_mode)
    assert mode == 0o600

    stored = json.loads(info.credentials_path.read_text())
    assert stored["uri"] == info.uri and stored["user"] == "neo4j"
    with GraphDatabase.driver(info.uri, auth=(stored["user"], stored["password"])) as driver:
        records, _, _ = driver.execute_query("RETURN 1 AS ok")
        assert records[0]["ok"] == 1

    with GraphDatabase.driver(info.uri, auth=("neo4j", "not-the-password")) as driver:
        with pytest.raises(AuthError):
            driver.verify_connectivity()


def test_resolve_connection_prefers_explicit_settings(
    info: ServerInfo, settings: Settings, server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("NEO4J_URI", "NEO4J_USER", "NEO4J_PASSWORD"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(f"SGAM_{var}", raising=False)
    unset = {"neo4j_uri": None, "neo4j_user": None, "neo4j_password": None}
    local = settings.model_copy(update=unset)
    assert resolve_connection(local) == server.credentials()

    remote = local.model_copy(
        update={"neo4j_uri": "neo4j+s://db.example:7687", "neo4j_password": "pw"}
    )
    assert resolve_connection(remote) == ("neo4j+s://db.example:7687", "neo4j", "pw")

    empty = local.model_copy(update={"home": settings.home / "nowhere"})
    with pytest.raises(ProvisioningError, match="sgam neo4j up"):
        resolve_connection(empty)


def test_second_up_reuses_the_running_server(info: ServerInfo, server: LocalServer) -> None:
    console_before = server.console_log.stat()
    again = server.up()
    assert again.pid == info.pid
    # Not restarted: a restart rotates console.log.
    assert server.console_log.stat().st_ino == console_before.st_ino


def test_status_reports_running(info: ServerInfo, server: LocalServer) -> None:
    status = server.status()
    assert status.running and status.pid == info.pid
    assert status.uri == info.uri
    assert status.browser_url == info.browser_url


def test_config_rewritten_without_duplicates(
    info: ServerInfo, server: LocalServer, settings: Settings
) -> None:
    first = (server.conf_dir / "neo4j.conf").read_text()
    server.write_config()  # the second write (up wrote the first)
    assert (server.conf_dir / "neo4j.conf").read_text() == first

    keys = _conf_keys(server)
    duplicates = [key for key, count in Counter(keys).items() if count > 1]
    assert duplicates == []
    lines = [line for line in first.splitlines() if line and not line.startswith("#")]
    conf = dict(line.split("=", 1) for line in lines)
    assert conf["server.bolt.advertised_address"] == f"127.0.0.1:{settings.bolt_port}"
    assert conf["server.http.advertised_address"] == f"127.0.0.1:{settings.http_port}"
    assert conf["server.https.enabled"] == "false"
    assert conf["dbms.security.auth_enabled"] == "true"


def _shared_bits(root: Path) -> dict[str, str]:
    """Everything under ``root`` that its group or others may use, with its mode."""
    return {str(p.relative_to(root)): oct(stat.S_IMODE(p.lstat().st_mode))
            for p in [root, *root.rglob("*")]
            if not p.is_symlink() and stat.S_IMODE(p.lstat().st_mode) & 0o077}


def test_the_home_is_private_to_its_user(info: ServerInfo, server: LocalServer) -> None:
    """The store files and transaction logs hold episode text: nothing under the home is readable
    by anyone but its user, including what the server wrote while running."""
    stored = json.loads(info.credentials_path.read_text())
    with GraphDatabase.driver(info.uri, auth=(stored["user"], stored["password"])) as driver:
        driver.execute_query("CREATE (:PermissionProbe {text: 'private episode text'})")
        driver.execute_query("MATCH (n:PermissionProbe) DELETE n")
    logs = list((server.home / "data" / "transactions").rglob("neostore.transaction.db.*"))
    assert logs and (server.home / "data" / "databases" / "neo4j").is_dir()
    assert _shared_bits(server.home) == {}
    # What it creates from now on (new log files, a new database) is private too: its umask.
    umask = [line for line in Path(f"/proc/{info.pid}/status").read_text().splitlines()
             if line.startswith("Umask:")]
    assert umask == ["Umask:\t0077"]
    # A home from before (or a file a server started before then wrote) is tightened by `up`.
    logs[0].chmod(0o644)
    server.logs_dir.chmod(0o755)
    assert server.up().pid == info.pid
    assert _shared_bits(server.home) == {}


def test_up_reports_the_memory_the_running_server_has(info: ServerInfo, settings: Settings,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM runs with the configured heap, and `sgam neo4j up` on the running server reports the
    sizes it was started with, even when the settings now say otherwise (auto here)."""
    command = Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")
    assert f"-Xmx{settings.heap_size}".encode() in command
    for var in ("SGAM_HEAP_SIZE", "SGAM_PAGECACHE_SIZE", "NEO4J_URI", "NEO4J_USER", "NEO4J_PASSWORD",
                "SGAM_NEO4J_URI", "SGAM_NEO4J_USER", "SGAM_NEO4J_PASSWORD"):  # the home's own server and credentials
        monkeypatch.delenv(var, raising=False)
    result = CliRunner().invoke(app, ["neo4j", "up", "--home", str(settings.home), "--bolt-port",
                                      str(settings.bolt_port), "--http-port", str(settings.http_port)])
    assert result.exit_code == 0, result.output
    assert f"heap {settings.heap_size}, page cache {settings.pagecache_size}" in result.output


def test_down_stops_the_server(info: ServerInfo, server: LocalServer, settings: Settings) -> None:
    assert server.down() is True
    status = server.status()
    assert not status.running and status.pid is None
    assert not server.pid_path.exists()
    assert not _is_neo4j_process(info.pid)
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", settings.bolt_port)) != 0
    assert server.down() is False

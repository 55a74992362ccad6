"""The local server's neo4j.conf (no server started): settings that keep a big import on the disk."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from sgam.graph.errors import InvalidSetting
from sgam.local.server import LocalServer, jar_artifact, machine_memory, memory_sizes, restrict_tree
from sgam.settings import Settings


def test_transaction_logs_are_bounded(tmp_path: Path) -> None:
    conf = LocalServer(Settings(home=tmp_path / "home", bolt_port=7991, http_port=7992))._config()
    # Neo4j's default keeps "2 days" of logs: 9.5 GB after a 1M-fact import, ~95 GB at 10M.
    assert conf["db.tx_log.rotation.retention_policy"] == "1G size"
    # Logs are pruned only at a checkpoint: the default 15 minutes would let an import outgrow the cap.
    assert conf["db.checkpoint.interval.time"] == "5m"
    assert conf["db.tx_log.preallocate"] == "false"


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in [root, *root.rglob("*")]
            if not p.is_symlink()}


def test_an_existing_home_is_made_private(tmp_path: Path) -> None:
    """A home made world-readable (0755 folders, 0644 files: the store and transaction logs hold
    episode text) keeps only its owner's bits; links are not followed out of it."""
    home = tmp_path / "home"
    logs = home / "data" / "transactions" / "neo4j"
    logs.mkdir(parents=True)
    for path, mode in ((logs / "neostore.transaction.db.0", 0o644), (home / "conf" / "neo4j.conf", 0o664),
                       (home / "run" / "tool", 0o755)):
        path.parent.mkdir(exist_ok=True)
        path.write_text("x")
        path.chmod(mode)
    for folder in (home, home / "data", home / "data" / "transactions", logs, home / "conf", home / "run"):
        folder.chmod(0o755)
    outside = tmp_path / "shared.txt"
    outside.write_text("not the home's")
    outside.chmod(0o644)
    os.symlink(outside, home / "link")
    restrict_tree(home)
    modes = _modes(home)
    assert {name: mode for name, mode in modes.items() if mode & 0o077} == {}
    assert modes["data/transactions/neo4j"] == 0o700
    assert modes["data/transactions/neo4j/neostore.transaction.db.0"] == 0o600
    assert modes["run/tool"] == 0o700  # the owner's execute bit stays
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644


def test_only_apoc_create_is_loaded(tmp_path: Path) -> None:
    """APOC core is in plugins/ for the Browser pictures' virtual relationships; of its procedures
    only apoc.create.* load (APOC's file and URL loaders stay out of reach)."""
    conf = LocalServer(Settings(home=tmp_path / "home", bolt_port=7991, http_port=7992))._config()
    assert conf["dbms.security.procedures.allowlist"] == "apoc.create.*"
    assert conf["server.directories.plugins"] == "plugins"


def test_expressions_are_compiled_when_planned_unless_asked_otherwise(tmp_path: Path, monkeypatch) -> None:
    """SGAM_CYPHER_EXPRESSIONS: compiled at planning by default (no slow 10th run), or Neo4j's own."""
    settings = dict(home=tmp_path / "home", bolt_port=7991, http_port=7992)
    assert LocalServer(Settings(**settings))._config()["internal.cypher.expression_engine"] == "COMPILED"
    monkeypatch.setenv("SGAM_CYPHER_EXPRESSIONS", "hot")
    assert LocalServer(Settings(**settings))._config()["internal.cypher.expression_engine"] == "DEFAULT"
    monkeypatch.setenv("SGAM_CYPHER_EXPRESSIONS", "sometimes")
    with pytest.raises(InvalidSetting, match="SGAM_CYPHER_EXPRESSIONS.*'compiled' or 'hot'"):
        Settings(**settings)


def test_plugins_are_copied_and_replaced_but_the_users_own_stay(tmp_path: Path) -> None:
    server = LocalServer(Settings(home=tmp_path / "home", cache_dir=tmp_path / "cache",
                                  apoc_version="5.26.19"))
    server.plugins_cache.mkdir(parents=True)
    for name in ("org.neo4j.procedure.apoc-core-5.26.19.jar", "com.opencsv.opencsv-5.7.1.jar"):
        (server.plugins_cache / name).write_text(name)
    server.plugins_dir.mkdir(parents=True)
    (server.plugins_dir / "users-own-1.0.jar").write_text("mine")
    server._install_plugins()
    assert sorted(p.name for p in server.plugins_dir.glob("*.jar")) == [
        "com.opencsv.opencsv-5.7.1.jar", "org.neo4j.procedure.apoc-core-5.26.19.jar", "users-own-1.0.jar"]
    # A later APOC: the old copy goes, the user's jar stays.
    newer = LocalServer(Settings(home=tmp_path / "home", cache_dir=tmp_path / "cache",
                                 apoc_version="5.26.20"))
    newer.plugins_cache.mkdir(parents=True)
    (newer.plugins_cache / "org.neo4j.procedure.apoc-core-5.26.20.jar").write_text("new")
    newer._install_plugins()
    assert sorted(p.name for p in newer.plugins_dir.glob("*.jar")) == [
        "org.neo4j.procedure.apoc-core-5.26.20.jar", "users-own-1.0.jar"]
    assert stat.S_IMODE((newer.plugins_dir / "org.neo4j.procedure.apoc-core-5.26.20.jar").stat().st_mode) == 0o600


@pytest.mark.parametrize(("jar", "artifact"), [
    ("org.ow2.asm.asm-9.3.jar", "org.ow2.asm.asm"),
    ("org.apache.commons.commons-lang3-3.12.0.jar", "org.apache.commons.commons-lang3"),
    ("org.neo4j.neo4j-slf4j-provider-5.26.31.jar", "org.neo4j.neo4j-slf4j-provider"),
    ("net.minidev.json-smart-2.5.0.jar", "net.minidev.json-smart"),
])
def test_a_plugin_dependency_is_matched_to_the_servers_by_artifact(jar: str, artifact: str) -> None:
    """A dependency of APOC the server's lib already has (another version) is left out of
    plugins/, which comes first on the classpath: matched by group and artifact, not version."""
    assert jar_artifact(jar) == artifact


# -- memory: "auto" is an eighth of the machine's memory each, within bounds -----------------------

MIB = 1 << 20


def _mib(size: str) -> int:
    assert size.endswith("m"), size
    return int(size[:-1])


@given(st.integers(min_value=1, max_value=1 << 42))
def test_auto_memory_is_an_eighth_of_the_machine_within_bounds(total: int) -> None:
    heap, cache = (_mib(s) for s in memory_sizes(total))
    eighth = total / 8 / MIB
    for size, low, high in ((heap, 1024, 4096), (cache, 512, 4096)):
        assert size % 256 == 0
        assert low <= size <= high
        if low < size < high:  # not clamped: the eighth, rounded down to a 256 MiB step
            assert size <= eighth < size + 256
        elif size == low and low < high:
            assert eighth < low + 256
        else:
            assert eighth >= high


def test_auto_memory_on_known_machines() -> None:
    assert memory_sizes(24 << 30) == ("3072m", "3072m")
    assert memory_sizes(8 << 30) == ("1024m", "1024m")
    assert memory_sizes(2 << 30) == ("1024m", "512m")
    assert memory_sizes(128 << 30) == ("4096m", "4096m")
    assert memory_sizes(None) == ("1g", "512m")  # unknown: Neo4j's small defaults


def test_the_config_and_the_jvm_get_the_same_resolved_memory(tmp_path: Path) -> None:
    server = LocalServer(Settings(home=tmp_path / "home", bolt_port=7991, http_port=7992))
    heap, cache = server.memory
    assert (heap, cache) == memory_sizes(machine_memory())
    conf = server._config()
    assert conf["server.memory.heap.initial_size"] == conf["server.memory.heap.max_size"] == heap
    assert conf["server.memory.pagecache.size"] == cache
    command = server._java_command("java")
    assert f"-Xms{heap}" in command and f"-Xmx{heap}" in command
    assert "auto" not in " ".join([*conf.values(), *command])


def test_a_size_given_is_kept_and_only_auto_is_resolved(tmp_path: Path) -> None:
    server = LocalServer(Settings(home=tmp_path / "home", heap_size="2g", pagecache_size="auto"))
    assert server.memory == ("2g", memory_sizes(machine_memory())[1])
    assert LocalServer(Settings(home=tmp_path / "h2", heap_size="768m", pagecache_size="64m")).memory == ("768m", "64m")


@pytest.mark.parametrize("variable", ["SGAM_HEAP_SIZE", "SGAM_PAGECACHE_SIZE"])
@pytest.mark.parametrize("bad", ["2G", "1.5g", "0m", "lots", "", "-1g", "2 g", "512"])
def test_a_bad_memory_size_names_the_variable_and_the_form(monkeypatch: pytest.MonkeyPatch, variable: str,
                                                            bad: str) -> None:
    monkeypatch.setenv(variable, bad)
    with pytest.raises(InvalidSetting) as caught:
        Settings()
    message = str(caught.value)
    assert variable in message and "'auto'" in message and "2g" in message and repr(bad) in message


def test_the_memory_reported_is_the_one_written_to_the_config(tmp_path: Path) -> None:
    """`sgam neo4j up` reports the sizes in neo4j.conf: a running server keeps the ones it started with."""
    home = tmp_path / "home"
    server = LocalServer(Settings(home=home, heap_size="768m", pagecache_size="128m"))
    assert server.configured_memory() == ("768m", "128m")  # no config yet: the settings'
    server.write_config()
    later = LocalServer(Settings(home=home, heap_size="2g", pagecache_size="1g"))
    assert later.configured_memory() == ("768m", "128m")

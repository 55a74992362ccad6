"""Every public entry point raises only SgamError subclasses; the CLI ends in one line and a
documented exit code (README, "Errors"). Typos never look like answers. Against the real server."""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import (
    AsyncMemoryGraph, ForgottenSubject, MemoryGraph, SgamError, StoreUnavailable, UnknownAttribute,
    UnknownSubject, UnknownTenant,
)
from sgam.cli import app
from sgam.graph.errors import InvalidSetting
from sgam.graph.ddl import EMBEDDING_DIMENSIONS
from sgam.graph.models import _TENANT_RE as TENANT
from sgam.settings import Settings

runner = CliRunner()
DOCUMENTED_EXIT_CODES = {0, 1, 2, 3, 4, 5}
UTC = timezone.utc


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


@pytest.fixture
def stored(graph: MemoryGraph, tenant: str) -> Iterator[MemoryGraph]:
    """``mira`` with a home city and a deadline, and ``ben``, forgotten."""
    graph.record_episode(tenant_id=tenant, id="e1", content="Mira lives in Porto; Ben too.",
                         occurred_at=utc(2026, 1, 1), actor="user:mira")
    for subject, attribute, value in (("mira", "home_city", "Porto"), ("mira", "passport_deadline", "2026-07-15"),
                                      ("ben", "home_city", "Porto")):
        graph.write(tenant_id=tenant, subject=subject, attribute=attribute, value=value,
                    valid_from=utc(2026, 1, 1), source_episode_id="e1")
    graph.forget_subject(tenant, "ben")
    yield graph
    graph.delete_tenant(tenant)


# -- typos are errors, not empty answers ------------------------------------------------------

def test_api_names_unknown_attributes_tenants_and_subjects(stored: MemoryGraph, tenant: str) -> None:
    typo = f"{tenant}-typo"
    reads = {
        "current": lambda t, s, a: stored.current(t, s, a),
        "as_of": lambda t, s, a: stored.as_of(t, s, a, valid_at="2026-06-02"),
        "history": lambda t, s, a: stored.history(t, s, a),
        "candidates": lambda t, s, a: stored.candidates(t, s, a),
        "traverse": lambda t, s, a: stored.traverse(t, s, [a]),
        "context": lambda t, s, a: stored.context(t, "where does she live?", subjects=[s], attributes=[a],
                                                  expand=False),
    }
    for name, read in reads.items():
        with pytest.raises(UnknownAttribute, match="unknown attribute 'hom_city'.*home_city"):
            read(tenant, "mira", "hom_city")
        with pytest.raises(UnknownTenant, match=f"tenant '{typo}' holds nothing"):
            read(typo, "mira", "home_city")
        if name != "candidates":  # a pending candidate is about a stored subject, or there is none
            with pytest.raises(UnknownSubject, match="no subject 'mria'"):
                read(tenant, "mria", "home_city")
            with pytest.raises(ForgottenSubject, match="'ben' .* was forgotten on 20"):
                read(tenant, "ben", "home_city")
    # a stored subject without a fact of the attribute: an empty answer, no error
    assert stored.current(tenant, "mira", "birthday") == []
    assert stored.history(tenant, "mira", "birthday") == []
    assert stored.as_of(tenant, "mira", "home_city", valid_at=date(2025, 1, 1)) == []
    assert [f.value for f in stored.as_of(tenant, "mira", "home_city", valid_at="2026-06-02")] == ["Porto"]
    assert not stored.context(tenant, "birthday?", subjects="mira", attributes="birthday", expand=False).facts
    with pytest.raises(UnknownTenant):
        stored.doctor(typo)
    assert stored.doctor(tenant) == []
    with pytest.raises(UnknownTenant):
        stored.query("queue", tenant=typo)
    assert stored.residue(tenant, "ben") == []   # residue's empty answer is its answer


def test_async_reads_name_unknown_names_too(neo4j_connection, stored: MemoryGraph, tenant: str) -> None:
    uri, auth = neo4j_connection

    async def main() -> None:
        graph = await AsyncMemoryGraph.connect(uri, auth, bootstrap=False)
        try:
            with pytest.raises(UnknownAttribute):
                await graph.current(tenant, "mira", "hom_city")
            with pytest.raises(UnknownTenant):
                await graph.history(f"{tenant}-typo", "mira")
            with pytest.raises(ForgottenSubject):
                await graph.as_of(tenant, "ben", valid_at="2026-06-02")
            assert await graph.current(tenant, "mira", "birthday") == []
        finally:
            await graph.close()

    asyncio.run(main())


def one_error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_cli_typos_exit_4_with_one_line(env, stored: MemoryGraph, tenant: str) -> None:
    typo = f"{tenant}-typo"
    cases = [
        (["query", "current", "-t", tenant, "-s", "mira", "-a", "pasport_deadline"],
         "unknown attribute 'pasport_deadline'; schema 'sgam-default' v3 knows: "),
        (["query", "current", "-t", typo, "-s", "mira"], f"tenant '{typo}' holds nothing"),
        (["query", "history", "-t", tenant, "-s", "mria"], "has no subject 'mria'"),
        (["query", "as-of", "-t", tenant, "-s", "ben", "--valid-at", "2026-06-02"], "'ben'"),
        (["context", "-t", tenant, "-a", "typo", "where does Mira live?"], "unknown attribute 'typo'"),
        (["context", "-t", typo, "where does Mira live?", "--no-expand"], "holds nothing"),
        (["doctor", "-t", typo], f"tenant '{typo}' holds nothing"),
        (["export", "-t", typo, "--format", "json"], "holds nothing"),
        (["quarantine", "list", "-t", typo], "holds nothing"),
    ]
    for args, words in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 4, (args, result.output)
        assert words in one_error_line(result), args
    forgotten = runner.invoke(app, ["query", "current", "-t", tenant, "-s", "ben"])
    assert forgotten.exit_code == 4 and "was forgotten on" in forgotten.stderr
    known = runner.invoke(app, ["query", "current", "-t", tenant, "-s", "mira", "-a", "passport_deadline",
                                "--json"])
    assert known.exit_code == 0 and "2026-07-15" in known.stdout
    assert runner.invoke(app, ["doctor", "-t", tenant]).exit_code == 0


# -- connection settings and a server that goes away ------------------------------------------

def test_the_browser_address_as_neo4j_uri_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_URI", "http://127.0.0.1:7474")
    monkeypatch.setenv("NEO4J_PASSWORD", "x")
    result = runner.invoke(app, ["query", "current", "-t", "demo", "-s", "mira"])
    assert result.exit_code == 1
    line = one_error_line(result)
    assert "NEO4J_URI 'http://127.0.0.1:7474' is not a Bolt address" in line and "bolt://127.0.0.1:7687" in line
    monkeypatch.delenv("NEO4J_URI")
    with pytest.raises(InvalidSetting, match="uri 'localhost:7687' is not a Bolt address"):
        MemoryGraph.connect("localhost:7687", ("neo4j", "x"))
    monkeypatch.setenv("SGAM_NEO4J_RETRY_SECONDS", "soon")
    with pytest.raises(InvalidSetting, match="SGAM_NEO4J_RETRY_SECONDS"):
        Settings()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]   # closed again when the probe is: nothing listens there


class Relay:
    """A TCP relay in front of the real server that can be cut: the server "dies" mid-command."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)   # wakes the blocked accept (close alone would not)
        self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def test_a_server_that_is_not_listening_fails_fast_in_one_line(env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEO4J_URI", f"bolt://127.0.0.1:{closed_port()}")
    started = time.monotonic()
    result = runner.invoke(app, ["query", "current", "-t", "demo", "-s", "mira"])
    assert time.monotonic() - started < 10
    assert result.exit_code == 5
    assert "Neo4j is not reachable at bolt://127.0.0.1:" in one_error_line(result)


def test_a_server_that_dies_mid_command_ends_in_one_line_within_the_retry_bound(
        env, neo4j_connection, stored: MemoryGraph, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    uri, _ = neo4j_connection
    host, port = uri.split("://")[1].rsplit(":", 1)
    relay = Relay((host, int(port)))
    monkeypatch.setenv("NEO4J_URI", f"bolt://127.0.0.1:{relay.port}")
    monkeypatch.setenv("SGAM_NEO4J_RETRY_SECONDS", "2")
    connect = MemoryGraph.connect

    def connect_then_cut(*args: Any, **kwargs: Any) -> MemoryGraph:
        graph = connect(*args, **kwargs)
        relay.cut()              # connected, then the server goes away before the read
        return graph

    monkeypatch.setattr(MemoryGraph, "connect", connect_then_cut)
    started = time.monotonic()
    result = runner.invoke(app, ["query", "current", "-t", tenant, "-s", "mira"])
    took = time.monotonic() - started
    assert result.exit_code == 5, result.output
    assert "Neo4j is not reachable" in one_error_line(result)   # no retry warnings, no traceback
    # retries for about SGAM_NEO4J_RETRY_SECONDS, at most twice that (the last pause may overrun)
    assert took < 2 * 2 + 3, took


def test_the_retry_warnings_stay_off_a_real_terminal(env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through a real process (the driver logs to the real stderr there)."""
    env_vars = {**os.environ, "NEO4J_URI": f"bolt://127.0.0.1:{closed_port()}", "NEO4J_PASSWORD": "x",
                "SGAM_NEO4J_RETRY_SECONDS": "1"}
    done = subprocess.run([sys.executable, "-m", "sgam.cli", "query", "current", "-t", "demo", "-s", "mira"],
                          capture_output=True, text=True, env=env_vars, timeout=60)
    assert done.returncode == 5
    assert [line for line in done.stderr.splitlines() if line.strip()] == [
        line for line in done.stderr.splitlines() if line.startswith("error: Neo4j is not reachable")]


# -- the walkers: hostile inputs everywhere ---------------------------------------------------

HUGE = "x" * 100_000
HOSTILE = [None, "", " ", HUGE, "\ud800", "[/]", "a\x00b", "typo", "2026-13-45", "2026-06-02T10:00",
           -1, 0, 10**30, float("nan"), True, 1.5, [], {}, [None], ["\ud800"], b"bytes", object(),
           datetime(2026, 6, 2), date(2026, 6, 2), utc(2026, 6, 2)]


class StandInEmbedder:
    """A 384-dimension embedder that needs no model (the walk is about arguments, not vectors)."""

    model_name = "stand-in"
    dimensions = EMBEDDING_DIMENSIONS

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1) for _ in texts]


def sensible(name: str, tenant: str) -> list[Any]:
    """A few well-formed values for a parameter, so calls get past the first check too."""
    return {
        "tenant": [tenant, f"{tenant}-typo"], "tenant_id": [tenant], "subject": ["mira", "ben", "mria"],
        "attribute": ["home_city", "hom_city"], "relations": [["holds"], ["holdz"]],
        "valid_at": ["2026-06-02", utc(2026, 6, 2)], "known_at": ["2026-06-02"], "now": ["2026-06-02"],
        "question": ["where does Mira live?"], "subjects": [["mira"], "mira"], "memory_id": ["m-1"],
        "name": ["current", "as-of", "nope"], "embedder": [StandInEmbedder()], "status": ["open", "all"],
        "budget_tokens": [50, 800], "batch_size": [1], "deltas": [[{"subject": "mira"}], []],
        "mapping": ["/nonexistent.yaml"], "schema": ["/nonexistent.yaml", 42],
        "episode": [None], "actor": ["user:mira"], "principal": ["user:mira", "*", "mira"],
    }.get(name, [])


def owned(value: Any, tenant: str) -> Any:
    """A drawn tenant id that another engineer's tenant could have becomes one of this test's."""
    if isinstance(value, str) and TENANT.match(value) and not value.startswith(tenant):
        return f"{tenant}-{value}"[:64]
    return value


def draw_args(data: st.DataObject, method: Any, tenant: str) -> tuple[list[Any], dict[str, Any]]:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in inspect.signature(method).parameters.values():
        if param.name == "self":
            continue
        choices = (st.sampled_from(sensible(param.name, tenant) + HOSTILE) | st.text(max_size=12))
        if param.name in ("tenant", "tenant_id"):
            choices = choices.map(lambda v: owned(v, tenant))
        if param.kind is param.VAR_POSITIONAL:
            args += data.draw(st.lists(choices, max_size=3), label=param.name)
        elif param.kind is param.VAR_KEYWORD:
            keys = st.sampled_from(["tenant_id", "subject", "attribute", "value", "valid_from", "id", "content",
                                    "occurred_at", "source_episode_id", "expand", "attributes", "k", "op"])
            drawn = data.draw(st.dictionaries(keys, choices, max_size=4), label=param.name)
            kwargs.update({k: owned(v, tenant) if k == "tenant_id" else v for k, v in drawn.items()})
        elif param.default is param.empty or data.draw(st.booleans(), label=f"give {param.name}"):
            value = data.draw(choices, label=param.name)
            if param.kind is param.KEYWORD_ONLY or param.default is not param.empty:
                kwargs[param.name] = value
            else:
                args.append(value)
    if method.__name__ in ("context", "embed"):
        # never the real model: the walk is about arguments (a hostile embedder still comes through)
        kwargs.setdefault("embedder", StandInEmbedder())
        if method.__name__ == "context":
            kwargs.setdefault("expand", False)
    return args, kwargs


# connect is walked by the settings tests above; apply_schema changes the shared database's schema
# for every tenant, so it is left to test_migrations.py.
NOT_WALKED = {"close", "apply_schema", "connect"}


def public_methods(cls: type) -> list[str]:
    return sorted(name for name, member in inspect.getmembers(cls)
                  if not name.startswith("_") and callable(member) and name not in NOT_WALKED)


WALK = settings(max_examples=40, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.mark.parametrize("name", public_methods(MemoryGraph))
@WALK
@given(data=st.data())
def test_every_api_method_raises_only_sgam_errors(stored: MemoryGraph, tenant: str, name: str,
                                                  data: st.DataObject) -> None:
    method = getattr(stored, name)
    args, kwargs = draw_args(data, method, tenant)
    try:
        with warnings.catch_warnings():   # as_of=... is deprecated on purpose, with a warning
            warnings.simplefilter("ignore", DeprecationWarning)
            method(*args, **kwargs)
    except SgamError:
        pass


@pytest.fixture(scope="module")
def loop_and_graph(neo4j_connection) -> Iterator[tuple[asyncio.AbstractEventLoop, AsyncMemoryGraph]]:
    uri, auth = neo4j_connection
    loop = asyncio.new_event_loop()
    graph = loop.run_until_complete(AsyncMemoryGraph.connect(uri, auth, bootstrap=False))
    yield loop, graph
    loop.run_until_complete(graph.close())
    loop.close()


@pytest.mark.parametrize("name", public_methods(AsyncMemoryGraph))
@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_every_async_method_raises_only_sgam_errors(loop_and_graph, stored: MemoryGraph, tenant: str, name: str,
                                                    data: st.DataObject) -> None:
    loop, graph = loop_and_graph
    method = getattr(graph, name)
    args, kwargs = draw_args(data, method, tenant)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loop.run_until_complete(method(*args, **kwargs))
    except SgamError:
        pass


# Commands the walk leaves alone, with the reason: each would act on more than a test tenant (the
# shared server, its schema, every tenant's queue) or run for minutes. A new command is walked
# unless it is added here.
CLI_NOT_WALKED = {
    ("neo4j",): "starts and stops servers", ("demo",): "resets the shared demo tenant",
    ("bench",): "benchmarks run for minutes", ("bench-replay",): "benchmarks run for minutes",
    ("schema", "apply"): "changes the shared database's schema", ("browser", "guide"): "serves until Ctrl-C",
    ("worker",): "works every tenant's queue", ("embed",): "loads the embedding model",
    ("serve",): "serves until Ctrl-C", ("mcp",): "serves its stdio client until it leaves",
}


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf command of the typer app's click tree (typer carries its own click)."""
    if any(path[:len(skip)] == skip for skip in CLI_NOT_WALKED):
        return
    if hasattr(group, "commands"):
        for name, command in group.commands.items():
            yield from commands(command, (*path, name))
    else:
        yield path, group


CLI_COMMANDS = dict(commands(typer.main.get_command(app)))
CLI_HOSTILE = ["", " ", HUGE[:5000], "\ud800", "[/]", "[bold]x", "typo", "-1", "0", "nan", "2026-13-45",
               "2026-06-02T10:00", "2026-06-02", "a=b", "=", "x,y", "mira", "ben", "home_city", "hom_city",
               "current", "as-of", "residue", "user:mira", "*", "json", "graphml", "{not json"]


def test_the_cli_walk_covers_every_command() -> None:
    names = {" ".join(path) for path in CLI_COMMANDS}
    assert {"query", "context", "doctor", "replay", "ingest", "export", "forget", "purge", "confirm",
            "quarantine list", "queue status", "schema show", "import-graphiti"} <= names


@pytest.mark.parametrize("path", sorted(CLI_COMMANDS), ids=" ".join)
@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_every_cli_command_ends_in_one_line_and_a_documented_code(
        env, stored: MemoryGraph, tenant: str, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...], data: st.DataObject) -> None:
    where = tmp_path_factory.mktemp("walk")
    monkeypatch.chdir(where)   # files a command writes (export -o, browser export) land here
    files = {"empty": where / "empty.jsonl", "binary": where / "binary.jsonl", "dir": where}
    files["empty"].write_text("")
    files["binary"].write_bytes(b"\xff\xfe\x00{")
    file_values = [str(p) for p in files.values()] + [str(where / "missing.jsonl")]
    tenants = [tenant, f"{tenant}-typo"]
    argv, positional = list(path), []
    for param in CLI_COMMANDS[path].params:
        if param.name == "help" or (not param.required and not data.draw(st.booleans(), label=param.name)):
            continue
        option = param.param_type_name == "option"
        if option and param.is_flag:
            argv.append(param.opts[0])
            continue
        if param.name == "tenant":   # never another tenant of the shared server: only ours, or invalid ids
            value = data.draw(st.sampled_from([*tenants, "", " ", "\ud800", "[/]", "a b", HUGE[:100]]))
        else:
            value = data.draw(st.sampled_from(CLI_HOSTILE + file_values) | st.text(max_size=8), label=param.name)
        if option:
            argv += [param.opts[0], value]
        else:
            positional.append(value)
    result = runner.invoke(app, [*argv, "--", *positional] if positional else argv, input="n\n")
    exception = result.exception
    if isinstance(exception, SystemExit):
        exception = None
    assert exception is None, (argv, repr(exception))
    assert result.exit_code in DOCUMENTED_EXIT_CODES, (argv, result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output, argv
    if result.exit_code in (1, 4, 5) and "error: " in result.stderr:
        assert len([line for line in result.stderr.splitlines() if line.startswith("error: ")]) == 1, argv


@pytest.fixture(autouse=True)
def _no_stray_tenants(graph: MemoryGraph, tenant: str) -> Iterator[None]:
    """The walks may create tenants whose ids start with the test's tenant: remove them after
    (the tenant index has every Entity and Episode tenant; a tombstone comes with one of them)."""
    yield
    for row in graph.store.read(
            "CALL () { MATCH (e:Entity) WHERE e.tenant_id STARTS WITH $t RETURN e.tenant_id AS t "
            "UNION MATCH (e:Episode) WHERE e.tenant_id STARTS WITH $t RETURN e.tenant_id AS t } RETURN DISTINCT t",
            {"t": tenant}):
        graph.delete_tenant(row["t"])


def test_store_unavailable_is_transient() -> None:
    assert StoreUnavailable.transient and issubclass(UnknownTenant, SgamError)

"""Which Neo4j addresses the connection code accepts: the routing and encrypted schemes always,
and a password over an unencrypted one (bolt://, neo4j://) only to this machine (loopback) or when
told otherwise (SGAM_ALLOW_PLAINTEXT). No network: the check runs before any driver is made."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path

import neo4j
import pytest
import yaml
from hypothesis import given, strategies as st

from sgam.graph.errors import InvalidSetting
from sgam.graph.schema import default_schema
from sgam.graph.store import BOLT_SCHEMES, AsyncStore, Store, check_transport
from sgam.settings import Settings, resolve_connection

ROOT = Path(__file__).resolve().parents[2]
AUTH = ("neo4j", "secret")
ENCRYPTED = ("bolt+s", "bolt+ssc", "neo4j+s", "neo4j+ssc")
PLAIN = ("bolt", "neo4j")
ENV = ("NEO4J_URI", "NEO4J_USER", "NEO4J_PASSWORD", "SGAM_ALLOW_PLAINTEXT")

# Hosts by what they are, written as a URI writes them (IPv6 in brackets).
loopback_v4 = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)).map(
    lambda t: "127.%d.%d.%d" % t)
loopback_hosts = st.one_of(loopback_v4, st.sampled_from(
    ["localhost", "LOCALHOST", "localhost.", "[::1]", "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]"]))
remote_v4 = st.ip_addresses(v=4).filter(lambda a: not a.is_loopback).map(str)
remote_v6 = st.ip_addresses(v=6).filter(
    lambda a: not a.is_loopback and not (a.ipv4_mapped and a.ipv4_mapped.is_loopback)).map(lambda a: f"[{a}]")
names = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True).filter(
    lambda h: h.rstrip(".") != "localhost")
remote_hosts = st.one_of(remote_v4, remote_v6, names, st.sampled_from(["neo4j", "db.example.com", "0.0.0.0",
                                                                       "localhost.example.com", "127.0.0.1.nip.io"]))
ports = st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}"))
paths = st.sampled_from(["", "/", "?policy=eu"])


def uri(scheme: str, host: str, port: str = "", path: str = "") -> str:
    return f"{scheme}://{host}{port}{path}"


@given(scheme=st.sampled_from(ENCRYPTED), host=st.one_of(remote_hosts, loopback_hosts), port=ports, path=paths)
def test_encrypted_schemes_carry_credentials_anywhere(scheme: str, host: str, port: str, path: str) -> None:
    check_transport(uri(scheme, host, port, path), AUTH, allow_plaintext=False)


@given(scheme=st.sampled_from(PLAIN), host=loopback_hosts, port=ports, path=paths)
def test_unencrypted_schemes_carry_credentials_on_loopback(scheme: str, host: str, port: str, path: str) -> None:
    check_transport(uri(scheme, host, port, path), AUTH, allow_plaintext=False)


@given(scheme=st.sampled_from(PLAIN + tuple(s.upper() for s in PLAIN)), host=remote_hosts, port=ports, path=paths)
def test_unencrypted_credentials_to_another_host_are_refused_unless_allowed(
        scheme: str, host: str, port: str, path: str) -> None:
    address = uri(scheme, host, port, path)
    with pytest.raises(InvalidSetting) as refused:
        check_transport(address, AUTH, allow_plaintext=False, setting="NEO4J_URI")
    message = str(refused.value)
    assert repr(address) in message and "NEO4J_URI" in message
    assert "SGAM_ALLOW_PLAINTEXT=1" in message and f"{scheme.lower()}+s://" in message
    check_transport(address, AUTH, allow_plaintext=True)
    check_transport(address, None, allow_plaintext=False)   # no credentials, nothing to leak


def test_the_host_strategies_mean_what_they_say() -> None:
    # the oracle for loopback, from the standard: 127.0.0.0/8 and ::1
    assert ipaddress.ip_network("127.0.0.0/8").num_addresses == 2 ** 24
    for host in ("127.0.0.1", "127.255.255.254", "::1"):
        assert ipaddress.ip_address(host).is_loopback
    for host in ("128.0.0.1", "10.0.0.1", "::2"):
        assert not ipaddress.ip_address(host).is_loopback


labelled_hosts = st.one_of(loopback_hosts.map(lambda h: (h, True)), remote_hosts.map(lambda h: (h, False)))


@given(scheme=st.sampled_from(BOLT_SCHEMES), labelled=labelled_hosts, port=ports)
def test_resolve_connection_applies_the_same_rule(scheme: str, labelled: tuple[str, bool], port: str) -> None:
    host, on_this_machine = labelled
    address = uri(scheme, host, port)
    settings = Settings(neo4j_uri=address, neo4j_password="secret", allow_plaintext=False)
    if scheme in PLAIN and not on_this_machine:
        with pytest.raises(InvalidSetting, match="NEO4J_URI.*SGAM_ALLOW_PLAINTEXT"):
            resolve_connection(settings)
        settings = Settings(neo4j_uri=address, neo4j_password="secret", allow_plaintext=True)
    assert resolve_connection(settings) == (address, "neo4j", "secret")


def test_the_override_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NEO4J_URI", "bolt://neo4j:7687")
    monkeypatch.setenv("NEO4J_PASSWORD", "secret")
    with pytest.raises(InvalidSetting, match=r"'bolt://neo4j:7687'.*SGAM_ALLOW_PLAINTEXT=1"):
        resolve_connection(Settings())
    for off in ("0", "false"):
        monkeypatch.setenv("SGAM_ALLOW_PLAINTEXT", off)
        with pytest.raises(InvalidSetting):
            resolve_connection(Settings())
    for on in ("1", "true"):
        monkeypatch.setenv("SGAM_ALLOW_PLAINTEXT", on)
        assert resolve_connection(Settings())[0] == "bolt://neo4j:7687"


def test_both_stores_refuse_before_making_a_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_driver(*args: object, **kwargs: object) -> None:
        raise AssertionError("a driver was made")

    monkeypatch.setattr(neo4j.GraphDatabase, "driver", no_driver)
    monkeypatch.setattr(neo4j.AsyncGraphDatabase, "driver", no_driver)
    address = "neo4j://db.example.com:7687"
    with pytest.raises(InvalidSetting, match=r"'neo4j://db.example.com:7687' would send the password"):
        Store.connect(address, AUTH, default_schema())
    with pytest.raises(InvalidSetting, match=r"'neo4j://db.example.com:7687' would send the password"):
        asyncio.run(AsyncStore.connect(address, AUTH, default_schema()))


def test_docker_compose_service_reaches_its_neo4j_over_plain_bolt(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compose service talks to the host `neo4j` on compose's own network: its environment
    carries the override, so the connection settings it builds are accepted."""
    environment = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["sgam"]["environment"]
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, "secret" if value.startswith("${NEO4J_PASSWORD") else value)
    assert resolve_connection(Settings()) == ("bolt://neo4j:7687", "neo4j", "secret")
    monkeypatch.delenv("SGAM_ALLOW_PLAINTEXT")
    with pytest.raises(InvalidSetting, match="SGAM_ALLOW_PLAINTEXT"):
        resolve_connection(Settings())


def test_a_placed_server_gets_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenant placed on another server is opened through the same check, with the graph's
    SGAM_ALLOW_PLAINTEXT: the placement cannot route a password around it."""
    from types import SimpleNamespace

    from sgam.placement import Stores
    from sgam.settings import Placement, Target

    made: list[str] = []

    def no_driver(uri: str, **kwargs: object) -> None:
        made.append(uri)
        raise RuntimeError("stop before the network")

    monkeypatch.setattr(neo4j.GraphDatabase, "driver", no_driver)
    default = SimpleNamespace(uri="bolt://127.0.0.1:7687", database="neo4j", schema=default_schema(),
                              clock=None, max_future=None)
    placement = Placement(tenants={"far": Target(uri="bolt://db.example.com:7687")})
    refusing = Stores(default, AUTH, placement, bootstrap=False, retry_seconds=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidSetting, match=r"'bolt://db.example.com:7687' would send the password"):
        refusing.of(["far"])
    assert made == []
    allowing = Stores(default, AUTH, placement, bootstrap=False, retry_seconds=0,  # type: ignore[arg-type]
                      allow_plaintext=True)
    with pytest.raises(Exception, match="stop before the network"):
        allowing.of(["far"])
    assert made == ["bolt://db.example.com:7687"]

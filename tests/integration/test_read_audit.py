"""The read audit log against the real server: a private value handed to a reader leaves a
(:ReadAudit) record naming the reader, the subject and the attribute; nothing else does. The log
is read with read_audit() and `sgam audit`, expires by retention, goes with forget and with the
tenant, and a failed audit write loses no read."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timedelta, timezone

import pytest

import sgam.api
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, MemoryGraph
from sgam.cli import app
from sgam.graph.audit import DEFAULT_TTL_DAYS
from sgam.graph.errors import InvalidSetting, StoreUnavailable

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
BIRTH = "1990-04-01"


@pytest.fixture
def stored(graph: MemoryGraph, tenant: str) -> str:
    """ada's private date of birth (readers: user:ada, agent:kyc) and her shared country."""
    graph.record_episode(tenant_id=tenant, id="e1", content="ada, born 1990-04-01, lives in Lisbon",
                         occurred_at=EPOCH)
    for attribute, value in (("date_of_birth", BIRTH), ("country", "DE")):
        graph.write(tenant_id=tenant, subject="ada", attribute=attribute, value=value,
                    valid_from=EPOCH, source_episode_id="e1")
    return tenant


def test_a_readers_private_read_is_audited_and_nothing_else_is(graph: MemoryGraph, stored: str) -> None:
    tenant = stored
    before = graph.clock()
    assert [f.value for f in graph.current(tenant, "ada", "country", principal="agent:kyc")] == ["DE"]
    assert graph.current(tenant, "ada", "date_of_birth", principal="user:bob") == []  # hidden: no record
    assert [f.attribute for f in graph.current(tenant, "ada")] == ["country"]       # no principal
    assert graph.read_audit(tenant) == []

    [fact] = graph.current(tenant, "ada", "date_of_birth", principal="agent:kyc")
    assert fact.value.isoformat() == BIRTH
    [row] = graph.read_audit(tenant)
    assert (row["principal"], row["subject"], row["attributes"], row["operation"]) == (
        "agent:kyc", "ada", ["date_of_birth"], "current")
    assert before <= row["at"] <= graph.clock()
    assert BIRTH not in json.dumps(row, default=str)   # names, never values

    graph.history(tenant, "ada", principal="*")                   # an admin read is a read too
    graph.context(tenant, "when was ada born", subjects="ada", principal="user:ada")
    rows = graph.read_audit(tenant)
    assert [(r["principal"], r["operation"]) for r in rows] == [
        ("user:ada", "context"), ("*", "history"), ("agent:kyc", "current")]
    assert all(r["attributes"] == ["date_of_birth"] for r in rows)
    assert [r["operation"] for r in graph.read_audit(tenant, principal="*")] == ["history"]
    assert graph.read_audit(tenant, subject="mira") == []


def test_off_records_nothing(neo4j_connection, graph: MemoryGraph, stored: str,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGAM_READ_AUDIT", "off")
    with MemoryGraph.connect(*neo4j_connection, bootstrap=False) as off:
        assert off.audit_reads == "off"
        assert len(off.current(stored, "ada", "date_of_birth", principal="agent:kyc")) == 1
    assert graph.read_audit(stored) == []
    monkeypatch.setenv("SGAM_READ_AUDIT", "all")
    with pytest.raises(InvalidSetting, match="SGAM_READ_AUDIT"):
        MemoryGraph.connect(*neo4j_connection, bootstrap=False)


def test_a_failed_audit_write_loses_no_read_and_is_logged(graph: MemoryGraph, stored: str,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    def refused(*args):  # the audit write finds the server gone
        raise StoreUnavailable("the server went away")

    monkeypatch.setattr(sgam.api, "audit_op", refused)
    with caplog.at_level(logging.WARNING, logger="sgam.graph.audit"):
        [fact] = graph.current(stored, "ada", "date_of_birth", principal="agent:kyc")
    assert fact.value.isoformat() == BIRTH
    assert "StoreUnavailable" in caplog.text and "not recorded" in caplog.text and BIRTH not in caplog.text
    assert graph.read_audit(stored) == []


def test_purge_removes_expired_records_only(graph: MemoryGraph, stored: str) -> None:
    graph.current(stored, "ada", "date_of_birth", principal="agent:kyc")
    soon = graph.clock() + timedelta(days=DEFAULT_TTL_DAYS - 1)
    assert graph.purge(stored, now=soon).audits == 0
    assert len(graph.read_audit(stored)) == 1
    later = graph.clock() + timedelta(days=DEFAULT_TTL_DAYS + 1)
    assert graph.purge(stored, now=later).audits == 1
    assert graph.read_audit(stored) == []


def test_forget_erases_the_records_about_the_subject(graph: MemoryGraph, stored: str) -> None:
    tenant = stored
    graph.write(tenant_id=tenant, subject="mira", attribute="date_of_birth", value="1985-02-03",
                valid_from=EPOCH, source_episode_id="e1")
    graph.current(tenant, "ada", "date_of_birth", principal="agent:kyc")
    graph.current(tenant, "mira", "date_of_birth", principal="agent:kyc")
    graph.forget_subject(tenant, "ada")
    assert [r["subject"] for r in graph.read_audit(tenant)] == ["mira"]
    assert graph.residue(tenant, "ada", forgotten=True) == []


def test_residue_finds_an_audit_record_left_behind(graph: MemoryGraph, stored: str) -> None:
    graph.forget_subject(stored, "ada")
    # A record older than the forget that the erasure missed (as an older version would have).
    graph.store.run_write("CREATE (:ReadAudit {tenant_id: $tenant, principal: 'agent:kyc', subject: 'ada', "
                          "attributes: ['date_of_birth'], operation: 'current', created_at: $at})",
                          {"tenant": stored, "at": EPOCH})
    found = graph.residue(stored, "ada", forgotten=True)
    assert {(f["where"], f["property"]) for f in found} == {("node ReadAudit", "subject")}


def test_tenant_deletion_deletes_the_records(graph: MemoryGraph, stored: str) -> None:
    graph.current(stored, "ada", "date_of_birth", principal="agent:kyc")
    report = graph.delete_tenant(stored)
    assert report.counts["read_audits"] == 1
    assert graph.read_audit(stored) == []


def test_the_async_graph_audits_and_reads_the_log(neo4j_connection, stored: str) -> None:
    async def go() -> list[dict]:
        agraph = await AsyncMemoryGraph.connect(*neo4j_connection, bootstrap=False)
        try:
            assert len(await agraph.current(stored, "ada", "date_of_birth", principal="user:ada")) == 1
            assert len((await agraph.export_subject(stored, "ada", principal="user:ada"))) > 0
            return await agraph.read_audit(stored, subject="ada")
        finally:
            await agraph.close()

    rows = asyncio.run(go())
    assert [(r["principal"], r["operation"]) for r in rows] == [
        ("user:ada", "export_subject"), ("user:ada", "current")]


def test_sgam_audit_lists_and_filters(env: None, graph: MemoryGraph, stored: str) -> None:
    graph.current(stored, "ada", "date_of_birth", principal="agent:kyc")
    graph.current(stored, "ada", "date_of_birth", principal="user:ada")
    runner = CliRunner()
    result = runner.invoke(app, ["audit", "-t", stored, "--principal", "user:ada", "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.output)
    assert (row["principal"], row["subject"], row["attributes"]) == ("user:ada", "ada", ["date_of_birth"])
    table = runner.invoke(app, ["audit", "-t", stored, "-s", "ada"], terminal_width=160)
    assert table.exit_code == 0 and "agent:kyc" in table.output and "user:ada" in table.output
    assert BIRTH not in table.output

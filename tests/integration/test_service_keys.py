"""``sgam keys create|list|revoke`` against the real store: a key is printed once, kept only as a
hash, listed without its secret, and a revoked or unknown key resolves to no identity."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest
from typer.testing import CliRunner

from sgam.api import AsyncMemoryGraph, MemoryGraph
from sgam.cli import app
from sgam.service.keys import Unauthenticated, resolve
from sgam.service.requests import Scope

runner = CliRunner()


async def _resolve(neo4j_connection: tuple[str, tuple[str, str]], key: str) -> object:
    uri, auth = neo4j_connection
    graph = await AsyncMemoryGraph.connect(uri, auth, bootstrap=False)
    try:
        return await resolve(graph.store, key)
    finally:
        await graph.close()


def test_create_list_revoke(env: None, tenant: str, shared_graph: MemoryGraph,
                            neo4j_connection: tuple[str, tuple[str, str]]) -> None:
    made = runner.invoke(app, ["keys", "create", "--tenant", tenant, "--principal", "agent:support",
                               "--scope", "write", "--note", "support bot"])
    assert made.exit_code == 0, made.output
    key = made.stdout.strip().splitlines()[0]
    assert key.startswith("sgam_")
    key_id = key.split("_")[1]
    [row] = shared_graph.store.read("MATCH (k:ApiKey {id: $id}) RETURN properties(k) AS p", {"id": key_id})
    assert row["p"]["hash"] == hashlib.sha256(key.encode()).hexdigest()
    assert key not in json.dumps(row["p"], default=str), "the key itself is never stored"

    identity = asyncio.run(_resolve(neo4j_connection, key))
    assert (identity.tenant, identity.principal, identity.scope) == (tenant, "agent:support", Scope.WRITE)

    listed = runner.invoke(app, ["keys", "list", "--tenant", tenant, "--json"])
    assert listed.exit_code == 0, listed.output
    [entry] = json.loads(listed.stdout)
    assert entry["id"] == key_id and entry["revoked_at"] is None and entry["note"] == "support bot"
    assert key not in listed.stdout and row["p"]["hash"] not in listed.stdout

    revoked = runner.invoke(app, ["keys", "revoke", key_id])
    assert revoked.exit_code == 0, revoked.output
    with pytest.raises(Unauthenticated, match="revoked"):
        asyncio.run(_resolve(neo4j_connection, key))
    [entry] = json.loads(runner.invoke(app, ["keys", "list", "--tenant", tenant, "--json"]).stdout)
    assert entry["revoked_at"] is not None


@pytest.mark.parametrize(("args", "message"), [
    (["--tenant", "bad tenant!", "--principal", "agent:x"], "tenant_id"),
    (["--tenant", "t1", "--principal", "nobody"], "principal"),
    (["--tenant", "t1", "--principal", "agent:x", "--scope", "root"], "scope"),
])
def test_bad_key_requests_are_refused(env: None, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["keys", "create", *args])
    assert result.exit_code == 1 and message in result.stderr


def test_revoking_an_unknown_key_says_so(env: None) -> None:
    result = runner.invoke(app, ["keys", "revoke", "000000000000"])
    assert result.exit_code != 0 and "no API key" in result.stderr


def test_the_service_reads_a_key_once_for_requests_that_miss_together_and_a_revocation_bites(
        neo4j_connection: tuple[str, tuple[str, str]], tenant: str, shared_graph: MemoryGraph) -> None:
    from sgam.service.keys import create_key, revoke_key
    from sgam.service.operations import Service

    new = create_key(shared_graph.store, tenant, "agent:support", "read")

    async def run() -> tuple[int, int]:
        graph = await AsyncMemoryGraph.connect(*neo4j_connection, bootstrap=False)
        reads = 0
        real = graph.store.read

        async def counted(query: str, params: dict) -> object:   # the real store, reads counted
            nonlocal reads
            reads += 1
            return await real(query, params)

        graph.store.read = counted  # type: ignore[method-assign]
        service = Service(graph, key_cache_seconds=0.5)
        try:
            found = await asyncio.gather(*(service.identify(new.key) for _ in range(20)))
            assert {f.key_id for f in found} == {new.identity.key_id} and found[0].tenant == tenant
            first = reads
            revoke_key(shared_graph.store, new.identity.key_id)
            await service.identify(new.key)   # still trusted within the cache time
            await asyncio.sleep(0.6)
            with pytest.raises(Unauthenticated, match="revoked"):
                await asyncio.gather(*(service.identify(new.key) for _ in range(5)))
            return first, reads
        finally:
            await service.close()

    first, total = asyncio.run(run())
    assert first == 1 and total == 2

"""Isolation through both surfaces, as a property: random reads with keys of two tenants, and of
several principals in one tenant, never show another tenant's value, nor a private value to a
principal its attribute does not name as a reader.

Every value written in a tenant carries that tenant's marker (dates differ by decade), so a leak
is found in the raw answer, whatever part of it (fact, citation, evidence text) carries it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from sgam.api import MemoryGraph
from sgam.service.keys import create_key

from .service_server import Server, start

SUBJECTS = ("c1", "c2", "c3")


@dataclass(frozen=True)
class Reader:
    key: str
    tenant: str
    principal: str


@dataclass(frozen=True)
class World:
    tenants: tuple[str, str]
    readers: tuple[Reader, ...]
    markers: dict[str, str]               # tenant -> the marker in its every text value
    birthdays: dict[tuple[str, str], str]   # (tenant, subject) -> date_of_birth (private)
    memory_ids: tuple[str, ...]


def birthday(tenant_index: int, subject: str) -> str:
    return f"{1950 + 30 * tenant_index}-0{SUBJECTS.index(subject) + 1}-1{tenant_index}"


@pytest.fixture(scope="module")
def world(shared_graph: MemoryGraph) -> World:
    tenants = (f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}")
    markers = {t: f"mk{uuid.uuid4().hex[:8]}" for t in tenants}
    readers, birthdays = [], {}
    for index, tenant in enumerate(tenants):
        for principal in ("agent:kyc", "agent:support", "user:c1"):
            readers.append(Reader(create_key(shared_graph.store, tenant, principal, "read").key, tenant, principal))
        for subject in SUBJECTS:
            birthdays[(tenant, subject)] = birthday(index, subject)
    return World(tenants, tuple(readers), markers, birthdays, ())


@pytest.fixture(scope="module")
def server(neo4j_connection: tuple[str, tuple[str, str]], world: World) -> Iterator[Server]:
    yield from start(neo4j_connection)


@pytest.fixture(scope="module")
def written(server: Server, world: World, shared_graph: MemoryGraph) -> World:
    memory_ids: list[str] = []
    for index, tenant in enumerate(world.tenants):
        writer = create_key(shared_graph.store, tenant, "agent:intake", "write").key
        marker = world.markers[tenant]
        with server.client(writer) as client:
            for subject in SUBJECTS:
                for content, deltas in (
                    (f"{subject} writes from {subject}@{marker}.example, plan {marker}-gold.",
                     [{"subject": subject, "subject_type": "Customer", "attribute": "email",
                       "value": f"{subject}@{marker}.example"},
                      {"subject": subject, "subject_type": "Customer", "attribute": "holds",
                       "value": f"{subject}-acct"}]),
                    (f"Identity check for {subject}: born {world.birthdays[(tenant, subject)]}.",
                     [{"subject": subject, "subject_type": "Customer", "attribute": "date_of_birth",
                       "value": world.birthdays[(tenant, subject)]}]),
                ):
                    response = client.post("/v1/remember", json={
                        "content": content, "occurred_at": f"2026-0{index + 3}-01T10:00:00Z", "deltas": deltas})
                    assert response.status_code == 200, response.text
                    memory_ids.extend(response.json()["memory_ids"])
    return World(world.tenants, world.readers, world.markers, world.birthdays, tuple(memory_ids))


def may_read_birthday(reader: Reader, subject: str) -> bool:
    return reader.principal == "agent:kyc" or reader.principal == f"user:{subject}"


def reads(world: World) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    subject = st.sampled_from(SUBJECTS)
    attribute = st.sampled_from([None, "email", "date_of_birth", "holds"])
    return st.one_of(
        st.tuples(st.just("current"), st.fixed_dictionaries({"subject": subject, "attribute": attribute})),
        st.tuples(st.just("as_of"), st.fixed_dictionaries({"subject": subject, "attribute": attribute,
                                                           "valid_at": st.sampled_from(["2026-03-15", "2026-04-15"])})),
        st.tuples(st.just("history"), st.fixed_dictionaries({"subject": subject, "attribute": attribute})),
        st.tuples(st.just("context"), st.fixed_dictionaries({
            "question": st.sampled_from(["When was {s} born?", "What is the email of {s}?", "Tell me about {s}"]),
            "subjects": st.lists(subject, min_size=1, max_size=2, unique=True)})),
        st.tuples(st.just("traverse"), st.fixed_dictionaries({"subject": subject, "relations": st.just(["holds"])})),
        st.tuples(st.just("candidates"), st.fixed_dictionaries({})),
        st.tuples(st.just("quarantine"), st.fixed_dictionaries({"status": st.just("all")})),
        st.tuples(st.just("provenance"), st.fixed_dictionaries({"memory_id": st.sampled_from(world.memory_ids)})),
    )


def over_http(server: Server, reader: Reader, operation: str, arguments: dict[str, Any]) -> str:
    path = operation.replace("_", "-")
    with server.client(reader.key) as client:
        response = client.post(f"/v1/{path}", json=arguments)
    assert response.status_code in (200, 404), response.text
    return response.text


def over_mcp(server: Server, reader: Reader, operation: str, arguments: dict[str, Any]) -> str:
    async def call() -> str:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {reader.key}"}) as client, \
                streamable_http_client(f"{server.url}/mcp", http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(operation, arguments)
            assert not result.is_error or "NotFound" in result.content[0].text or \
                "Unknown" in result.content[0].text or "Forgotten" in result.content[0].text, result.content
            return "\n".join(getattr(c, "text", "") for c in result.content)

    return asyncio.run(call())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_read_crosses_a_tenant_or_shows_a_private_value(server: Server, written: World,
                                                           data: st.DataObject) -> None:
    reader = data.draw(st.sampled_from(written.readers))
    operation, arguments = data.draw(reads(written))
    if "question" in arguments:
        arguments = {**arguments, "question": arguments["question"].format(s=arguments["subjects"][0])}
    surface = data.draw(st.sampled_from([over_http, over_mcp]))
    answer = surface(server, reader, operation, {k: v for k, v in arguments.items() if v is not None})
    for tenant, marker in written.markers.items():
        if tenant != reader.tenant:
            assert marker not in answer, f"{operation} as {reader.principal} of {reader.tenant} shows {tenant}'s data"
    for (tenant, subject), born in written.birthdays.items():
        if tenant != reader.tenant or not may_read_birthday(reader, subject):
            assert born not in answer, f"{operation} shows {subject}'s private date_of_birth to {reader.principal}"


def test_the_readers_that_may_see_a_birthday_do(server: Server, written: World) -> None:
    """The property above can fail: the same reads return the private value to its readers."""
    for reader in written.readers:
        answer = json.loads(over_http(server, reader, "current", {"subject": "c1", "attribute": "date_of_birth"}))
        shown = [f["value"] for f in answer["facts"]]
        assert shown == ([written.birthdays[(reader.tenant, "c1")]] if may_read_birthday(reader, "c1") else [])
        email = json.loads(over_mcp(server, reader, "current", {"subject": "c1", "attribute": "email"}))
        assert [f["value"] for f in email["facts"]] == [f"c1@{written.markers[reader.tenant]}.example"]


def test_concurrent_reads_answered_together_keep_each_keys_tenant_and_reader(server: Server,
                                                                               written: World) -> None:
    """`sgam serve` answers concurrent `current` reads of one shape as one statement
    (sgam/service/coalesce.py): fired all at once, from every key, each answer is still exactly
    its own key's tenant and reader's."""
    import httpx

    reads = [(reader, subject, attribute) for reader in written.readers for subject in SUBJECTS
             for attribute in (None, "email", "date_of_birth", "holds")] * 3

    def expected(reader: Reader, subject: str, attribute: str | None) -> list[str]:
        marker = written.markers[reader.tenant]
        values = {"email": [f"{subject}@{marker}.example"], "holds": [f"{subject}-acct"],
                  "date_of_birth": [written.birthdays[(reader.tenant, subject)]]
                  if may_read_birthday(reader, subject) else []}
        return sorted(values[attribute] if attribute else [v for vs in values.values() for v in vs])

    async def main() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            return await asyncio.gather(*(
                client.post("/v1/current", json={"subject": subject, **({"attribute": attribute} if attribute else {})},
                            headers={"Authorization": f"Bearer {reader.key}"})
                for reader, subject, attribute in reads))

    for (reader, subject, attribute), response in zip(reads, asyncio.run(main())):
        assert response.status_code == 200, response.text
        shown = sorted(str(f["value"]) for f in response.json()["facts"])
        assert shown == expected(reader, subject, attribute), (reader.principal, reader.tenant, subject, attribute)

"""The MCP SDK's own client against SGAM's MCP server, over stdio (``sgam mcp``, a subprocess)
and over streamable HTTP (``/mcp`` of a real ``sgam serve``): it lists the tools, validates their
schemas, writes the seed story and reads back current 2026-06-30 and as-of-2026-06-02 2026-07-15."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
from jsonschema import Draft202012Validator
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from sgam.service.requests import OPERATIONS

from .service_server import SEED, SGAM, Keys, Server, keys, server, server_env, start  # noqa: F401 (the shared fixtures)


def over_stdio(connection: tuple[str, tuple[str, str]], key: str) -> AbstractAsyncContextManager[Any]:
    return stdio_client(StdioServerParameters(command=SGAM, args=["mcp"],
                                              env=server_env(connection, SGAM_API_KEY=key)))


@asynccontextmanager
async def over_http(server: Server, key: str) -> AsyncIterator[Any]:
    # A client passed in is the caller's to close.
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as client, \
            streamable_http_client(f"{server.url}/mcp", http_client=client) as streams:
        yield streams


async def story(transport: AbstractAsyncContextManager[Any], subject: str) -> dict[str, Any]:
    """List and validate the tools, write the seed story about ``subject``, read it back."""
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        for tool in tools:
            Draft202012Validator.check_schema(tool.input_schema)
        seen: dict[str, Any] = {"tools": [t.name for t in tools]}
        for episode in SEED:
            said = json.loads(json.dumps(episode).replace('"mira"', json.dumps(subject)))
            result = await session.call_tool("remember", said)
            assert not result.is_error, result.content
            Draft202012Validator(next(t.input_schema for t in tools if t.name == "remember")).validate(said)
        now = await session.call_tool("current", {"subject": subject, "attribute": "passport_deadline"})
        then = await session.call_tool("as_of", {"subject": subject, "attribute": "passport_deadline",
                                                 "valid_at": "2026-06-02"})
        seen["current"] = [f["value"] for f in now.structured_content["facts"]]
        seen["as_of"] = [f["value"] for f in then.structured_content["facts"]]
        seen["text"] = now.content[0].text
        bad = await session.call_tool("current", {"subject": subject, "attribute": "passport"})
        seen["bad"] = (bad.is_error, bad.content[0].text)
        forget = await session.call_tool("forget", {"subject": subject})
        seen["forget"] = (forget.is_error, forget.content[0].text)
        return seen


def check(seen: dict[str, Any]) -> None:
    assert seen["current"] == ["2026-06-30"]
    assert seen["as_of"] == ["2026-07-15"]
    assert json.loads(seen["text"])["facts"][0]["value"] == "2026-06-30"
    assert seen["bad"][0] and "passport" in seen["bad"][1]
    assert seen["forget"][0] and "scope admin" in seen["forget"][1]


def test_stdio(neo4j_connection: tuple[str, tuple[str, str]], keys: Keys) -> None:
    seen = asyncio.run(story(over_stdio(neo4j_connection, keys.writer), "mira"))
    # A write key sees every tool but forget (admin).
    assert seen["tools"] == [op.name for op in OPERATIONS if op.name != "forget"]
    check(seen)


def test_streamable_http(server: Server, keys: Keys) -> None:
    seen = asyncio.run(story(over_http(server, keys.writer), "mira-http"))
    assert seen["tools"] == [op.name for op in OPERATIONS if op.name != "forget"]
    check(seen)


def test_http_without_a_valid_key_never_reaches_the_mcp_server(server: Server, keys: Keys) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    for headers in ({}, {"Authorization": f"Bearer {keys.revoked}"}, {"Authorization": "Bearer nope"}):
        response = httpx.post(f"{server.url}/mcp", json=message, headers={
            **headers, "Accept": "application/json, text/event-stream"})
        assert response.status_code == 401 and response.json()["error"]["type"] == "Unauthenticated"


def test_a_read_key_lists_only_read_tools_and_cannot_write(server: Server, keys: Keys) -> None:
    async def run() -> tuple[list[str], Any]:
        async with over_http(server, keys.reader) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            refused = await session.call_tool("remember", {"content": "x", "deltas": [
                {"subject": "mira", "attribute": "home_city", "value": "Rome"}]})
            return names, refused

    names, refused = asyncio.run(run())
    assert names == [op.name for op in OPERATIONS if op.scope.value == "read"]
    assert refused.is_error and "scope write" in refused.content[0].text


def test_stdio_refuses_to_start_without_a_valid_key(neo4j_connection: tuple[str, tuple[str, str]],
                                                    keys: Keys) -> None:
    result = subprocess.run([SGAM, "mcp"], env=server_env(neo4j_connection, SGAM_API_KEY=keys.revoked),
                            input=b"", capture_output=True, timeout=120)
    assert result.returncode == 1 and b"revoked" in result.stderr


def test_a_session_belongs_to_the_key_that_opened_it_until_it_is_deleted(server: Server, keys: Keys) -> None:
    def headers(key: str, session: str | None = None) -> dict[str, str]:
        sent = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
        return {**sent, "Mcp-Session-Id": session, "Mcp-Protocol-Version": LATEST_HANDSHAKE_VERSION} if session else sent

    def answer(response: httpx.Response) -> Any:
        """The JSON-RPC answer carried by a response's event stream."""
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        return json.loads(next(line[5:] for line in response.text.splitlines() if line.startswith("data:")))

    opening = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        opened = http.post("/mcp", json=opening, headers=headers(keys.reader))
        session = opened.headers["mcp-session-id"]
        assert answer(opened)["result"]["serverInfo"]["name"] == "sgam"
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post("/mcp", json=initialized, headers=headers(keys.reader, session)).status_code == 202
        tools = answer(http.post("/mcp", json=listing, headers=headers(keys.reader, session)))["result"]["tools"]
        assert [t["name"] for t in tools] == [op.name for op in OPERATIONS if op.scope.value == "read"]
        # Another valid key of the same tenant cannot use the session: it is not there for it.
        assert http.post("/mcp", json=listing, headers=headers(keys.writer, session)).status_code == 404
        # A request without a session that is not an initialize opens nothing.
        assert http.post("/mcp", json=listing, headers=headers(keys.reader)).status_code == 400
        assert http.delete("/mcp", headers=headers(keys.reader, session)).status_code == 200
        assert http.post("/mcp", json=listing, headers=headers(keys.reader, session)).status_code == 404


def test_several_workers_serve_the_api_and_a_stateless_mcp(neo4j_connection: tuple[str, tuple[str, str]],
                                                          keys: Keys) -> None:
    """Two worker processes on one port: the MCP story holds with no session kept between
    requests, and /v1 answers every request, each on a fresh connection (so the kernel spreads
    them over both processes), under the tenant of its key."""
    for workers in start(neo4j_connection, "--workers", "2"):
        children = subprocess.run(["pgrep", "-P", str(workers.process.pid)], capture_output=True, text=True)
        assert len(children.stdout.split()) >= 2, children
        check(asyncio.run(story(over_http(workers, keys.writer), "mira-workers")))
        for _ in range(20):
            response = httpx.post(f"{workers.url}/v1/current", json={"subject": "mira-workers",
                                                                     "attribute": "passport_deadline"},
                                  headers={"Authorization": f"Bearer {keys.reader}"})
            assert [f["value"] for f in response.json()["facts"]] == ["2026-06-30"], response.text
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}
        opened = httpx.post(f"{workers.url}/mcp", json=initialize, headers={
            "Authorization": f"Bearer {keys.reader}", "Accept": "application/json, text/event-stream"})
        assert opened.status_code == 200 and "mcp-session-id" not in opened.headers


def test_granian_serves_both_surfaces_behind_the_same_keys(neo4j_connection: tuple[str, tuple[str, str]],
                                                          keys: Keys) -> None:
    """``sgam serve --server granian`` (the Rust HTTP server, extra ``granian``) runs the same app:
    the MCP story over streamable HTTP, /v1 reads under the key's tenant, a missing key 401 on
    both surfaces, an oversized body 413, and the log line of each call."""
    for served in start(neo4j_connection, "--server", "granian"):
        check(asyncio.run(story(over_http(served, keys.writer), "mira-granian")))
        reader = {"Authorization": f"Bearer {keys.reader}"}
        response = httpx.post(f"{served.url}/v1/current", headers=reader,
                              json={"subject": "mira-granian", "attribute": "passport_deadline"})
        assert [(f["value"], f["tenant_id"]) for f in response.json()["facts"]] == [("2026-06-30", keys.tenant_a)]
        assert "x-sgam-bookmarks" in response.headers
        for path in ("/v1/current", "/mcp"):
            refused = httpx.post(f"{served.url}{path}", json={"subject": "mira-granian"})
            assert refused.status_code == 401 and refused.json()["error"]["type"] == "Unauthenticated"
        huge = httpx.post(f"{served.url}/v1/current", headers=reader, content=b"x" * 2_000_000)
        assert huge.status_code == 413, huge.text
        assert "current key=" in served.log_text()

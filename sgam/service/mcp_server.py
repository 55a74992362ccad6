"""The MCP server: the service's operations as MCP tools (the official ``mcp`` SDK's low-level
server), over stdio (``sgam mcp``) or streamable HTTP (``/mcp`` in ``sgam serve``).

The tools are listed from the schema registry (:mod:`.tools`), only those the caller's key may
call. A tool's error is a tool result with ``isError`` and the error's message, so a model can
read it and correct its call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server

from sgam.graph.errors import SgamError

from .keys import Identity, Unauthenticated
from .operations import Service
from .requests import BY_NAME
from .tools import tool_definitions

IDENTITY_KEY = "sgam.identity"
"""Where the HTTP mount (:mod:`.http`) leaves the caller's identity in the ASGI scope."""


def build_server(service: Callable[[], Service], stdio_identity: Identity | None = None) -> Server:
    """An MCP server over ``service()``; ``stdio_identity`` is the identity of a stdio session
    (its key came from ``SGAM_API_KEY``), an HTTP request brings its own."""

    def identity(ctx: Any) -> Identity:
        request = getattr(ctx, "request", None)
        found = request.scope.get(IDENTITY_KEY) if request is not None else stdio_identity
        if found is None:
            raise Unauthenticated("no API key: the MCP endpoint needs 'Authorization: Bearer <key>'")
        return found

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        who = identity(ctx)
        return types.ListToolsResult(tools=[
            types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
            for t in tool_definitions(service().graph.schema, "mcp")
            if who.scope.allows(BY_NAME[t["name"]].scope)])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            result = await service().call(identity(ctx), params.name, params.arguments)
        except SgamError as exc:
            return types.CallToolResult(
                content=[types.TextContent(text=f"{type(exc).__name__}: {exc}")], is_error=True)
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    structured_content=result if isinstance(result, dict) else None)

    return Server("sgam", instructions="Schema-guided, bitemporal agent memory: remember facts from "
                  "episodes, read what holds now or held at a time, with citations.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def run_stdio(service: Service, key: str | None) -> None:
    """Serve one stdio session as the key ``key`` (checked before the session starts)."""
    from mcp.server.stdio import stdio_server

    who = await service.identify(key)
    server = build_server(lambda: service, who)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

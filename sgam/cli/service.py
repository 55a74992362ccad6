"""``sgam serve``, ``sgam mcp``, ``sgam keys create|list|revoke`` and ``sgam tools``: the memory
service (:mod:`sgam.service`) on the command line."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer

from sgam.cli.bench import bench_app
from sgam.cli.common import app, friendly
from sgam.graph.errors import InvalidSetting
from sgam.graph.schema import load_schema
from sgam.service.settings import loopback, service_settings
from sgam.service.tools import DIALECTS, tool_definitions
from sgam.settings import Settings

SERVERS = ("uvicorn", "granian")
APP_FACTORY = "sgam.service.http:from_environment"
"""What each worker of ``sgam serve`` runs, whichever server runs it."""

keys_app = typer.Typer(no_args_is_help=True, help="API keys of the service: create, list, revoke.")

SchemaOpt = typer.Option("default", "--schema", help="A shipped schema name or a YAML/JSON file")


def _connect(schema: str = "default") -> Any:
    from sgam.api import MemoryGraph

    return MemoryGraph.connect(schema=load_schema(schema))



app.add_typer(keys_app, name="keys")


@app.command("tools")
@friendly
def tools(fmt: str = typer.Option("mcp", "--format", help="openai | anthropic | mcp"),
          schema: str = SchemaOpt) -> None:
    """Print the service's tool definitions, generated from the schema, as JSON."""
    if fmt not in DIALECTS:
        raise typer.BadParameter(f"--format must be one of {', '.join(DIALECTS)}")
    typer.echo(json.dumps(tool_definitions(load_schema(schema), fmt), indent=2))  # type: ignore[arg-type]


@keys_app.command("create")
@friendly
def keys_create(tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant the key may use"),
                principal: str = typer.Option(..., "--principal", "-p",
                                              help="Who reads and writes with it, e.g. agent:support"),
                scope: str = typer.Option("read", "--scope", help="read | write | admin"),
                note: str = typer.Option(None, "--note", help="What the key is for (kept with it)")) -> None:
    """Issue an API key; it is printed once and stored only as a hash."""
    from sgam.service.keys import create_key

    graph = _connect()
    try:
        new = create_key(graph.store, tenant, principal, scope, note=note)
    finally:
        graph.close()
    typer.echo(new.key)
    typer.echo(f"key {new.identity.key_id}: tenant {tenant}, principal {principal}, scope "
               f"{new.identity.scope.value} (shown once; store it now)", err=True)


@keys_app.command("list")
@friendly
def keys_list(tenant: str = typer.Option(None, "--tenant", "-t", help="Only this tenant's keys"),
              as_json: bool = typer.Option(False, "--json", help="Print JSON")) -> None:
    """List keys (never the keys themselves): id, tenant, principal, scope, revoked."""
    from pydantic_core import to_jsonable_python

    from sgam.service.keys import list_keys

    graph = _connect()
    try:
        rows = [{k: (v.iso_format() if hasattr(v, "iso_format") else v) for k, v in r.items()}
                for r in list_keys(graph.store, tenant)]
    finally:
        graph.close()
    if as_json:
        typer.echo(json.dumps(to_jsonable_python(rows), indent=2))
        return
    for r in rows:
        state = f"revoked {r['revoked_at']}" if r["revoked_at"] else "active"
        typer.echo(f"{r['id']}  {r['tenant']}  {r['principal']}  {r['scope']}  {state}"
                   + (f"  {r['note']}" if r["note"] else ""))


@keys_app.command("revoke")
@friendly
def keys_revoke(key_id: str = typer.Argument(..., help="The key's id (sgam keys list)")) -> None:
    """Revoke a key: requests with it get 401 from then on."""
    from sgam.service.keys import revoke_key

    graph = _connect()
    try:
        revoke_key(graph.store, key_id)
    finally:
        graph.close()
    typer.echo(f"key {key_id} revoked")


@app.command("serve")
@friendly
def serve(host: str = typer.Option("127.0.0.1", "--host", help="Address to bind"),
          port: int = typer.Option(8080, "--port", help="Port to bind"),
          workers: int = typer.Option(None, "--workers", min=1, max=64,
                                      help="Worker processes, one event loop each (default "
                                           "SGAM_SERVICE_WORKERS or 1); with more than one, /mcp is stateless"),
          server: str = typer.Option("uvicorn", "--server",
                                     help="The HTTP server: uvicorn, or granian (Rust; pip install "
                                          "'sgam[granian]'; less CPU a request)"),
          coalesce: bool = typer.Option(None, "--coalesce/--no-coalesce",
                                        help="Answer concurrent `current` reads of one key and shape as one "
                                             "statement (default SGAM_SERVICE_COALESCE_READS or on)"),
          schema: str = SchemaOpt) -> None:
    """Run the HTTP API (/v1) and the MCP server (/mcp) with uvicorn (or granian)."""
    import os

    from sgam.service.keys import any_active

    if server not in SERVERS:
        raise typer.BadParameter(f"--server must be one of {', '.join(SERVERS)}")

    if not loopback(host):
        graph = _connect(schema)
        try:
            if not any_active(graph.store):
                raise InvalidSetting(f"refusing to serve on {host}, reachable from other machines, "
                                     "while no API key exists: create one with `sgam keys create` "
                                     "(or bind 127.0.0.1)")
        finally:
            graph.close()
    Settings()
    load_schema(schema)   # a bad setting or schema is one line here, not a traceback per worker
    # Each worker reads what it serves from the environment (sgam.service.http.from_environment).
    os.environ["SGAM_SERVICE_SCHEMA"] = schema
    if workers is not None:
        os.environ["SGAM_SERVICE_WORKERS"] = str(workers)
    if coalesce is not None:
        os.environ["SGAM_SERVICE_COALESCE_READS"] = str(coalesce).lower()
    limits = service_settings()
    # One line per call from sgam.service (operation, key id, time); no access log, whose
    # lines would add nothing but the client's address.
    if server == "granian":
        _granian(host, port, limits.service_workers)
        return
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    logs = {**LOGGING_CONFIG, "loggers": {**LOGGING_CONFIG["loggers"],
                                          "sgam.service": {"handlers": ["default"], "level": "INFO"}}}
    uvicorn.run(APP_FACTORY, factory=True, host=host, port=port,
                workers=limits.service_workers, log_level="info", log_config=logs, access_log=False)


def _granian(host: str, port: int, workers: int) -> None:
    """Serve the same app with granian: HTTP parsed and answered in Rust, the app on uvloop."""
    try:
        from granian import Granian
        from granian.log import LOGGING_CONFIG
    except ImportError:
        raise InvalidSetting("--server granian: granian is not installed (pip install 'sgam[granian]'); "
                             "or leave --server at uvicorn") from None
    loggers: Any = LOGGING_CONFIG["loggers"]   # typed as object by granian
    logs = {"loggers": {**loggers, "sgam.service": {"handlers": ["console"], "level": "INFO"}}}
    Granian(APP_FACTORY, factory=True, interface="asgi", address=host, port=port, workers=workers,
            loop="uvloop", websockets=False, log_dictconfig=logs, log_access=False).serve()


@bench_app.command("service")
@friendly
def bench_service(subjects: int = typer.Option(500, min=1, help="People seeded into a throwaway tenant"),
                  clients: int = typer.Option(16, min=1, help="Concurrent clients"),
                  requests: int = typer.Option(2000, min=1, help="Requests per operation and path"),
                  operation: list[str] = typer.Option(["current", "context"], "--operation",
                                                      help="current and/or context (repeatable)"),
                  workers: int = typer.Option(1, min=1, max=64, help="Worker processes of the server"),
                  rate: float = typer.Option(None, min=0.1, help="Requests per second of all clients together "
                                                                 "(default: each client sends as soon as it is answered)"),
                  load: str = typer.Option(None, "--load", help="HTTP load generator: wrk or aiohttp "
                                                                "[default: wrk when installed, else aiohttp]"),
                  server: str = typer.Option("uvicorn", "--server", help="What sgam serve runs: uvicorn or granian"),
                  coalesce: bool = typer.Option(True, "--coalesce/--no-coalesce",
                                                help="Whether sgam serve answers concurrent current reads together"),
                  as_json: bool = typer.Option(False, "--json", help="Print JSON")) -> None:
    """The service's requests/s and p50/p99 of current and context over HTTP, next to in-process."""
    from sgam.bench import service as bench

    unknown = set(operation) - set(bench.OPERATIONS)
    if unknown:
        raise typer.BadParameter(f"--operation must be one of {', '.join(bench.OPERATIONS)}")
    result = bench.run(subjects=subjects, clients=clients, requests=requests, workers=workers, rate=rate,
                       operations=tuple(dict.fromkeys(operation)), load=load, server=server, coalesce=coalesce,
                       log=lambda line: typer.echo(line, err=True))
    typer.echo(json.dumps(result, indent=2) if as_json else bench.markdown(result))


@app.command("mcp")
@friendly
def mcp_stdio(schema: str = SchemaOpt) -> None:
    """Serve MCP over stdio (what desktop clients launch); the key comes from SGAM_API_KEY."""
    from sgam.service.mcp_server import run_stdio
    from sgam.service.operations import Service

    key = service_settings().api_key

    async def main() -> None:
        service = await Service.open(Settings(), load_schema(schema))
        try:
            await run_stdio(service, key.get_secret_value() if key else None)
        finally:
            await service.close()

    asyncio.run(main())

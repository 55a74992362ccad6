"""The ASGI app of ``sgam serve``: the HTTP API under ``/v1`` (FastAPI, with its OpenAPI document
at ``/v1/openapi.json``) and the MCP server over streamable HTTP at ``/mcp``.

Every request names its key as ``Authorization: Bearer <key>``. The key is checked, then its
scope, then the body, and only then does anything run: a refused request writes nothing. Errors
are JSON, ``{"error": {"type": ..., "message": ...}}``, with the status of their kind.

Causal consistency across requests (and services): every answer carries the bookmarks of the
store its key's tenant lives on in ``X-SGAM-Bookmarks`` (comma-separated); a request that sends
them back in the same header sees every write made before they were given, even on a cluster
secondary that has not caught up.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from pydantic_core import to_json
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from sgam.graph.errors import (
    Conflict, InvalidDelta, NotAllowed, NotFound, SchemaViolation, SgamError, StoreUnavailable,
)

from .keys import Unauthenticated
from .mcp_server import IDENTITY_KEY, build_server
from .operations import Service, parse_json
from .requests import OPERATIONS, Operation

BOOKMARKS_HEADER = "X-SGAM-Bookmarks"
DEFAULT_MAX_BODY_BYTES = 1_000_000
"""The largest request body (an episode is at most 100 kB of text; JSON escaping can double it)."""
MCP_SESSION_IDLE_SECONDS = 1800.0
"""An MCP session without a request for this long is closed (its id then answers 404)."""

# The status of each kind of error (the first match wins: subclasses before their roots).
STATUS: tuple[tuple[type[SgamError], int], ...] = (
    (Unauthenticated, 401), (NotAllowed, 403), (NotFound, 404), (Conflict, 409),
    (InvalidDelta, 422), (SchemaViolation, 422), (StoreUnavailable, 503),
)

BEARER = {"type": "http", "scheme": "bearer", "description": "An SGAM API key (sgam keys create)"}
JSON_HINT = " (send the arguments as a JSON object with Content-Type: application/json)"


def bearer_key(header: bytes | str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header; ``None`` for any other header."""
    text = header.decode("latin-1") if isinstance(header, bytes) else header or ""
    return text[7:].strip() if text[:7].lower() == "bearer " else None


def error_response(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status,
                        headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)


def status_of(exc: SgamError) -> int:
    return next((code for kind, code in STATUS if isinstance(exc, kind)), 400)


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413 before any of it is parsed. The body is
    read here (at most ``limit`` bytes are held), so a chunked body without a Content-Length is
    counted too, and handed on whole."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._refuse(scope, receive, send)
                return
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(413, "BodyTooLarge", f"the request body is over the {self.limit}-byte limit "
                                                       "(SGAM_SERVICE_MAX_BODY_BYTES)")
        await response(scope, receive, send)


class McpAuth:
    """The MCP endpoint behind the same keys: a request without a valid key gets 401 and never
    reaches the MCP server; a valid one carries its identity in the ASGI scope."""

    def __init__(self, app: ASGIApp, service: Any) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            identity = await self.service().identify(bearer_key(dict(scope["headers"]).get(b"authorization")))
        except SgamError as exc:
            await error_response(status_of(exc), type(exc).__name__, str(exc))(scope, receive, send)
            return
        scope[IDENTITY_KEY] = identity
        # The session manager binds a session to the user that opened it: a request of another key
        # naming that session is answered as if it did not exist. The user is the key's id, never the key.
        scope["user"] = AuthenticatedUser(AccessToken(token=identity.key_id, client_id=identity.key_id,
                                                      scopes=[identity.scope.value], subject=identity.principal))
        await self.app(scope, receive, send)


def from_environment() -> ASGIApp:
    """The app each worker of ``sgam serve`` runs: the connection, the schema and the limits come
    from the environment (``NEO4J_*``, ``SGAM_SERVICE_*``), which the command sets for them."""
    from sgam.graph.schema import load_schema
    from sgam.settings import Settings

    from .settings import service_settings

    settings, limits = Settings(), service_settings()

    async def open_service() -> Service:
        return await Service.open(settings, load_schema(limits.service_schema),
                                  key_cache_seconds=limits.service_key_cache_seconds,
                                  coalesce_reads=limits.service_coalesce_reads)

    return create_app(open_service, max_body_bytes=limits.service_max_body_bytes,
                      mcp_sessions=limits.service_workers == 1)


def create_app(opener: Callable[[], Awaitable[Service]] | None = None, *,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, mcp_sessions: bool = True) -> ASGIApp:
    """The service's ASGI app; when it starts it opens its :class:`Service` with ``opener``
    (default: connect with the environment's settings and the default schema). Without
    ``mcp_sessions`` every /mcp request stands alone (no ``Mcp-Session-Id``), as it must when
    several processes serve one port."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

    state: dict[str, Service] = {}

    def current() -> Service:
        return state["service"]

    # Stateful sessions, as MCP clients expect (an Mcp-Session-Id from initialize on, answers and
    # server notifications as SSE, a GET stream, DELETE to end): a session lives in this process,
    # bound to the key that opened it, and its key is still checked on every request. SGAM's tools
    # keep nothing between calls, so stateless requests lose no feature of theirs. No
    # DNS-rebinding check: a page in a browser has no key to send.
    sessions = StreamableHTTPSessionManager(app=build_server(current), stateless=not mcp_sessions,
                                            session_idle_timeout=MCP_SESSION_IDLE_SECONDS)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state["service"] = await (opener or Service.open)()
        try:
            async with sessions.run():
                yield
        finally:
            await state["service"].close()

    app = FastAPI(title="SGAM", version="1", lifespan=lifespan, openapi_url="/v1/openapi.json",
                  docs_url="/v1/docs", redoc_url=None,
                  description="Schema-guided, bitemporal agent memory. Tenant and reader come from the "
                              "API key; the same operations are MCP tools at /mcp.")

    @app.exception_handler(SgamError)
    async def sgam_error(request: Request, exc: SgamError) -> JSONResponse:
        return error_response(status_of(exc), type(exc).__name__, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # An unknown path or a wrong method answers in the same shape as every other error.
        hint = " (every operation is POST /v1/<operation>; see /v1/openapi.json)" if exc.status_code in (404, 405) else ""
        return error_response(exc.status_code, "HTTPError", f"{exc.detail}{hint}")

    for operation in OPERATIONS:
        _add_route(app, operation, current)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.router.routes.append(Route("/mcp", McpAuth(StreamableHTTPASGIApp(sessions), current),
                                   methods=["GET", "POST", "DELETE"]))
    return BodyLimit(app, max_body_bytes)


def _add_route(app: FastAPI, operation: Operation, service: Any) -> None:
    # The endpoint reads its request itself: the key from the header, the body decoded and checked
    # by the operation's model in one pass (pydantic's JSON parser), the answer encoded in one
    # pass. FastAPI's dependency solving and double encoding cost a third of what the service adds
    # to a read (py-spy, 16 clients); the OpenAPI document still names every body and the key.
    async def endpoint(request: Request) -> Response:
        headers = request.headers
        identity = await service().identify(bearer_key(headers.get("authorization")))
        identity.require(operation.scope, operation.name)
        try:
            arguments = parse_json(operation.model, await request.body())
        except InvalidDelta as exc:
            if "json" in headers.get("content-type", ""):
                raise
            raise InvalidDelta(f"{exc}{JSON_HINT}") from None
        # Bookmarks name transactions of one server: those of the store the key's tenant lives on.
        store = await service().graph.targets.of([identity.tenant])
        bookmarks = headers.get(BOOKMARKS_HEADER)
        if bookmarks is not None:
            await store.catch_up([b.strip() for b in bookmarks.split(",")])
        result = await service().run(identity, operation, arguments)
        return Response(to_json(result), media_type="application/json",
                        headers={BOOKMARKS_HEADER: ",".join(await store.bookmarks())})

    body = {"required": _required(operation),
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{operation.model.__name__}"}}}}
    bookmarks = {"name": BOOKMARKS_HEADER, "in": "header", "required": False, "schema": {"type": "string"},
                 "description": "bookmarks from an earlier answer: this request sees every write made before them"}
    app.add_api_route(f"/v1/{operation.path}", endpoint, methods=["POST"], name=operation.name,
                      summary=operation.description.split(". ")[0], description=operation.description,
                      tags=[operation.scope.value],
                      openapi_extra={"requestBody": body, "parameters": [bookmarks], "security": [{"bearer": []}]})


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document, with the request models the endpoints read themselves and the key scheme."""
    if app.openapi_schema is None:
        document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = document.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        for operation in OPERATIONS:
            schema = operation.model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[operation.model.__name__] = schema
        components["securitySchemes"] = {"bearer": BEARER}
        app.openapi_schema = document
    return app.openapi_schema


def _required(operation: Operation) -> bool:
    return any(field.is_required() for field in operation.model.model_fields.values())

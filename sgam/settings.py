"""Settings for SGAM, built once at an entry point (the CLI, a test fixture, or the caller).

Environment variables override defaults; ``NEO4J_URI``/``NEO4J_USER``/``NEO4J_PASSWORD`` take
precedence over the locally provisioned server's stored credentials (:func:`resolve_connection`:
reading the credentials file is all a client needs of the local server, so the front door does not
import the provisioning in :mod:`sgam.local.server`, which writes that file).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, ValidationInfo, \
    field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sgam.graph.errors import InvalidSetting, ProvisioningError, validation_problems
from sgam.graph.models import check_tenant
from sgam.graph.store import DEFAULT_RETRY_SECONDS, check_bolt_uri, check_transport


def _default_home() -> Path:
    return Path.home() / ".sgam" / "neo4j"


def _default_cache() -> Path:
    return Path.home() / ".cache" / "sgam"


def _default_placement() -> Path:
    return Path.home() / ".sgam" / "placement.json"


class Target(BaseModel):
    """Where a tenant lives: a server (``uri``) and a database on it. ``None`` parts are the
    default connection's (``NEO4J_URI``, ``NEO4J_DATABASE``); a server other than the default
    takes its password from the environment variable ``password_env`` (never from the file), or
    the default connection's password when that is unset."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    uri: str | None = None
    database: str | None = None
    user: str | None = None
    password_env: str | None = None

    @field_validator("uri")
    @classmethod
    def _bolt(cls, uri: str | None) -> str | None:
        if uri is None:
            return None
        try:
            return check_bolt_uri(uri, "a placement's uri")
        except InvalidSetting as exc:
            raise ValueError(str(exc)) from None

    def describe(self) -> str:
        """The target as one line (``uri/database``, ``default`` for the default parts)."""
        return f"{self.uri or 'default'}/{self.database or 'default'}"


class Placement(BaseModel):
    """The placement map: tenant -> :class:`Target`; a tenant not named lives on the default one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenants: dict[str, Target] = Field(default_factory=dict)

    @field_validator("tenants")
    @classmethod
    def _tenant_ids(cls, tenants: dict[str, Target]) -> dict[str, Target]:
        for tenant in tenants:
            check_tenant(tenant)
        return tenants

    def target(self, tenant: str) -> Target:
        return self.tenants.get(tenant, DEFAULT_TARGET)

    def placed(self, tenant: str, target: Target) -> Placement:
        """This map with ``tenant`` on ``target`` (a default target drops its entry)."""
        tenants = {t: x for t, x in self.tenants.items() if t != tenant}
        if target != DEFAULT_TARGET:
            tenants[tenant] = target
        return Placement(tenants=dict(sorted(tenants.items())))


DEFAULT_TARGET = Target()


def load_placement(path: Path) -> Placement:
    """The placement map stored at ``path`` (an empty one when there is no file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Placement()
    except OSError as exc:
        raise InvalidSetting(f"SGAM_PLACEMENT_FILE {path}: cannot read it: {exc}") from None
    try:
        return Placement.model_validate_json(text)
    except ValidationError as exc:
        raise InvalidSetting(f"SGAM_PLACEMENT_FILE {path}: {validation_problems(exc, 'tenants')}"
                             " (the file is {\"tenants\": {TENANT: {\"uri\": ..., \"database\": ...}}})") from None


def save_placement(path: Path, placement: Placement) -> None:
    """Replace the file at ``path`` with ``placement`` atomically: a reader sees the old map or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(placement.model_dump_json(indent=2, exclude_defaults=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class Settings(BaseSettings):
    """Connection and local-server settings; every field has an ``SGAM_`` environment variable."""

    model_config = SettingsConfigDict(env_prefix="SGAM_", extra="ignore")

    def __init__(self, **values: Any) -> None:
        # A bad environment variable is one line naming it, not a pydantic traceback.
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise InvalidSetting("; ".join(_problem(e) for e in exc.errors())) from None

    neo4j_uri: str | None = Field(
        default=None, validation_alias=AliasChoices("NEO4J_URI", "SGAM_NEO4J_URI")
    )
    neo4j_user: str | None = Field(
        default=None, validation_alias=AliasChoices("NEO4J_USER", "SGAM_NEO4J_USER")
    )
    neo4j_password: str | None = Field(
        default=None, validation_alias=AliasChoices("NEO4J_PASSWORD", "SGAM_NEO4J_PASSWORD")
    )
    neo4j_database: str = Field(
        default="neo4j", validation_alias=AliasChoices("NEO4J_DATABASE", "SGAM_NEO4J_DATABASE")
    )
    # How long a transaction failing for a transient reason (server gone, deadlock) is retried,
    # and how long opening a connection may take (graph/store.py, DEFAULT_RETRY_SECONDS).
    neo4j_retry_seconds: float = Field(default=DEFAULT_RETRY_SECONDS, ge=0, le=3600)
    # SGAM_ALLOW_PLAINTEXT=1: send the password over bolt:// or neo4j:// to a server that is not on
    # this machine (refused otherwise: graph/store.py, check_transport), e.g. on docker compose's network.
    allow_plaintext: bool = False
    # Tenant placement (README, "Placement"): the map given here, else the file
    # SGAM_PLACEMENT_FILE (which `sgam tenants place|move` writes); none: every tenant on NEO4J_URI.
    placement: Placement | None = None
    placement_file: Path = Field(default_factory=_default_placement)

    @field_validator("heap_size", "pagecache_size")
    @classmethod
    def _size(cls, size: str, info: ValidationInfo) -> str:
        if size == "auto" or re.fullmatch(r"[1-9][0-9]{0,6}[kmg]", size):
            return size
        raise ValueError(f"SGAM_{str(info.field_name).upper()} must be 'auto' (sized from this machine's memory) "
                         f"or a whole number with k, m or g, such as 512m or 2g; got {size!r:.40}")

    @field_validator("neo4j_uri")
    @classmethod
    def _bolt(cls, uri: str | None) -> str | None:
        if uri is None:
            return None
        try:
            return check_bolt_uri(uri, "NEO4J_URI")
        except InvalidSetting as exc:
            raise ValueError(str(exc)) from None

    # The locally provisioned server (`sgam neo4j up`).
    home: Path = Field(default_factory=_default_home)
    cache_dir: Path = Field(default_factory=_default_cache)
    neo4j_version: str = "5.26.31"
    browser_version: str = "5.24.0"
    # APOC core for the Browser pictures (virtual relationships). Its 5.26 line does not publish
    # every server patch: this is the newest on Maven Central; any 5.26 server loads it.
    apoc_version: str = "5.26.19"
    bolt_port: int = Field(default=7687, ge=1, le=65535)
    http_port: int = Field(default=7474, ge=1, le=65535)
    # "auto": sized from the machine's memory when the server's config is written
    # (``sgam.local.server.memory_sizes``); else a size such as 512m or 2g.
    heap_size: str = "auto"
    pagecache_size: str = "auto"
    start_timeout: float = 120.0
    # When the local server compiles a query's expressions: "compiled" when the query is planned
    # (its first run pays a few milliseconds more, once per server); "hot" (Neo4j's default) on its
    # 10th run, which then takes several times a usual run (the read tail on a fresh server,
    # sgam/bench/README.md "Session 17"). The test suite's server, whose queries mostly run fewer
    # than ten times, uses "hot".
    cypher_expressions: Literal["compiled", "hot"] = "compiled"

    # The write path: how far after now a valid_from may lie (a scheduled change) before it is
    # refused as absurd; an attribute's max_future_days in the schema wins.
    max_future_days: int = Field(default=36_500, ge=0, le=3_000_000)
    # SGAM_READ_AUDIT: record who read which subject's private attributes (graph/audit.py says
    # why private ones only), or nothing.
    read_audit: Literal["private", "off"] = "private"

    # The OpenAI-compatible structured-output extractor (sgam.ingest.extractors.llm): SGAM_LLM_BASE_URL, ...
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout: float = Field(default=30.0, gt=0)
    llm_max_retries: int = Field(default=3, ge=0)

    def placement_map(self) -> Placement:
        """The placement in force: :attr:`placement` if given, else the file's."""
        if self.placement is not None:
            return self.placement
        return load_placement(self.placement_file.expanduser())


DEFAULT_USER = "neo4j"
CREDENTIALS_FILE = "credentials.json"   # in the local server's home, written by `sgam neo4j up`


def stored_credentials(path: Path) -> tuple[str, str, str] | None:
    """(uri, user, password) the local server stored at ``path``, or None if there are none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return (str(data["uri"]), str(data["user"]), str(data["password"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ProvisioningError(f"cannot read {path}: {exc}") from exc


def resolve_connection(settings: Settings) -> tuple[str, str, str]:
    """(uri, user, password) for SGAM's Neo4j connection.

    NEO4J_URI (with NEO4J_USER, default "neo4j", and NEO4J_PASSWORD) names an external server and
    wins outright; its password is refused over an unencrypted scheme to a server not on this
    machine unless ``allow_plaintext`` (SGAM_ALLOW_PLAINTEXT). Otherwise the local server's stored
    credentials are used, with NEO4J_USER / NEO4J_PASSWORD still overriding their parts.
    """
    if settings.neo4j_uri:
        if settings.neo4j_password is None:
            raise ProvisioningError(
                "NEO4J_URI is set but NEO4J_PASSWORD is not: set NEO4J_PASSWORD for that server"
            )
        check_transport(settings.neo4j_uri, settings.neo4j_password, settings.allow_plaintext, "NEO4J_URI")
        return settings.neo4j_uri, settings.neo4j_user or DEFAULT_USER, settings.neo4j_password
    stored = stored_credentials(settings.home.expanduser().resolve() / CREDENTIALS_FILE)
    if stored is None:
        raise ProvisioningError(
            "no Neo4j server is configured: run `sgam neo4j up` to start a local one, "
            "or set NEO4J_URI and NEO4J_PASSWORD"
        )
    uri, user, password = stored
    return uri, settings.neo4j_user or user, settings.neo4j_password or password


def connection(uri: str | None, auth: tuple[str, str] | None,
               settings: Settings) -> tuple[str, tuple[str, str] | None]:
    """``(uri, auth)`` as given when ``uri`` is; otherwise :func:`resolve_connection`'s."""
    if uri is not None:
        return uri, auth
    resolved_uri, user, password = resolve_connection(settings)
    return resolved_uri, (user, password)


def _problem(error: Any) -> str:
    """One pydantic error as ``VARIABLE: message`` (a field is named by its environment variable)."""
    name = str(error["loc"][0]) if error["loc"] else "settings"
    variable = name if name.isupper() else f"SGAM_{name.upper()}"
    cause = error.get("ctx", {}).get("error")
    return str(cause) if isinstance(cause, ValueError) else f"{variable}: {error['msg']} (got {error['input']!r})"

"""Settings for SGAM, built once at an entry point (the CLI, a test fixture, or the caller).

Environment variables override defaults; ``NEO4J_URI``/``NEO4J_USER``/``NEO4J_PASSWORD`` take
precedence over the locally provisioned server's stored credentials.
"""

from __future__ import annotations

from pathlib import Path

from typing import Any

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sgam.graph.errors import InvalidSetting
from sgam.graph.store import DEFAULT_RETRY_SECONDS, check_bolt_uri


def _default_home() -> Path:
    return Path.home() / ".sgam" / "neo4j"


def _default_cache() -> Path:
    return Path.home() / ".cache" / "sgam"


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
    heap_size: str = "1g"
    pagecache_size: str = "512m"
    start_timeout: float = 120.0

    # The write path: how far after now a valid_from may lie (a scheduled change) before it is
    # refused as absurd; an attribute's max_future_days in the schema wins.
    max_future_days: int = Field(default=36_500, ge=0, le=3_000_000)

    # The OpenAI-compatible structured-output extractor (sgam.ingest.llm): SGAM_LLM_BASE_URL, ...
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    llm_timeout: float = Field(default=30.0, gt=0)
    llm_max_retries: int = Field(default=3, ge=0)


def _problem(error: Any) -> str:
    """One pydantic error as ``VARIABLE: message`` (a field is named by its environment variable)."""
    name = str(error["loc"][0]) if error["loc"] else "settings"
    variable = name if name.isupper() else f"SGAM_{name.upper()}"
    cause = error.get("ctx", {}).get("error")
    return str(cause) if isinstance(cause, ValueError) else f"{variable}: {error['msg']} (got {error['input']!r})"

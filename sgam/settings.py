"""Settings for SGAM, built once at an entry point (the CLI, a test fixture, or the caller).

Environment variables override defaults; ``NEO4J_URI``/``NEO4J_USER``/``NEO4J_PASSWORD`` take
precedence over the locally provisioned server's stored credentials.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_home() -> Path:
    return Path.home() / ".sgam" / "neo4j"


def _default_cache() -> Path:
    return Path.home() / ".cache" / "sgam"


class Settings(BaseSettings):
    """Connection and local-server settings; every field has an ``SGAM_`` environment variable."""

    model_config = SettingsConfigDict(env_prefix="SGAM_", extra="ignore")

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

    # The locally provisioned server (`sgam neo4j up`).
    home: Path = Field(default_factory=_default_home)
    cache_dir: Path = Field(default_factory=_default_cache)
    neo4j_version: str = "5.26.31"
    browser_version: str = "5.24.0"
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

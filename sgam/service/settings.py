"""The service's own settings and the bind check of ``sgam serve``."""

from __future__ import annotations

import ipaddress

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from sgam.graph.errors import InvalidSetting


class ServiceSettings(BaseSettings):
    """The service's own settings (the connection comes from :class:`sgam.settings.Settings`)."""

    model_config = SettingsConfigDict(env_prefix="SGAM_", extra="ignore")

    # The key of a stdio session (`sgam mcp`): desktop clients pass it in the server's env.
    api_key: SecretStr | None = None
    service_max_body_bytes: int = Field(default=1_000_000, ge=1_000, le=100_000_000)
    # How long `sgam serve` trusts a key it found valid before it asks the store again (0: ask on
    # every request); a revoked key keeps working for at most this long.
    service_key_cache_seconds: float = Field(default=5.0, ge=0, le=3600)
    # Whether `sgam serve` answers concurrent `current` reads of one key's tenant and principal
    # (and one attribute, candidates and memory types) together, as one statement: the same
    # answers, fewer round trips under load (sgam/service/coalesce.py).
    service_coalesce_reads: bool = True
    # What `sgam serve` hands its worker processes (a worker is started fresh and reads them here).
    service_schema: str = "default"
    # Worker processes of `sgam serve`: one event loop each. With more than one, /mcp is stateless
    # (a session would live in one process while its requests are spread over all of them).
    service_workers: int = Field(default=1, ge=1, le=64)


def service_settings() -> ServiceSettings:
    """The service's settings; a bad variable is one line naming it (as :class:`Settings` does)."""
    try:
        return ServiceSettings()
    except ValidationError as exc:
        raise InvalidSetting("; ".join(f"SGAM_{str(e['loc'][0]).upper()}: {e['msg']}" for e in exc.errors())) from None


def loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

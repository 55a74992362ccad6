"""The Dockerfile and the compose service (no Docker engine here: their syntax and what they name)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_image_copies_every_package_folder_and_serves() -> None:
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0].startswith("FROM python:3.11")
    copied = {part for line in lines if line.startswith("COPY") for part in line.split()[1:-1]}
    folders = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values())
    assert {f.split("/")[0] for f in folders} <= copied and all((ROOT / c).exists() for c in copied)
    assert any(line.startswith("RUN pip install '.[service]'") for line in lines)
    command = json.loads(next(line for line in lines if line.startswith("CMD"))[3:])
    assert command[:2] == ["sgam", "serve"] and "--host" in command


def test_the_compose_service_runs_next_to_neo4j_on_loopback() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    service = compose["services"]["sgam"]
    assert service["build"] == "." and service["depends_on"]["neo4j"]["condition"] == "service_healthy"
    assert service["environment"]["NEO4J_URI"] == "bolt://neo4j:7687"
    assert all(port.startswith("127.0.0.1:") for port in service["ports"])


def test_the_compose_neo4j_is_tuned_as_the_local_server() -> None:
    """The settings `sgam neo4j up` writes beyond Neo4j's defaults for how the server behaves
    (not its paths, ports or memory) are the compose service's too, in the image's naming
    (``.`` -> ``_``, ``_`` -> ``__``)."""
    from sgam.local.server import LocalServer
    from sgam.settings import Settings

    environment = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["neo4j"]["environment"]
    config = LocalServer(Settings())._config()
    shared = ("db.tx_log.preallocate", "db.tx_log.rotation.retention_policy", "db.checkpoint.interval.time",
              "dbms.security.procedures.allowlist", "dbms.usage_report.enabled", "client.allow_telemetry",
              "internal.cypher.expression_engine")
    for key in shared:
        name = "NEO4J_" + key.replace("_", "__").replace(".", "_")
        assert environment.get(name) == config[key], (key, name)

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

"""A real ``sgam serve`` process for the service tests, and the keys it serves.

The server runs as a subprocess on a free loopback port against the test session's Neo4j; keys
are issued through the key store itself, as ``sgam keys create`` issues them. The fixtures
``keys`` and ``server`` (one of each per test module: two fresh tenants, one server) are shared
by the modules that import them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from sgam.api import MemoryGraph
from sgam.service.keys import create_key

SGAM = str(Path(sys.executable).with_name("sgam"))

# The seed story (sgam/resources/demo.jsonl, e1 and e2): Mira's passport deadline, then its correction.
SEED = (
    {"content": "I prefer concise answers. My passport deadline is 2026-07-15.",
     "occurred_at": "2026-05-20T09:00:00Z",
     "deltas": [{"subject": "mira", "subject_name": "Mira", "attribute": "response_style", "value": "concise"},
                {"subject": "mira", "attribute": "passport_deadline", "value": "2026-07-15"}]},
    {"content": "Correction: my passport deadline is now 2026-06-30.", "occurred_at": "2026-06-10T14:30:00Z",
     "deltas": [{"subject": "mira", "attribute": "passport_deadline", "value": "2026-06-30"}]},
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(connection: tuple[str, tuple[str, str]], **extra: str) -> dict[str, str]:
    uri, (user, password) = connection
    return {**os.environ, "NEO4J_URI": uri, "NEO4J_USER": user, "NEO4J_PASSWORD": password, **extra}


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log: Any

    def log_text(self) -> str:
        self.log.seek(0)
        return str(self.log.read().decode("utf-8", "replace"))

    def client(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


@dataclass(frozen=True)
class Keys:
    """Keys of two tenants: ``a`` with a writer, an admin, two readers and a revoked key; ``b``."""

    tenant_a: str
    tenant_b: str
    writer: str          # tenant a, user:mira, write
    admin: str           # tenant a, agent:ops, admin
    reader: str          # tenant a, agent:support, read
    kyc: str             # tenant a, agent:kyc, read (a reader of the private date_of_birth)
    revoked: str         # tenant a, write, revoked
    other: str           # tenant b, user:mira, write


def issue_keys(graph: MemoryGraph, tenant_a: str, tenant_b: str) -> Keys:
    from sgam.service.keys import revoke_key

    make = lambda tenant, principal, scope: create_key(graph.store, tenant, principal, scope)  # noqa: E731
    revoked = make(tenant_a, "user:mira", "write")
    revoke_key(graph.store, revoked.identity.key_id)
    return Keys(tenant_a, tenant_b, make(tenant_a, "user:mira", "write").key, make(tenant_a, "agent:ops", "admin").key,
                make(tenant_a, "agent:support", "read").key, make(tenant_a, "agent:kyc", "read").key,
                revoked.key, make(tenant_b, "user:mira", "write").key)


def start(connection: tuple[str, tuple[str, str]], *args: str, **env: str) -> Iterator[Server]:
    port = free_port()
    # The log goes to a file: a pipe nobody reads would stall the server once it filled.
    log = tempfile.TemporaryFile()
    process = subprocess.Popen([SGAM, "serve", "--port", str(port), *args], env=server_env(connection, **env),
                               stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise AssertionError(f"sgam serve exited: {log.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{url}/v1/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("sgam serve did not answer within 90 s")
            time.sleep(0.3)
        yield Server(url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture(scope="module")
def keys(shared_graph: MemoryGraph) -> Keys:
    return issue_keys(shared_graph, f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def server(neo4j_connection: tuple[str, tuple[str, str]], keys: Keys) -> Iterator[Server]:
    yield from start(neo4j_connection)

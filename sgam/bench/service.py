"""``sgam bench service``: what the service costs over the in-process API, measured in one run.

A throwaway tenant gets ``subjects`` people with a few facts each; then ``clients`` concurrent
clients read ``current`` and ``context`` of random subjects through a ``sgam serve`` process over
HTTP (aiohttp, keep-alive: a load generator that costs the shared cores as little as it can) and through an in-process :class:`AsyncMemoryGraph` with the same number
of concurrent tasks, in alternating rounds, so a machine whose load drifts during the run loads
both paths alike. Reported: requests per second and p50/p99 latency of each, and the p50 overhead
of the service. The tenant and the key are removed afterwards.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from sgam.api import AsyncMemoryGraph, MemoryGraph
from sgam.graph.models import MemoryDelta

from sgam.service.keys import create_key, revoke_key

OPERATIONS = ("current", "context")
ROUNDS = 5


def _seed(graph: MemoryGraph, tenant: str, subjects: int) -> list[str]:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    names = [f"p{i:05d}" for i in range(subjects)]
    episode = graph.record_episode(tenant_id=tenant, content="benchmark seed", occurred_at=start)
    deltas = [MemoryDelta(tenant_id=tenant, subject=name, attribute=attribute, value=value,
                          valid_from=start + timedelta(days=i % 300), source_episode_id=episode.id)
              for i, name in enumerate(names)
              for attribute, value in (("home_city", f"City{i % 97}"), ("response_style", "concise"),
                                       ("passport_deadline", (start + timedelta(days=400 + i % 365)).date()))]
    graph.write_many(deltas)
    return names


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _arguments(operation: str, subject: str) -> dict[str, Any]:
    if operation == "current":
        return {"subject": subject}
    return {"question": f"When is the passport deadline of {subject}?", "subjects": [subject]}


Call = Callable[[str, dict[str, Any]], Awaitable[None]]


async def _load(call: Call, operation: str, plan: list[str], clients: int,
                rate: float | None = None) -> tuple[list[float], float]:
    """The latency of each request of ``plan`` shared by ``clients``, and the time of them all.

    Without ``rate`` each client sends its next request as soon as it has the answer (a closed
    loop: the machine runs flat out). With ``rate`` the clients together send ``rate`` requests a
    second, each on its own schedule, and a request's latency counts from the moment it was due,
    so a request held up behind a slow one is charged for the wait (no coordinated omission)."""
    latencies: list[float] = []
    began = time.perf_counter()

    async def client(index: int, share: list[str]) -> None:
        interval = clients / rate if rate else 0.0
        for k, subject in enumerate(share):
            due = began + interval * (k + index / clients) if rate else time.perf_counter()
            if rate:
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
            await call(operation, _arguments(operation, subject))
            latencies.append(time.perf_counter() - due)

    await asyncio.gather(*(client(i, plan[i::clients]) for i in range(clients)))
    return latencies, time.perf_counter() - began


async def _compare(ways: dict[str, Call], operation: str, names: list[str], clients: int,
                   requests: int, rate: float | None = None) -> dict[str, dict[str, float]]:
    """Each way warmed up, then ``ROUNDS`` rounds of ``requests / ROUNDS`` requests of each way in turn."""
    rng = random.Random(7)
    for call in ways.values():
        await _load(call, operation, [rng.choice(names) for _ in range(max(clients, requests // 10))], clients)
    latencies: dict[str, list[float]] = {way: [] for way in ways}
    elapsed = dict.fromkeys(ways, 0.0)
    for _ in range(ROUNDS):
        plan = [rng.choice(names) for _ in range(max(clients, requests // ROUNDS))]
        for way, call in ways.items():
            took, seconds = await _load(call, operation, plan, clients, rate)
            latencies[way] += took
            elapsed[way] += seconds
    measured = {}
    for way, taken in latencies.items():
        ordered = sorted(taken)
        measured[way] = {"requests": len(ordered), "rps": len(ordered) / elapsed[way],
                         "p50_ms": statistics.median(ordered) * 1000,
                         "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000}
    return measured


async def _measure(url: str, key: str, tenant: str, names: list[str], clients: int, requests: int,
                   operations: tuple[str, ...], rate: float | None) -> dict[str, dict[str, dict[str, float]]]:
    graph = await AsyncMemoryGraph.connect(bootstrap=False)
    try:
        async with aiohttp.ClientSession(base_url=url, headers={"Authorization": f"Bearer {key}"},
                                         connector=aiohttp.TCPConnector(limit=clients),
                                         timeout=aiohttp.ClientTimeout(total=60)) as http:
            async def over_http(operation: str, arguments: dict[str, Any]) -> None:
                async with http.post(f"/v1/{operation}", json=arguments) as response:
                    await response.read()
                    response.raise_for_status()

            async def in_process(operation: str, arguments: dict[str, Any]) -> None:
                if operation == "current":
                    await graph.current(tenant, arguments["subject"], principal="agent:bench")
                else:
                    await graph.context(tenant, arguments["question"], subjects=arguments["subjects"],
                                        principal="agent:bench")

            return {operation: await _compare({"http": over_http, "in_process": in_process}, operation,
                                              names, clients, requests, rate)
                    for operation in operations}
    finally:
        await graph.close()


def run(*, subjects: int = 500, clients: int = 16, requests: int = 2000, workers: int = 1,
        rate: float | None = None, operations: tuple[str, ...] = OPERATIONS, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Seed, serve, measure both ways, clean up; the measurements."""
    tenant = f"bench-service-{uuid.uuid4().hex[:8]}"
    graph = MemoryGraph.connect()
    try:
        log(f"seeding {subjects} subjects into {tenant}")
        names = _seed(graph, tenant, subjects)
        new = create_key(graph.store, tenant, "agent:bench", "read", note="sgam bench service")
        port = _free_port()
        server = subprocess.Popen([str(Path(sys.executable).with_name("sgam")), "serve", "--port", str(port),
                                   "--workers", str(workers)],
                                  env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait(url, server)
            log(f"measuring {requests} requests per operation with {clients} concurrent clients")
            results = asyncio.run(_measure(url, new.key, tenant, names, clients, requests, operations, rate))
        finally:
            server.terminate()
            server.wait(timeout=30)
            revoke_key(graph.store, new.identity.key_id)
    finally:
        # A failed run leaves nothing behind either.
        graph.delete_tenant(tenant)
        graph.close()
    return {"tenant": tenant, "subjects": subjects, "clients": clients, "requests": requests, "workers": workers,
            "rate": rate, "results": results}


def _wait(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("sgam serve exited before it answered")
        try:
            if httpx.get(f"{url}/v1/openapi.json", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError("sgam serve did not answer within 90 s")


def markdown(result: dict[str, Any]) -> str:
    lines = [f"{result['clients']} concurrent clients, {result['requests']} requests per row, "
             f"{result['subjects']} subjects, {result.get('workers', 1)} server worker(s), "
             + (f"paced at {result['rate']:g} requests/s" if result.get("rate") else "flat out"), "",
             "| operation | path | requests/s | p50 ms | p99 ms |", "|---|---|---|---|---|"]
    for operation, ways in result["results"].items():
        for way, m in ways.items():
            lines.append(f"| {operation} | {way.replace('_', '-')} | {m['rps']:.0f} | {m['p50_ms']:.1f} | "
                         f"{m['p99_ms']:.1f} |")
    lines.append("")
    for operation, ways in result["results"].items():
        overhead = ways["http"]["p50_ms"] - ways["in_process"]["p50_ms"]
        lines.append(f"p50 overhead of the service for {operation}: {overhead:+.1f} ms")
    return "\n".join(lines)

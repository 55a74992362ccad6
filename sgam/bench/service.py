"""``sgam bench service``: what the service costs over the in-process API, measured in one run.

A throwaway tenant gets ``subjects`` people with a few facts each; then ``clients`` concurrent
clients read ``current`` and ``context`` of random subjects through a ``sgam serve`` process over
HTTP and through an in-process :class:`AsyncMemoryGraph` with the same number of concurrent
tasks, in alternating rounds, so a machine whose load drifts during the run loads both paths
alike. Reported: requests per second, p50/p99 latency and CPU per request of each, and the p50
overhead of the service. The tenant and the key are removed afterwards.

The HTTP clients are wrk's keep-alive connections when wrk is installed (a native load generator:
0.1-0.2 ms of CPU a request here, Lua hooks included, where real clients on other machines cost
the server's cores nothing), else aiohttp in this process (0.3-0.8 ms of CPU a request, on the
cores the server and the in-process path share).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import IO, Any

import aiohttp
import httpx

from sgam.api import AsyncMemoryGraph, MemoryGraph
from sgam.bench.cpu import process_cpu_s
from sgam.graph.errors import InvalidSetting
from sgam.graph.models import MemoryDelta

from sgam.service.keys import create_key, revoke_key

OPERATIONS = ("current", "context")
ROUNDS = 5
LOADS = ("wrk", "aiohttp")
WRK_SCRIPT = Path(__file__).with_name("service_wrk.lua")
WRK_TIMEOUT = "30s"
"""A request unanswered this long counts as an error (wrk keeps a bucket per microsecond up to it)."""


def default_load() -> str:
    """wrk when it is installed, else aiohttp."""
    return "wrk" if shutil.which("wrk") else "aiohttp"


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
Round = tuple[list[float], float, dict[str, float]]
"""What one round of a load gives: each request's latency (s), the round's time (s), counters to add up."""
Load = Callable[[str, list[str], int, float | None], Awaitable[Round]]


async def _load(call: Call, operation: str, plan: list[str], clients: int,
                rate: float | None = None) -> Round:
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
    return latencies, time.perf_counter() - began, {}


def _wrk(url: str, key: str) -> Load:
    """The plan sent by one wrk thread over ``clients`` keep-alive connections (service_wrk.lua).

    Paced, wrk sends each request when it is due, or as soon as a connection is free after that,
    and counts its latency from the send: ``sent_late`` says how many left over 1 ms late."""
    async def load(operation: str, plan: list[str], clients: int, rate: float | None = None) -> Round:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", prefix="sgam-bench-") as bodies:
            bodies.writelines(json.dumps(_arguments(operation, subject)) + "\n" for subject in plan)
            bodies.flush()
            process = await asyncio.create_subprocess_exec(
                "wrk", "-t1", f"-c{clients}", "-d3600s", "--timeout", WRK_TIMEOUT, "-s", str(WRK_SCRIPT), url,
                "--", f"/v1/{operation}", bodies.name, str(len(plan)), str(rate or 0),
                env={**os.environ, "SGAM_BENCH_KEY": key},
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await process.communicate()
        lines = [line for line in out.decode().splitlines() if line.startswith("{")]
        if process.returncode != 0 or not lines:
            raise RuntimeError(f"wrk failed ({process.returncode}): {(err or out).decode().strip()[-500:]}")
        report = json.loads(lines[-1])
        if report["errors"]:
            raise RuntimeError(f"wrk: {report['errors']} of {report['requests']} requests failed "
                               f"(refused, unanswered within {WRK_TIMEOUT} or answered 4xx/5xx)")
        latencies = [value / 1e6 for value, count in report["latency_us"] for _ in range(count)]
        return latencies, report["duration_us"] / 1e6, {"sent_late": report["late"],
                                                         "client_cpu": report["cpu_us"] / 1e6}

    return load


def _cpu(pid: int | None) -> tuple[float, float]:
    """CPU seconds so far of this process (the aiohttp clients, or the in-process calls), and of
    ``pid``'s tree. wrk reports its own, up to its last answer."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, _tree_cpu(pid) if pid else 0.0


def _tree_cpu(pid: int) -> float:
    """The CPU seconds of a process and its descendants (the workers of ``sgam serve``), from /proc."""
    own = process_cpu_s(pid)
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:  # gone since it was listed
        return 0.0
    if own is None:
        return 0.0
    return own + sum(_tree_cpu(int(c)) for c in children)


async def _compare(ways: dict[str, Load], operation: str, names: list[str], clients: int,
                   requests: int, rate: float | None = None, server: int | None = None) -> dict[str, dict[str, float]]:
    """Each way warmed up, then ``ROUNDS`` rounds of ``requests / ROUNDS`` requests of each way in
    turn; the CPU of each round is the clients' (this process, or what wrk reports) and the ``server``'s."""
    rng = random.Random(7)
    for load in ways.values():
        await load(operation, [rng.choice(names) for _ in range(max(clients, requests // 10))], clients, None)
    latencies: dict[str, list[float]] = {way: [] for way in ways}
    totals: dict[str, dict[str, float]] = {way: {"seconds": 0.0, "client_cpu": 0.0, "server_cpu": 0.0}
                                           for way in ways}
    for _ in range(ROUNDS):
        plan = [rng.choice(names) for _ in range(max(clients, requests // ROUNDS))]
        for way, load in ways.items():
            own, served = _cpu(server)
            took, seconds, counters = await load(operation, plan, clients, rate)
            own_after, served_after = _cpu(server)
            latencies[way] += took
            for name, value in (("seconds", seconds), ("client_cpu", own_after - own),
                                ("server_cpu", served_after - served), *counters.items()):
                totals[way][name] = totals[way].get(name, 0) + value
    measured = {}
    for way, taken in latencies.items():
        ordered, total = sorted(taken), totals[way]
        measured[way] = {"requests": len(ordered), "rps": len(ordered) / total.pop("seconds"),
                         "p50_ms": statistics.median(ordered) * 1000,
                         "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
                         "client_cpu_ms": total.pop("client_cpu") * 1000 / len(ordered),
                         "server_cpu_ms": total.pop("server_cpu") * 1000 / len(ordered), **total}
    return measured


async def _measure(url: str, key: str, tenant: str, names: list[str], clients: int, requests: int,
                   operations: tuple[str, ...], rate: float | None, load: str,
                   server: int) -> dict[str, dict[str, dict[str, float]]]:
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

            http_load = _wrk(url, key) if load == "wrk" else partial(_load, over_http)
            return {operation: await _compare({"http": http_load, "in_process": partial(_load, in_process)},
                                              operation, names, clients, requests, rate, server)
                    for operation in operations}
    finally:
        await graph.close()


def run(*, subjects: int = 500, clients: int = 16, requests: int = 2000, workers: int = 1,
        rate: float | None = None, operations: tuple[str, ...] = OPERATIONS, load: str | None = None,
        server: str = "uvicorn", coalesce: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Seed, serve, measure both ways, clean up; the measurements. ``load`` is the HTTP load
    generator, one of :data:`LOADS` (default: :func:`default_load`); ``server`` is what ``sgam
    serve --server`` runs; ``coalesce``: whether it answers concurrent ``current`` reads together
    (``sgam serve --coalesce``, the default)."""
    load = load or default_load()
    if load not in LOADS:
        raise InvalidSetting(f"load generator {load!r}: use one of {', '.join(LOADS)}")
    if load == "wrk" and not shutil.which("wrk"):
        raise InvalidSetting("the wrk load generator is not installed: apt-get install wrk, or use aiohttp "
                             "(--load aiohttp)")
    tenant = f"bench-service-{uuid.uuid4().hex[:8]}"
    graph = MemoryGraph.connect()
    try:
        log(f"seeding {subjects} subjects into {tenant}")
        names = _seed(graph, tenant, subjects)
        new = create_key(graph.store, tenant, "agent:bench", "read", note="sgam bench service")
        port = _free_port()
        # The server's log goes to a file (a pipe nobody reads would stall it): its last lines
        # say why, if it stops before it answers.
        with tempfile.TemporaryFile() as server_log:
            process = subprocess.Popen([str(Path(sys.executable).with_name("sgam")), "serve", "--port", str(port),
                                        "--workers", str(workers), "--server", server,
                                        "--coalesce" if coalesce else "--no-coalesce"],
                                       env=os.environ.copy(), stdout=server_log, stderr=subprocess.STDOUT)
            try:
                url = f"http://127.0.0.1:{port}"
                _wait(url, process, server_log)
                log(f"measuring {requests} requests per operation with {clients} concurrent clients ({load})")
                results = asyncio.run(_measure(url, new.key, tenant, names, clients, requests, operations, rate,
                                               load, process.pid))
            finally:
                process.terminate()
                process.wait(timeout=30)
                revoke_key(graph.store, new.identity.key_id)
    finally:
        # A failed run leaves nothing behind either.
        graph.delete_tenant(tenant)
        graph.close()
    return {"tenant": tenant, "subjects": subjects, "clients": clients, "requests": requests, "workers": workers,
            "rate": rate, "load": load, "server": server, "coalesce": coalesce, "results": results}


def _wait(url: str, server: subprocess.Popen[bytes], server_log: IO[bytes]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if server.poll() is not None:
            server_log.seek(0)
            raise RuntimeError(f"sgam serve exited before it answered: {server_log.read().decode()[-1000:]}")
        try:
            if httpx.get(f"{url}/v1/openapi.json", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError("sgam serve did not answer within 90 s")


def markdown(result: dict[str, Any]) -> str:
    lines = [f"{result['clients']} concurrent clients ({result.get('load', 'aiohttp')} over HTTP), "
             f"{result['requests']} requests per row, "
             f"{result['subjects']} subjects, {result.get('server', 'uvicorn')} with "
             f"{result.get('workers', 1)} worker(s), "
             f"`current` reads {'coalesced' if result.get('coalesce', False) else 'one statement each'}, "
             + (f"paced at {result['rate']:g} requests/s" if result.get("rate") else "flat out"), "",
             "| operation | path | requests/s | p50 ms | p99 ms | CPU ms/request: client + server |",
             "|---|---|---|---|---|---|"]
    for operation, ways in result["results"].items():
        for way, m in ways.items():
            lines.append(f"| {operation} | {way.replace('_', '-')} | {m['rps']:.0f} | {m['p50_ms']:.1f} | "
                         f"{m['p99_ms']:.1f} | {m['client_cpu_ms']:.2f} + {m['server_cpu_ms']:.2f} |")
    lines.append("")
    for operation, ways in result["results"].items():
        if ways["http"].get("sent_late"):
            lines.append(f"{operation}: wrk sent {ways['http']['sent_late']:.0f} requests over 1 ms late "
                         "(all connections busy); their latency counts from the send")
    for operation, ways in result["results"].items():
        overhead = ways["http"]["p50_ms"] - ways["in_process"]["p50_ms"]
        lines.append(f"p50 overhead of the service for {operation}: {overhead:+.1f} ms")
    return "\n".join(lines)

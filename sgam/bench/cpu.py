"""CPU time of a benchmark phase, split between this Python process and the Neo4j server.

Which side limits a phase (SGAM's planning in Python, or the server's writing) shows in where the
CPU went: the harness's own CPU time (``os.times``, every thread of the process) and the server
process's (its CPU-time clock on Linux, else ``/proc/<pid>/stat``: user + system). The server is
the process listening on the bolt port, so only a server on this machine is measured (``None``
otherwise, and where ``/proc`` is missing). A server shared with other clients counts their work
too: the figure is an upper bound for this phase.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

_LISTEN = "0A"  # TCP state in /proc/net/tcp
_DEFAULT_BOLT_PORT = 7687


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def server_pid(uri: str) -> int | None:
    """The pid of the local process listening on ``uri``'s port, or None (remote, or not visible)."""
    parsed = urlparse(uri)
    if parsed.hostname not in ("localhost", "127.0.0.1", "::1"):
        return None
    inodes = {f"socket:[{i}]" for i in _listening_inodes(parsed.port or _DEFAULT_BOLT_PORT)}
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:  # gone, or not ours to read
            continue
    return None


def _cpu_clock(pid: int) -> int:
    """The id of process ``pid``'s CPU-time clock on Linux, as ``clock_getcpuclockid(3)`` makes it
    (the kernel's process-wide scheduler clock: ``~pid << 3 | 2``)."""
    return ((~pid) << 3) | 2


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far, every thread it ran (None when it cannot
    be read): from its CPU-time clock, to the nanosecond, where the system has one (Linux), else
    from ``/proc/<pid>/stat``, in clock ticks (10 ms: the server's share of a few requests rounds
    to nothing)."""
    if hasattr(time, "clock_gettime") and os.uname().sysname == "Linux":
        try:
            return time.clock_gettime(_cpu_clock(pid))
        except OSError:  # gone, or not ours to read
            return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


@contextmanager
def cpu_split(uri: str, into: dict[str, float | None]) -> Iterator[None]:
    """Fill ``into`` with the phase's ``wall_s``, ``python_cpu_s`` and ``server_cpu_s``."""
    pid = server_pid(uri)
    server = None if pid is None else process_cpu_s(pid)
    own, wall = _own_cpu_s(), time.perf_counter()
    try:
        yield
    finally:
        into["wall_s"] = round(time.perf_counter() - wall, 3)
        into["python_cpu_s"] = round(_own_cpu_s() - own, 3)
        after = None if pid is None else process_cpu_s(pid)
        into["server_cpu_s"] = None if server is None or after is None else round(after - server, 3)


__all__ = ["cpu_split", "process_cpu_s", "server_pid"]

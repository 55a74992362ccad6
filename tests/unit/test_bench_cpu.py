"""The bench's CPU split: this process's CPU time, and the server's when it runs here."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from sgam.bench.cpu import cpu_split, process_cpu_s, server_pid


def test_a_busy_phase_shows_in_this_process_cpu_time() -> None:
    into: dict[str, float | None] = {}
    with cpu_split("bolt://db.example.com:7687", into):
        sum(i * i for i in range(2_000_000))
    assert into["python_cpu_s"] is not None and into["python_cpu_s"] > 0
    assert into["wall_s"] is not None and into["wall_s"] > 0
    assert into["server_cpu_s"] is None  # a remote server is not measured


def test_the_server_is_the_process_listening_on_the_bolt_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert server_pid(f"bolt://127.0.0.1:{port}") == os.getpid()
    assert server_pid(f"bolt://127.0.0.1:{port}") is None


def test_cpu_time_of_a_process() -> None:
    seconds = process_cpu_s(os.getpid())
    assert seconds is not None and seconds > 0
    assert process_cpu_s(2**22 + 7) is None  # no such process


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a process's CPU-time clock is Linux's")
def test_a_few_milliseconds_of_another_process_show() -> None:
    """The server's share of a handful of requests is a few milliseconds: it must show to the
    millisecond, not round to nothing (``/proc/<pid>/stat`` counts 10 ms clock ticks; the bench's
    service run once read 0 for the server). The child busies itself for 4 ms of CPU and says how
    much it used; what we read of it from outside agrees within 2.5 ms."""
    busy = ("import sys, time\nprint('ready', flush=True)\nsys.stdin.readline()\nt = time.process_time()\n"
            "while time.process_time() - t < 0.004: pass\nprint(t, time.process_time(), flush=True)\n"
            "sys.stdin.readline()")
    child = subprocess.Popen([sys.executable, "-c", busy], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline() == "ready\n"  # started: what it used to start is not counted
        before = process_cpu_s(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        start, end = map(float, child.stdout.readline().split())
        after = process_cpu_s(child.pid)
        assert before is not None and after is not None
        assert abs((after - before) - (end - start)) < 0.0025, (after - before, end - start)
    finally:
        child.communicate("end\n", timeout=30)


def test_the_floor_is_the_busier_of_one_interpreter_and_the_shared_cores() -> None:
    from sgam.bench.scale import cpu_floor

    # Python's own CPU cannot spread over cores; the sum of both cannot beat the cores.
    assert cpu_floor({"python_cpu_s": 4.0, "server_cpu_s": 7.0}, cores=2) == 5.5
    assert cpu_floor({"python_cpu_s": 6.0, "server_cpu_s": 2.0}, cores=2) == 6.0
    assert cpu_floor({"python_cpu_s": 4.0, "server_cpu_s": 7.0}, cores=8) == 4.0
    assert cpu_floor({"python_cpu_s": 4.0, "server_cpu_s": None}, cores=2) is None

"""The bench's CPU split: this process's CPU time, and the server's when it runs here."""

from __future__ import annotations

import os
import socket

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

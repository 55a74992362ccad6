"""The writer process of ``test_concurrency.test_processes_leave_a_sound_history``.

Its own small module, so the process that forks the writers imports only what they run (not
pytest, the CLI or the test module's other imports).
"""

from __future__ import annotations

from typing import Any

from sgam import MemoryDelta, MemoryGraph
from sgam.graph.schema import default_schema

SPAWN_TIMEOUT_S = 120


def process_writer(uri: str, auth: tuple[str, str], deltas: list[MemoryDelta], start: Any,
                   results: Any, w: int) -> None:
    """One writer process: connects itself, waits for the others, writes its deltas one by one."""
    try:
        graph = MemoryGraph.connect(uri, auth, schema=default_schema(), bootstrap=False)
        try:
            start.wait(timeout=SPAWN_TIMEOUT_S)
            outcomes = [graph.write(d).outcome for d in deltas]
            results.put((w, outcomes, None, graph.retries.transactions))
        finally:
            graph.close()
    except BaseException as exc:  # reported to the parent, which fails the test with it
        results.put((w, None, f"{type(exc).__name__}: {exc}", None))

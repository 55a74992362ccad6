"""The demo's episodes replayed into a test's own tenant (other tests reset tenant ``demo``)."""

from __future__ import annotations

import json
from datetime import datetime
from importlib.resources import files

from sgam import MemoryGraph
from sgam.graph.models import utcnow
from sgam.ingest.replay import replay


def demo_lines(resource: str, tenant: str) -> list[str]:
    """A shipped demo file's lines with their tenant_id set to ``tenant`` (comments dropped)."""
    text = (files("sgam") / "resources" / resource).read_text(encoding="utf-8")
    return [json.dumps({**json.loads(line), "tenant_id": tenant})
            for line in text.splitlines() if line.strip() and not line.startswith("#")]


def replay_demo(graph: MemoryGraph, tenant: str) -> datetime:
    """Replay demo.jsonl then demo-correction.jsonl, as `sgam demo` does; returns an instant
    between the two (what the store believed before the Lisbon correction)."""
    first = replay(graph.store, demo_lines("demo.jsonl", tenant))
    assert not first.errors, first.errors
    before_correction = utcnow()
    second = replay(graph.store, demo_lines("demo-correction.jsonl", tenant))
    assert not second.errors, second.errors
    return before_correction

"""How many statements a write sends: each is a round trip to the server, and for one delta the
waits were half of a write's time (sgam/bench/README.md, "Session 27")."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

import sgam.graph.store as store_module
from sgam import MemoryGraph
from sgam.graph.writes import PERSIST

AT = datetime(2026, 3, 1, tzinfo=timezone.utc)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The statements this process sends in transactions."""
    texts: list[str] = []
    real = store_module._run

    def counted(tx: Any, statement: Any) -> Any:
        texts.append(statement.query)
        return real(tx, statement)

    monkeypatch.setattr(store_module, "_run", counted)
    yield texts


def _write(graph: MemoryGraph, tenant: str, episode: str, subject: str, attribute: str, value: Any,
           day: int) -> None:
    graph.write(tenant_id=tenant, subject=subject, attribute=attribute, value=value,
                valid_from=AT.replace(day=day), source_episode_id=episode, asserted_by="user:mira")


def test_a_write_is_three_statements_check_lock_and_persist_and_a_replay_two(graph: MemoryGraph, tenant: str,
                                                            sent: list[str]) -> None:
    for i in range(3):
        graph.record_episode(tenant_id=tenant, id=f"e{i}", content=f"episode {i}", occurred_at=AT, actor="user:mira")
    cases = [
        ("a new subject and slot", "e0", "mira", "home_city", "Lisbon", 1),
        ("a change of a believed value (its row retired)", "e1", "mira", "home_city", "Porto", 5),
        ("a relation to a new entity", "e2", "cust-ada", "holds", "acc-1", 2),
        ("the same statement again (a replay: nothing to write)", "e1", "mira", "home_city", "Porto", 5),
    ]
    for what, episode, subject, attribute, value, day in cases:
        sent.clear()
        _write(graph, tenant, episode, subject, attribute, value, day)
        assert len(sent) == (3 if "replay" not in what else 2), (what, sent)
        assert (sent[-1] == PERSIST) != ("replay" in what), what  # step 4 at once, when there is one
    assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Porto"]
    assert [f.value for f in graph.current(tenant, "cust-ada", "holds")] == ["acc-1"]
    assert {r["id"] for r in graph.store.read(
        "MATCH (:Episode {tenant_id: $t, id: 'e2'})-[:MENTIONS]->(e) RETURN e.id AS id", {"t": tenant})} == \
        {"cust-ada", "acc-1"}

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


def test_a_retired_row_names_what_retired_it_and_keeps_its_support(graph: MemoryGraph, tenant: str) -> None:
    """Step 4 updates a stored row two ways: support added (the same statement from another
    episode), or retired (a later value cut it short). Each keeps what the other part sets."""
    for i in range(3):
        graph.record_episode(tenant_id=tenant, id=f"e{i}", content=f"episode {i}", occurred_at=AT, actor="user:mira")
    _write(graph, tenant, "e0", "mira", "home_city", "Lisbon", 1)
    _write(graph, tenant, "e1", "mira", "home_city", "Lisbon", 1)
    [supported] = graph.history(tenant, "mira", "home_city")
    assert (supported.support_count, sorted(supported.support_episodes)) == (2, ["e0", "e1"])
    assert len(set(supported.delta_keys)) == 2 and supported.last_confirmed_at is not None
    result = graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto",
                         valid_from=AT.replace(day=5), source_episode_id="e2", asserted_by="user:mira")
    rows = {r.memory_id: r for r in graph.history(tenant, "mira", "home_city")}
    retired = rows[supported.memory_id]
    assert retired.expired_at is not None and retired.expired_by_episode_id == "e2"
    [porto] = [rows[m] for m in result.memory_ids if rows[m].value == "Porto"]
    assert retired.expired_by_delta_key in porto.delta_keys
    # Retiring it changed nothing of its support.
    assert (retired.support_count, sorted(retired.support_episodes), sorted(retired.delta_keys),
            retired.last_confirmed_at) == (2, ["e0", "e1"], sorted(supported.delta_keys), supported.last_confirmed_at)
    assert [f.value for f in graph.current(tenant, "mira", "home_city")] == ["Porto"]

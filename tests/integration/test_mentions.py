"""``MENTIONS`` links against a real Neo4j: each episode links each entity it names exactly once.

Whatever path writes a stream (one delta at a time, ``write_many`` in batches and lanes, sent
twice, ``import_history`` in chunks of any size), the links are the pairs the statements name: an
episode and a delta's subject, and an episode and a relation's target. The streams make every
subject's entity a relation target too (customers hold accounts, accounts are covered by
policies), named by the same episodes from other subjects, so a link can be due from a chunk or
batch that is not its subject's.

Every entity a statement names is an entity afterwards, whether or not the statement ever holds:
one that loses a tie at its instant (two values of one slot from one episode at one instant) holds
nowhere, yet its episode mentions its target, whichever of the two arrived first.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sgam import Episode, MemoryDelta, MemoryGraph

EPOCH = datetime(2025, 5, 1, tzinfo=timezone.utc)
EPISODES = ("e0", "e1", "e2")
ENTITIES = "MATCH (e:Entity {tenant_id: $t}) RETURN e.id AS id"
LINKS = "MATCH (ep:Episode {tenant_id: $t})-[:MENTIONS]->(e:Entity) RETURN ep.id AS episode, e.id AS entity"


@st.composite
def streams(draw: Any) -> list[tuple[str, str, str, str, int]]:
    """(attribute, subject, target, episode, day) statements over few customers, accounts and policies."""
    said = []
    for _ in range(draw(st.integers(1, 14))):
        if draw(st.booleans()):
            said.append(("holds", f"c{draw(st.integers(0, 3))}", f"a{draw(st.integers(0, 3))}",
                         draw(st.sampled_from(EPISODES)), draw(st.integers(0, 5))))
        else:
            said.append(("covered_by", f"a{draw(st.integers(0, 3))}", f"p{draw(st.integers(0, 1))}",
                         draw(st.sampled_from(EPISODES)), draw(st.integers(0, 5))))
    return said


def deltas(tenant: str, stream: list[tuple[str, str, str, str, int]]) -> list[MemoryDelta]:
    return [MemoryDelta(tenant_id=tenant, subject=subject, attribute=attribute, value=target,
                        valid_from=EPOCH + timedelta(days=day), source_episode_id=episode)
            for attribute, subject, target, episode, day in stream]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(stream=[("covered_by", "a0", "p1", "e0", 0), ("covered_by", "a0", "p0", "e0", 0)], path="write",
         size=1, workers=1)  # p0 never holds (a tie at one instant), and is an entity e0 mentions
@example(stream=[("covered_by", "a1", "p1", "e0", 1), ("holds", "c0", "a0", "e0", 0),
                 ("covered_by", "a1", "p0", "e0", 1), ("covered_by", "a0", "p0", "e1", 0)], path="write",
         size=1, workers=1)  # e0's p0 never holds; e1's later one makes p0 an entity held: e0 links it too
@given(stream=streams(), path=st.sampled_from(["write", "write_many", "write_many twice", "import"]),
       size=st.integers(1, 6), workers=st.integers(1, 3))
def test_each_episode_links_each_entity_it_names_once(graph: MemoryGraph, stream, path: str, size: int,
                                                      workers: int) -> None:
    tenant = f"men-{uuid.uuid4().hex[:10]}"
    graph.record_episodes([Episode(tenant_id=tenant, id=e, content=f"episode {e}", occurred_at=EPOCH)
                           for e in EPISODES])
    try:
        written = deltas(tenant, stream)
        if path == "write":
            assert all(graph.write(d).ok for d in written)
        elif path == "import":
            assert not graph.import_history(written, chunk_size=size).rejected
        else:
            for _ in range(2 if path == "write_many twice" else 1):
                assert not graph.write_many(written, batch_size=size, workers=workers).rejected
        links = Counter((r["episode"], r["entity"]) for r in graph.store.read(LINKS, {"t": tenant}))
        stored = {r["id"] for r in graph.store.read(ENTITIES, {"t": tenant})}
        assert stored == {entity for _, subject, target, _, _ in stream for entity in (subject, target)}
        named = {(episode, entity) for _, subject, target, episode, _ in stream for entity in (subject, target)}
        assert set(links) == named, f"{path}: missing {sorted(named - set(links))}, extra {sorted(set(links) - named)}"
        assert [pair for pair, n in links.items() if n > 1] == [], f"{path}: linked more than once"
    finally:
        graph.delete_tenant(tenant)


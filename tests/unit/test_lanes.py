"""How ``write_many`` splits a stream into lanes of batches (``batches.lanes``; no Neo4j).

The rules, from the write path's contract: every delta is written once, under its own index; a
subject's deltas stay in one lane in their order (each slot sees its statements in order); no
batch holds more than ``batch_size``; there are never more lanes than ``workers`` nor more than
there are batches' worth of deltas (a write of one batch or less is one transaction); ``atomic``
is one transaction for everything.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgam.graph import InvalidDelta, MemoryDelta
from sgam.graph.batches import DEFAULT_WORKERS, MAX_WORKERS, lanes

AT = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _deltas(subjects: list[str], tenants: list[str]) -> list[MemoryDelta]:
    return [MemoryDelta(tenant_id=tenant, subject=subject, attribute="home_city", value=f"city-{i}",
                        valid_from=AT, source_episode_id="e1")
            for i, (subject, tenant) in enumerate(zip(subjects, tenants))]


@given(st.integers(0, 60).flatmap(lambda n: st.tuples(
           st.lists(st.sampled_from(["ada", "bo", "cy", "di", "ed", "fay", "gus"]), min_size=n, max_size=n),
           st.lists(st.sampled_from(["t1", "t2"]), min_size=n, max_size=n))),
       st.integers(1, 25), st.integers(1, 8))
def test_lanes_keep_every_delta_once_and_each_subject_in_order(
        stream: tuple[list[str], list[str]], size: int, workers: int) -> None:
    deltas = _deltas(*stream)
    split = lanes(deltas, size, False, workers)
    chunks = [chunk for lane in split for chunk in lane]
    assert sorted(i for indices, _ in chunks for i in indices) == list(range(len(deltas)))
    for indices, chunk in chunks:
        assert 1 <= len(chunk) <= size and len(indices) == len(chunk)
        assert [deltas[i] for i in indices] == chunk
    owner: dict[tuple[str, str], int] = {}
    for k, lane in enumerate(split):
        order = [i for indices, _ in lane for i in indices]
        assert order == sorted(order)   # within a lane, the stream's order
        for i in order:
            key = (deltas[i].tenant_id, deltas[i].subject)
            assert owner.setdefault(key, k) == k, f"{key} is in two lanes"
    batches = -(-len(deltas) // size)
    assert len(split) <= min(workers, batches)
    if deltas and len(deltas) <= size:
        assert len(split) == 1 and len(split[0]) == 1


def test_a_small_write_is_one_transaction_by_default() -> None:
    deltas = _deltas([f"s{i}" for i in range(10)], ["t1"] * 10)
    assert DEFAULT_WORKERS > 1
    [[(indices, chunk)]] = lanes(deltas, 2000, False, DEFAULT_WORKERS)
    assert indices == list(range(10)) and chunk == deltas
    # two batches' worth may take two lanes
    assert len(lanes(_deltas([f"s{i}" for i in range(40)], ["t1"] * 40), 20, False, DEFAULT_WORKERS)) == 2


def test_atomic_is_one_transaction() -> None:
    deltas = _deltas([f"s{i}" for i in range(30)], ["t1"] * 30)
    assert lanes(deltas, 4, True, 8) == [[(list(range(30)), deltas)]]


@pytest.mark.parametrize("size, workers", [(0, 2), (True, 2), (2.5, 2), (10, 0), (10, MAX_WORKERS + 1), (10, "2")])
def test_bad_sizes_and_lane_counts_are_refused(size: object, workers: object) -> None:
    with pytest.raises(InvalidDelta, match="batch_size|workers"):
        lanes(_deltas(["a"], ["t1"]), size, False, workers)  # type: ignore[arg-type]

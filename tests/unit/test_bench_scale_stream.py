"""The scale benchmark's compact stream (no Neo4j): the same data as the list-keeping stream it
replaced, independent of its slot-state cache, and a correctness model that agrees with
``sgam.bench.baseline.Slot`` applied to the built ``MemoryDelta`` models; the generator's incremental
slot state answers as the oracle's ``Slot``.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sgam.bench import baseline as bench, scale as bench_scale
from sgam.graph import InvalidDelta

# sha256 over json.dumps(model_dump(mode="json"), sort_keys=True) of each model, in order, as the
# stream generated them before it was made compact (seed 7, final size 1M: the default run's
# stream; its first 6,000 deltas and the 626 episodes they cite). The deltas' digest was re-pinned
# when MemoryDelta gained valid_to and replaces (both null here; the deltas are the same).
PINNED_DELTAS = "f7cb4ff581748fe9aebe10408d6409483ca12501f3dc559e8b88708333ea41ec"
PINNED_EPISODES = "f47e41545178910e1111c63682b6fe6812fabb75e1b09f18c8f41818364aac57"
PINNED_OPS = {"add": 546, "backdated": 415, "change": 1334, "correct": 230, "create": 2418,
              "reassert": 601, "replay": 185, "retract": 271}


def _digest(models: Iterable[BaseModel]) -> str:
    digest = hashlib.sha256()
    for model in models:
        fields = model.model_dump(mode="json")
        # Fields MemoryDelta gained after the pin (the stream never sets them).
        for name in ("valid_to", "replaces"):
            if fields.get(name, 0) is None:
                del fields[name]
        digest.update(json.dumps(fields, sort_keys=True).encode())
    return digest.hexdigest()


def test_the_stream_is_the_pinned_stream() -> None:
    stream = bench_scale.Stream(seed=7, final_size=1_000_000)
    stream.take(2_500)  # grown in steps, as the benchmark grows it through its sizes
    stream.take(3_500)
    assert len(stream) == 6_000 and stream.episode_count == 626
    assert _digest(stream.deltas()) == PINNED_DELTAS
    assert _digest(stream.episodes()) == PINNED_EPISODES
    assert dict(stream.ops) == PINNED_OPS
    # a slice is the same models as the whole, cut
    assert _digest(stream.deltas(1_000, 1_200)) == _digest(list(stream.deltas())[1_000:1_200])
    assert stream.nbytes < 60 * len(stream) + 200_000


def test_the_cache_does_not_change_the_stream() -> None:
    full = bench_scale.Stream(seed=3, final_size=8_000)
    full.take(8_000)
    tiny = bench_scale.Stream(seed=3, final_size=8_000, cache_slots=2)  # nearly every slot rebuilt
    tiny.take(8_000)
    assert _digest(tiny.deltas()) == _digest(full.deltas())
    assert tiny.max_slot_history == full.max_slot_history > 20


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(50, 3_000), cache=st.sampled_from([1, 50, 20_000]))
def test_the_model_agrees_with_bench_slot(seed: int, size: int, cache: int) -> None:
    """``Stream.model`` after a prefix = ``sgam.bench.baseline.Slot`` fed the prefix's ``MemoryDelta`` models."""
    stream = bench_scale.Stream(seed=seed, final_size=3_000, cache_slots=cache)
    stream.take(3_000)
    slots: dict[tuple[str, str], bench.Slot] = {}
    for delta in stream.deltas(0, size):
        many = bench_scale.SCHEMA.attribute(delta.attribute).cardinality.value == "many"
        vkey = None if delta.value is None else bench_scale.SCHEMA.coerce(delta.attribute, delta.value)[1]
        slots.setdefault((delta.subject, delta.attribute), bench.Slot(many=many)).apply(delta, vkey)
    rng = random.Random(seed)
    now = datetime.now(timezone.utc)
    for key in rng.sample(sorted(slots), min(40, len(slots))):
        expected, model = slots[key], stream.model(*key, size)
        instants = [d.valid_from for d in expected.deltas]
        instants += [t - timedelta(seconds=1) for t in instants] + [now, bench.EPOCH]
        for instant in instants:
            assert model.expected(instant) == expected.expected(instant), (key, instant)


def test_slot_keys_and_subjects_match_the_models() -> None:
    stream = bench_scale.Stream(seed=5, final_size=20_000)
    stream.take(4_000)
    deltas = list(stream.deltas(0, 3_000))
    keys = stream.slot_keys(3_000)
    assert list(keys) == sorted({(d.subject, d.attribute) for d in deltas})
    assert list(keys.without("located_in")) == [k for k in keys if k[1] != "located_in"]
    assert stream.subjects_with("knows", 3_000) == sorted({d.subject for d in deltas if d.attribute == "knows"})
    assert any(k[0].startswith("co-") for k in keys) and any(k[0].startswith("p-") for k in keys)


def test_delta_view_builds_the_streams_models_on_access() -> None:
    stream = bench_scale.Stream(seed=7, final_size=1_000_000)
    stream.take(300)
    view = stream.view(100, 250)
    assert len(view) == 150 and len(stream.view(250, 10_000)) == 50
    built = [d.model_dump() for d in stream.deltas(100, 250)]
    assert [view[i].model_dump() for i in range(len(view))] == built
    assert view[-1].model_dump() == built[-1] and view[0] is not view[0]  # a new model each time
    with pytest.raises(IndexError):
        view[150]


# Statements as the stream makes them (op code, value code, valid_from in seconds, episode, confidence
# in hundredths), drawn so that instants, ops and confidences often tie: the same-instant rule then
# reaches the canonical value, whose order here differs from the codes' (and episode 10 sorts before 9).
CANONICAL = {1: "str:z", 2: "str:a", 3: "str:m"}
statements = st.lists(st.tuples(
    st.sampled_from([0, 0, 1, 2]), st.integers(1, 3), st.integers(0, 4), st.sampled_from([1, 9, 10]),
    st.sampled_from([60, 90]),
), max_size=14)


class _Rows:
    """The stream's columns, as much of them as a slot state reads."""

    def __init__(self) -> None:
        self._op: list[int] = []
        self._value: list[int] = []
        self._valid_from: list[int] = []
        self._episode: list[int] = []
        self._confidence: list[int] = []

    def add(self, op: int, code: int, valid_from: int, episode: int, confidence: int) -> int:
        for column, item in zip((self._op, self._value, self._valid_from, self._episode, self._confidence),
                                (op, code, valid_from, episode, confidence)):
            column.append(item)
        return len(self._op) - 1


@settings(max_examples=400, deadline=None)
@given(rows=statements, many=st.booleans(), data=st.data())
def test_the_generators_slot_state_is_the_oracles(rows: list, many: bool, data) -> None:
    """The generator's incremental slot state answers as the oracle's ``Slot`` after every delta
    (replays included), at every instant, between instants, before the first and after the last."""
    stream = _Rows()
    rows = rows + data.draw(st.lists(st.sampled_from(rows), max_size=4)) if rows else rows  # replays
    live = bench_scale._LiveSlot(many, CANONICAL.__getitem__)
    reference = bench_scale._SlotState(many, CANONICAL.__getitem__)
    instants = [bench_scale.EPOCH + timedelta(seconds=s) for s in (-1, 0, 0.5, 1, 2, 2.75, 3, 4, 5)]
    for op, code, valid_from, episode, confidence in rows:
        if op == 1 and not many:
            code = bench_scale.NO_VALUE  # a single value's retract names no value in the stream
        index = stream.add(op, code, valid_from, episode, confidence)
        live.apply(stream, index)
        reference.apply(stream, index)
        assert live.indices == list(range(index + 1))
        for instant in instants:
            assert live.held(instant) == reference.held(instant), (rows, instant)


def test_the_generators_slot_state_refuses_what_it_does_not_model() -> None:
    stream = _Rows()
    live = bench_scale._LiveSlot(False, CANONICAL.__getitem__)
    with pytest.raises(InvalidDelta, match="retract without a value"):
        live.apply(stream, stream.add(1, 2, 0, 1, 60))

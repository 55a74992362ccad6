"""Scale benchmark (``sgam bench scale``): how SGAM's costs grow from 10k to 1M facts (10M optional).

One seeded stream of deltas is generated in arrival order; the graph at size ``S`` is its first
``S`` deltas. First, untimed, a warm-up stream of another seed (``WARM_UP`` deltas, at most the
window) is written and read in tenants of its own and removed, again until a round is no longer
faster than the one before (at most ``WARM_UP_ROUNDS``), so that no size is timed while the
server's JIT compiler is still at work. Sizes run in ascending order, each in a fresh tenant (the
previous one is deleted):

1. the first ``S - window`` deltas are loaded with :meth:`MemoryGraph.import_history` (the bulk
   path for a whole history into an empty tenant: same reconciliation, larger transactions);
2. the last ``window`` deltas (20k by default) go through ``write_many`` and are timed, next to a
   plain ``UNWIND ... CREATE`` of the same deltas as raw relationships (``sgam.bench.RAW_WRITE``)
   into a scratch tenant;
3. the query plans are re-made for the loaded graph (``db.clearQueryCaches``), then ``current``,
   ``as_of``, ``history``, a 3-hop ``traverse`` (knows -> works_at -> located_in) and ``context``
   (exact facts, no vector expansion) are timed on random slots, each interleaved with its raw
   baseline (every round of one slot in a fresh random order): the same indexed lookup without
   temporal logic; ``current`` and ``as_of`` also apart for single-valued and set-valued slots;
4. Neo4j's store size (bytes of the database directory, local server only) and its heap in use
   (JMX) are recorded; ``current`` / ``as_of`` answers are checked against :mod:`sgam.bench.oracle` (the
   semantics written from docs/temporal-semantics.md) over the slot's deltas up to the size;
5. last, ``write`` of one delta a call (a person moves: a retired row, its successor, a ledger
   entry, a link) is timed next to the raw write of the same delta in a transaction of its own.

CPU, for the bulk import (``bulk_import.cpu``) and for the write window (``writes.cpu``, SGAM's and
the raw write's): the harness's own CPU seconds and the local server process's over the phase's wall
time (:mod:`sgam.bench.cpu`), to show which side limits it; ``writes.cpu.sgam_floor_s`` is the least
wall time that CPU allows on this machine's cores (:func:`cpu_floor`), so a ratio to the raw write
that the CPU alone rules out is visible as such.

Memory, two figures per size. ``python.rss_mb`` / ``peak_rss_mb``: the whole harness process
(stream, SGAM, driver), now and the highest so far. ``python.sgam_peak_growth_mb``: what SGAM itself
took in a phase, measured as the process's peak resident memory during the phase (VmHWM, reset via
``/proc/self/clear_refs`` after a ``gc.collect()`` at its start) minus the resident memory at its
start; phases ``write_many`` (the timed window; its models are built before), ``lookups`` (warm-up
and timed reads) and ``bulk_import`` (the import, which reads the stream through a lazy
:class:`DeltaView` and so builds each history model on access, chunk by chunk). Memory the allocator reuses from earlier
is not counted, so these are lower bounds; ``None`` where ``/proc`` is missing (not Linux).

The stream: a person pool that grows with the stream (about ten facts per person), 1% of the
pool "hot" and receiving 15% of the facts (long histories), companies located in cities, and the
operation mix of ``sgam.bench`` (changes, re-asserts, backdated asserts, corrections, retractions,
replays). The stream is compact (typed arrays, under 40 bytes a delta; see :class:`Stream`):
``MemoryDelta`` / ``Episode`` models are built only for the slice being written, so the harness's
own memory stays small next to SGAM's. It runs under its own schema (``sgam-bench-scale``), which
adds the relations the 3-hop traversal needs. Results: ``scale-<timestamp>.json``, ``.md`` and
``.png`` under ``out_dir``.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import random
import resource
import secrets
import sys
import time
from array import array
from bisect import bisect_left, insort
from contextlib import contextmanager
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Sequence
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sgam.bench import oracle
from sgam.bench.cpu import cpu_split
from sgam.bench.common import (
    RAW_LOOKUP, RetryCounter, compare_latency, git_state, latency_summary, loadavg, machine_info,
    neo4j_info, observed_keys, package_version, raw_write, write_tenant_cleanup,
)
from sgam.bench.workload import CITIES, EPOCH, HORIZON, MANY_OPS, ONE_OPS, Values, choose
from sgam.graph.batches import DEFAULT_BATCH
from sgam.graph.errors import InvalidDelta
from sgam.graph.models import Cardinality, Episode, EpisodeKind, MemoryDelta, Op
from sgam.graph.schema import Schema
from sgam.ingest.graphiti.env import GraphitiUnavailable

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
HUGE_SIZE = 10_000_000
WINDOW = 20_000
# Timed calls of each read and its raw baseline at each size: with 300, two runs of nearly the same
# code put `current` at 1M at 1.32x and 1.40x the raw lookup (sgam/bench/README.md, "Session 34").
LOOKUPS = 1_000
WARMUP = 50
# Deltas of a warm-up stream (another seed, its own tenants) written before the first size: half
# imported, half through the raw write and ``write_many``, then a few reads; never timed. A new
# server runs its first writes on a cold JIT: the first size's writes were 1.5-2x slower on
# both sides (the raw write, timed first, more), and their ratio swung with it
# (sgam/bench/README.md, "Session 29"). One round was not enough: on a new server the JVM's
# compiler threads were still busy through the 10k size (3 s of their CPU in its write window) and
# a round took 17.4, 10.2, 6.0, 4.9, 5.1 s in turn ("Session 30"). So rounds are repeated until
# one takes at least WARM_UP_SETTLED of the one before, at most WARM_UP_ROUNDS of them.
WARM_UP = 10_000
WARM_UP_ROUNDS = 6
WARM_UP_SETTLED = 0.85
SINGLE_WRITES = 200  # `write` calls of one delta timed at each size (at most the lookups asked for)
GRAPHITI_MAX = 10_000  # embedding every edge (and searching them) of a bigger graph takes too long on CPU
# Graphiti's searches asked at a size (the first of the lookups' questions): its p50 is 50-300x
# SGAM's, so 300 settle the comparison, and at 65-280 ms a search (MiniLM embeds each question on
# the CPU) the 1,000 the lookups ask took `make bench` 1-4.5 minutes ("Session 35").
GRAPHITI_QUESTIONS = 300
EPISODE_BATCH = 5_000
FACTS_PER_PERSON = 10
HOT_SHARE, HOT_FACTS = 0.01, 0.15
COMPANY_SHARE = 0.04  # of the facts, about companies (where they are)
PERSONS_PER_COMPANY = 20
CACHE_SLOTS = 20_000  # slot states with a short history the generator keeps built; others are rebuilt
KEEP_HISTORY = 16  # a slot with this many deltas stays built, so a rebuild replays fewer
ACTORS = (("user:self", EpisodeKind.MESSAGE), ("agent:support", EpisodeKind.MESSAGE),
          ("tool:crm", EpisodeKind.TOOL_RESULT))
OPERATIONS = ("current", "as_of", "history", "traverse", "context")
PATH = ("knows", "works_at", "located_in")

PERSON_WEIGHTS = {"home_city": 18, "email": 14, "response_style": 12, "passport_deadline": 8,
                  "last_contacted_at": 12, "contact": 12, "knows": 16, "works_at": 8}

SCHEMA = Schema.from_data({
    "name": "sgam-bench-scale", "version": 1,
    "entity_types": ["Person", "Company", "City"],
    "attributes": {
        "home_city": {"value_type": "string", "memory_type": "profile", "subject_types": ["Person"]},
        "email": {"value_type": "string", "normalise": "lower", "memory_type": "profile",
                  "subject_types": ["Person"]},
        "response_style": {"value_type": "string", "memory_type": "preference", "subject_types": ["Person"]},
        "passport_deadline": {"value_type": "date", "memory_type": "task_state", "subject_types": ["Person"]},
        "last_contacted_at": {"value_type": "datetime", "memory_type": "profile", "subject_types": ["Person"]},
        "contact": {"value_type": "string", "cardinality": "many", "memory_type": "profile",
                    "subject_types": ["Person"]},
        "knows": {"value_type": "entity", "target": "Person", "cardinality": "many",
                  "memory_type": "relation", "subject_types": ["Person"]},
        "works_at": {"value_type": "entity", "target": "Company", "memory_type": "relation",
                     "subject_types": ["Person"]},
        "located_in": {"value_type": "entity", "target": "City", "memory_type": "relation",
                       "subject_types": ["Company"]},
    },
}, origin="sgam.bench.scale")

MEMORY_NOTE = ("python.rss_mb / peak_rss_mb: the harness process (stream, SGAM, driver), now and the "
               "highest so far; python.sgam_peak_growth_mb: per phase, the process's peak resident memory "
               "during the phase minus its resident memory at the start (VmHWM reset through "
               "/proc/self/clear_refs after a gc): bulk_import (import_history over a lazy view of the "
               "stream: models built chunk by chunk), write_many (the timed window), lookups (warm-up and timed reads); "
               "memory the allocator reuses is not counted, so a lower bound; None where not Linux")

# Raw baselines: the same indexed entry point, no temporal predicate.
RAW_HISTORY = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->(o)
WHERE f.attribute = $attribute
RETURN f.value AS value, f.valid_from AS valid_from
"""
RAW_TRAVERSE = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[:KNOWS]->(a)-[:WORKS_AT]->(b)-[:LOCATED_IN]->(c)
RETURN a.id AS a, b.id AS b, c.id AS c
"""
RAW_CONTEXT = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->(o)
WHERE f.expired_at IS NULL
RETURN f.attribute AS attribute, f.value AS value, f.source_episode_id AS episode
"""
STORE_COUNTS = """
CALL () { MATCH (n:Entity {tenant_id: $tenant}) RETURN count(n) AS entities }
CALL () { MATCH (:Entity {tenant_id: $tenant})-[f]->() WHERE f.memory_id IS NOT NULL
          RETURN count(f) AS facts, count(CASE WHEN f.expired_at IS NULL THEN 1 END) AS believed }
RETURN entities, facts, believed
"""


# -- the stream ------------------------------------------------------------------------------------


class _ScaleValues(Values):
    def __init__(self, rng: random.Random, stream: Stream) -> None:
        super().__init__(rng, SCHEMA)
        self.stream = stream

    def draw(self, attribute: str, subject: str, at: datetime) -> Any:
        if attribute == "knows":
            return self.stream.person(self.rng.randrange(self.stream.pool))
        if attribute == "works_at":
            return self.stream.company(self.rng.randrange(self.stream.companies))
        if attribute == "located_in":
            return f"city-{self.rng.choice(CITIES).lower()}"
        return super().draw(attribute, subject, at)


_PERSON_TABLE = tuple(PERSON_WEIGHTS.items())  # for workload.choose
ATTRIBUTES = (*PERSON_WEIGHTS, "located_in")  # attribute codes; located_in is the company attribute
LOCATED_IN, KNOWS, WORKS_AT = (ATTRIBUTES.index(a) for a in ("located_in", "knows", "works_at"))
OPS = (Op.ASSERT, Op.RETRACT, Op.CORRECT)
NO_VALUE = 0
_SECOND, _MICRO = timedelta(seconds=1), timedelta(microseconds=1)
_DATETIME_OFFSET = 10**6  # datetime values are seconds from EPOCH (a backdated one can be a day before it)


class _Codec:
    """The stream's values as positive ints (``NO_VALUE`` = no value), one code space per attribute.

    Entity ids are their number, dates their ordinal, datetimes (whole seconds) their offset from
    EPOCH, other strings an index into a table. Codes are equal exactly when the values (and so
    their value keys) are, which lets the generator compare codes where it compared value keys.
    """

    def __init__(self) -> None:
        self.kinds = [SCHEMA.attribute(a).value_type for a in ATTRIBUTES]
        self.tables: list[dict[Any, int]] = [{} for _ in ATTRIBUTES]
        self.values: list[list[Any]] = [[None] for _ in ATTRIBUTES]

    def encode(self, attribute: int, value: Any) -> int:
        if attribute == KNOWS:
            return int(value[2:]) + 1
        if attribute == WORKS_AT:
            return int(value[3:]) + 1
        kind = self.kinds[attribute]
        if kind == "datetime":
            return (value - EPOCH) // _SECOND + _DATETIME_OFFSET
        if kind == "date":
            return value.toordinal()
        table = self.tables[attribute]
        code = table.get(value)
        if code is None:
            code = table[value] = len(self.values[attribute])
            self.values[attribute].append(value)
        return code

    def decode(self, attribute: int, code: int) -> Any:
        if code == NO_VALUE:
            return None
        if attribute == KNOWS:
            return Stream.person(code - 1)
        if attribute == WORKS_AT:
            return Stream.company(code - 1)
        kind = self.kinds[attribute]
        if kind == "datetime":
            return EPOCH + timedelta(seconds=code - _DATETIME_OFFSET)
        if kind == "date":
            return date.fromordinal(code)
        return self.values[attribute][code]


class _SlotState:
    """The expected state of one slot, as ``sgam.bench.Slot`` keeps it, over value codes.

    An :class:`sgam.bench.oracle.Slot` with value codes for values and episode numbers for episode ids
    (each a one-to-one renaming, so the same decisions); a code's value key is looked up only when
    the same-instant rule needs it.
    """

    __slots__ = ("many", "model")

    def __init__(self, many: bool, canonical: oracle.Canonical) -> None:
        self.many = many
        self.model = oracle.Slot(many=many, canonical=canonical)

    def apply(self, stream: Stream, index: int) -> None:
        op, code = OPS[stream._op[index]].value, stream._value[index]
        # Only valid time is checked, so every statement is believed from one transaction time.
        self.model.apply(oracle.Statement(
            op, code or None, EPOCH + stream._valid_from[index] * _SECOND, episode=str(stream._episode[index]),
            confidence=stream._confidence[index] / 100), EPOCH)

    def held(self, instant: datetime) -> Any:
        """The value code (a frozenset of member codes, for a set) at ``instant``."""
        return self.model.value_at(instant)


_OP_RANK = tuple(oracle.OP_RANK[op.value] for op in OPS)  # stream op code -> same-instant rank
_ASSERT_CODE, _RETRACT_CODE, _CORRECT_CODE = range(3)  # positions in OPS
_INSTANT = 1 << 14  # a point's order number: (valid_from * 128 + op rank) * 128 + confidence in hundredths


class _LiveSlot:
    """What the generator asks of a slot, kept up to date delta by delta: its deltas in arrival
    order (``indices``) and the value code (for a set, the member codes) believed at an instant.

    The oracle (:class:`_SlotState`) derives the whole timeline again after each delta, so a hot
    slot cost more with every delta; here a delta is one insertion into the slot's points sorted
    by the oracle's same-instant rule, and a lookup a bisection. It answers for what the stream
    makes: statements without ``valid_to`` or ``replaces``, latest-wins, no gate, a single value's
    retract without a value. There the sweep of ``oracle.believed`` comes down to this: a retract
    ends what holds, an assert sets a value, a correct rewrites the value of the change point in
    force (or sets one where nothing holds); so the value at ``x`` is that of the last point at or
    before ``x``, rewritten by the corrects that follow it in a row. A member holds at ``x`` when its
    last point at or before ``x`` (by instant, then retract < assert < correct) is not a retract.
    tests/unit/test_bench_scale_stream.py checks it against the oracle on random statements.
    """

    __slots__ = ("many", "indices", "_points", "_members", "_canonical")

    def __init__(self, many: bool, canonical: oracle.Canonical) -> None:
        self.many, self._canonical = many, canonical
        self.indices: list[int] = []
        self._points: list[tuple[int, int, int, int]] = []  # (order number, code, episode, op), sorted
        self._members: dict[int, list[int]] = {}  # member code -> sorted valid_from * 4 + op rank

    def apply(self, stream: Stream, index: int) -> None:
        self.indices.append(index)
        op, code, instant = stream._op[index], stream._value[index], stream._valid_from[index]
        if self.many:
            insort(self._members.setdefault(code, []), instant * 4 + _OP_RANK[op])
            return
        if op == _RETRACT_CODE and code != NO_VALUE:
            raise InvalidDelta("scale stream: the generator's slot state takes a single value's retract "
                               "without a value only (use oracle.Slot for a retract naming one)")
        self._insert(op, code, instant, stream._episode[index], stream._confidence[index])

    def _insert(self, op: int, code: int, instant: int, episode: int, confidence: int) -> None:
        points = self._points
        lo = bisect_left(points, (instant * _INSTANT,))
        hi = bisect_left(points, ((instant + 1) * _INSTANT,), lo)
        for _, other, other_episode, other_op in points[lo:hi]:
            if other_op == op and other == code and other_episode == episode:
                return  # the same statement again (idempotency key): the first one counts
        number = (instant * 128 + _OP_RANK[op]) * 128 + confidence
        at = bisect_left(points, (number,), lo, hi)
        end = bisect_left(points, (number + 1,), at, hi)
        if at < end:  # op and confidence tie: canonical value, then episode id, as oracle._Tie
            mine = self._tie(code, episode)
            while at < end and self._tie(points[at][1], points[at][2]) < mine:
                at += 1
        points.insert(at, (number, code, episode, op))

    def _tie(self, code: int, episode: int) -> tuple[str, str]:
        return ("" if code == NO_VALUE else self._canonical(code), str(episode))

    def held(self, instant: datetime) -> Any:
        """The value code (a frozenset of member codes, for a set) at ``instant``."""
        second = (instant - EPOCH) // _SECOND  # valid_from is in whole seconds
        if self.many:
            bound = second * 4 + 4
            return frozenset(member for member, marks in self._members.items()
                             if (k := bisect_left(marks, bound)) and marks[k - 1] % 4 != _OP_RANK[_RETRACT_CODE])
        points = self._points
        j = bisect_left(points, ((second + 1) * _INSTANT,)) - 1
        if j < 0 or points[j][3] == _RETRACT_CODE:
            return None
        code = points[j][1]
        for k in range(j + 1, len(points)):
            if points[k][3] != _CORRECT_CODE:
                break
            code = points[k][1]
        return code


class SlotModel:
    """The expected answers for one slot after a prefix of the stream (for the correctness check)."""

    def __init__(self, stream: Stream, attribute: int, state: _SlotState) -> None:
        self._stream, self._attribute, self._state = stream, attribute, state

    def _key(self, code: int) -> str:
        return self._stream.value_key(self._attribute, code)

    def expected(self, instant: datetime) -> tuple[str, ...]:
        """Sorted value keys expected at ``instant`` (empty: nothing holds), like ``Slot.expected``."""
        held = self._state.held(instant)
        if self._state.many:
            return tuple(sorted(self._key(c) for c in held))
        return () if held is None else (self._key(held),)


_SORTED = sorted(ATTRIBUTES)


def _ranks() -> Any:
    import numpy as np

    return np.array([_SORTED.index(a) for a in ATTRIBUTES], dtype=np.int64)


class _SlotKeys(Sequence):  # type: ignore[type-arg]
    """Sorted slot keys packed in an int64 array, read as ``(subject, attribute)`` tuples."""

    def __init__(self, keys: Any) -> None:
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, index: int) -> tuple[str, str]:  # type: ignore[override]
        key = int(self.keys[index])
        number = (key >> 8) & 0xFFFFFFFF
        subject = Stream.person(number) if key >> 40 else Stream.company(number)
        return subject, _SORTED[key & 0xFF]

    def without(self, attribute: str) -> _SlotKeys:
        return _SlotKeys(self.keys[(self.keys & 0xFF) != _SORTED.index(attribute)])


class Stream:
    """The deterministic delta stream: ``take(n)`` extends it; ``deltas`` / ``episodes`` build models.

    Compact: each delta is a row of typed arrays (subject, attribute, value code, valid_from in
    seconds, episode, op, confidence in hundredths, the slot's previous delta), each episode its
    instant and actor, each slot its last delta and count; under 40 bytes a delta. ``MemoryDelta``
    and ``Episode`` models are built only for the range asked for. The generator needs each slot's
    believed value at an instant (a :class:`_LiveSlot` each, kept delta by delta, so a delta costs
    the same however long its slot's history; :meth:`model` answers with the oracle itself): the
    slots in use are kept in a bounded LRU cache and any other is rebuilt from its deltas
    (following the previous-delta links), except those of ``KEEP_HISTORY`` deltas or more, which
    stay built: so a rebuild replays fewer than ``KEEP_HISTORY`` deltas, and the generated data
    are what the list-keeping version generated, seed for seed.
    """

    def __init__(self, seed: int, final_size: int, tenant: str = "bench-scale",
                 cache_slots: int = CACHE_SLOTS) -> None:
        self.seed, self.final_size, self.tenant = seed, final_size, tenant
        self.rng = random.Random(seed)
        self.values = _ScaleValues(self.rng, self)
        self.codec = _Codec()
        self._attribute_code = {name: i for i, name in enumerate(ATTRIBUTES)}
        self._many = [SCHEMA.attribute(a).cardinality is Cardinality.MANY for a in ATTRIBUTES]
        self.pool = 50
        self.companies = 5
        self.ops: Counter = Counter()
        self._left = 0
        self._actor_code = 0
        # one row per delta
        self._subject = array("i")  # person number, or -1 - company number
        self._attr = array("B")
        self._value = array("q")
        self._valid_from = array("q")  # whole seconds from EPOCH
        self._episode = array("i")
        self._op = array("B")
        self._confidence = array("B")  # hundredths
        self._previous = array("i")  # the slot's previous delta, -1 for its first
        # one row per episode
        self._occurred = array("q")  # microseconds from EPOCH
        self._actor = array("B")
        # one row per slot: person p's attribute a at p * 8 + a; company c's located_in at c
        self._person_last, self._person_count = array("i"), array("i")
        self._company_last, self._company_count = array("i"), array("i")
        self._cache: OrderedDict[int, _LiveSlot] = OrderedDict()
        self._kept: dict[int, _LiveSlot] = {}  # slots of KEEP_HISTORY deltas or more
        self._cache_slots = cache_slots

    @staticmethod
    def person(index: int) -> str:
        return f"p-{index:07d}"

    @staticmethod
    def company(index: int) -> str:
        return f"co-{index:06d}"

    def __len__(self) -> int:
        return len(self._op)

    @property
    def episode_count(self) -> int:
        return len(self._actor)

    @property
    def slot_count(self) -> int:
        """Slots (subject, attribute) with at least one delta."""
        return sum(1 for c in self._person_count if c) + sum(1 for c in self._company_count if c)

    @property
    def nbytes(self) -> int:
        """Bytes in the stream's arrays (the slot-state cache and value tables not counted)."""
        arrays = (self._subject, self._attr, self._value, self._valid_from, self._episode, self._op,
                  self._confidence, self._previous, self._occurred, self._actor, self._person_last,
                  self._person_count, self._company_last, self._company_count)
        return sum(a.itemsize * len(a) for a in arrays)

    @property
    def max_slot_history(self) -> int:
        """The most deltas any one slot received."""
        return max(max(self._person_count, default=0), max(self._company_count, default=0))

    # -- slots --------------------------------------------------------------------------------------

    def value_key(self, attribute: int, code: int) -> str:
        """The value key of a value code."""
        return SCHEMA.coerce(ATTRIBUTES[attribute], self.codec.decode(attribute, code))[1]

    def _subject_id(self, code: int) -> str:
        return self.person(code) if code >= 0 else self.company(-1 - code)

    def _slot_id(self, subject: int, attribute: int) -> int:
        """Person slots are >= 0, company slots < 0."""
        return subject * LOCATED_IN + attribute if subject >= 0 else subject

    def _last(self, slot: int) -> int:
        last = self._person_last if slot >= 0 else self._company_last
        index = slot if slot >= 0 else -1 - slot
        return last[index] if index < len(last) else -1

    def _link(self, slot: int, index: int) -> None:
        last, count = ((self._person_last, self._person_count) if slot >= 0
                       else (self._company_last, self._company_count))
        at = slot if slot >= 0 else -1 - slot
        if at >= len(last):
            grow = max(at + 1 - len(last), 4096)
            last.extend(array("i", [-1]) * grow)
            count.extend(array("i", [0]) * grow)
        self._previous.append(last[at])
        last[at] = index
        count[at] += 1

    def _indices(self, slot: int, stop: int | None = None) -> list[int]:
        """The slot's deltas in arrival order (those before ``stop`` only, if given)."""
        out, index, previous = [], self._last(slot), self._previous
        while index >= 0:
            if stop is None or index < stop:
                out.append(index)
            index = previous[index]
        out.reverse()
        return out

    def _state(self, slot: int, attribute: int, stop: int | None = None) -> _SlotState:
        state = _SlotState(self._many[attribute], lambda code: self.value_key(attribute, code))
        for index in self._indices(slot, stop):
            state.apply(self, index)
        return state

    def _live(self, slot: int, attribute: int) -> _LiveSlot:
        state = self._kept.get(slot)
        if state is not None:
            return state
        state = self._cache.get(slot)
        if state is not None:
            if len(state.indices) >= KEEP_HISTORY:
                self._kept[slot] = self._cache.pop(slot)
            else:
                self._cache.move_to_end(slot)
            return state
        state = _LiveSlot(self._many[attribute], lambda code: self.value_key(attribute, code))
        for index in self._indices(slot):
            state.apply(self, index)
        if len(state.indices) >= KEEP_HISTORY:
            self._kept[slot] = state
            return state
        self._cache[slot] = state
        if len(self._cache) > self._cache_slots:
            self._cache.popitem(last=False)
        return state

    def model(self, subject: str, attribute: str, size: int) -> SlotModel:
        """The expected state of ``(subject, attribute)`` after the first ``size`` deltas."""
        code = int(subject[2:]) if subject.startswith("p-") else -1 - int(subject[3:])
        attr = self._attribute_code[attribute]
        return SlotModel(self, attr, self._state(self._slot_id(code, attr), attr, size))

    def slot_keys(self, size: int) -> _SlotKeys:
        """The slots written by the first ``size`` deltas, sorted as ``(subject, attribute)`` tuples."""
        import numpy as np

        subject = np.frombuffer(self._subject, dtype=np.int32, count=size).astype(np.int64)
        rank = _ranks()[np.frombuffer(self._attr, dtype=np.uint8, count=size)]
        # "co-..." sorts before "p-...", each by number (fixed width), then the attribute by name
        group = (subject >= 0).astype(np.int64)
        number = np.where(subject >= 0, subject, -1 - subject)
        return _SlotKeys(np.unique((group << 40) | (number << 8) | rank))

    def subjects_with(self, attribute: str, size: int) -> list[str]:
        """Sorted subjects that the first ``size`` deltas gave ``attribute``."""
        import numpy as np

        subject = np.frombuffer(self._subject, dtype=np.int32, count=size)
        chosen = np.frombuffer(self._attr, dtype=np.uint8, count=size) == self._attribute_code[attribute]
        return sorted(self._subject_id(int(code)) for code in np.unique(subject[chosen]))

    # -- generating ---------------------------------------------------------------------------------

    def _pick_subject(self) -> tuple[int, int]:
        rng = self.rng
        if rng.random() < COMPANY_SHARE:
            return -1 - rng.randrange(self.companies), LOCATED_IN
        attribute = self._attribute_code[choose(rng, _PERSON_TABLE)]
        if rng.random() < HOT_FACTS:
            hot = max(1, int(self.pool * HOT_SHARE))
            return int(hot * rng.random() ** 2), attribute
        return rng.randrange(self.pool), attribute

    def take(self, n: int) -> None:
        """Append the next ``n`` deltas (and the episodes they cite) to the stream."""
        span = (HORIZON - EPOCH).total_seconds()
        rng = self.rng
        for _ in range(n):
            i = len(self._op)
            self.pool = max(50, i // FACTS_PER_PERSON + 1)
            self.companies = max(5, self.pool // PERSONS_PER_COMPANY)
            base = EPOCH + timedelta(seconds=span * i / self.final_size + rng.uniform(0, 3600))
            if self._left == 0:
                self._actor_code = ACTORS.index(rng.choice(ACTORS))
                self._left = rng.randint(5, 15)
                self._occurred.append((base - EPOCH) // _MICRO)
                self._actor.append(self._actor_code)
            self._left -= 1
            subject, attribute = self._pick_subject()
            slot = self._slot_id(subject, attribute)
            state = self._live(slot, attribute)
            kind, (op, code, valid_from, episode, confidence) = self._next(state, subject, attribute, base)
            self._subject.append(subject)
            self._attr.append(attribute)
            self._op.append(op)
            self._value.append(code)
            self._valid_from.append(valid_from)
            self._episode.append(episode)
            self._confidence.append(confidence)
            self._link(slot, i)
            state.apply(self, i)
            self.ops[kind] += 1

    def _next(self, state: _LiveSlot, subject: int, attribute: int,
              base: datetime) -> tuple[str, tuple[int, int, int, int, int]]:
        """The next delta of a slot, as ``sgam.bench._next_delta`` makes it (the same draws, in order)."""
        rng, name = self.rng, ATTRIBUTES[attribute]
        episode = len(self._actor) - 1

        def draw(at: datetime) -> int:
            return self.codec.encode(attribute, self.values.draw(name, self._subject_id(subject), at))

        def delta(op: int, code: int, at: datetime) -> tuple[int, int, int, int, int]:
            confidence = round(rng.uniform(0.6, 1.0), 2)
            return op, code, (at - EPOCH) // _SECOND, episode, round(confidence * 100)

        def backdated() -> datetime:
            return max(EPOCH, base - timedelta(days=rng.uniform(1, 400)))

        if not state.indices:
            return "create", delta(0, draw(base), base)
        kind = choose(rng, MANY_OPS if state.many else ONE_OPS)
        if kind == "replay":
            j = rng.choice(state.indices)
            return "replay", (self._op[j], self._value[j], self._valid_from[j], self._episode[j],
                              self._confidence[j])
        if state.many:
            held: list[int] = []
            if kind in ("retract", "reassert"):
                values, members = self._value, state.held(base)
                held = [j for j in state.indices if values[j] != NO_VALUE and values[j] in members]
            if kind == "retract" and held:
                return "retract", delta(1, values[rng.choice(held)], base)
            if kind == "reassert" and held:
                return "reassert", delta(0, values[rng.choice(held)], base)
            if kind == "backdated":
                code = draw(base)
                return "backdated", delta(0, code, backdated())
            return "add", delta(0, draw(base), base)
        if kind == "reassert":
            current = state.held(base)
            if current is not None:  # a delta of this slot set it: re-assert that value
                return "reassert", delta(0, current, base)  # type: ignore[arg-type]
            kind = "change"
        if kind == "retract":
            return "retract", delta(1, NO_VALUE, base)
        if kind == "correct":
            return "correct", delta(2, draw(base), base)
        if kind == "backdated":
            when = backdated()
            return "backdated", delta(0, draw(when), when)
        return "change", delta(0, draw(base), base)

    # -- models for a range -------------------------------------------------------------------------

    def deltas(self, start: int = 0, stop: int | None = None) -> Iterator[MemoryDelta]:
        """``MemoryDelta`` models of the deltas ``start:stop``, built one at a time."""
        stop = len(self) if stop is None else min(stop, len(self))
        for i in range(start, stop):
            yield self.delta(i)

    def delta(self, i: int) -> MemoryDelta:
        """The ``MemoryDelta`` model of delta ``i`` (built anew on every call)."""
        subject, attribute, episode = self._subject[i], self._attr[i], self._episode[i]
        return MemoryDelta(
            tenant_id=self.tenant, subject=self._subject_id(subject), attribute=ATTRIBUTES[attribute],
            value=self.codec.decode(attribute, self._value[i]),
            valid_from=EPOCH + timedelta(seconds=self._valid_from[i]),
            source_episode_id=f"ep-{episode:08d}", op=OPS[self._op[i]],
            asserted_by=ACTORS[self._actor[episode]][0], confidence=self._confidence[i] / 100,
            subject_type="Person" if subject >= 0 else "Company")

    def view(self, start: int = 0, stop: int | None = None) -> DeltaView:
        """The deltas ``start:stop`` as a lazy sequence (for ``import_history``): no model is kept."""
        return DeltaView(self, start, len(self) if stop is None else min(stop, len(self)))

    def episodes(self, start: int = 0, stop: int | None = None) -> Iterator[Episode]:
        """``Episode`` models of the episodes ``start:stop``, built one at a time."""
        stop = self.episode_count if stop is None else min(stop, self.episode_count)
        for k in range(start, stop):
            actor, kind = ACTORS[self._actor[k]]
            yield Episode(tenant_id=self.tenant, id=f"ep-{k:08d}",
                          occurred_at=EPOCH + timedelta(microseconds=self._occurred[k]),
                          kind=kind, actor=actor, content=f"scale episode {k} (seed {self.seed})")


class DeltaView(Sequence):  # type: ignore[type-arg]
    """A slice of a :class:`Stream` read as a sequence of ``MemoryDelta``, each built on access."""

    def __init__(self, stream: Stream, start: int, stop: int) -> None:
        self.stream, self.start, self.stop = stream, start, max(start, stop)

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, index: int) -> MemoryDelta:  # type: ignore[override]
        if isinstance(index, slice):
            raise TypeError("DeltaView takes one position at a time")
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"delta {index} out of range (0..{len(self) - 1})")
        return self.stream.delta(self.start + index)


# -- measuring ---------------------------------------------------------------------------------------


class _Memory:
    """This process's resident memory: now, its peak so far, and each phase's peak growth."""

    def __init__(self) -> None:
        self.peak_kb = 0

    @staticmethod
    def _status() -> dict[str, int]:
        try:
            lines = Path("/proc/self/status").read_text().splitlines()
        except OSError:
            return {}
        return {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in lines)
                if k in ("VmRSS", "VmHWM")}

    @contextmanager
    def phase(self, name: str, into: dict[str, float | None]) -> Iterator[None]:
        """Record in ``into[name]`` how far the resident memory rose above its level at the start (MB)."""
        gc.collect()
        status = self._status()
        self.peak_kb = max(self.peak_kb, status.get("VmHWM", 0))
        try:
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux >= 4.0)
            start = self._status().get("VmRSS")
        except OSError:
            start = None
        try:
            yield
        finally:
            peak = self._status().get("VmHWM")
            self.peak_kb = max(self.peak_kb, peak or 0)
            # the kernel's counters can lag a few pages: a phase that took nothing reads as 0
            into[name] = None if start is None or peak is None else round(max(0, peak - start) / 1024, 1)

    def snapshot(self) -> dict[str, float | None]:
        status = self._status()
        self.peak_kb = max(self.peak_kb, status.get("VmHWM", 0),
                           resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # kB on Linux
        current = status.get("VmRSS")
        return {"rss_mb": None if current is None else round(current / 1024, 1),
                "peak_rss_mb": round(self.peak_kb / 1024, 1)}


def _heap(graph: Any) -> dict[str, Any]:
    try:
        rows = graph.store.read("CALL dbms.queryJmx('java.lang:type=Memory') YIELD attributes "
                                "RETURN attributes.HeapMemoryUsage.value.properties AS heap", {})
        heap = rows[0]["heap"]
        return {"heap_used_mb": round(heap["used"] / 2**20, 1),
                "heap_committed_mb": round(heap["committed"] / 2**20, 1),
                "heap_max_mb": round(heap["max"] / 2**20, 1), "source": "dbms.queryJmx java.lang:type=Memory"}
    except Exception as exc:  # noqa: BLE001 - informational; say why it is missing
        return {"heap_used_mb": None, "error": str(exc)[:200]}


def _store_dir(graph: Any) -> Path | None:
    """The database directory of the local server (None for a server elsewhere)."""
    from sgam.settings import Settings

    settings = Settings()
    if not str(graph.store.uri).endswith(f":{settings.bolt_port}"):
        return None
    path = settings.home.expanduser().resolve() / "data" / "databases" / graph.store.database
    return path if path.is_dir() else None


def _dir_bytes(path: Path | None) -> int | None:
    if path is None:
        return None
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    answer = call()
    return time.perf_counter() - started, answer


def _lookups(graph: Any, stream: Stream, size: int, tenant: str, lookups: int, seed: int,
             memory: Callable[[], Any]) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Timed reads with their raw baselines, and the correctness check of current/as_of.

    ``memory()`` is the context (``_Memory.phase``) the warm-up and the timed reads run in.
    """
    rng = random.Random(seed * 7919 + size)
    seen = stream.slot_keys(size)
    slots = seen.without("located_in") or seen
    travellers = stream.subjects_with("knows", size) or [slots[0][0]]
    horizon = EPOCH + timedelta(seconds=stream._valid_from[size - 1])
    pairs = [rng.choice(slots) for _ in range(lookups)]
    starts = [rng.choice(travellers) for _ in range(lookups)]
    instants = [EPOCH + (horizon - EPOCH) * rng.random() for _ in range(lookups)]
    store = graph.store

    def raw(query: str, **params: Any) -> Callable[[int], Any]:
        return lambda i: store.read(query, {"tenant": tenant, **{k: v(i) for k, v in params.items()}})

    subject = lambda i: pairs[i][0]  # noqa: E731
    attribute = lambda i: pairs[i][1]  # noqa: E731
    variants: dict[str, Callable[[int], Any]] = {
        "current": lambda i: graph.current(tenant, *pairs[i]),
        "as_of": lambda i: graph.as_of(tenant, *pairs[i], valid_at=instants[i]),
        "history": lambda i: graph.history(tenant, *pairs[i]),
        "traverse": lambda i: graph.traverse(tenant, starts[i], PATH),
        "context": lambda i: graph.context(tenant, f"what is the {pairs[i][1]} of {pairs[i][0]}?",
                                           subjects=pairs[i][0], expand=False, budget_tokens=4000),
        "raw_lookup": raw(RAW_LOOKUP, subject=subject, attribute=attribute),
        "raw_history": raw(RAW_HISTORY, subject=subject, attribute=attribute),
        "raw_traverse": raw(RAW_TRAVERSE, subject=lambda i: starts[i]),
        "raw_context": raw(RAW_CONTEXT, subject=subject),
    }
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    answers: dict[str, list[Any]] = {"current": [None] * lookups, "as_of": [None] * lookups}
    # A fresh order each round: a rotation keeps each call's predecessor, and a read timed right
    # after a heavier one (or after another read of its slot) came out 1.5-2% apart ("Session 33").
    # Its own generator, so the slots and instants drawn above stay those of earlier runs.
    order = random.Random(seed * 7919 + size + 1)
    with memory():
        for _ in range(min(WARMUP, lookups)):
            j = rng.randrange(lookups)
            for call in variants.values():
                call(j)
        for i in range(lookups):
            order.shuffle(names)
            for name in names:
                seconds, answer = _timed(lambda: variants[name](i))
                samples[name].append(seconds)
                if name in answers:
                    answers[name][i] = answer

    now = datetime.now(timezone.utc)
    bad = Counter()
    examples: list[dict[str, Any]] = []
    for i, key in enumerate(pairs):
        model = stream.model(*key, size)
        for name, instant in (("current", now), ("as_of", instants[i])):
            expected, observed = model.expected(instant), observed_keys(answers[name][i])
            if expected != observed:
                bad[name] += 1
                if len(examples) < 10:
                    examples.append({"query": name, "subject": key[0], "attribute": key[1],
                                     "at": instant.isoformat(), "expected": list(expected),
                                     "observed": list(observed)})
    stats = {name: latency_summary(values) for name, values in samples.items()}
    baseline = {"current": "raw_lookup", "as_of": "raw_lookup", "history": "raw_history",
                "traverse": "raw_traverse", "context": "raw_context"}
    result = {op: compare_latency(stats[op], stats[baseline[op]]) for op in OPERATIONS}
    for op in ("current", "as_of"):
        result[op]["by_cardinality"] = _by_cardinality(samples[op], samples[baseline[op]], pairs)
    correctness = {"checked": lookups, "current_mismatches": bad["current"],
                   "as_of_mismatches": bad["as_of"], "examples": examples}
    questions = [{"subject": s, "attribute": a, "as_of": t.isoformat()} for (s, a), t in zip(pairs, instants)]
    return result, correctness, questions


def _by_cardinality(sgam: list[float], raw: list[float],
                    pairs: Sequence[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """The lookups of single-valued and of set-valued slots apart (``one`` / ``many``), each SGAM
    against its raw lookup. The raw lookup stops at the slot's first fact; a set-valued slot's
    answer is every value it holds now (about four in this stream), each a whole fact."""
    groups: dict[str, list[int]] = {"one": [], "many": []}
    for i, (_, attribute) in enumerate(pairs):
        many = SCHEMA.attribute(attribute).cardinality is Cardinality.MANY
        groups["many" if many else "one"].append(i)
    return {name: compare_latency(latency_summary([sgam[i] for i in indices]),
                                  latency_summary([raw[i] for i in indices]))
            for name, indices in groups.items() if indices}


def _single_writes(graph: Any, stream: Stream, size: int, tenant: str, raw_tenant: str, count: int,
                   seed: int) -> dict[str, Any]:
    """``write`` of one delta a call (what an agent does turn by turn), next to the raw write of the
    same delta as one relationship in a transaction of its own; interleaved, after a warm-up. Each
    delta moves a person's home city from a later instant than the stream's, so SGAM retires the
    believed row and writes its successor, the ledger's new statement and the episode's link."""
    rng = random.Random(seed * 31 + size)
    people = stream.subjects_with("home_city", size)
    episode = next(stream.episodes(0, 1)).id
    deltas = [MemoryDelta(tenant_id=tenant, subject=rng.choice(people), attribute="home_city",
                          value=f"Moved-{k}", valid_from=HORIZON + timedelta(minutes=k + 1),
                          source_episode_id=episode, asserted_by="bench")
              for k in range(count + WARMUP)]
    sgam_s: list[float] = []
    raw_s: list[float] = []
    for k, delta in enumerate(deltas):
        timed = [(sgam_s, lambda: graph.write(delta)), (raw_s, lambda: raw_write(graph, [delta], raw_tenant, 1))]
        for samples, call in timed if k % 2 else timed[::-1]:
            seconds, _ = _timed(call)
            if k >= WARMUP:
                samples.append(seconds)
    # Each person moved lives where their last move took them.
    last = {d.subject: d.value for d in deltas}
    wrong = sum(1 for subject, city in last.items()
                if [f.value for f in graph.current(tenant, subject, "home_city")] != [city])
    return {**compare_latency(latency_summary(sgam_s), latency_summary(raw_s)), "mismatches": wrong}


# -- Graphiti (optional: sgam.bench.graphiti comes with the Graphiti comparison) -------------------


def _graphiti_probe(graph: Any, uri: str, auth: Any, tenant: str, size: int,
                    questions: list[dict[str, Any]], log: Callable[[str], None]) -> dict[str, Any]:
    try:
        from sgam.bench.graphiti import scale_probe
    except (ImportError, GraphitiUnavailable) as exc:
        return {"skipped": f"sgam.bench.graphiti is not available ({exc})"}
    rows = [{"subject": r["subject"], "attribute": r["attribute"], "value": r["value"],
             "valid_from": r["valid_from"], "valid_to": r["valid_to"]}
            for r in graph.store.read(BELIEVED_ROWS, {"tenant": tenant})]
    questions = questions[:GRAPHITI_QUESTIONS]
    log(f"Graphiti probe: {len(rows):,} believed rows, {len(questions)} questions")
    try:
        return {**scale_probe(uri, auth, rows, questions, group_id=f"{tenant}-graphiti-{size}"),
                "questions": len(questions)}
    except Exception as exc:  # noqa: BLE001 - the probe is optional; record why it failed
        return {"skipped": f"Graphiti probe failed: {type(exc).__name__}: {exc}"[:300]}


BELIEVED_ROWS = """
MATCH (:Entity {tenant_id: $tenant})-[f]->()
WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL
RETURN f.subject AS subject, f.attribute AS attribute, toString(f.value) AS value,
       toString(f.valid_from) AS valid_from, toString(f.valid_to) AS valid_to
"""


# -- the benchmark -----------------------------------------------------------------------------------


def _record_episodes(graph: Any, stream: Stream) -> float:
    """Record every episode of ``stream`` so far, ``EPISODE_BATCH`` at a time; the seconds spent
    in ``record_episodes`` (the models are built outside it)."""
    seconds = 0.0
    for start in range(0, stream.episode_count, EPISODE_BATCH):
        batch = list(stream.episodes(start, start + EPISODE_BATCH))
        t0 = time.perf_counter()
        graph.record_episodes(batch)
        seconds += time.perf_counter() - t0
    return seconds


def _warm_up(graph: Any, seed: int, deltas: int, tenant: str) -> list[float]:
    """Rounds of :func:`_warm_round` until one takes at least :data:`WARM_UP_SETTLED` of the
    round before (at most :data:`WARM_UP_ROUNDS`); the rounds' seconds."""
    stream = Stream(seed=seed + 1, final_size=deltas, tenant=tenant)
    stream.take(deltas)
    rounds: list[float] = []
    while len(rounds) < WARM_UP_ROUNDS and (len(rounds) < 2 or rounds[-1] < WARM_UP_SETTLED * rounds[-2]):
        t0 = time.perf_counter()
        _warm_round(graph, stream, tenant)
        rounds.append(time.perf_counter() - t0)
    return rounds


def _warm_round(graph: Any, stream: Stream, tenant: str) -> None:
    """The server's write and read paths run once before anything is timed: the deltas taken from
    ``stream`` (another seed's, in ``tenant``: half imported, half written raw and through
    ``write_many``, then some reads), removed again."""
    deltas = len(stream)
    half = deltas // 2
    try:
        _record_episodes(graph, stream)
        graph.import_history(stream.view(0, half))
        recent = list(stream.deltas(half, deltas))
        raw_write(graph, recent, f"{tenant}-raw", DEFAULT_BATCH)
        graph.write_many(recent)
        slots = stream.slot_keys(deltas)
        for subject, attribute in (slots[i] for i in range(min(WARMUP, len(slots)))):
            graph.current(tenant, subject, attribute)
            graph.store.read(RAW_LOOKUP, {"tenant": tenant, "subject": subject, "attribute": attribute})
    finally:
        write_tenant_cleanup(graph, f"{tenant}-raw")
        graph.delete_tenant(tenant)


def run(sizes: Sequence[int] = DEFAULT_SIZES, *, seed: int = 7, window: int = WINDOW,
        lookups: int = LOOKUPS, graphiti: bool | None = None, out_dir: Path | str = Path("bench/results"),
        uri: str | None = None, auth: tuple[str, str] | None = None,
        log: Callable[[str], None] | None = None, keep: bool = False,
        warm_up: int | None = None) -> dict[str, Any]:
    """Run the scale benchmark over ``sizes`` (ascending), write JSON/Markdown/PNG, return the result.

    ``graphiti``: ``None`` probes Graphiti's search at sizes up to 10k (if its module is there);
    ``True`` at every size; ``False`` never. ``warm_up``: deltas of the untimed warm-up stream
    written first, in rounds until the server's speed settles (:data:`WARM_UP`, at most
    ``window``, by default; 0 for none).
    """
    from sgam.api import MemoryGraph

    sizes = sorted(set(int(s) for s in sizes))
    if not sizes or sizes[0] < 2 or window < 1 or lookups < 1:
        raise ValueError("sizes must be at least 2 facts, window and lookups positive")
    log = log or (lambda message: print(message, file=sys.stderr))
    started_at = datetime.now(timezone.utc)
    load_start = loadavg()
    suffix = secrets.token_hex(3)
    tenant, raw_tenant = f"scale-{seed}-{suffix}", f"scale-{seed}-{suffix}-raw"
    stream = Stream(seed=seed, final_size=sizes[-1], tenant=tenant)
    from sgam.settings import Settings, connection

    uri, auth = connection(uri, auth, Settings())  # Graphiti's probe connects on its own
    graph = MemoryGraph.connect(uri, auth, schema=SCHEMA)
    retries = RetryCounter()
    logging.getLogger("neo4j").addHandler(retries)
    store_dir = _store_dir(graph)
    rows: list[dict[str, Any]] = []
    generate_s = 0.0
    memory = _Memory()
    warm = min(WARM_UP, window) if warm_up is None else warm_up
    warm_s = 0.0
    rounds: list[float] = []
    try:
        if warm >= 2:
            t0 = time.perf_counter()
            rounds = _warm_up(graph, seed, warm, f"{tenant}-warm")
            warm_s = time.perf_counter() - t0
            log(f"warm-up: {warm:,} deltas of another stream written and read {len(rounds)} times in "
                f"{warm_s:.1f}s ({', '.join(f'{r:.1f}' for r in rounds)} s; not timed)")
        for size in sizes:
            t0 = time.perf_counter()
            stream.take(size - len(stream))
            generated_s = time.perf_counter() - t0
            generate_s += generated_s
            w = min(window, max(1, size // 2))
            log(f"size {size:,}: {stream.episode_count:,} episodes (generated in {generated_s:.1f}s); "
                f"loading {size - w:,} in bulk, "
                f"then {w:,} through write_many")
            t0 = time.perf_counter()
            graph.delete_tenant(tenant)  # the previous size's
            graph.delete_tenant(raw_tenant)
            clear_s = time.perf_counter() - t0
            sgam_mb: dict[str, float | None] = {}
            # every episode so far is cited: each one's first delta is among the first `size`
            episodes_s = _record_episodes(graph, stream)
            log(f"  removed the previous size's tenant in {clear_s:.1f}s; recorded {stream.episode_count:,} "
                f"episodes in {episodes_s:.1f}s")

            bulk_cpu: dict[str, float | None] = {}
            with memory.phase("bulk_import", sgam_mb), cpu_split(uri, bulk_cpu):  # models built chunk by chunk
                t0 = time.perf_counter()
                imported = graph.import_history(stream.view(0, size - w))
                bulk_s = time.perf_counter() - t0
                rejected = len(imported.rejected)
                del imported
            bulk_floor = cpu_floor(bulk_cpu)
            log(f"  bulk import {size - w:,} in {bulk_s:.1f}s ({(size - w) / bulk_s:,.0f} facts/s); "
                f"{_cpu_words(bulk_cpu)}; {_import_floor_words(bulk_floor, size - w)}")

            retries.take()
            recent = list(stream.deltas(size - w, size))
            raw_cpu: dict[str, float | None] = {}
            write_cpu: dict[str, float | None] = {}
            with cpu_split(uri, raw_cpu):
                raw_s = raw_write(graph, recent, raw_tenant, DEFAULT_BATCH)  # as write_many batches
            with memory.phase("write_many", sgam_mb), cpu_split(uri, write_cpu):
                t0 = time.perf_counter()
                batch = graph.write_many(recent)
                write_s = time.perf_counter() - t0
            write_floor = cpu_floor(write_cpu)
            log(f"  write_many {w:,} in {write_s:.1f}s (raw {raw_s:.1f}s); {_cpu_words(write_cpu)}; "
                f"{_floor_words(write_floor, raw_s)}")
            write_tenant_cleanup(graph, raw_tenant)
            rejected += len(batch.rejected)
            outcomes = dict(sorted(Counter(r.outcome for r in batch.results).items()))
            del recent, batch

            graph.store.run_write("CALL db.clearQueryCaches()", {})
            lookup, correctness, questions = _lookups(graph, stream, size, tenant, lookups, seed,
                                                      lambda: memory.phase("lookups", sgam_mb))
            log(f"  lookups: {correctness['current_mismatches']} current / "
                f"{correctness['as_of_mismatches']} as_of mismatches")
            counts = graph.store.read(STORE_COUNTS, {"tenant": tenant})[0]
            row = {
                "size": size, "window": w, "episodes": stream.episode_count,
                "stored": {"entities": counts["entities"], "fact_rows": counts["facts"],
                           "believed_rows": counts["believed"]},
                "bulk_import": {"deltas": size - w, "seconds": round(bulk_s, 3),
                                "facts_per_s": round((size - w) / bulk_s, 1),
                                "episodes_seconds": round(episodes_s, 3), "cpu": bulk_cpu,
                                "cpu_floor_s": bulk_floor,
                                "clear_previous_seconds": round(clear_s, 3)},
                "writes": {"sgam_facts_per_s": round(w / write_s, 1), "raw_facts_per_s": round(w / raw_s, 1),
                           "sgam_seconds": round(write_s, 3), "raw_seconds": round(raw_s, 3),
                           "ratio": round(write_s / raw_s, 3),
                           "cpu": {"sgam": write_cpu, "raw": raw_cpu, "cores": CORES,
                                   "sgam_floor_s": write_floor},
                           "outcomes": outcomes,
                           "rejected": rejected, "driver_retries": retries.take()},
                "lookups": lookup,
                "correctness": correctness,
                "store_bytes": _dir_bytes(store_dir),
                "neo4j_heap": _heap(graph),
                "python": {**memory.snapshot(), "sgam_peak_growth_mb": sgam_mb},
            }
            probe = graphiti if graphiti is not None else size <= GRAPHITI_MAX
            if probe:
                row["graphiti"] = _graphiti_probe(graph, uri, auth, tenant, size, questions, log)
                _graphiti_ratios(row)
            else:
                row["graphiti"] = {"skipped": f"not run at {size:,} facts (Graphiti embeds every edge; "
                                              f"on CPU that is not feasible beyond {GRAPHITI_MAX:,})"
                                   if graphiti is None else "disabled (--no-graphiti)"}
            # Last: it changes slots that the checks and the Graphiti probe read.
            row["single_writes"] = _single_writes(graph, stream, size, tenant, raw_tenant, min(lookups, SINGLE_WRITES),
                                                  seed)
            write_tenant_cleanup(graph, raw_tenant)
            log(f"  one delta a call: `write` p50 {row['single_writes']['sgam']['p50_ms']:.2f} ms, raw "
                f"{row['single_writes']['raw']['p50_ms']:.2f} ms")
            rows.append(row)
        result = {
            "benchmark": "sgam.bench.scale", "format": 1,
            "started_at": started_at.isoformat(),
            "machine": {**machine_info(), "loadavg_1_5_15_start": load_start},
            "versions": {"python": sys.version.split()[0], "sgam": package_version("sgam"),
                         "neo4j_driver": package_version("neo4j"), **git_state()},
            "neo4j": neo4j_info(graph),
            "params": {"sizes": sizes, "seed": seed, "window": window, "lookups": lookups,
                       "warmup": WARMUP, "warm_up_deltas": warm, "warm_up_seconds": round(warm_s, 3),
                       "warm_up_rounds": [round(r, 3) for r in rounds],
                       "schema": f"{SCHEMA.name} v{SCHEMA.version}",
                       "traversal": list(PATH), "context": "exact facts only (expand=False)",
                       "store_dir": None if store_dir is None else str(store_dir), "tenant": tenant,
                       "memory": MEMORY_NOTE},
            "dataset": {"deltas": len(stream), "episodes": stream.episode_count,
                        "slots": stream.slot_count, "ops": dict(sorted(stream.ops.items())),
                        "generate_seconds": round(generate_s, 3), "stream_mb": round(stream.nbytes / 2**20, 1),
                        "max_deltas_per_slot": stream.max_slot_history},
            "sizes": rows,
        }
    finally:
        logging.getLogger("neo4j").removeHandler(retries)
        if not keep:
            t0 = time.perf_counter()
            for t in (tenant, raw_tenant):
                try:
                    graph.delete_tenant(t)
                except Exception as exc:  # noqa: BLE001 - report, do not mask the real error
                    log(f"cleanup of {t} failed: {exc}")
            log(f"removed the benchmark's tenants in {time.perf_counter() - t0:.1f}s")
        graph.close()
    result["finished_at"] = datetime.now(timezone.utc).isoformat()
    result["machine"]["loadavg_1_5_15_end"] = loadavg()
    result["targets"] = targets(result)
    return _save(result, Path(out_dir), started_at, suffix)


# The performance targets this benchmark checks (sgam/bench/README.md): (name, limit, the sizes it
# applies to (None: every size), the measure of one size's row, whether a measure meets the limit,
# how a measure is shown).
TARGETS: tuple[tuple[str, str, int | None, Callable[[dict[str, Any]], float],
                     Callable[[float], bool], Callable[[float], str]], ...] = (
    ("`write_many` time vs the raw write", "<= 1.5x", None,
     lambda r: r["writes"]["ratio"], lambda v: v <= 1.5, lambda v: f"{v:.2f}x"),
    ("`write_many` facts/s", ">= 5,000 from 100k", 100_000,
     lambda r: r["writes"]["sgam_facts_per_s"], lambda v: v >= 5_000, lambda v: f"{v:,.0f}"),
    ("bulk import facts/s", ">= 10,000 at 1M", 1_000_000,
     lambda r: r["bulk_import"]["facts_per_s"], lambda v: v >= 10_000, lambda v: f"{v:,.0f}"),
    *((f"`{op}` p50 vs raw", "<= 1.2x", None, (lambda r, op=op: r["lookups"][op]["ratio_p50"]),
       lambda v: v <= 1.2, lambda v: f"{v:.2f}x") for op in ("current", "as_of")),
    *((f"`{op}` p{q} vs raw", f"<= {limit}x", None, (lambda r, op=op, q=q: r["lookups"][op][f"ratio_p{q}"]),
       (lambda v, limit=limit: v <= limit), lambda v: f"{v:.2f}x")
      for op in ("traverse", "context") for q, limit in ((50, 1.5), (99, 2.0))),
    ("wrong `current` / `as_of` answers", "0", None,
     lambda r: (r["correctness"]["current_mismatches"] + r["correctness"]["as_of_mismatches"]
                + r.get("single_writes", {}).get("mismatches", 0)),
     lambda v: v == 0, lambda v: f"{v:.0f}"),
    ("transactions the driver retried (deadlocks)", "0", None,
     lambda r: sum(r["writes"]["driver_retries"].values()), lambda v: v == 0, lambda v: f"{v:.0f}"),
)


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each of :data:`TARGETS` with what this run measured at the sizes it applies to, and whether
    every one of them meets it (``None``: no size of this run is one it applies to)."""
    checked = []
    for name, limit, from_size, measure, meets, shown in TARGETS:
        rows = [r for r in result["sizes"] if from_size is None or r["size"] >= from_size]
        measured = {r["size"]: measure(r) for r in rows}
        checked.append({"target": name, "limit": limit,
                        "measured": {f"{size:,}": shown(v) for size, v in measured.items()},
                        "met": all(meets(v) for v in measured.values()) if measured else None})
    return checked


def _graphiti_ratios(row: dict[str, Any]) -> None:
    probe = row["graphiti"]
    if "search_p50_ms" not in probe:
        return
    for op in ("current", "as_of"):
        ours = row["lookups"][op]["sgam"]["p50_ms"]
        probe[f"ratio_search_p50_over_{op}_p50"] = round(probe["search_p50_ms"] / ours, 2)


def _save(result: dict[str, Any], out_dir: Path, started_at: datetime, suffix: str) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"scale-{started_at.strftime('%Y%m%dT%H%M%SZ')}"
    if stem.with_suffix(".json").exists():
        stem = stem.with_name(f"{stem.name}-{suffix}")
    files = {"json": str(stem.with_suffix(".json")), "markdown": str(stem.with_suffix(".md")),
             "png": str(stem.with_suffix(".png"))}
    result["result_files"] = files
    Path(files["markdown"]).write_text(markdown(result), encoding="utf-8")
    _plot(result, Path(files["png"]))
    Path(files["json"]).write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return result


def _ms(entry: dict[str, Any], side: str, q: str) -> str:
    return f"{entry[side][f'{q}_ms']:.2f}"


def _sgam_mb(row: dict[str, Any]) -> str:
    grown = row["python"].get("sgam_peak_growth_mb", {})
    return " / ".join("n/a" if grown.get(k) is None else f"{grown[k]:,.0f}" for k in ("write_many", "lookups"))


# The cores this process and the local server share (the affinity mask, as the OS grants them).
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_floor(cpu: dict[str, Any], cores: int = CORES) -> float | None:
    """The least wall time a phase's CPU allows on ``cores``: its Python runs on one interpreter
    (at most one core at a time, whatever its threads), the server's beside it on the rest, both
    at once never more than the cores. ``None`` when the server's CPU was not measured."""
    python, server = cpu["python_cpu_s"], cpu["server_cpu_s"]
    if server is None:
        return None
    return round(max(python, (python + server) / cores), 3)


_FLOOR_UNKNOWN = "its floor not known (the server is not a local process)"


def _floor_words(floor: float | None, raw_s: float) -> str:
    if floor is None:
        return _FLOOR_UNKNOWN
    return (f"on {CORES} cores that CPU takes at least {floor:,.1f} s, {floor / max(raw_s, 1e-3):.2f}x "
            "the raw write's wall")


def _import_floor_words(floor: float | None, deltas: int) -> str:
    if floor is None:
        return _FLOOR_UNKNOWN
    return f"on {CORES} cores that CPU allows at most {deltas / max(floor, 1e-3):,.0f} facts/s"


def _cpu_words(cpu: dict[str, Any]) -> str:
    """Where a phase's CPU went: this Python process against the (local) server."""
    wall, python, server = max(cpu["wall_s"], 1e-3), cpu["python_cpu_s"], cpu["server_cpu_s"]
    words = f"CPU {python:,.1f} s in Python ({python / wall:.0%} of {wall:,.1f} s wall)"
    if server is None:
        return words + ", server not measured (not a local process)"
    return words + f", {server:,.1f} s in the server ({server / wall:.0%}; counts all its clients)"


def markdown(result: dict[str, Any]) -> str:
    """The result as Markdown tables: one row per size and measure, SGAM next to raw."""
    p, m = result["params"], result["machine"]
    lines = [f"# SGAM scale benchmark ({result['started_at'][:19]}Z)", "",
             f"Seed {p['seed']}, sizes {', '.join(f'{s:,}' for s in p['sizes'])}, write window "
             f"{p['window']:,}, {p['lookups']} timed lookups per operation; {m['cpu']} "
             f"({m['cpu_count']} CPUs), load average {m.get('loadavg_1_5_15_start')} at start, "
             f"{m.get('loadavg_1_5_15_end')} at end; Neo4j {result['neo4j'].get('version')}. "
             "Ratios are SGAM / raw (latency) from the same run.", "",
             "| facts | operation | SGAM p50 ms | raw p50 ms | ratio p50 | SGAM p99 ms | raw p99 ms | ratio p99 |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in result["sizes"]:
        timed = [(op, row["lookups"][op]) for op in OPERATIONS]
        if row.get("single_writes"):  # results written before single writes were timed have none
            timed.append(("`write`, one delta", row["single_writes"]))
        for op, e in timed:
            lines.append(f"| {row['size']:,} | {op} | {_ms(e, 'sgam', 'p50')} | {_ms(e, 'raw', 'p50')} | "
                         f"{e['ratio_p50']:.2f}x | {_ms(e, 'sgam', 'p99')} | {_ms(e, 'raw', 'p99')} | "
                         f"{e['ratio_p99']:.2f}x |")
    split = [(row["size"], op, row["lookups"][op]["by_cardinality"]) for row in result["sizes"]
             for op in ("current", "as_of") if "by_cardinality" in row["lookups"][op]]
    if split:  # results written before the split have none
        lines += ["", "The same reads by the attribute's cardinality (the raw lookup stops at a slot's first "
                  "fact; a set-valued slot's answer is every value it holds now, each a whole fact):", "",
                  "| facts | operation | single-valued: ratio p50 (SGAM / raw p50 ms, lookups) | "
                  "set-valued: ratio p50 (SGAM / raw p50 ms, lookups) |", "|---:|---|---|---|"]
        for size, op, groups in split:
            cells = [f"{g['ratio_p50']:.2f}x ({_ms(g, 'sgam', 'p50')} / {_ms(g, 'raw', 'p50')}, {g['sgam']['n']})"
                     if g else "none" for g in (groups.get("one"), groups.get("many"))]
            lines.append(f"| {size:,} | {op} | {cells[0]} | {cells[1]} |")
    lines += ["", "| facts | write_many facts/s | raw facts/s | time ratio | bulk import facts/s | "
              "fact rows | store MB | heap used MB | harness RSS MB | SGAM MB write_many / lookups | "
              "mismatches | Graphiti search p50 ms | Graphiti p50 / current p50 |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in result["sizes"]:
        w, g = row["writes"], row["graphiti"]
        store = "n/a" if row["store_bytes"] is None else f"{row['store_bytes'] / 2**20:,.0f}"
        bad = row["correctness"]["current_mismatches"] + row["correctness"]["as_of_mismatches"]
        search = f"{g['search_p50_ms']:.1f}" if "search_p50_ms" in g else "skipped"
        ratio = f"{g['ratio_search_p50_over_current_p50']:.0f}x" if "ratio_search_p50_over_current_p50" in g else ""
        lines.append(f"| {row['size']:,} | {w['sgam_facts_per_s']:,.0f} | {w['raw_facts_per_s']:,.0f} | "
                     f"{w['ratio']:.2f}x | {row['bulk_import']['facts_per_s']:,.0f} | "
                     f"{row['stored']['fact_rows']:,} | {store} | {row['neo4j_heap'].get('heap_used_mb')} | "
                     f"{row['python']['rss_mb']} | {_sgam_mb(row)} | {bad} | {search} | {ratio} |")
    lines += [""] + [f"Bulk import at {r['size']:,}: {_cpu_words(r['bulk_import']['cpu'])}; "
                     f"{_import_floor_words(r['bulk_import'].get('cpu_floor_s'), r['bulk_import']['deltas'])}."
                     for r in result["sizes"] if "cpu" in r["bulk_import"]]
    lines += [""] + [f"`write_many` at {r['size']:,}: {_cpu_words(r['writes']['cpu']['sgam'])}; "
                     f"{_floor_words(r['writes']['cpu'].get('sgam_floor_s'), r['writes']['raw_seconds'])}. "
                     f"The raw write: {_cpu_words(r['writes']['cpu']['raw'])}."
                     for r in result["sizes"] if "cpu" in r["writes"]]
    skipped = [f"{r['size']:,}: {r['graphiti']['skipped']}" for r in result["sizes"] if "skipped" in r["graphiti"]]
    if skipped:
        lines += ["", "Graphiti: " + "; ".join(skipped)]
    lines += ["", "Targets (sgam/bench/README.md), each measured at the sizes it applies to:", "",
              "| target | limit | measured | met |", "|---|---|---|---|"]
    for t in result.get("targets") or targets(result):
        measured = ", ".join(f"{v} at {size}" for size, v in t["measured"].items()) or "no size of this run"
        met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
        lines.append(f"| {t['target']} | {t['limit']} | {measured} | {met} |")
    return "\n".join(lines) + "\n"


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["size"] for r in result["sizes"]]
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, op in enumerate(OPERATIONS):
        color = f"C{i}"
        ax.plot(sizes, [r["lookups"][op]["sgam"]["p50_ms"] for r in result["sizes"]], "o-",
                color=color, label=f"{op} (SGAM)")
        ax.plot(sizes, [r["lookups"][op]["raw"]["p50_ms"] for r in result["sizes"]], "s--",
                color=color, alpha=0.6, label=f"{op} (raw)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("facts in the graph")
    ax.set_ylabel("p50 latency (ms)")
    ax.set_title(f"SGAM vs raw Cypher: p50 latency by graph size (seed {result['params']['seed']})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_summary(result: dict[str, Any], console: Any) -> None:
    """Print the Markdown tables, the Graphiti ratios and the result files."""
    console.print(markdown(result), markup=False, highlight=False)
    for row in result["sizes"]:
        g = row["graphiti"]
        if "ratio_search_p50_over_current_p50" in g:
            console.print(f"SGAM exact vs Graphiti search at {row['size']:,} facts: Graphiti p50 "
                          f"{g['search_p50_ms']:.1f} ms = {g['ratio_search_p50_over_current_p50']:.0f}x "
                          f"SGAM current p50, {g['ratio_search_p50_over_as_of_p50']:.0f}x as_of p50",
                          markup=False, highlight=False)
    console.print(f"results: {result['result_files']}", markup=False, highlight=False)


__all__ = ["DEFAULT_SIZES", "HUGE_SIZE", "SCHEMA", "Stream", "markdown", "print_summary", "run"]

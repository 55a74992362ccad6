"""Reconciliation: the pure functions that decide what a proposed write does to stored history.

The believed history of a slot (tenant, subject, attribute) is a function of the **set of
statements** the store accepted about it, never of their arrival order, batching or writers
(``docs/temporal-semantics.md`` is the contract). Every accepted delta is a :class:`Point` kept in
the slot's ledger, including those that change nothing visible when they arrive.
:func:`believed_runs` derives the timeline from the points:

* each statement without ``valid_to`` is a change point at its ``valid_from``: ``assert`` v sets v,
  ``retract`` clears (``retract`` v clears only if v is in force there), ``correct`` v replaces the
  change point in force (it was never true) by v, or acts as an assert where nothing is in force;
* the points are applied in valid-time order; at one instant retracts, then asserts, then corrects,
  then by confidence (lowest first: the most confident wins), then by value, episode and key;
* statements with ``valid_to`` (SQL:2011 ``FOR PORTION OF``) then overwrite ``[valid_from,
  valid_to)`` only, earliest first, the longer of two starting together first;
* the value at x is the one of the latest change point at or before x; believed rows are the
  maximal runs of that function. A set-valued attribute has one such timeline per member.

So a backdated assert ends at the next change point after it, whatever its value, including a
re-assert of the value already holding; a re-assert makes no new row, only more support.

``reconcile(existing, delta, schema, now, statements=...)`` returns a :class:`WritePlan`: rows to
retire in transaction time (``expire``), rows to create, rows whose support grows, and the points
to add to the ledger. It diffs the stored believed rows against the runs derived from the points
after the delta. Rows are immutable apart from their support counters and ``expired_at``, so
``known_at`` queries stay exact. Nothing here touches the database and the clock is passed in.

**Candidates** (an attribute with ``requires: N`` > 1 or ``sensitive: true``, see
:class:`~sgam.graph.schema.AttributeSpec`). A value that is not in force at ``t`` is not a change
point yet: it becomes (or supports) the slot's pending candidate for that value, a believed row
with ``status = candidate`` that never closes, cuts or supersedes a confirmed version. There is one
pending candidate per value (per member of a set); it keeps the ``valid_from`` and ``op`` of the
statement that opened it, and later statements of the value, at any valid time, add support.
Competing values of a cardinality-one slot wait side by side; a ``correct`` withdraws the other
pending values. The candidate is **promoted** when its support reaches N distinct episodes (never
for a sensitive attribute) or when a ``confirm`` from an allowed actor arrives: the candidate row
is retired and its statement becomes a change point, carrying all its support. A ``retract``
naming a pending value withdraws that candidate; every other retract is a change point.

**Disagreement held as a candidate** (``disagreement: candidate``) is not decided on arrival: every
statement, confirms included, goes to the ledger, and :func:`settled_runs` decides in the sweep
which ones are held, confirmed or withdrawn; the slot's candidate rows are diffed against its
result as the believed rows are.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from typing import Any

from .errors import Conflict, InvalidDelta, NotAllowed, NotFound
from .models import Cardinality, Fact, MemoryDelta, Op, Status, require_aware, shown
from .schema import AttributeSpec, Schema

# A result message names the version a change replaced after this (``_Slot._message``); a batch
# that does not write that version names its copy instead (``writes._readdressed``).
PREVIOUS_VERSION = "previous version "
DEFAULT_MAX_FUTURE = timedelta(days=36_500)
"""How far after now a ``valid_from`` may lie before it is refused as absurd (a scheduled change
further out is more likely a typo for a date value). The setting ``SGAM_MAX_FUTURE_DAYS`` and the
attribute option ``max_future_days`` change it."""

# At one instant: retracts first (a retract at t ends what held before t, so an end and a start at
# the same instant meet, as [a, t) and [t, b) do), then asserts, then corrections.
_RANK = {Op.RETRACT.value: 0, Op.ASSERT.value: 1, Op.CORRECT.value: 2}
# The ops as the ledger stores them (plain strings: the derivation compares them per statement).
_ASSERT, _CORRECT, _RETRACT = Op.ASSERT.value, Op.CORRECT.value, Op.RETRACT.value
_NEVER = datetime.min.replace(tzinfo=timezone.utc)
# A confirm is a statement of a ``disagreement: candidate`` slot (kept, never a change point).
_CONFIRM = Op.CONFIRM.value
# One encoder for every ledger entry: ``json.dumps`` with options builds a new one per call.
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


@dataclass(slots=True)  # not frozen: a frozen dataclass sets each field through object.__setattr__
class Point:
    """One accepted statement about a slot, as kept in the slot's ledger.

    ``value`` is JSON-able (dates as ISO strings) and ``value_key`` canonical (``""``: a retract
    without value). ``until`` is the statement's ``valid_to``; ``replaces_key``/``replaces`` name the
    member a ``correct`` of a set replaces. ``support``, ``episodes`` and ``keys`` are set only on
    points rebuilt from rows written before the ledger existed (a row's whole support).
    """

    at: datetime
    op: str
    value: Any
    value_key: str
    key: str
    episode: str
    asserted_by: str
    confidence: float
    until: datetime | None = None
    replaces_key: str = ""
    replaces: Any = None
    schema_version: int | None = None
    support: int = 1
    episodes: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    confirmed_by: str | None = None
    confirmed_by_episode_id: str | None = None

    def order(self) -> tuple[Any, ...]:
        return (self.at, _RANK[self.op], self.confidence, self.value_key, self.episode,
                self.until is None, self.until or self.at, self.key)

    def to_json(self) -> str:
        """The ledger entry: a compact JSON object (defaults left out)."""
        entry: dict[str, Any] = {"at": self.at.isoformat(), "op": self.op, "v": self.value,
                                 "k": self.value_key, "id": self.key, "ep": self.episode,
                                 "by": self.asserted_by, "c": self.confidence}
        # Most entries have none of these: each is tested alone (a dict of them cost a fifth of an
        # import's ledger encoding).
        if self.until:
            entry["to"] = self.until.isoformat()
        if self.replaces_key:
            entry["rk"] = self.replaces_key
        if self.replaces not in (None, "", []):
            entry["rv"] = self.replaces
        if self.schema_version is not None:
            entry["sv"] = self.schema_version
        if self.support != 1 and self.support is not None:
            entry["n"] = self.support
        if self.episodes:
            entry["eps"] = list(self.episodes)
        if self.keys:
            entry["keys"] = list(self.keys)
        if self.confirmed_by:
            entry["cb"] = self.confirmed_by
        if self.confirmed_by_episode_id:
            entry["cbe"] = self.confirmed_by_episode_id
        return _ENCODE(entry)

    @classmethod
    def from_json(cls, text: str) -> Point:
        return cls.from_entry(json.loads(text))

    @classmethod
    def many_from_json(cls, texts: Sequence[str]) -> list[Point]:
        """A ledger's entries, decoded in one pass (a write reads thousands of them per batch)."""
        return [cls.from_entry(e) for e in json.loads("[" + ",".join(texts) + "]")] if texts else []

    @classmethod
    def from_entry(cls, e: dict[str, Any]) -> Point:
        return cls(
            at=datetime.fromisoformat(e["at"]), op=e["op"], value=e.get("v"), value_key=e["k"],
            key=e["id"], episode=e["ep"], asserted_by=e["by"], confidence=e["c"],
            until=datetime.fromisoformat(e["to"]) if e.get("to") else None,
            replaces_key=e.get("rk", ""), replaces=e.get("rv"), schema_version=e.get("sv"),
            support=e.get("n", 1), episodes=tuple(e.get("eps", ())), keys=tuple(e.get("keys", ())),
            confirmed_by=e.get("cb"), confirmed_by_episode_id=e.get("cbe"),
        )

    @property
    def supporting_keys(self) -> tuple[str, ...]:
        return self.keys or (self.key,)

    @property
    def supporting_episodes(self) -> tuple[str, ...]:
        return self.episodes or (self.episode,)


@dataclass(slots=True)
class Run:
    """A believed version derived from the points: ``value_key`` holds on ``[start, end)``."""

    start: datetime
    end: datetime | None
    value_key: str
    opener: Point
    support: tuple[Point, ...] = ()


@dataclass(slots=True)
class _Entry:
    at: datetime
    value_key: str | None
    opener: Point | None


Rank = Callable[[Point], float]
"""A statement's rank under the attribute's conflict policy (``None``: latest-wins, all equal)."""


def _outranked(point: Point, entry: _Entry | None, rank: Rank | None) -> bool:
    """Whether ``entry`` holds a value set by a statement of higher rank than ``point``'s, which
    ``point`` may therefore not end, change or correct."""
    return rank is not None and entry is not None and entry.value_key is not None \
        and entry.opener is not None and rank(point) < rank(entry.opener)


class _Hold:
    """``disagreement: candidate`` while a timeline is derived (docs/temporal-semantics.md,
    "Conflict policy"): the value keys some confirm names, the statements held, and the statements
    a confirm kept from being held."""

    def __init__(self, confirmed: Collection[str]) -> None:
        self.confirmed = confirmed
        self.held: list[Point] = []
        self.promoted: set[str] = set()

    def holds(self, point: Point, entry: _Entry | None) -> bool:
        """Whether ``point``, an assert or correct, states another value than ``entry`` (the one
        in force) holds, which a statement of another actor set; records it if so."""
        if point.op == _RETRACT or entry is None or entry.value_key is None or entry.opener is None \
                or entry.value_key == point.value_key or entry.opener.asserted_by == point.asserted_by:
            return False
        if point.value_key in self.confirmed:
            self.promoted.add(point.key)
            return False
        self.held.append(point)
        return True


def _sweep(steps: Iterable[tuple[Point, str, str | None]], rank: Rank | None = None,
           hold: _Hold | None = None) -> list[_Entry]:
    """Apply change points (``point, kind, value_key``) in order; see the module docstring."""
    entries: list[_Entry] = []
    for point, kind, vkey in sorted(steps, key=lambda s: s[0].order()):
        last = entries[-1] if entries else None
        if _outranked(point, last, rank) or (hold is not None and hold.holds(point, last)):
            continue
        if kind == "set":
            entries.append(_Entry(point.at, vkey, point))
        elif kind == "clear":
            entries.append(_Entry(point.at, None, point))
        elif kind == "clear_if":
            if last is not None and last.value_key == vkey:
                entries.append(_Entry(point.at, None, point))
        elif last is not None and last.value_key is not None:  # correct
            if last.value_key != vkey:
                last.value_key, last.opener = vkey, point
        elif vkey is not None:
            entries.append(_Entry(point.at, vkey, point))
    return _normalised(entries)


def _normalised(entries: list[_Entry]) -> list[_Entry]:
    """One entry per instant (the last one applied there)."""
    out: list[_Entry] = []
    for entry in entries:
        if out and out[-1].at == entry.at:
            out[-1] = entry
        else:
            out.append(entry)
    return out


def _in_force(entries: Sequence[_Entry], instant: datetime) -> _Entry | None:
    found = None
    for entry in entries:
        if entry.at > instant:
            break
        found = entry
    return found


def _overlay(entries: list[_Entry], point: Point, vkey: str | None, only: str | None,
             rank: Rank | None) -> list[_Entry]:
    """``[point.at, point.until)`` takes ``vkey`` (only where ``only`` holds, when given, and no
    value of higher rank does)."""
    start, end = point.at, point.until
    assert end is not None
    first = _in_force(entries, start)
    segments = [(start, first)] + [(e.at, e) for e in entries if start < e.at < end]
    inside = []
    for at, entry in segments:
        held = entry.value_key if entry is not None else None
        if (only is None or held == only) and not _outranked(point, entry, rank):
            inside.append(_Entry(at, vkey, point))
        else:
            inside.append(_Entry(at, held, entry.opener if entry is not None else None))
    after = [e for e in entries if e.at >= end]
    if not after or after[0].at != end:
        resumed = _in_force(entries, end)
        after.insert(0, _Entry(end, resumed.value_key if resumed else None,
                               resumed.opener if resumed else None))
    return [e for e in entries if e.at < start] + inside + after


def _runs(entries: Sequence[_Entry]) -> list[tuple[datetime, datetime | None, str, Point]]:
    runs: list[tuple[datetime, datetime | None, str, Point]] = []
    for index, entry in enumerate(entries):
        end = entries[index + 1].at if index + 1 < len(entries) else None
        if entry.value_key is None or entry.opener is None:
            continue
        if runs and runs[-1][1] == entry.at and runs[-1][2] == entry.value_key:
            runs[-1] = (runs[-1][0], end, entry.value_key, runs[-1][3])
        else:
            runs.append((entry.at, end, entry.value_key, entry.opener))
    return runs


def _timeline(steps: list[tuple[Point, str, str | None]], intervals: list[Point],
              member: str | None, rank: Rank | None, hold: _Hold | None = None) -> list[_Entry]:
    entries = _sweep(steps, rank, hold)
    for point in sorted(intervals, key=lambda p: (p.at, -p.until.timestamp(), *p.order()[1:])):  # type: ignore[union-attr]
        if hold is not None and hold.holds(point, _in_force(entries, point.at)):
            continue  # held as a whole
        if point.op == _ASSERT:
            entries = _overlay(entries, point, point.value_key, None, rank)
        else:  # a retract: of everything, or of its value only (a set's member: its timeline)
            only = None if member is not None or not point.value_key else point.value_key
            entries = _overlay(entries, point, None, only, rank)
    return entries


_KIND = {_ASSERT: "set", _CORRECT: "correct", _RETRACT: "clear"}


def _single_timeline(points: list[Point], rank: Rank | None, hold: _Hold | None = None) -> list[_Entry]:
    """The entries of a single-valued slot's timeline: the sweep, then the intervals."""
    steps = [(p, _KIND[p.op] if p.op != _RETRACT or not p.value_key else "clear_if",
              p.value_key or None) for p in points if p.until is None]
    return _timeline(steps, [p for p in points if p.until is not None], None, rank, hold)


def settled_runs(points: Iterable[Point], rank: Rank | None = None) -> tuple[list[Run], list[Run]]:
    """``disagreement: candidate``: the believed versions and the pending candidates (one run per
    value, open-ended unless its first statement is an interval) that the statements of a
    single-valued slot, confirms included, derive (docs/temporal-semantics.md, "Conflict policy").
    A believed version opened by a statement a confirm kept from being held names that confirm."""
    confirms: dict[str, Point] = {}
    stated = []
    for p in sorted(points, key=lambda p: p.key):
        if p.op == _CONFIRM:
            confirms.setdefault(p.value_key, p)
        else:
            stated.append(p)
    hold = _Hold(confirms)
    runs = _runs(_single_timeline(stated, rank, hold))
    held = {p.key for p in hold.held}
    support = _Supporters([p for p in stated if p.key not in held])
    believed = []
    for start, end, vkey, opener in runs:
        if opener.key in hold.promoted:
            confirm = confirms[vkey]
            opener = replace(opener, confirmed_by=confirm.asserted_by, confirmed_by_episode_id=confirm.episode)
        believed.append(Run(start, end, vkey, opener, support.of(start, end, vkey)))
    # A retract of v without valid_to, at t, withdraws the statements of v held at or before t.
    withdrawn: dict[str, datetime] = {}
    for p in stated:
        if p.op == _RETRACT and p.until is None and p.value_key:
            withdrawn[p.value_key] = max(p.at, withdrawn.get(p.value_key, p.at))
    pending: dict[str, list[Point]] = {}
    for p in sorted(hold.held, key=Point.order):
        if p.at > withdrawn.get(p.value_key, _NEVER):
            pending.setdefault(p.value_key, []).append(p)
    candidates = [Run(group[0].at, group[0].until, vkey, group[0], tuple(group)) for vkey, group in pending.items()]
    return believed, candidates


def believed_runs(points: Iterable[Point], many: bool, rank: Rank | None = None) -> list[Run]:
    """The believed versions the ``points`` of one slot derive (see the module docstring);
    ``rank``: the conflict policy's, when it ranks statements."""
    # Confirms stay in the ledger of a slot whose attribute held disagreements before.
    points = [p for p in points if p.op != _CONFIRM]
    if not many:
        runs = _runs(_single_timeline(points, rank))
    else:
        runs = []
        for member, entries in _member_timelines(points, rank).items():
            runs.extend(_runs(entries))
        runs.sort(key=lambda r: (r[2], r[0]))
    support = _Supporters(points)
    return [Run(start, end, vkey, opener, support.of(start, end, vkey))
            for start, end, vkey, opener in runs]


def _member_timelines(points: list[Point], rank: Rank | None) -> dict[str, list[_Entry]]:
    """A set's timelines, one per member. A ``correct`` with ``replaces`` cancels the membership
    of ``replaces`` in force at its instant and sets its own member from that membership's change
    point, found on the member's own statements (its asserts, retracts and plain corrects) before
    any correction's point is added, so chains of corrections cannot loop. A correction outranked
    by that membership sets nothing."""
    own: dict[str, list[tuple[Point, str, str | None]]] = {}
    intervals: dict[str, list[Point]] = {}
    for p in points:
        if p.until is not None:
            intervals.setdefault(p.value_key, []).append(p)
        elif p.op == _CORRECT and p.replaces_key:
            own.setdefault(p.replaces_key, []).append((p, "correct", None))
            own.setdefault(p.value_key, [])
        elif p.op == _RETRACT:
            own.setdefault(p.value_key, []).append((p, "clear", None))
        else:
            own.setdefault(p.value_key, []).append((p, "set", p.value_key))
    derived: dict[str, list[tuple[Point, str, str | None]]] = {}
    for member, steps in own.items():
        ordered = sorted(steps, key=lambda s: s[0].order())
        for index, (p, kind, _) in enumerate(ordered):
            if kind != "correct":
                continue
            # on the member's own statements only: the other corrections that replace it are
            # left out of the look-up, as the derived points are
            held = _in_force(_sweep([x for x in ordered[:index] if not x[0].replaces_key], rank), p.at)
            if _outranked(p, held, rank):
                continue
            at = held.at if held is not None and held.value_key is not None else p.at
            derived.setdefault(p.value_key, []).append((replace(p, at=at), "set", p.value_key))
    members = set(own) | set(intervals) | set(derived)
    return {m: _timeline(own.get(m, []) + derived.get(m, []), intervals.get(m, []), m, rank)
            for m in sorted(members)}


class _Supporters:
    """The statements of each value, in valid-time order, to find a run's support by bisection."""

    def __init__(self, points: list[Point]) -> None:
        self.at: dict[str, list[datetime]] = {}
        self.points: dict[str, list[Point]] = {}
        self.intervals: dict[str, list[Point]] = {}
        for p in sorted(points, key=lambda p: p.at):
            if p.op == _RETRACT:
                continue
            if p.until is not None:
                self.intervals.setdefault(p.value_key, []).append(p)
            self.at.setdefault(p.value_key, []).append(p.at)
            self.points.setdefault(p.value_key, []).append(p)

    def of(self, start: datetime, end: datetime | None, vkey: str) -> tuple[Point, ...]:
        """The statements of ``vkey`` that lie in (or, for intervals, overlap) ``[start, end)``."""
        instants = self.at.get(vkey, [])
        low = bisect_left(instants, start)
        high = len(instants) if end is None else bisect_left(instants, end)
        found = self.points.get(vkey, [])[low:high]
        earlier = [p for p in self.intervals.get(vkey, ()) if p.at < start and p.until > start]  # type: ignore[operator]
        return tuple(earlier + found)


def value_at(runs: Sequence[Run], instant: datetime) -> Run | None:
    """The run of a cardinality-one slot holding at ``instant``."""
    for run in runs:
        if run.start <= instant and (run.end is None or instant < run.end):
            return run
    return None


@dataclass(frozen=True)
class WritePlan:
    """What one delta does: rows to expire, rows to create, rows whose support grows, and the
    statements to add to the slot's ledger."""

    tenant_id: str
    subject: str
    attribute: str
    rel_type: str
    kind: str
    outcome: str
    delta_key: str
    episode_id: str
    now: datetime
    expire: tuple[str, ...] = ()
    create: tuple[dict[str, Any], ...] = ()
    support: tuple[str, ...] = ()
    statements: tuple[Point, ...] = ()
    message: str = ""

    @property
    def changes_anything(self) -> bool:
        return bool(self.expire or self.create or self.support or self.statements)


def _but(plan: WritePlan, **changes: Any) -> WritePlan:
    """``dataclasses.replace(plan, **changes)``, the one way a plan is copied here: ``replace`` runs
    the frozen dataclass's ``__init__`` again, which sets every field through ``object.__setattr__``
    (about 6 us a plan, two plans a delta). Only the fields ``replace`` would accept."""
    unknown = changes.keys() - plan.__dict__.keys()
    if unknown:
        raise TypeError(f"WritePlan has no field(s) {sorted(unknown)}")
    new = object.__new__(WritePlan)
    new.__dict__.update(plan.__dict__, **changes)
    return new


def delta_key(delta: MemoryDelta, value_key: str, replaces_key: str = "") -> str:
    """The idempotency key of a delta: replaying the same statement gives the same key.

    A confirmation is keyed without its ``valid_from`` (the API stamps it with the time of the
    call): the same episode confirming the same value is one confirmation.
    """
    return statement_key(delta.tenant_id, delta.subject, delta.attribute, delta.op.value, value_key,
                         delta.valid_from, delta.source_episode_id, delta.valid_to, replaces_key)


def statement_key(tenant: str, subject: str, attribute: str, op: str, value_key: str, valid_from: datetime,
                  episode: str, valid_to: datetime | None = None, replaces_key: str = "") -> str:
    """The idempotency key of a statement from its parts (:func:`delta_key` of the delta that
    states it); a merge re-keys the statements it moves to another subject with it."""
    when = "" if op == Op.CONFIRM.value else valid_from.isoformat()
    parts = [tenant, subject, attribute, op, value_key, when, episode]
    if valid_to is not None:
        parts.append("to=" + valid_to.isoformat())
    if replaces_key:
        parts.append("replaces=" + replaces_key)
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32]


# The generator of memory ids: its own, seeded from the system's entropy, and again in a forked
# child (a child must not repeat its parent's ids). Not the ``random`` module's: a caller (or
# Hypothesis, for every example) may seed that one, and repeated ids would collide in the store.
_IDS = random.Random()
os.register_at_fork(after_in_child=_IDS.seed)


def new_memory_id() -> str:
    """A fresh fact-version id: 80 random bits (``uuid4`` objects cost more than the rest of a plan)
    from :data:`_IDS`, with no system call per id (``os.urandom`` took about 7 us of a delta's
    planning while the server worked beside it: 2.6% of a write's Python). An id names a version;
    it is no secret."""
    return f"m-{_IDS.getrandbits(80):020x}"


def storable_value(value: Any) -> Any:
    """A value as a ledger entry keeps it (JSON: dates as ISO strings)."""
    return value.isoformat() if isinstance(value, (date, datetime)) else value


def points_from_rows(rows: Iterable[Fact], many: bool = False) -> list[Point]:
    """Statements standing for believed confirmed rows written before the ledger existed: each
    row's start (with its whole support), and a retract where it ends and nothing follows (of the
    member, for a set; of whatever holds, for a single value)."""
    rows = sorted((r for r in rows if r.expired_at is None and r.status is Status.CONFIRMED),
                  key=lambda r: (r.value_key, r.valid_from))
    starts = {(r.value_key, r.valid_from) for r in rows}
    points = []
    for r in rows:
        points.append(_row_point(r, Op.ASSERT.value))
        # A retract of the row's own value: harmless where another value starts at the same instant.
        if r.valid_to is not None and (r.value_key, r.valid_to) not in starts:
            points.append(Point(
                at=r.valid_to, op=Op.RETRACT.value, value=storable_value(r.value) if many else None,
                value_key=r.value_key if many else "",
                key="row-end:" + r.memory_id, episode=r.expired_by_episode_id or r.source_episode_id,
                asserted_by=r.asserted_by, confidence=r.confidence, schema_version=r.schema_version,
            ))
    return points


def _row_point(r: Fact, op: str, until: datetime | None = None) -> Point:
    """The statement a stored row stands for, with the row's whole support."""
    return Point(
        at=r.valid_from, op=op, value=storable_value(r.value), value_key=r.value_key,
        key="row:" + r.memory_id, episode=r.source_episode_id, asserted_by=r.asserted_by,
        confidence=r.confidence, until=until, schema_version=r.schema_version, support=r.support_count,
        episodes=r.support_episodes or (r.source_episode_id,), keys=r.delta_keys or ("row:" + r.memory_id,),
        confirmed_by=r.confirmed_by, confirmed_by_episode_id=r.confirmed_by_episode_id,
    )


def reconcile(
    existing: Sequence[Fact],
    delta: MemoryDelta,
    schema: Schema,
    now: datetime,
    *,
    statements: Sequence[Point] | None = None,
    applied: Collection[str] = frozenset(),
    applied_only: bool = False,
    max_future: timedelta = DEFAULT_MAX_FUTURE,
    prepared: tuple[Any, str, str] | None = None,
) -> WritePlan:
    """Plan the effect of ``delta`` on its slot.

    ``existing`` holds the slot's believed rows (retired ones are ignored except for the
    idempotency keys they carry; of a confirmed row only ``memory_id``, ``valid_from``,
    ``valid_to``, ``value_key`` and ``status`` are read). ``statements`` are the slot's ledger;
    ``None`` means the slot has none yet (written before the ledger existed): it is rebuilt from
    the believed rows (:func:`points_from_rows`), which must then be complete, and the plan's
    ``statements`` carry it. ``applied`` holds idempotency keys stored elsewhere, so a replayed
    delta is recognised; ``applied_only`` says it holds those of ``existing`` and ``statements``
    too. ``max_future``: the horizon for ``valid_from`` (the attribute's ``max_future_days``
    wins). ``prepared``: the delta's coerced value, value key and :func:`delta_key`, when the
    caller has them already (``writes.prepare`` does). Raises :class:`InvalidDelta`, :class:`Conflict` or
    :class:`~sgam.graph.errors.SchemaViolation` for a write that must not happen; a ``confirm``
    may also raise :class:`NotAllowed` or :class:`NotFound`.
    """
    now = require_aware(now, "now")
    spec = schema.attribute(delta.attribute)
    value, vkey = prepared[:2] if prepared is not None and delta.value is not None \
        else _checked_value(delta, schema)
    replaces, replaces_key = _checked_replaces(delta, schema, spec, vkey)
    _check_horizon(delta, spec, now, max_future)
    key = prepared[2] if prepared is not None else delta_key(delta, vkey, replaces_key)
    base = WritePlan(
        tenant_id=delta.tenant_id, subject=delta.subject, attribute=delta.attribute,
        rel_type=schema.rel_type(delta.attribute),
        kind="relation" if spec.value_type == "entity" else "attribute",
        outcome="unchanged", delta_key=key, episode_id=delta.source_episode_id, now=now,
    )
    seeded: tuple[Point, ...] = ()
    if statements is None:
        seeded = tuple(points_from_rows(existing, spec.cardinality is Cardinality.MANY))
        if spec.holds_disagreement:
            # a pending candidate stands for a statement of its value, held again if it still disagrees
            seeded += tuple(_row_point(r, r.op.value, r.valid_to) for r in existing
                            if r.expired_at is None and r.status is Status.CANDIDATE)
        statements = seeded
    if key in applied or (not applied_only and (
            any(key in r.delta_keys or r.expired_by_delta_key == key for r in existing)
            or any(key in p.supporting_keys for p in statements))):
        return _but(base, statements=seeded, message="this delta was already applied (replay)")

    many = spec.cardinality is Cardinality.MANY
    believed: list[Fact] = []
    pending: list[Fact] = []
    for r in existing:  # one pass: a hot slot's batch reads its rows once per delta
        if r.expired_at is None:
            if r.status is Status.CONFIRMED:
                believed.append(r)
            elif r.status is Status.CANDIDATE:
                pending.append(r)
    pending.sort(key=lambda r: (r.valid_from, r.value_key))
    candidate = next((r for r in pending if r.value_key == vkey), None) if vkey else None
    slot = _Slot(base, believed, list(statements), seeded, many, schema, spec)
    point = Point(
        at=delta.valid_from, op=delta.op.value, value=storable_value(value), value_key=vkey, key=key,
        episode=delta.source_episode_id, asserted_by=delta.asserted_by or "unknown",
        confidence=delta.confidence, until=delta.valid_to, replaces_key=replaces_key,
        replaces=storable_value(replaces), schema_version=schema.version,
    )
    if spec.holds_disagreement:
        return _settle(slot, pending, delta, point, value)
    if delta.op is Op.CONFIRM:
        return _confirm(slot, pending, delta, vkey)
    if delta.op is Op.RETRACT and candidate is not None:
        return _but(base, outcome="withdrawn", expire=(candidate.memory_id,), statements=seeded,
                       message=f"candidate {candidate.memory_id} (value {shown(candidate.value)}) withdrawn")
    if delta.op is not Op.RETRACT and spec.gated and not slot.holds(vkey, delta.valid_from):
        return _propose(slot, pending, candidate, delta, value, vkey)
    return slot.add(point, {vkey: value})


def _check_horizon(delta: MemoryDelta, spec: AttributeSpec, now: datetime,
                   max_future: timedelta) -> None:
    limit = timedelta(days=spec.max_future_days) if spec.max_future_days is not None else max_future
    try:
        horizon = now + limit
    except OverflowError:
        return
    if delta.valid_from > horizon:
        raise InvalidDelta(
            f"valid_from {delta.valid_from.isoformat()} of {delta.attribute!r} for {delta.subject!r} "
            f"is more than {limit.days} days after now ({now.isoformat()}): a scheduled change that far "
            "out is refused as absurd. valid_from is when the fact becomes true in the world (for a "
            "date the fact is about, such as a deadline, use the value); raise the horizon with "
            "SGAM_MAX_FUTURE_DAYS or the attribute's max_future_days if it is meant"
        )


def _checked_replaces(delta: MemoryDelta, schema: Schema, spec: AttributeSpec,
                      vkey: str) -> tuple[Any, str]:
    many = spec.cardinality is Cardinality.MANY
    if delta.op is Op.CORRECT and many and delta.replaces is None:
        raise InvalidDelta(
            f"op 'correct' on set-valued {delta.attribute!r} needs 'replaces': the wrong member "
            "(value is the right one); or retract the wrong member at its valid_from and assert the "
            "right one"
        )
    if delta.replaces is None:
        return None, ""
    if not many:
        raise InvalidDelta(
            f"'replaces' is for set-valued attributes; {delta.attribute!r} holds one value, and a "
            "'correct' of it replaces the version holding at valid_from"
        )
    replaces, replaces_key = schema.coerce(delta.attribute, delta.replaces)
    if replaces_key == vkey:
        raise InvalidDelta(f"'replaces' names the same member as value ({shown(delta.value)}): "
                           "a correction replaces a wrong member by another one")
    return replaces, replaces_key


class _Slot:
    """One slot while a delta is planned: its believed confirmed rows and its statements.

    The rows are the runs the statements derive (the write path keeps it so), so what held before
    the delta is read from them, and only the timeline after it is derived.
    """

    def __init__(self, base: WritePlan, rows: list[Fact], points: list[Point],
                 seeded: tuple[Point, ...], many: bool, schema: Schema, spec: AttributeSpec) -> None:
        if not spec.holds_disagreement:  # confirms kept while it held disagreements
            points = [p for p in points if p.op != _CONFIRM]
        self.base, self.rows, self.points, self.seeded = base, rows, points, seeded
        self.many, self.schema, self.spec = many, schema, spec
        self.rank: Rank | None = None
        if spec.ranked:
            self.rank = lambda p: spec.rank(p.asserted_by, p.confidence, base.subject)

    def holding(self, vkey: str, instant: datetime) -> Fact | None:
        """The row holding at ``instant``: the slot's, or for a set the member ``vkey``'s."""
        for row in self.rows:
            if (not self.many or row.value_key == vkey) and row.valid_from <= instant \
                    and (row.valid_to is None or instant < row.valid_to):
                return row
        return None

    def holds(self, vkey: str, instant: datetime) -> bool:
        row = self.holding(vkey, instant)
        return row is not None and row.value_key == vkey

    def add(self, point: Point, values: dict[str, Any], *, outcome: str | None = None,
            carried: Fact | None = None, confirmer: str | None = None,
            after: list[Run] | None = None) -> WritePlan:
        """The plan that adds ``point`` (``values``: typed values known by value key); ``after``:
        the runs after it, when the caller derived them."""
        held = self.holding(point.value_key, point.at)
        rows: list[Fact] = self.rows
        fixed: Sequence[Fact] = ()
        if after is None:
            rows, fixed, after = self._after(point, held)
        by_interval = {(r.valid_from, r.valid_to, r.value_key): r for r in rows}
        kept: dict[tuple[Any, ...], str] = {}
        for run in after:
            row = by_interval.get((run.start, run.end, run.value_key))
            if row is not None:
                kept[(run.start, run.end, run.value_key)] = row.memory_id
        expire = tuple(r.memory_id for r in rows if (r.valid_from, r.valid_to, r.value_key) not in kept)
        support = tuple(
            kept[(run.start, run.end, run.value_key)] for run in after
            # by identity: the derivation carries the point itself (equality compares every field)
            if (run.start, run.end, run.value_key) in kept and run.value_key == point.value_key
            and any(p is point for p in run.support)
        )
        create = []
        ids: dict[tuple[Any, ...], str] = dict(kept)
        for run in after:
            if (run.start, run.end, run.value_key) in kept:
                continue
            props = self._props(run, values, carried, confirmer)
            ids[(run.start, run.end, run.value_key)] = props["memory_id"]
            create.append(props)
        if create:
            self._link(create, after, ids, rows, fixed)
        changed = bool(expire or create)
        if outcome is None:
            outcome = self._outcome(point, held, changed, bool(support))
        return _but(self.base, outcome=outcome, expire=expire, create=tuple(create), support=support,
                       statements=(*self.seeded, point), message=self._message(outcome, held))

    def _after(self, point: Point, held: Fact | None) -> tuple[list[Fact], list[Fact], list[Run]]:
        """The runs after adding ``point``, with the rows they stand for: ``(rows, fixed, runs)``,
        where ``runs`` replace ``rows`` and the rows ``fixed`` stay as they are.

        Nothing before the start ``s`` of the run holding at the point's instant (or the instant
        itself, in a gap) can change, so only the statements from ``s`` on are swept, and the rows
        before ``s`` (and, in a set, the other members' rows) stand as they are. That needs a fresh
        start at ``s``: the point may not fall on ``s`` itself, no interval or correction with
        ``replaces`` (whose reach is not local) may be in the slot, and no conflict policy may rank
        the statements (a value's rank outlives its run's start). And where a row ends exactly at
        ``s``, the run from ``s`` must keep its value, or it could merge with that row: an assert or
        a retract after ``s`` only adds a change point after ``s``, but a correct may change the
        value set at ``s`` (the point, or a correct from ``s`` on that an assert before it now takes
        the place of), and in a gap a point at ``s`` sets it. Otherwise the whole slot is derived.
        """
        start = held.valid_from if held is not None else point.at
        local = point.until is None and not point.replaces_key and (held is None or start < point.at) and not any(
            p.until is not None or p.replaces_key for p in self.points) and self.rank is None
        if local:
            vkey = point.value_key
            if self.many:
                points = [p for p in self.points if p.at >= start and p.value_key == vkey]
            else:
                points = [p for p in self.points if p.at >= start]
            rows: list[Fact] = []
            fixed: list[Fact] = []
            abutting = False
            for r in self.rows:
                if self.many and r.value_key != vkey:
                    fixed.append(r)
                    continue
                if r.valid_to == start:
                    abutting = True
                (fixed if r.valid_from < start else rows).append(r)
            if not abutting or not (held is None or point.op == _CORRECT or any(p.op == _CORRECT for p in points)):
                return rows, fixed, believed_runs([*points, point], self.many)
        return self.rows, [], believed_runs([*self.points, point], self.many, self.rank)

    def _message(self, outcome: str, held: Fact | None) -> str:
        if outcome == "kept":
            return "kept as a change point; it changes nothing believed now"
        if outcome == "supported":
            return "the same value already holds; its support grew"
        if held is None:
            return outcome
        # A row known by its outline has no value: the statements have it.
        value = held.value if "value" in vars(held) else next(
            (p.value for p in self.points if p.value_key == held.value_key), None)
        return f"{outcome}; {PREVIOUS_VERSION}{held.memory_id} (value {shown(value)})"

    def _outcome(self, point: Point, held: Fact | None, changed: bool, supported: bool) -> str:
        if not changed:
            return "supported" if supported else "kept"
        if point.op == Op.RETRACT.value:
            return "retracted"
        if point.op == Op.CORRECT.value:
            return "corrected"
        holding = held is not None and (self.many or held.value_key != point.value_key)
        return "changed" if holding and not self.many else "created"

    def _props(self, run: Run, values: dict[str, Any], carried: Fact | None,
               confirmer: str | None) -> dict[str, Any]:
        opener, base = run.opener, self.base
        if run.value_key in values:
            value = values[run.value_key]
        else:
            value = self.schema.coerce(base.attribute, opener.value if opener.value_key == run.value_key
                                       else opener.replaces)[0]
            values[run.value_key] = value
        props = _row_props(base, self.spec, self.schema, run, value)
        confirmed_by = opener.confirmed_by
        if carried is not None and opener.key in carried.delta_keys:
            confirmed_by = confirmer or "recurrence"
            props["confirmed_by_episode_id"] = base.episode_id
        elif opener.confirmed_by_episode_id:
            props["confirmed_by_episode_id"] = opener.confirmed_by_episode_id
        if confirmed_by:
            props["confirmed_by"] = confirmed_by
        return props

    def _link(self, create: list[dict[str, Any]], after: list[Run], ids: dict[tuple[Any, ...], str],
              rows: list[Fact], fixed: Sequence[Fact] = ()) -> None:
        """``revises_memory_id``: the retired row of the same value a new row overlaps;
        ``supersedes_memory_id``: the version before it in valid time (a different value ending
        where it starts), or the row of another value it took the place of. ``after``: the runs
        that replace ``rows``; ``fixed``: the rows that stay as they are (none overlaps a new row)."""
        for props in create:
            start, end, vkey = props["valid_from"], props["valid_to"], props["value_key"]
            revised = next((r for r in rows if r.value_key == vkey and _overlaps(
                r.valid_from, r.valid_to, start, end)), None)
            props["revises_memory_id"] = revised.memory_id if revised is not None else None
            if self.many:
                continue
            before = next((run for run in after if run.end == start and run.value_key != vkey), None)
            if before is not None:
                props["supersedes_memory_id"] = ids[(before.start, before.end, before.value_key)]
                continue
            ended = next((r for r in fixed if r.valid_to == start and r.value_key != vkey), None)
            if ended is not None:
                props["supersedes_memory_id"] = ended.memory_id
                continue
            displaced = next((r for r in rows if r.value_key != vkey and r.valid_from <= start
                              and (r.valid_to is None or start < r.valid_to)), None)
            props["supersedes_memory_id"] = displaced.memory_id if displaced is not None else None


def _overlaps(a_start: datetime, a_end: datetime | None, b_start: datetime, b_end: datetime | None) -> bool:
    return (b_end is None or a_start < b_end) and (a_end is None or b_start < a_end)


def _propose(slot: _Slot, pending: list[Fact], candidate: Fact | None, delta: MemoryDelta,
             value: Any, vkey: str) -> WritePlan:
    """A gated value that does not hold yet: open or support its candidate, promoting at N."""
    spec, base = slot.spec, _but(slot.base, statements=slot.seeded)
    withdrawn: tuple[str, ...] = ()
    if delta.op is Op.CORRECT:
        withdrawn = tuple(r.memory_id for r in pending if r.value_key != vkey)
    if candidate is None:
        props = _candidate_props(base, delta, value, vkey, slot.schema)
        waiting = "a confirmation" if spec.sensitive else f"{spec.requires} distinct episodes"
        return _but(base, outcome="candidate", expire=withdrawn, create=(props,),
                       message=f"stored as a candidate; it needs {waiting} to be confirmed")
    supported = _supported(candidate, base)
    if spec.sensitive or len(supported.support_episodes) < spec.requires:
        have = len(supported.support_episodes)
        waiting = "a confirmation" if spec.sensitive else f"{have} of {spec.requires} distinct episodes"
        return _but(base, outcome="candidate", expire=withdrawn, support=(candidate.memory_id,),
                       message=f"candidate {candidate.memory_id} gained support; {waiting}")
    return _promote(slot, supported, withdrawn, by=None)


def _settle(slot: _Slot, pending: list[Fact], delta: MemoryDelta, point: Point, value: Any) -> WritePlan:
    """``disagreement: candidate``: keep the statement (a confirm too) and derive the slot's believed
    rows and its candidates from all its statements (:func:`settled_runs`)."""
    if point.op == _CONFIRM and not point.value_key:
        if len(pending) != 1:
            _confirm(slot, pending, delta, "")  # refuses it: none or several pending
        # a confirm without a value names the one value pending when it arrives
        value = pending[0].value
        point = replace(point, value=storable_value(value), value_key=pending[0].value_key)
    runs, candidates = settled_runs([*slot.points, point], slot.rank)
    values = {point.value_key: value}
    plan = slot.add(point, values, after=runs)
    derived = {run.value_key: run for run in candidates}
    expire: list[str] = []
    support: list[str] = []
    for row in pending:
        run = derived.get(row.value_key)
        if run is None or (row.valid_from, row.valid_to) != (run.start, run.end) \
                or row.delta_keys[:1] != run.opener.supporting_keys[:1]:
            expire.append(row.memory_id)
            continue
        keys = {k for p in run.support for k in p.supporting_keys}
        if set(row.delta_keys) == keys:
            del derived[row.value_key]
        elif set(row.delta_keys) | {point.key} == keys:
            del derived[row.value_key]
            support.append(row.memory_id)
        else:
            expire.append(row.memory_id)
    create = []
    for run in derived.values():
        if run.value_key not in values:
            values[run.value_key] = slot.schema.coerce(plan.attribute, run.opener.value)[0]
        create.append(_row_props(plan, slot.spec, slot.schema, run, values[run.value_key], Status.CANDIDATE))
    changes_believed = bool(plan.create or plan.expire)
    plan = _but(plan, expire=(*plan.expire, *expire), support=(*plan.support, *support),
                   create=(*plan.create, *create))
    believed = {run.value_key for run in runs}
    promoted = [r for r in pending if r.memory_id in expire and r.value_key in believed]
    dropped = [r for r in pending if r.memory_id in expire and r.value_key not in {c.value_key for c in candidates}]
    if any(point.key == p.key for run in candidates for p in run.support):
        return _but(plan, outcome="candidate", message=(
            "stored as a candidate; it disagrees with the version in force from another source; "
            "it needs a confirmation"))
    if point.op == _CONFIRM:
        if not promoted:
            return _but(plan, outcome="kept", message=(
                f"confirmation kept: no statement of value {shown(value)} is held now; it promotes "
                "any that is"))
        return _but(plan, outcome="promoted", message=(
            f"candidate {promoted[0].memory_id} (value {shown(value)}) promoted, confirmed by "
            f"{point.asserted_by}"))
    if point.op == _RETRACT and dropped and not changes_believed:
        return _but(plan, outcome="withdrawn", message=f"candidate {dropped[0].memory_id} "
                       f"(value {shown(dropped[0].value)}) withdrawn")
    return plan


def _confirm(slot: _Slot, pending: list[Fact], delta: MemoryDelta, vkey: str) -> WritePlan:
    """An explicit confirmation: promote the pending candidate it names (or the only one)."""
    spec = slot.spec
    where = f"{delta.attribute!r} of {delta.subject!r} (tenant {delta.tenant_id!r})"
    if not spec.may_confirm(delta.asserted_by, delta.subject):
        allowed = ", ".join(c.replace("{subject}", delta.subject) for c in spec.confirmers)
        raise NotAllowed(
            f"actor {delta.asserted_by!r} may not confirm sensitive attribute {where}; "
            f"allowed confirmers: {allowed} (the schema's 'confirmers')"
        )
    waiting = [r for r in pending if not vkey or r.value_key == vkey]
    if len(waiting) == 1:
        return _promote(slot, _supported(waiting[0], slot.base), (), by=delta)
    # A private attribute's pending values are shown only to an actor who may read them.
    readers = spec.visible_to(delta.subject)
    if readers is None or delta.asserted_by in readers:
        listed = ", ".join(shown(r.value) for r in pending) or "none"
    else:
        listed = f"{len(pending)} (private: values shown to {', '.join(readers)} only)"
    if waiting:
        raise Conflict(f"several candidate values are pending for {where} ({listed}): "
                       "name the value to confirm")
    held = slot.holding(vkey, delta.valid_from)
    if vkey and held is not None and held.value_key == vkey:
        return _but(slot.base, outcome="supported", support=(held.memory_id,), statements=slot.seeded,
                       message="the value is already confirmed; its support grew")
    asked = f"with value {shown(delta.value)} " if vkey else ""
    raise NotFound(f"no candidate {asked}is pending for {where}; pending candidates: {listed}")


def _promote(slot: _Slot, candidate: Fact, withdrawn: tuple[str, ...],
             by: MemoryDelta | None) -> WritePlan:
    """Make a candidate (with its support so far) the change point it stands for."""
    point = Point(
        at=candidate.valid_from, op=candidate.op.value, value=storable_value(candidate.value),
        value_key=candidate.value_key, key=candidate.delta_keys[0] if candidate.delta_keys else candidate.memory_id,
        episode=candidate.source_episode_id, asserted_by=candidate.asserted_by,
        confidence=candidate.confidence, schema_version=candidate.schema_version,
        support=candidate.support_count, episodes=candidate.support_episodes,
        keys=candidate.delta_keys,
    )
    confirmer = by.asserted_by if by is not None else None
    plan = slot.add(point, {candidate.value_key: candidate.value}, carried=candidate,
                    confirmer=confirmer)
    how = f"confirmed by {confirmer}" if confirmer else (
        f"{len(candidate.support_episodes)} distinct episodes")
    readers = slot.spec.visible_to(candidate.subject)
    named = "" if readers is not None and confirmer not in readers else f" (value {shown(candidate.value)})"
    return _but(plan, outcome="promoted",
                   expire=(*withdrawn, *plan.expire, candidate.memory_id),
                   message=f"candidate {candidate.memory_id}{named} promoted, {how}; {plan.outcome}")


def _checked_value(delta: MemoryDelta, schema: Schema) -> tuple[Any, str]:
    spec = schema.attribute(delta.attribute)
    if delta.op in (Op.RETRACT, Op.CONFIRM) and delta.value is None:
        if spec.cardinality is Cardinality.MANY:
            raise InvalidDelta(
                f"{delta.op.value} on set-valued {delta.attribute!r} needs the member as value"
            )
        return None, ""
    return schema.coerce(delta.attribute, delta.value)


def _row_props(base: WritePlan, spec: AttributeSpec, schema: Schema, run: Run, value: Any,
               status: Status = Status.CONFIRMED) -> dict[str, Any]:
    """A new row for ``run``: its provenance from the statement that opened it, its support from
    the statements that support it."""
    opener = run.opener
    episodes: list[str] = []
    keys: list[str] = []
    count = 0
    for p in sorted(run.support, key=Point.order):
        episodes += [e for e in p.supporting_episodes if e not in episodes]
        keys += [k for k in p.supporting_keys if k not in keys]
        count += p.support
    return {
        "memory_id": new_memory_id(),
        "tenant_id": base.tenant_id,
        "subject": base.subject,
        "attribute": base.attribute,
        "value": value,
        "value_key": run.value_key,
        "value_type": spec.value_type,
        "kind": base.kind,
        "memory_type": spec.memory_type,
        "schema_version": opener.schema_version or schema.version,
        "valid_from": run.start,
        "valid_to": run.end,
        "recorded_at": base.now,
        "expired_at": None,
        "supersedes_memory_id": None,
        "revises_memory_id": None,
        "source_episode_id": opener.episode,
        "asserted_by": opener.asserted_by,
        "confidence": opener.confidence,
        "retention_policy": spec.retention,
        "visible_to": spec.visible_to(base.subject),
        "status": status.value,
        "op": opener.op,
        "support_count": max(count, 1),
        "support_episodes": tuple(episodes),
        "delta_keys": tuple(keys),
        "last_confirmed_at": base.now,
        "expired_by_episode_id": None,
        "expired_by_delta_key": None,
    }


def _candidate_props(base: WritePlan, delta: MemoryDelta, value: Any, vkey: str,
                     schema: Schema) -> dict[str, Any]:
    """A new pending candidate, stated by ``delta`` (open-ended, from its ``valid_from``)."""
    stated = Point(at=delta.valid_from, op=delta.op.value, value=storable_value(value), value_key=vkey,
                   key=base.delta_key, episode=delta.source_episode_id,
                   asserted_by=delta.asserted_by or "unknown", confidence=delta.confidence,
                   schema_version=schema.version)
    return _row_props(base, schema.attribute(delta.attribute), schema,
                      Run(delta.valid_from, None, vkey, stated, (stated,)), value, Status.CANDIDATE)


def apply_plan(rows: Sequence[Fact], plan: WritePlan) -> list[Fact]:
    """The rows of a slot after ``plan``: what the store will hold (pure; used by batches and tests)."""
    expire = set(plan.expire)
    support = set(plan.support)
    if not expire and not support:
        return [*rows, *(Fact.model_validate(props) for props in plan.create)]
    result: list[Fact] = []
    for row in rows:
        if row.memory_id in support:
            row = _supported(row, plan)
        if row.memory_id in expire:
            row = row.model_copy(update={
                "expired_at": plan.now,
                "expired_by_episode_id": plan.episode_id,
                "expired_by_delta_key": plan.delta_key,
            })
        result.append(row)
    result.extend(Fact.model_validate(props) for props in plan.create)
    return result


def _supported(row: Fact, plan: WritePlan) -> Fact:
    episodes = row.support_episodes
    if plan.episode_id not in episodes:
        episodes = (*episodes, plan.episode_id)
    return row.model_copy(update={
        "support_count": row.support_count + 1,
        "support_episodes": episodes,
        "delta_keys": (*row.delta_keys, plan.delta_key),
        "last_confirmed_at": plan.now,
    })


def rederive(existing: Sequence[Fact], points: Sequence[Point], schema: Schema, base: WritePlan) -> WritePlan:
    """The plan that makes a slot's stored rows the ones its statements ``points`` derive, whatever
    they were (a merge or a split changes a slot's set of statements as a whole).

    A stored row stays when a derived row has its interval, value, status and exactly its support;
    every other row not yet retired is retired and the derived rows it lacks are created (recorded
    at ``base.now``), so ``known_at`` before the change still answers as before. The pending
    candidates of a gated attribute (``requires``, ``sensitive``) are not statements: they are
    left to the caller."""
    spec = schema.attribute(base.attribute)
    many = spec.cardinality is Cardinality.MANY
    rows = [r for r in existing if r.expired_at is None and (r.status is Status.CONFIRMED or not spec.gated)]
    slot = _Slot(base, [r for r in rows if r.status is Status.CONFIRMED], list(points), (), many, schema, spec)
    if spec.holds_disagreement:
        runs, candidates = settled_runs(slot.points, slot.rank)
    else:
        runs, candidates = believed_runs(slot.points, many, slot.rank), []
    wanted = [(run, Status.CONFIRMED) for run in runs] + [(run, Status.CANDIDATE) for run in candidates]
    stored = {(r.valid_from, r.valid_to, r.value_key, r.status, frozenset(r.delta_keys)): r for r in rows}
    values: dict[str, Any] = {}
    kept: dict[tuple[Any, ...], str] = {}
    create = []
    for run, status in wanted:
        keys = frozenset(k for p in run.support for k in p.supporting_keys)
        row = stored.pop((run.start, run.end, run.value_key, status, keys), None)
        if row is not None:
            kept[(run.start, run.end, run.value_key)] = row.memory_id
            continue
        props = slot._props(run, values, None, None)
        if status is Status.CANDIDATE:
            props = _row_props(base, spec, schema, run, props["value"], Status.CANDIDATE)
        create.append(props)
    ids = dict(kept)
    ids.update(((p["valid_from"], p["valid_to"], p["value_key"]), p["memory_id"]) for p in create)
    slot._link([p for p in create if p["status"] == Status.CONFIRMED.value], runs, ids, slot.rows)
    return _but(base, outcome="rederived", expire=tuple(r.memory_id for r in stored.values()),
                   create=tuple(create), statements=tuple(points))


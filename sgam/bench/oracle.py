"""The temporal oracle: SGAM's change-point model written again, from docs/temporal-semantics.md only.

Tests and benchmarks compare the store's answers with this module; it shares no code with the
write path (``graph/reconcile.py``, ``graph/writes.py``) and knows nothing about rows. It works
from the set of accepted statements of one slot (one subject and attribute):

* :class:`Statement`: one accepted delta, identified by its idempotency key (op, canonical value,
  ``valid_from``, ``valid_to``, episode); the same statement twice is one statement.
* :func:`believed`: the believed timeline of a set of statements: the change-point sweep with the
  same-instant rule, then the intervals (``valid_to``) in their documented order; per member for a
  set-valued attribute, with ``correct ... replaces``. It gives :class:`Timeline` (cardinality one)
  or :class:`SetTimeline` (many): ``runs()`` are the maximal runs ``(start, end | None, value)``,
  ``value_at(x)`` the value at a valid instant.
* :class:`Slot`: statements in arrival order, each stamped with the transaction time it became
  believed, so ``timeline(known_at=K)`` is the timeline believed from K on. It also models the
  gated attributes (``requires`` > 1, ``sensitive``): a value not in force is a pending candidate,
  a change point only once promoted, at the ``valid_from`` of the statement that opened it. That
  part depends on arrival order, as the specification says.

Values are compared as given: pass the schema's coerced values (``Schema.coerce(...)[0]``) or
canonical keys, one kind per slot. Ties between change points at one instant are broken by op,
confidence, canonical value (``value_key``) and idempotency key, which look only at the statements.

Where the specification leaves a choice open, the choice made here is written at the place it is
made: a derived point of a ``correct ... replaces`` ranks as a ``correct``; the instant it cancels is
looked up on the sweep of the replaced member's own asserts, retracts and replaces-free corrects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from sgam.graph.errors import Conflict, InvalidDelta, NotAllowed, NotFound
from sgam.graph.schema import value_key

ASSERT, CORRECT, RETRACT, CONFIRM = "assert", "correct", "retract", "confirm"
OP_RANK = {RETRACT: 0, ASSERT: 1, CORRECT: 2}
"""Same-instant order of change points: retracts, then asserts, then corrects (the last applied wins)."""

MEMBER = True
"""The value of a member's own timeline while the member belongs to the set."""

_UNIX = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)

# What a change point does in the sweep.
_SET, _CLEAR, _CLEAR_IF, _CORRECT = "set", "clear", "clear-if", "correct"


Canonical = Callable[[Any], str]
"""A value's canonical text (``value_key`` of the coerced value), for the same-instant rule."""


def _canonical(value: Any) -> str:
    return "" if value is None else value_key(value)


@dataclass(frozen=True)
class Statement:
    """One accepted delta about a slot.

    ``value`` is the coerced value (a member, for a set; ``None`` for a retract without value).
    ``replaces`` is the wrong member a ``correct`` on a set-valued attribute cancels. ``confidence``
    and ``asserted_by`` are not part of the identity: the first arrival of a statement decides them.
    """

    op: str
    value: Any
    valid_from: datetime
    valid_to: datetime | None = None
    episode: str = "e"
    confidence: float = 1.0
    replaces: Any = None
    asserted_by: str | None = None

    def __post_init__(self) -> None:
        if self.op not in (*OP_RANK, CONFIRM):
            raise InvalidDelta(f"oracle: op {self.op!r} is not one of assert, correct, retract, confirm")
        if self.valid_to is not None:
            if self.op == CORRECT:
                raise InvalidDelta("oracle: a correct takes no valid_to; correct the change point in "
                                   "force at valid_from, or assert / retract on [valid_from, valid_to)")
            if self.valid_to <= self.valid_from:
                raise InvalidDelta(f"oracle: valid_to {self.valid_to.isoformat()} is not after "
                                   f"valid_from {self.valid_from.isoformat()}")
        if self.replaces is not None and (self.op != CORRECT or self.replaces == self.value):
            raise InvalidDelta("oracle: replaces names the wrong member of a correct, and differs from "
                               "its value")
        if self.op in (ASSERT, CORRECT) and self.value is None:
            raise InvalidDelta(f"oracle: an {self.op} needs a value")

    @classmethod
    def from_delta(cls, delta: Any, value: Any = None, replaces: Any = None) -> Statement:
        """The statement of a ``MemoryDelta``; ``value`` / ``replaces`` override the delta's own
        (pass the coerced ones)."""
        return cls(
            op=delta.op.value, value=delta.value if value is None else value,
            valid_from=delta.valid_from, valid_to=delta.valid_to, episode=delta.source_episode_id,
            confidence=delta.confidence,
            replaces=delta.replaces if replaces is None else replaces,
            asserted_by=delta.asserted_by,
        )

    @property
    def key(self) -> tuple[str, str, datetime | None, datetime | None, str]:
        """The idempotency key within the slot (a confirm has no valid time of its own)."""
        if self.op == CONFIRM:
            return (CONFIRM, _canonical(self.value), None, None, self.episode)
        return (self.op, _canonical(self.value), self.valid_from, self.valid_to, self.episode)

    def tie_order(self, canonical: Canonical = value_key) -> tuple[int, float, _Tie]:
        """The same-instant rule: op, confidence (lowest first), canonical value, idempotency key."""
        return (OP_RANK[self.op], self.confidence, _Tie(self, canonical))


class _Tie:
    """The last criteria of the same-instant rule (canonical value, then idempotency key), worked
    out only when op and confidence tie, so that a costly ``canonical`` is rarely called."""

    __slots__ = ("statement", "canonical")

    def __init__(self, statement: Statement, canonical: Canonical) -> None:
        self.statement, self.canonical = statement, canonical

    def _order(self) -> tuple[str, str]:
        value = self.statement.value
        return ("" if value is None else self.canonical(value), repr(self.statement.key))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Tie) and self._order() == other._order()

    def __lt__(self, other: _Tie) -> bool:
        return self._order() < other._order()


@dataclass(frozen=True)
class Timeline:
    """A value as a function of valid time: sorted change points ``(instant, value)``, normalised
    (nothing holds before the first one, no point repeats the value before it, ``None`` = nothing)."""

    points: tuple[tuple[datetime, Any], ...] = ()

    @classmethod
    def of(cls, function: dict[datetime, Any]) -> Timeline:
        points, previous = [], None
        for instant in sorted(function):
            if function[instant] != previous:
                points.append((instant, function[instant]))
                previous = function[instant]
        return cls(tuple(points))

    def value_at(self, instant: datetime) -> Any:
        held = None
        for start, value in self.points:
            if start > instant:
                break
            held = value
        return held

    def runs(self) -> list[tuple[datetime, datetime | None, Any]]:
        """The maximal runs ``(start, end | None, value)`` where something holds."""
        out = []
        for i, (start, value) in enumerate(self.points):
            if value is not None:
                end = self.points[i + 1][0] if i + 1 < len(self.points) else None
                out.append((start, end, value))
        return out

    def overwrite(self, start: datetime, end: datetime, change: Callable[[Any], Any]) -> Timeline:
        """``change`` applied to the values on [start, end); the rest untouched."""
        function = {k: v for k, v in self.points if not start <= k < end}
        function.update({k: change(v) for k, v in self.points if start <= k < end})
        function.setdefault(start, change(self.value_at(start)))
        function.setdefault(end, self.value_at(end))
        return Timeline.of(function)


@dataclass(frozen=True)
class SetTimeline:
    """A set-valued attribute: one :class:`Timeline` per member (values ``MEMBER`` / ``None``)."""

    members: dict[Any, Timeline] = field(default_factory=dict)

    def value_at(self, instant: datetime) -> frozenset:
        return frozenset(m for m, line in self.members.items() if line.value_at(instant) is not None)

    def runs(self) -> list[tuple[datetime, datetime | None, Any]]:
        """Every member's maximal runs ``(start, end | None, member)``, by start then member."""
        out = [(start, end, member) for member, line in self.members.items()
               for start, end, _ in line.runs()]
        return sorted(out, key=lambda run: (run[0], _canonical(run[2])))


@dataclass(frozen=True)
class _Point:
    """A change point of one timeline, with the statement that orders it."""

    instant: datetime
    action: str
    value: Any
    statement: Statement

    def order(self, canonical: Canonical) -> tuple:
        return (self.instant, *self.statement.tie_order(canonical))


def _sweep(points: Iterable[_Point], canonical: Canonical) -> Timeline:
    function: dict[datetime, Any] = {}
    for instant, value in _effective(points, canonical):  # at one instant the last appended entry holds
        function[instant] = value
    return Timeline.of(function)


def _effective(points: Iterable[_Point], canonical: Canonical) -> list[list[Any]]:
    """The list E of the specification: effective change points [instant, value], in order."""
    effective: list[list[Any]] = []          # [instant, value]; value None = nothing
    for point in sorted(points, key=lambda p: p.order(canonical)):
        last = effective[-1][1] if effective else None
        if point.action == _SET:
            effective.append([point.instant, point.value])
        elif point.action == _CLEAR:
            effective.append([point.instant, None])
        elif point.action == _CLEAR_IF:
            if last is not None and last == point.value:
                effective.append([point.instant, None])
        elif last is not None:               # correct, something in force: it was never true
            effective[-1][1] = point.value
        else:
            effective.append([point.instant, point.value])
    return effective


def _interval_order(statement: Statement, canonical: Canonical) -> tuple:
    assert statement.valid_to is not None
    latest_first = -((statement.valid_to - _UNIX) // _MICROSECOND)
    return (statement.valid_from, latest_first, *statement.tie_order(canonical))


def _apply_intervals(line: Timeline, intervals: Iterable[Statement], value: Callable[[Statement], Any],
                     retract_named: bool, canonical: Canonical) -> Timeline:
    for s in sorted(intervals, key=lambda s: _interval_order(s, canonical)):
        assert s.valid_to is not None
        if s.op == ASSERT:
            held = value(s)
            line = line.overwrite(s.valid_from, s.valid_to, lambda _old, held=held: held)
        elif s.value is None or not retract_named:
            line = line.overwrite(s.valid_from, s.valid_to, lambda _old: None)
        else:
            line = line.overwrite(s.valid_from, s.valid_to,
                                  lambda old, gone=s.value: None if old == gone else old)
    return line


def _one(statements: list[Statement], canonical: Canonical) -> Timeline:
    points = []
    for s in statements:
        if s.valid_to is not None:
            continue
        if s.replaces is not None:
            raise InvalidDelta("oracle: replaces applies to a set-valued attribute only")
        action = {ASSERT: _SET, CORRECT: _CORRECT}.get(s.op) or (_CLEAR if s.value is None else _CLEAR_IF)
        points.append(_Point(s.valid_from, action, s.value, s))
    return _apply_intervals(_sweep(points, canonical), [s for s in statements if s.valid_to is not None],
                            lambda s: s.value, True, canonical)


def _many(statements: list[Statement], canonical: Canonical) -> SetTimeline:
    direct: dict[Any, list[_Point]] = {}
    corrections = []
    for s in statements:
        if s.value is None:
            raise InvalidDelta("oracle: a retract of a set-valued attribute names its member")
        if s.valid_to is not None:
            continue
        if s.replaces is not None:
            corrections.append(s)
            continue
        action = {ASSERT: _SET, CORRECT: _CORRECT, RETRACT: _CLEAR}[s.op]
        direct.setdefault(s.value, []).append(_Point(s.valid_from, action, MEMBER, s))
    derived: dict[Any, list[_Point]] = {}
    for s in corrections:
        start = _cancelled_start(direct.get(s.replaces, []), s, canonical)
        derived.setdefault(s.replaces, []).append(_Point(s.valid_from, _CORRECT, None, s))
        # The right member's point ranks as the correct it comes from, at the cancelled instant.
        derived.setdefault(s.value, []).append(_Point(start, _SET, MEMBER, s))
    members = {}
    for member in {*direct, *derived, *(s.value for s in statements if s.valid_to is not None)}:
        line = _sweep(direct.get(member, []) + derived.get(member, []), canonical)
        intervals = [s for s in statements if s.valid_to is not None and s.value == member]
        members[member] = _apply_intervals(line, intervals, lambda _s: MEMBER, False, canonical)
    return SetTimeline({m: line for m, line in members.items() if line.points})


def _cancelled_start(points: list[_Point], correction: Statement, canonical: Canonical) -> datetime:
    """The instant of the change point in force where ``correction`` falls on the replaced
    member's own sweep (an entry of E, not the start of its run: a re-assert is a change point of
    its own), or the correction's ``valid_from`` when no membership is in force."""
    position = (correction.valid_from, *correction.tie_order(canonical))
    effective = _effective((p for p in points if p.order(canonical) < position), canonical)
    if effective and effective[-1][1] is not None:
        return effective[-1][0]
    return correction.valid_from


def believed(statements: Iterable[Statement], many: bool = False,
             canonical: Canonical = value_key) -> Timeline | SetTimeline:
    """The believed timeline of a set of accepted statements (arrival order plays no part;
    duplicates by idempotency key count once, the first one given wins). ``canonical`` gives the
    canonical text of a value for the same-instant rule, when values are codes standing for them."""
    unique: dict[tuple, Statement] = {}
    for s in statements:
        if s.op == CONFIRM:
            raise InvalidDelta("oracle: a confirm promotes a candidate; give the promoted statement")
        unique.setdefault(s.key, s)
    return (_many if many else _one)(list(unique.values()), canonical)


@dataclass
class _Pending:
    opener: Statement
    episodes: set[str]


@dataclass
class Slot:
    """One slot's statements in arrival order, with transaction times and candidates.

    ``apply(statement, at)`` records a statement that arrived (was written) at transaction time
    ``at``; a refused one (a confirm that may not or cannot happen) raises as SGAM does:
    :class:`NotAllowed`, :class:`Conflict` (several candidates, none named), :class:`NotFound`.
    """

    many: bool = False
    requires: int = 1
    sensitive: bool = False
    canonical: Canonical = value_key
    _believed: dict[tuple, tuple[datetime, Statement]] = field(default_factory=dict)
    _seen: set[tuple] = field(default_factory=set)
    _candidates: dict[Any, _Pending] = field(default_factory=dict)
    _now: Timeline | SetTimeline | None = None

    @property
    def gated(self) -> bool:
        return self.sensitive or self.requires > 1

    def apply(self, statement: Statement, at: datetime, allowed: bool = True) -> None:
        """``allowed``: whether the statement's actor may confirm a sensitive value."""
        key = statement.key
        if key in self._seen:
            return
        if statement.op == CONFIRM:
            self._confirm(statement, at, allowed)
        elif statement.op == RETRACT and statement.value in self._candidates:
            del self._candidates[statement.value]
        elif statement.op != RETRACT and self.gated and not self._holds(statement):
            self._candidate(statement, at)
        else:
            self._believe(statement, at)
        self._seen.add(key)

    def timeline(self, known_at: datetime | None = None) -> Timeline | SetTimeline:
        """The timeline believed now, or from transaction time ``known_at`` on."""
        if known_at is None:
            if self._now is None:
                self._now = believed((s for _, s in self._believed.values()), self.many, self.canonical)
            return self._now
        return believed((s for at, s in self._believed.values() if at <= known_at), self.many,
                        self.canonical)

    def value_at(self, instant: datetime, known_at: datetime | None = None) -> Any:
        """The value (a frozenset of members, for a set) at valid time ``instant``."""
        return self.timeline(known_at).value_at(instant)

    def runs(self, known_at: datetime | None = None) -> list[tuple[datetime, datetime | None, Any]]:
        return self.timeline(known_at).runs()

    def pending(self) -> dict[Any, tuple[datetime, int]]:
        """Pending candidates: value -> (valid_from of the opener, distinct supporting episodes)."""
        return {v: (c.opener.valid_from, len(c.episodes)) for v, c in self._candidates.items()}

    def _believe(self, statement: Statement, at: datetime) -> None:
        self._believed.setdefault(statement.key, (at, statement))
        self._now = None

    def _holds(self, statement: Statement) -> bool:
        held = self.value_at(statement.valid_from)
        return statement.value in held if self.many else held == statement.value

    def _candidate(self, statement: Statement, at: datetime) -> None:
        if statement.op == CORRECT:
            if self.many:
                raise InvalidDelta("oracle: the specification does not define a correct on a gated "
                                   "set-valued attribute")
            self._candidates = {v: c for v, c in self._candidates.items() if v == statement.value}
        pending = self._candidates.get(statement.value)
        if pending is None:
            self._candidates[statement.value] = _Pending(statement, {statement.episode})
            return
        pending.episodes.add(statement.episode)
        if not self.sensitive and len(pending.episodes) >= self.requires:
            self._promote(statement.value, at)

    def _confirm(self, confirm: Statement, at: datetime, allowed: bool) -> None:
        value = confirm.value
        if self.sensitive and not allowed:
            raise NotAllowed("oracle: this actor may not confirm")
        named = [v for v in self._candidates if value is None or v == value]
        if len(named) > 1:
            raise Conflict("oracle: several candidates pending, none named")
        if named:
            self._promote(named[0], at)
        elif value is None or not self._holds(confirm):
            raise NotFound("oracle: no such candidate")

    def _promote(self, value: Any, at: datetime) -> None:
        self._believe(self._candidates.pop(value).opener, at)

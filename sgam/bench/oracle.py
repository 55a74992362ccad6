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
* ``disagreement: candidate`` (``believed(..., hold=True)``, ``Slot(hold=True)``): which statements
  are held is decided in the sweep, from the set of statements, confirms included (:class:`Held`).

Values are compared as given: pass the schema's coerced values (``Schema.coerce(...)[0]``) or
canonical keys, one kind per slot. Ties between change points at one instant are broken by op,
confidence, canonical value (``value_key``), source episode and idempotency key, which look only at
the statements.

Where the specification leaves a choice open, the choice made here is written at the place it is
made: a derived point of a ``correct ... replaces`` ranks as a ``correct``; the instant it cancels is
looked up on the sweep of the replaced member's own asserts, retracts and replaces-free corrects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
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
        """The same-instant rule: op, confidence (lowest first), canonical value, source episode,
        end of validity (earlier first, open last), idempotency key."""
        return (OP_RANK[self.op], self.confidence, _Tie(self, canonical))


class _Tie:
    """The last criteria of the same-instant rule (canonical value, source episode, end of validity,
    idempotency key), worked out only when op and confidence tie, so that a costly ``canonical`` is
    rarely called."""

    __slots__ = ("statement", "canonical")

    def __init__(self, statement: Statement, canonical: Canonical) -> None:
        self.statement, self.canonical = statement, canonical

    def _order(self) -> tuple[str, str, bool, datetime, str]:
        statement = self.statement
        value = "" if statement.value is None else self.canonical(statement.value)
        end = statement.valid_to
        return (value, statement.episode, end is None, end or statement.valid_from, repr(statement.key))

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


Ranker = Callable[[Statement], float]
"""A statement's rank under the attribute's conflict policy (higher wins; ``None``: latest-wins)."""

Held = tuple[Any, float | None, Statement | None]
"""What holds from an instant on: the value (``None`` = nothing), the rank of the statement that
set it (``None`` where nothing holds) and that statement."""

_NOTHING: Held = (None, None, None)


def _outranked(statement: Statement, held: Held, rank: Ranker | None) -> bool:
    """The policy's rule: no statement ends, changes or corrects a value set by a higher one."""
    return rank is not None and held[0] is not None and rank(statement) < held[1]  # type: ignore[operator]


def _held_at(function: dict[datetime, Held], instant: datetime) -> Held:
    before = [k for k in function if k <= instant]
    return function[max(before)] if before else _NOTHING


def _sweep(points: Iterable[_Point], canonical: Canonical, rank: Ranker | None,
           hold: _Hold | None = None) -> dict[datetime, Held]:
    function: dict[datetime, Held] = {}
    for entry in _effective(points, canonical, rank, hold):  # at one instant the last appended entry holds
        function[entry[0]] = (entry[1], entry[2], entry[3])
    return function


@dataclass
class _Hold:
    """``disagreement: candidate`` while a timeline is derived: the values some confirm names, and
    the statements held so far."""

    confirmed: set[Any]
    held: list[Statement] = field(default_factory=list)

    def holds(self, statement: Statement, in_force: Held) -> bool:
        """The specification's test: an assert or correct of another value than the one in force,
        set by a statement of another actor, and no confirm of its value in the set."""
        value, _, source = in_force
        if statement.op == RETRACT or value is None or value == statement.value or source is None:
            return False
        if source.asserted_by == statement.asserted_by or statement.value in self.confirmed:
            return False
        self.held.append(statement)
        return True


def _effective(points: Iterable[_Point], canonical: Canonical, rank: Ranker | None,
               hold: _Hold | None = None) -> list[list[Any]]:
    """The list E of the specification: effective change points [instant, value, rank, statement],
    in order (value None = nothing)."""
    effective: list[list[Any]] = []
    for point in sorted(points, key=lambda p: p.order(canonical)):
        last = effective[-1] if effective else [None, None, None, None]
        if _outranked(point.statement, (last[1], last[2], last[3]), rank):
            continue
        if hold is not None and hold.holds(point.statement, (last[1], last[2], last[3])):
            continue
        mine = rank(point.statement) if rank is not None else None
        if point.action == _SET:
            effective.append([point.instant, point.value, mine, point.statement])
        elif point.action == _CLEAR:
            effective.append([point.instant, None, None, point.statement])
        elif point.action == _CLEAR_IF:
            if last[1] is not None and last[1] == point.value:
                effective.append([point.instant, None, None, point.statement])
        elif last[1] is not None:            # correct, something in force: it was never true
            if last[1] != point.value:       # a correct of another value rewrites the entry
                last[1:] = [point.value, mine if point.value is not None else None, point.statement]
        else:
            effective.append([point.instant, point.value, mine, point.statement])
    return effective


def _interval_order(statement: Statement, canonical: Canonical) -> tuple:
    assert statement.valid_to is not None
    latest_first = -((statement.valid_to - _UNIX) // _MICROSECOND)
    return (statement.valid_from, latest_first, *statement.tie_order(canonical))


def _apply_intervals(function: dict[datetime, Held], intervals: Iterable[Statement],
                     value: Callable[[Statement], Any], retract_named: bool, canonical: Canonical,
                     rank: Ranker | None, hold: _Hold | None = None) -> dict[datetime, Held]:
    """Each interval overwrites [valid_from, valid_to), except where a value of higher rank holds;
    one held (``hold``) as a whole changes nothing."""
    for s in sorted(intervals, key=lambda s: _interval_order(s, canonical)):
        assert s.valid_to is not None
        if hold is not None and hold.holds(s, _held_at(function, s.valid_from)):
            continue
        mine = rank(s) if rank is not None else None
        inside = sorted({s.valid_from, *(k for k in function if s.valid_from < k < s.valid_to)})
        changed = {k: v for k, v in function.items() if not s.valid_from <= k < s.valid_to}
        for instant in inside:
            held = _held_at(function, instant)
            if _outranked(s, held, rank):
                changed[instant] = held
            elif s.op == ASSERT:
                changed[instant] = (value(s), mine, s)
            elif s.value is None or not retract_named or held[0] == s.value:
                changed[instant] = (None, None, s)
            else:                            # a retract of a value that does not hold here
                changed[instant] = held
        changed.setdefault(s.valid_to, _held_at(function, s.valid_to))
        function = changed
    return function


def _values(function: dict[datetime, Held]) -> Timeline:
    return Timeline.of({instant: held[0] for instant, held in function.items()})


def _one_function(statements: list[Statement], canonical: Canonical,
                  rank: Ranker | None, hold: _Hold | None = None) -> dict[datetime, Held]:
    points = []
    for s in statements:
        if s.valid_to is not None:
            continue
        if s.replaces is not None:
            raise InvalidDelta("oracle: replaces applies to a set-valued attribute only")
        action = {ASSERT: _SET, CORRECT: _CORRECT}.get(s.op) or (_CLEAR if s.value is None else _CLEAR_IF)
        points.append(_Point(s.valid_from, action, s.value, s))
    return _apply_intervals(_sweep(points, canonical, rank, hold),
                            [s for s in statements if s.valid_to is not None],
                            lambda s: s.value, True, canonical, rank, hold)


def _one(statements: list[Statement], canonical: Canonical, rank: Ranker | None) -> Timeline:
    return _values(_one_function(statements, canonical, rank))


def _many(statements: list[Statement], canonical: Canonical, rank: Ranker | None) -> SetTimeline:
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
        derived.setdefault(s.replaces, []).append(_Point(s.valid_from, _CORRECT, None, s))
        start = _cancelled_start(direct.get(s.replaces, []), s, canonical, rank)
        if start is not None:
            # The right member's point ranks as the correct it comes from, at the cancelled instant.
            derived.setdefault(s.value, []).append(_Point(start, _SET, MEMBER, s))
    members = {}
    for member in {*direct, *derived, *(s.value for s in statements if s.valid_to is not None)}:
        line = _sweep(direct.get(member, []) + derived.get(member, []), canonical, rank)
        intervals = [s for s in statements if s.valid_to is not None and s.value == member]
        members[member] = _values(_apply_intervals(line, intervals, lambda _s: MEMBER, False, canonical, rank))
    return SetTimeline({m: line for m, line in members.items() if line.points})


def _cancelled_start(points: list[_Point], correction: Statement, canonical: Canonical,
                     rank: Ranker | None) -> datetime | None:
    """The instant of the change point in force where ``correction`` falls on the replaced
    member's own sweep (an entry of E, not the start of its run: a re-assert is a change point of
    its own), or the correction's ``valid_from`` when no membership is in force; ``None`` when
    that membership outranks the correction (it then sets nothing)."""
    position = (correction.valid_from, *correction.tie_order(canonical))
    effective = _effective((p for p in points if p.order(canonical) < position), canonical, rank)
    if effective and effective[-1][1] is not None:
        last = effective[-1]
        return None if _outranked(correction, (last[1], last[2], last[3]), rank) else last[0]
    return correction.valid_from


def policy_rank(conflict: str = "latest", sources: tuple[str, ...] = (),
                subject: str = "") -> Ranker | None:
    """The rank a conflict policy gives a statement: ``latest`` none (all equal), ``confidence`` its
    confidence, ``source_priority`` minus the position of the first source pattern its actor
    matches (an actor id, ``{subject}`` for the subject, a prefix ending in ``*``; none: below all)."""
    if conflict == "latest":
        return None
    if conflict == "confidence":
        return lambda s: s.confidence
    if conflict != "source_priority":
        raise InvalidDelta(f"oracle: conflict policy {conflict!r} is not latest, confidence or source_priority")

    def matches(pattern: str, actor: str | None) -> bool:
        pattern = pattern.replace("{subject}", subject)
        if actor is None:
            return False
        return actor.startswith(pattern[:-1]) if pattern.endswith("*") else actor == pattern

    def position(s: Statement) -> float:
        for i, pattern in enumerate(sources):
            if matches(pattern, s.asserted_by):
                return -float(i)
        return -float(len(sources))

    return position


def believed(statements: Iterable[Statement], many: bool = False,
             canonical: Canonical = value_key, rank: Ranker | None = None,
             hold: bool = False) -> Timeline | SetTimeline:
    """The believed timeline of a set of accepted statements (arrival order plays no part;
    duplicates by idempotency key count once, the first one given wins). ``canonical`` gives the
    canonical text of a value for the same-instant rule, when values are codes standing for them;
    ``rank`` is the conflict policy's (:func:`policy_rank`); ``hold``: ``disagreement: candidate``
    (the set may then hold confirms, see :func:`held`)."""
    if hold:
        return held(statements, canonical, rank)[0]
    unique: dict[tuple, Statement] = {}
    for s in statements:
        if s.op == CONFIRM:
            raise InvalidDelta("oracle: a confirm promotes a candidate; give the promoted statement")
        unique.setdefault(s.key, s)
    return (_many if many else _one)(list(unique.values()), canonical, rank)


def held(statements: Iterable[Statement], canonical: Canonical = value_key, rank: Ranker | None = None,
         ) -> tuple[Timeline, dict[Any, tuple[Statement, list[Statement]]]]:
    """``disagreement: candidate`` (single values): the believed timeline of a set of statements,
    confirms included, and its pending candidates, value -> (the statement whose interval and
    provenance the candidate shows, every held statement of the value)."""
    unique: dict[tuple, Statement] = {}
    for s in statements:
        if s.replaces is not None:
            raise InvalidDelta("oracle: disagreement: candidate is for single-valued attributes")
        unique.setdefault(s.key, s)
    said = list(unique.values())
    hold = _Hold({s.value for s in said if s.op == CONFIRM})
    timeline = _values(_one_function([s for s in said if s.op != CONFIRM], canonical, rank, hold))
    # A retract of v without valid_to, at t, withdraws the statements of v held at or before t.
    withdrawn = [s for s in said if s.op == RETRACT and s.valid_to is None and s.value is not None]
    pending: dict[Any, list[Statement]] = {}
    for s in hold.held:
        if not any(r.value == s.value and s.valid_from <= r.valid_from for r in withdrawn):
            pending.setdefault(s.value, []).append(s)
    first = {v: min(group, key=lambda s: (s.valid_from, *s.tie_order(canonical))) for v, group in pending.items()}
    return timeline, {v: (first[v], group) for v, group in pending.items()}


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
    ``rank``: the conflict policy's (:func:`policy_rank`); ``hold``: ``disagreement: candidate``
    (a value another source states against the one in force waits for a confirm): every statement,
    confirms included, is kept, and :func:`held` decides from the set; only a confirm without a
    value is resolved on arrival, to the one value pending then.
    """

    many: bool = False
    requires: int = 1
    sensitive: bool = False
    canonical: Canonical = value_key
    rank: Ranker | None = None
    hold: bool = False
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
        if self.hold:
            if statement.op == CONFIRM and statement.value is None:
                statement = replace(statement, value=self._only_pending())
            self._believe(statement, at)
        elif statement.op == CONFIRM:
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
                self._now = believed((s for _, s in self._believed.values()), self.many, self.canonical,
                                     self.rank, self.hold)
            return self._now
        return believed((s for at, s in self._believed.values() if at <= known_at), self.many,
                        self.canonical, self.rank, self.hold)

    def value_at(self, instant: datetime, known_at: datetime | None = None) -> Any:
        """The value (a frozenset of members, for a set) at valid time ``instant``."""
        return self.timeline(known_at).value_at(instant)

    def runs(self, known_at: datetime | None = None) -> list[tuple[datetime, datetime | None, Any]]:
        return self.timeline(known_at).runs()

    def pending(self) -> dict[Any, tuple[datetime, int]]:
        """Pending candidates: value -> (valid_from of the opener, distinct supporting episodes)."""
        if self.hold:
            found = held((s for _, s in self._believed.values()), self.canonical, self.rank)[1]
            return {v: (opener.valid_from, len({s.episode for s in group})) for v, (opener, group) in found.items()}
        return {v: (c.opener.valid_from, len(c.episodes)) for v, c in self._candidates.items()}

    def _believe(self, statement: Statement, at: datetime) -> None:
        self._believed.setdefault(statement.key, (at, statement))
        self._now = None

    def _holds(self, statement: Statement) -> bool:
        held = self.value_at(statement.valid_from)
        return statement.value in held if self.many else held == statement.value

    def _only_pending(self) -> Any:
        """The value a confirm without one names: the one candidate pending now."""
        pending = list(self.pending())
        if len(pending) > 1:
            raise Conflict("oracle: several candidates pending, none named")
        if not pending:
            raise NotFound("oracle: no candidate pending")
        return pending[0]

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
        # "It becomes a change point": the opener's valid_to, if it had one, is not kept.
        opener = self._candidates.pop(value).opener
        self._believe(replace(opener, valid_to=None), at)

"""An independent in-memory model of the temporal semantics, used to check reconcile and the store.

It knows nothing about rows: it keeps, per transaction time, a map of valid-time change points
(instant -> value, ``None`` for "nothing holds"), normalised so that no point repeats the value
before it. Values at instants are compared against SGAM's answers.

Candidates (attributes with ``requires`` > 1 or ``sensitive``) are modelled apart from the
timeline: a dict value -> (valid_from, op, set of supporting episodes). Only a promotion touches
the timeline, replaying the candidate's first statement as a confirmed one.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sgam.graph import Conflict, NotAllowed, NotFound


@dataclass
class Timeline:
    points: dict[datetime, Any] = field(default_factory=dict)

    def value_at(self, instant: datetime) -> Any:
        keys = sorted(self.points)
        index = bisect.bisect_right(keys, instant)
        return self.points[keys[index - 1]] if index else None

    def run_start(self, instant: datetime) -> datetime:
        keys = sorted(k for k in self.points if k <= instant)
        return keys[-1]

    def normalise(self) -> None:
        previous = None
        for key in sorted(self.points):
            if self.points[key] == previous:
                del self.points[key]
            else:
                previous = self.points[key]


@dataclass
class Pending:
    """A value waiting for recurrence or confirmation."""

    valid_from: datetime
    op: str
    episodes: set[str]


@dataclass
class Oracle:
    """Model of one cardinality-one slot, or one member of a set (values True/None)."""

    snapshots: list[tuple[datetime, dict[datetime, Any]]] = field(default_factory=list)
    timeline: Timeline = field(default_factory=Timeline)
    applied: set[tuple] = field(default_factory=set)
    requires: int = 1
    sensitive: bool = False
    candidates: dict[Any, Pending] = field(default_factory=dict)

    def apply(self, op: str, value: Any, valid_from: datetime, episode: str, now: datetime,
              allowed: bool = True) -> None:
        """Apply one statement; ``allowed`` says whether its actor may confirm a sensitive value."""
        key = (op, value, None if op == "confirm" else valid_from, episode)
        if key in self.applied:
            return
        held = self.timeline.value_at(valid_from)
        gated = self.sensitive or self.requires > 1
        if op == "confirm":
            if self.sensitive and not allowed:
                raise NotAllowed("oracle: this actor may not confirm")
            named = [v for v in self.candidates if value is None or v == value]
            if len(named) > 1:
                raise Conflict("oracle: several candidates pending, none named")
            if named:
                self._promote(named[0])
            elif value is None or held != value:
                raise NotFound("oracle: no such candidate")
        elif op == "retract" and value is not None and value in self.candidates:
            del self.candidates[value]
        elif op != "retract" and gated and held != value:
            if op == "correct":
                self.candidates = {v: c for v, c in self.candidates.items() if v == value}
            pending = self.candidates.get(value)
            if pending is None:
                self.candidates[value] = Pending(valid_from, op, {episode})
            else:
                pending.episodes.add(episode)
                if not self.sensitive and len(pending.episodes) >= self.requires:
                    self._promote(value)
        elif op == "retract":
            if held is None:
                return
            if value is not None and value != held:
                raise Conflict("oracle: retracting a value that is not held")
            self.timeline.points[valid_from] = None
        else:
            self._state(op, value, valid_from)
        self.timeline.normalise()
        self.applied.add(key)
        self.snapshots.append((now, dict(self.timeline.points)))

    def _promote(self, value: Any) -> None:
        pending = self.candidates.pop(value)
        self._state(pending.op, value, pending.valid_from)

    def _state(self, op: str, value: Any, valid_from: datetime) -> None:
        held = self.timeline.value_at(valid_from)
        if held == value:
            return
        if op == "correct" and held is not None:
            self.timeline.points[self.timeline.run_start(valid_from)] = value
        else:
            self.timeline.points[valid_from] = value

    def value(self, valid_at: datetime, known_at: datetime | None = None) -> Any:
        if known_at is None:
            return self.timeline.value_at(valid_at)
        believed = [points for at, points in self.snapshots if at <= known_at]
        return Timeline(believed[-1]).value_at(valid_at) if believed else None

    def pending(self) -> dict[Any, tuple[datetime, int]]:
        """Pending candidates now: value -> (valid_from, distinct supporting episodes)."""
        return {v: (c.valid_from, len(c.episodes)) for v, c in self.candidates.items()}

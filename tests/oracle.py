"""An independent in-memory model of the temporal semantics, used to check reconcile and the store.

It knows nothing about rows: it keeps, per transaction time, a map of valid-time change points
(instant -> value, ``None`` for "nothing holds"), normalised so that no point repeats the value
before it. Values at instants are compared against SGAM's answers.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sgam.graph import Conflict


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
class Oracle:
    """Model of one cardinality-one slot, or one member of a set (values True/None)."""

    snapshots: list[tuple[datetime, dict[datetime, Any]]] = field(default_factory=list)
    timeline: Timeline = field(default_factory=Timeline)
    applied: set[tuple] = field(default_factory=set)

    def apply(self, op: str, value: Any, valid_from: datetime, episode: str, now: datetime) -> None:
        key = (op, value, valid_from, episode)
        if key in self.applied:
            return
        held = self.timeline.value_at(valid_from)
        if op == "retract":
            if held is None:
                return
            if value is not None and value != held:
                raise Conflict("oracle: retracting a value that is not held")
            self.timeline.points[valid_from] = None
        elif held == value:
            pass
        elif op == "correct" and held is not None:
            self.timeline.points[self.timeline.run_start(valid_from)] = value
        else:
            self.timeline.points[valid_from] = value
        self.timeline.normalise()
        self.applied.add(key)
        self.snapshots.append((now, dict(self.timeline.points)))

    def value(self, valid_at: datetime, known_at: datetime | None = None) -> Any:
        if known_at is None:
            return self.timeline.value_at(valid_at)
        believed = [points for at, points in self.snapshots if at <= known_at]
        return Timeline(believed[-1]).value_at(valid_at) if believed else None

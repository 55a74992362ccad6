"""Reconciliation: the pure function that decides what a proposed write does to stored history.

``reconcile(existing, delta, schema, now)`` reads the stored versions of one
(tenant, subject, attribute) slot and returns a :class:`WritePlan`: which rows to retire in
transaction time (``expire``), which rows to create, and which rows merely gain support. Nothing
here touches the database and the clock is passed in.

Rows are immutable apart from their support counters and ``expired_at``: closing a version writes a
closed copy and retires the open row, so ``known_at`` queries stay exact.

The believed rows of a slot always form *maximal runs*: for a cardinality-one attribute no two
believed rows overlap and no two adjacent ones hold the same value; for a set-valued attribute the
same holds per member. Every operation edits that timeline as a list of segments and then diffs it
against the stored rows, so the rules below are all the code has to get right:

* **assert** ``v`` at ``t``: if ``v`` already holds at ``t`` the open row gains support; otherwise
  the row open at ``t`` is cut at ``t`` and ``v`` holds from ``t`` to where that row ended (or,
  in a gap, to where the next row starts). A backdated assert thus never closes a newer version.
* **correct** ``v`` at ``t``: the version holding at ``t`` was never true; ``v`` takes over its
  whole interval. With nothing holding at ``t`` it is an assert.
* **retract** at ``t``: the version holding at ``t`` ends at ``t`` (retracting at its start means it
  was never true). Retracting nothing is a no-op.
* replaying a delta already applied changes nothing.

**Candidates** (an attribute with ``requires: N`` > 1 or ``sensitive: true``, see
:class:`~sgam.graph.schema.AttributeSpec`). A value that does not already hold at ``t`` is not
applied: it becomes (or supports) the slot's pending candidate for that value, a believed row with
``status = candidate`` that never closes, cuts or supersedes a confirmed version. There is one
pending candidate per value (per member of a set); it keeps the ``valid_from`` and ``op`` of the
statement that opened it, and later statements of the value, at any valid time, add support.
Competing values of a cardinality-one slot wait side by side, each with its own support; a
``correct`` withdraws the other pending values. The candidate is **promoted** when its support
reaches N distinct episodes (never for a sensitive attribute) or when a ``confirm`` delta from an
allowed actor arrives: the candidate row is retired and its value applies exactly as a confirmed
``assert``/``correct`` at its ``valid_from`` would have, carrying all its support. A ``retract``
naming a pending value withdraws that candidate; every other retract acts on confirmed versions.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from .errors import Conflict, InvalidDelta, NotAllowed, NotFound
from .models import Cardinality, Fact, MemoryDelta, Op, Status, require_aware
from .schema import Schema

MAX_FUTURE = timedelta(days=1)


@dataclass(frozen=True)
class WritePlan:
    """What one delta does: rows to expire, rows to create, rows whose support grows."""

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
    message: str = ""

    @property
    def changes_anything(self) -> bool:
        return bool(self.expire or self.create or self.support)


@dataclass
class _Segment:
    """A piece of the valid-time timeline, remembering where it came from."""

    start: datetime
    end: datetime | None
    value_key: str
    rows: list[Fact] = field(default_factory=list)
    from_delta: bool = False


def delta_key(delta: MemoryDelta, value_key: str) -> str:
    """The idempotency key of a delta: replaying the same statement gives the same key.

    A confirmation is keyed without its ``valid_from`` (the API stamps it with the time of the
    call): the same episode confirming the same value is one confirmation.
    """
    when = "" if delta.op is Op.CONFIRM else delta.valid_from.isoformat()
    parts = [
        delta.tenant_id, delta.subject, delta.attribute, delta.op.value, value_key,
        when, delta.source_episode_id,
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32]


def new_memory_id() -> str:
    """A fresh fact-version id: 80 random bits (``uuid4`` objects cost more than the rest of a plan)."""
    return "m-" + os.urandom(10).hex()


def reconcile(
    existing: Sequence[Fact],
    delta: MemoryDelta,
    schema: Schema,
    now: datetime,
    *,
    applied: Collection[str] = frozenset(),
    applied_only: bool = False,
    max_future: timedelta = MAX_FUTURE,
) -> WritePlan:
    """Plan the effect of ``delta`` on the stored versions ``existing`` of its slot.

    ``existing`` holds the stored rows of the slot: the believed ones at least (retired rows are
    ignored except for the idempotency keys they carry). ``applied`` holds idempotency keys
    already stored on rows not passed in, so a replayed delta is recognised without them;
    ``applied_only`` says it holds those of ``existing`` too (a batch keeps such a set, so a long
    slot is not searched once per delta). Raises
    :class:`InvalidDelta`, :class:`Conflict` or :class:`~sgam.graph.errors.SchemaViolation` for a
    write that must not happen; a ``confirm`` may also raise :class:`NotAllowed` (an actor the
    schema does not list) or :class:`NotFound` (no such candidate pending).
    """
    now = require_aware(now, "now")
    spec = schema.attribute(delta.attribute)
    value, vkey = _checked_value(delta, schema)
    if delta.valid_from > now + max_future:
        raise InvalidDelta(
            f"valid_from {delta.valid_from.isoformat()} of {delta.attribute!r} for {delta.subject!r} "
            f"is more than {max_future} after now ({now.isoformat()}): valid_from is when the fact "
            "became true in the world; for a date the fact is about (a deadline), use the value"
        )
    if delta.op is Op.CORRECT and spec.cardinality is Cardinality.MANY:
        raise InvalidDelta(
            f"op 'correct' is for cardinality-one attributes; {delta.attribute!r} is set-valued: "
            "retract the wrong member at its valid_from (never true) and assert the right one"
        )
    key = delta_key(delta, vkey)
    base = WritePlan(
        tenant_id=delta.tenant_id, subject=delta.subject, attribute=delta.attribute,
        rel_type=schema.rel_type(delta.attribute),
        kind="relation" if spec.value_type == "entity" else "attribute",
        outcome="unchanged", delta_key=key, episode_id=delta.source_episode_id, now=now,
    )
    if key in applied or (not applied_only and any(
            key in r.delta_keys or r.expired_by_delta_key == key for r in existing)):
        return replace(base, message="this delta was already applied (replay)")

    believed = sorted(
        (r for r in existing if r.expired_at is None and r.status is Status.CONFIRMED
         and (spec.cardinality is Cardinality.ONE or r.value_key == vkey)),
        key=lambda r: r.valid_from,
    )
    pending = sorted((r for r in existing if r.expired_at is None and r.status is Status.CANDIDATE),
                     key=lambda r: (r.valid_from, r.value_key))
    candidate = next((r for r in pending if r.value_key == vkey), None) if vkey else None
    if delta.op is Op.CONFIRM:
        return _confirm(base, believed, pending, delta, vkey, schema)
    if delta.op is Op.RETRACT and candidate is not None:
        return replace(base, outcome="withdrawn", expire=(candidate.memory_id,),
                       message=f"candidate {candidate.memory_id} (value {candidate.value!r}) withdrawn")
    holding = _open_at(believed, delta.valid_from)
    if delta.op is not Op.RETRACT and spec.gated and not (holding and holding.value_key == vkey):
        return _propose(base, believed, pending, candidate, delta, value, vkey, schema)
    return _confirmed(base, believed, delta, value, vkey, schema)


def _confirmed(base: WritePlan, believed: list[Fact], delta: MemoryDelta, value: Any, vkey: str,
               schema: Schema, carried: Fact | None = None) -> WritePlan:
    """The effect of ``delta`` on the confirmed versions (``carried``: a promoted candidate)."""
    holding = _open_at(believed, delta.valid_from)
    if delta.op is Op.RETRACT:
        return _retract(base, believed, holding, delta, vkey)
    if holding is not None and holding.value_key == vkey:
        return replace(base, outcome="supported", support=(holding.memory_id,),
                       message="the same value already holds; its support grew")
    segments = _segments(believed)
    if delta.op is Op.CORRECT and holding is not None:
        outcome = "corrected"
        _replace_segment(segments, holding, vkey)
    else:
        outcome = "changed" if holding is not None else "created"
        _insert_at(segments, delta.valid_from, vkey)
    return _plan(base, believed, _merge(segments), delta, value, vkey, schema, outcome, holding,
                 carried)


def _propose(base: WritePlan, believed: list[Fact], pending: list[Fact], candidate: Fact | None,
             delta: MemoryDelta, value: Any, vkey: str, schema: Schema) -> WritePlan:
    """A gated value that does not hold yet: open or support its candidate, promoting at N."""
    spec = schema.attribute(delta.attribute)
    withdrawn: tuple[str, ...] = ()
    if delta.op is Op.CORRECT:
        withdrawn = tuple(r.memory_id for r in pending if r.value_key != vkey)
    if candidate is None:
        props = _from_delta(_Segment(delta.valid_from, None, vkey), base, delta, value, vkey, schema)
        props["status"] = Status.CANDIDATE.value
        waiting = "a confirmation" if spec.sensitive else f"{spec.requires} distinct episodes"
        return replace(base, outcome="candidate", expire=withdrawn, create=(props,),
                       message=f"stored as a candidate; it needs {waiting} to be confirmed")
    supported = _supported(candidate, base)
    if spec.sensitive or len(supported.support_episodes) < spec.requires:
        have = len(supported.support_episodes)
        waiting = "a confirmation" if spec.sensitive else f"{have} of {spec.requires} distinct episodes"
        return replace(base, outcome="candidate", expire=withdrawn, support=(candidate.memory_id,),
                       message=f"candidate {candidate.memory_id} gained support; {waiting}")
    return _promote(base, believed, supported, withdrawn, schema, by=None)


def _confirm(base: WritePlan, believed: list[Fact], pending: list[Fact], delta: MemoryDelta,
             vkey: str, schema: Schema) -> WritePlan:
    """An explicit confirmation: promote the pending candidate it names (or the only one)."""
    spec = schema.attribute(delta.attribute)
    where = f"{delta.attribute!r} of {delta.subject!r} (tenant {delta.tenant_id!r})"
    if not spec.may_confirm(delta.asserted_by, delta.subject):
        allowed = ", ".join(c.replace("{subject}", delta.subject) for c in spec.confirmers)
        raise NotAllowed(
            f"actor {delta.asserted_by!r} may not confirm sensitive attribute {where}; "
            f"allowed confirmers: {allowed} (the schema's 'confirmers')"
        )
    waiting = [r for r in pending if not vkey or r.value_key == vkey]
    if len(waiting) == 1:
        return _promote(base, believed, _supported(waiting[0], base), (), schema, by=delta)
    listed = ", ".join(repr(r.value) for r in pending) or "none"
    if waiting:
        raise Conflict(f"several candidate values are pending for {where} ({listed}): "
                       "name the value to confirm")
    holding = _open_at(believed, delta.valid_from)
    if vkey and holding is not None and holding.value_key == vkey:
        return replace(base, outcome="supported", support=(holding.memory_id,),
                       message="the value is already confirmed; its support grew")
    asked = f"with value {delta.value!r} " if vkey else ""
    raise NotFound(f"no candidate {asked}is pending for {where}; pending candidates: {listed}")


def _promote(base: WritePlan, believed: list[Fact], candidate: Fact, withdrawn: tuple[str, ...],
             schema: Schema, by: MemoryDelta | None) -> WritePlan:
    """Apply a candidate (with its support so far) as the confirmed write it stands for."""
    statement = MemoryDelta(
        tenant_id=candidate.tenant_id, subject=candidate.subject, attribute=candidate.attribute,
        value=candidate.value, valid_from=candidate.valid_from, op=candidate.op,
        source_episode_id=candidate.source_episode_id, asserted_by=candidate.asserted_by,
        confidence=candidate.confidence,
    )
    plan = _confirmed(base, believed, statement, candidate.value, candidate.value_key, schema,
                      carried=candidate)
    confirmer = by.asserted_by if by is not None else None
    for props in plan.create:
        if props.pop("stated", False):
            props.update(confirmed_by=confirmer or "recurrence",
                         confirmed_by_episode_id=base.episode_id)
    how = f"confirmed by {confirmer}" if confirmer else (
        f"{len(candidate.support_episodes)} distinct episodes")
    return replace(plan, outcome="promoted",
                   expire=(*withdrawn, *plan.expire, candidate.memory_id),
                   message=f"candidate {candidate.memory_id} (value {candidate.value!r}) promoted, "
                           f"{how}; {plan.outcome}")


def _checked_value(delta: MemoryDelta, schema: Schema) -> tuple[Any, str]:
    spec = schema.attribute(delta.attribute)
    if delta.op in (Op.RETRACT, Op.CONFIRM) and delta.value is None:
        if spec.cardinality is Cardinality.MANY:
            raise InvalidDelta(
                f"{delta.op.value} on set-valued {delta.attribute!r} needs the member as value"
            )
        return None, ""
    return schema.coerce(delta.attribute, delta.value)


def _open_at(rows: Sequence[Fact], instant: datetime) -> Fact | None:
    for row in rows:
        if row.valid_at(instant):
            return row
    return None


def _retract(base: WritePlan, believed: list[Fact], holding: Fact | None,
             delta: MemoryDelta, vkey: str) -> WritePlan:
    if holding is None:
        return replace(base, message="nothing holds at valid_from; nothing to retract")
    if vkey and holding.value_key != vkey:
        raise Conflict(
            f"cannot retract {delta.value!r} from {delta.attribute!r} of {delta.subject!r} "
            f"(tenant {delta.tenant_id!r}): the value held at {delta.valid_from.isoformat()} is "
            f"{holding.value!r} ({holding.memory_id})"
        )
    segments = _segments(believed)
    index = next(i for i, s in enumerate(segments) if holding in s.rows)
    segment = segments[index]
    if segment.start < delta.valid_from:
        segments[index] = _Segment(segment.start, delta.valid_from, segment.value_key, segment.rows)
    else:
        del segments[index]
    return _plan(base, believed, segments, delta, None, vkey, None, "retracted", holding)


def _segments(rows: Sequence[Fact]) -> list[_Segment]:
    return [_Segment(r.valid_from, r.valid_to, r.value_key, [r]) for r in rows]


def _replace_segment(segments: list[_Segment], holding: Fact, vkey: str) -> None:
    index = next(i for i, s in enumerate(segments) if holding in s.rows)
    old = segments[index]
    segments[index] = _Segment(old.start, old.end, vkey, [], from_delta=True)


def _insert_at(segments: list[_Segment], instant: datetime, vkey: str) -> None:
    """Let ``vkey`` hold from ``instant`` to the next boundary of the timeline."""
    for index, seg in enumerate(segments):
        if seg.start <= instant and (seg.end is None or instant < seg.end):
            tail = _Segment(instant, seg.end, vkey, [], from_delta=True)
            if seg.start < instant:
                segments[index] = _Segment(seg.start, instant, seg.value_key, seg.rows)
                segments.insert(index + 1, tail)
            else:
                segments[index] = tail
            return
        if instant < seg.start:
            segments.insert(index, _Segment(instant, seg.start, vkey, [], from_delta=True))
            return
    segments.append(_Segment(instant, None, vkey, [], from_delta=True))


def _merge(segments: list[_Segment]) -> list[_Segment]:
    """Join adjacent segments holding the same value, so believed rows stay maximal runs."""
    merged: list[_Segment] = []
    for seg in segments:
        last = merged[-1] if merged else None
        if last is not None and last.end == seg.start and last.value_key == seg.value_key:
            merged[-1] = _Segment(last.start, seg.end, last.value_key, last.rows + seg.rows,
                                  last.from_delta or seg.from_delta)
        else:
            merged.append(seg)
    return merged


def _unchanged(seg: _Segment) -> bool:
    if seg.from_delta or len(seg.rows) != 1:
        return False
    row = seg.rows[0]
    return row.valid_from == seg.start and row.valid_to == seg.end


def _plan(base: WritePlan, believed: list[Fact], segments: list[_Segment], delta: MemoryDelta,
          value: Any, vkey: str, schema: Schema | None, outcome: str,
          holding: Fact | None, carried: Fact | None = None) -> WritePlan:
    kept = {seg.rows[0].memory_id for seg in segments if _unchanged(seg)}
    expire = tuple(r.memory_id for r in believed if r.memory_id not in kept)
    create: list[dict[str, Any]] = []
    stated: dict[str, Any] | None = None
    # The version the delta displaced: the closed copy of the row it cut, or that row itself.
    predecessor = holding.memory_id if holding is not None else None
    for seg in segments:
        if _unchanged(seg):
            continue
        if seg.rows and seg.rows[0].valid_from == seg.start:
            props = _revised(seg, base, delta, carried)
            if holding in seg.rows and not seg.from_delta:
                predecessor = props["memory_id"]
        else:
            assert schema is not None
            props = stated = _from_delta(seg, base, delta, value, vkey, schema, carried)
        create.append(props)
    if stated is not None:
        stated["supersedes_memory_id"] = predecessor
    return replace(base, outcome=outcome, expire=expire, create=tuple(create),
                   message=_message(outcome, holding))


def _message(outcome: str, holding: Fact | None) -> str:
    if holding is None:
        return outcome
    return f"{outcome}; previous version {holding.memory_id} (value {holding.value!r})"


def _revised(seg: _Segment, base: WritePlan, delta: MemoryDelta,
             carried: Fact | None = None) -> dict[str, Any]:
    """A closed, trimmed or extended copy of a stored row (it keeps the row's provenance)."""
    first = seg.rows[0]
    props = dict(vars(first))  # model_dump() of a flat model, without its cost
    props.update(
        memory_id=new_memory_id(), valid_from=seg.start, valid_to=seg.end, recorded_at=base.now,
        expired_at=None, revises_memory_id=first.memory_id, expired_by_episode_id=None,
        expired_by_delta_key=None,
    )
    episodes = list(first.support_episodes)
    keys = list(first.delta_keys)
    count = first.support_count
    for other in seg.rows[1:]:
        episodes += [e for e in other.support_episodes if e not in episodes]
        keys += [k for k in other.delta_keys if k not in keys]
        count += other.support_count
    if seg.from_delta:
        new_episodes, new_keys, new_count = _contribution(base, delta, carried)
        episodes += [e for e in new_episodes if e not in episodes]
        keys += [k for k in new_keys if k not in keys]
        count += new_count
        props["last_confirmed_at"] = base.now
        if carried is not None:
            props["stated"] = True
    props.update(support_episodes=tuple(episodes), delta_keys=tuple(keys), support_count=count)
    return props


def _contribution(base: WritePlan, delta: MemoryDelta,
                  carried: Fact | None) -> tuple[list[str], list[str], int]:
    """The support a delta brings: its own, or that of the candidate it promotes."""
    if carried is None:
        return [delta.source_episode_id], [base.delta_key], 1
    return list(carried.support_episodes), list(carried.delta_keys), carried.support_count


def _from_delta(seg: _Segment, base: WritePlan, delta: MemoryDelta, value: Any, vkey: str,
                schema: Schema, carried: Fact | None = None) -> dict[str, Any]:
    """A new version stated by the delta (absorbing any stored rows it merged with)."""
    spec = schema.attribute(delta.attribute)
    episodes, keys, count = _contribution(base, delta, carried)
    for row in seg.rows:
        episodes += [e for e in row.support_episodes if e not in episodes]
        keys += [k for k in row.delta_keys if k not in keys]
    return {
        "memory_id": new_memory_id(),
        "tenant_id": delta.tenant_id,
        "subject": delta.subject,
        "attribute": delta.attribute,
        "value": value,
        "value_key": vkey,
        "value_type": spec.value_type,
        "kind": base.kind,
        "memory_type": spec.memory_type,
        "schema_version": schema.version,
        "valid_from": seg.start,
        "valid_to": seg.end,
        "recorded_at": base.now,
        "expired_at": None,
        "supersedes_memory_id": None,
        "revises_memory_id": seg.rows[0].memory_id if seg.rows else None,
        "source_episode_id": delta.source_episode_id,
        "asserted_by": delta.asserted_by or "unknown",
        "confidence": delta.confidence,
        "retention_policy": spec.retention,
        "visible_to": spec.visible_to(delta.subject),
        "status": "confirmed",
        "op": delta.op.value,
        "support_count": count + sum(r.support_count for r in seg.rows),
        "support_episodes": tuple(episodes),
        "delta_keys": tuple(keys),
        "last_confirmed_at": base.now,
        "expired_by_episode_id": None,
        "expired_by_delta_key": None,
        **({"stated": True} if carried is not None else {}),
    }


def apply_plan(rows: Sequence[Fact], plan: WritePlan) -> list[Fact]:
    """The rows of a slot after ``plan``: what the store will hold (pure; used by batches and tests)."""
    expire = set(plan.expire)
    support = set(plan.support)
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

"""Rebuilding memory: re-run extraction over a tenant's stored episodes and compare.

:func:`rebuild_op` reads the episodes of tenant ``T`` in the order they occurred and ingests each,
under its own id, into tenant ``into`` through the usual pipeline (``pipeline.ingest_op``: the
same validation, reconciliation, quarantine and extraction trail) with the given extractors, e.g.
a new event mapping, another model or the extractors of a changed schema. It then compares the
two tenants' believed facts slot by slot (subject, attribute): a slot only the rebuild has is
``added``, one only ``T`` has is ``missing``, one whose rows (value, valid window, status) differ
is ``changed``. ``T`` itself is only read.

``into`` must hold nothing (a rebuild never merges into existing memory). A **dry run** does the
same inside one transaction that is rolled back: the report is the same and nothing is written
(the transaction holds every write of the rebuild, so a dry run suits a tenant of moderate size;
its extractors run while the transaction is open).

The agent's own deltas (given to ``ingest`` directly) are not extraction: they are not stored with
their episode, so a rebuild does not repeat them and their facts show as ``missing``.
"""

from __future__ import annotations

import secrets
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sgam.graph.codec import native
from sgam.graph.errors import InvalidDelta, checked
from sgam.graph.models import Episode, check_id
from sgam.graph.steps import Auto, Blocking, InTx, Operation, Read, Records, Statement, Write

from .extract import Extractor
from .pipeline import Target, ingest_op

EPISODES = """
MATCH (e:Episode {tenant_id: $tenant})
RETURN e {.id, .content, .kind, .actor, .session_id, .occurred_at} AS episode
ORDER BY e.occurred_at, e.id
"""

BELIEVED = """
MATCH (s:Entity {tenant_id: $tenant})-[f]->()
WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL
RETURN s.id AS subject, f.attribute AS attribute, f.value AS value, f.valid_from AS valid_from,
       f.valid_to AS valid_to, f.status AS status
"""

HOLDS_ANYTHING = """
RETURN EXISTS { MATCH (:Entity {tenant_id: $tenant}) } OR EXISTS { MATCH (:Episode {tenant_id: $tenant}) }
       OR EXISTS { MATCH (:Quarantine {tenant_id: $tenant}) }
       OR EXISTS { MATCH (t:Tombstone {tenant_id: $tenant}) WHERE t.subject IS NOT NULL }
       AS holds
"""

Row = tuple[Any, ...]


@dataclass(frozen=True)
class SlotChange:
    """One slot that differs: its believed rows ``(value, valid_from, valid_to, status)`` in the
    current tenant (``before``) and in the rebuild (``after``)."""

    subject: str
    attribute: str
    before: tuple[Row, ...]
    after: tuple[Row, ...]


@dataclass
class RebuildReport:
    """What a rebuild did and how its memory differs from the tenant's current state."""

    tenant_id: str
    into: str
    dry_run: bool
    extractors: tuple[str, ...]
    episodes: int = 0
    written: int = 0
    quarantined: int = 0
    same: int = 0
    """Slots that hold the same rows in both."""
    added: list[SlotChange] = field(default_factory=list)
    changed: list[SlotChange] = field(default_factory=list)
    missing: list[SlotChange] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return bool(self.added or self.changed or self.missing)


class _RolledBack(Exception):
    """Ends a dry run's transaction (so the store rolls it back), carrying its report."""

    def __init__(self, report: RebuildReport) -> None:
        super().__init__("dry run rolled back")
        self.report = report


def _slots(records: Records) -> dict[tuple[str, str], tuple[Row, ...]]:
    slots: dict[tuple[str, str], list[Row]] = {}
    for r in records:
        row = (native(r["value"]), native(r["valid_from"]), native(r["valid_to"]), r["status"])
        slots.setdefault((r["subject"], r["attribute"]), []).append(row)
    return {k: tuple(sorted(v, key=repr)) for k, v in slots.items()}


def compare(report: RebuildReport, current: Records, rebuilt: Records) -> None:
    """Fill ``report``'s slot differences from the believed rows of both tenants."""
    before, after = _slots(current), _slots(rebuilt)
    for key in sorted(before.keys() | after.keys()):
        change = SlotChange(*key, before.get(key, ()), after.get(key, ()))
        if key not in after:
            report.missing.append(change)
        elif key not in before:
            report.added.append(change)
        elif before[key] != after[key]:
            report.changed.append(change)
        else:
            report.same += 1


def _inline(op: Operation[Any]) -> Generator[Statement, Records, Any]:
    """``op``'s requests as statements of the one transaction running them (a dry run's)."""
    try:
        request = next(op)
        while True:
            try:
                if isinstance(request, InTx):
                    reply = yield from request.make_steps()
                elif isinstance(request, (Read, Write)):
                    reply = yield request.statement
                elif isinstance(request, Blocking):
                    reply = request.work()
                else:
                    raise InvalidDelta(f"a dry-run rebuild cannot run {type(request).__name__} work "
                                       "inside its transaction; rebuild into a fresh tenant instead")
            except _RolledBack:
                raise
            except Exception as exc:  # thrown back, as a store does, so the op may clean up
                request = op.throw(exc)
            else:
                request = op.send(reply)
    except StopIteration as stop:
        return stop.value


def rebuild_op(target: Target, tenant: str, extractors: Sequence[Extractor], *, into: str | None = None,
               dry_run: bool = False) -> Operation[RebuildReport]:
    """Rebuild ``tenant``'s memory into ``into`` (see the module docstring); a dry run without
    ``into`` uses a scratch tenant id inside its rolled-back transaction."""
    tenant = checked(check_id, tenant)
    if into is None and not dry_run:
        raise InvalidDelta("rebuild needs a fresh tenant to write into (into=...), or dry_run=True")
    into = checked(check_id, into) if into is not None else f"{tenant}-rebuild-{secrets.token_hex(4)}"
    if into == tenant:
        raise InvalidDelta(f"rebuild writes into a fresh tenant, not into {tenant!r} itself")
    [holds] = yield Read(Statement(HOLDS_ANYTHING, {"tenant": into}))
    if holds["holds"]:
        raise InvalidDelta(f"tenant {into!r} already holds memory: rebuild into a fresh tenant id "
                           f"(or delete it first: sgam delete tenant -t {into})")
    report = RebuildReport(tenant, into, dry_run, tuple(x.name for x in extractors))
    if not dry_run:
        return (yield from _rebuild(target, report, extractors))
    try:
        yield InTx(lambda: _rolled_back(target, report, extractors))
    except _RolledBack as done:
        return done.report
    raise AssertionError("a dry run always rolls back")  # pragma: no cover


def _rolled_back(target: Target, report: RebuildReport,
                 extractors: Sequence[Extractor]) -> Generator[Statement, Records, None]:
    fresh = RebuildReport(report.tenant_id, report.into, True, report.extractors)
    raise _RolledBack((yield from _inline(_rebuild(target, fresh, extractors))))


def _rebuild(target: Target, report: RebuildReport, extractors: Sequence[Extractor]) -> Operation[RebuildReport]:
    rows = yield Read(Statement(EPISODES, {"tenant": report.tenant_id}))
    for row in rows:
        data = {k: native(v) for k, v in row["episode"].items() if v is not None}
        episode = Episode.model_validate({**data, "tenant_id": report.into})
        done = yield from ingest_op(target, episode, extractors)
        report.episodes += 1
        report.written += done.written
        report.quarantined += len(done.quarantined)
    current = yield Read(Statement(BELIEVED, {"tenant": report.tenant_id}))
    rebuilt = yield Read(Statement(BELIEVED, {"tenant": report.into}))
    compare(report, current, rebuilt)
    return report


__all__ = ["BELIEVED", "EPISODES", "HOLDS_ANYTHING", "RebuildReport", "SlotChange", "compare", "rebuild_op"]

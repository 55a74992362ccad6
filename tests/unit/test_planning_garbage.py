"""Planning a batch leaves no reference cycles of its own.

A write transaction runs with the cyclic collector paused (``graph/store.py``), so whatever
planning leaves in a cycle stays alive until the transaction ends, and the collector then walks
it. A recursive closure (a nested function that calls itself) is such a cycle, one per call:
``writes._readdressed`` made one for every delta of a batch whose rows had stand-ins.
"""

from __future__ import annotations

import gc
import types
from datetime import datetime, timedelta, timezone

from sgam.bench.scale import SCHEMA
from sgam.graph import MemoryDelta
from sgam.graph.writes import plan_ahead, prepare

AT = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _changes(subjects: int, per_subject: int) -> list[MemoryDelta]:
    """Each subject's home city changing month by month, in valid-time order: every open-ended row
    but the last is cut short by the next change of the same batch, so planning leaves it out
    and names its copy instead (``writes._never_believed``)."""
    return [MemoryDelta(tenant_id="t", subject=f"p{s}", attribute="home_city", value=f"city-{s}-{k}",
                        valid_from=AT + timedelta(days=30 * k), source_episode_id=f"e{s}-{k}")
            for s in range(subjects) for k in range(per_subject)]


def _garbage_functions_of_sgam(run: types.FunctionType) -> list[str]:
    """The functions defined in SGAM's modules that ``run()`` left in reference cycles."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return sorted({f"{o.__module__}.{o.__qualname__}" for o in gc.garbage
                       if isinstance(o, types.FunctionType) and (o.__module__ or "").startswith("sgam.")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_planning_a_batch_with_stand_ins_leaves_no_cycles() -> None:
    ready, rejected = prepare(_changes(subjects=20, per_subject=4), SCHEMA)
    assert not rejected
    planned: list[object] = []

    def run() -> None:
        plan = plan_ahead(ready, SCHEMA, NOW)
        assert plan is not None
        planned.append(plan)

    assert _garbage_functions_of_sgam(run) == []
    plan = planned[0]
    # The batch did take the path that names copies: 3 rows a subject were left out.
    assert len(plan.rows.stand_ins) == 20 * 3  # type: ignore[attr-defined]
    written = {r["props"]["memory_id"] for r in plan.rows.attributes}  # type: ignore[attr-defined]
    for result in plan.results:  # type: ignore[attr-defined]
        assert result.ok and set(result.memory_ids) <= written, result

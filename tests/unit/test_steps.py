"""The step protocol (graph/steps.py) and operations run on scripted answers, without a server."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import pytest

from sgam.graph.errors import ExtractionError, StoreUnavailable
from sgam.graph.models import Episode
from sgam.graph.reconcile import DEFAULT_MAX_FUTURE
from sgam.graph.schema import default_schema
from sgam.graph.steps import Blocking, InTx, Read, Statement, Write, adrive, drive, scripted
from sgam.ingest import quarantine as q
from sgam.ingest.pipeline import LINK_AND_READ, MARK_DONE, process_op

NOW = datetime(2026, 1, 2, tzinfo=timezone.utc)
A, B = Statement("RETURN 1 AS a"), Statement("RETURN 2 AS b")


def _op() -> Any:
    """Reads A; writes B in its own transaction, and on a failure records it and re-raises."""
    first = yield Read(A)
    try:
        second = yield Write(B)
    except StoreUnavailable:
        yield Write(Statement("RECORD FAILURE"))
        raise
    return first, second


def test_drive_answers_each_request_in_order() -> None:
    asked: list[Any] = []

    def answer(request: Any) -> Any:
        asked.append(request)
        return [{"n": len(asked)}]

    assert drive(_op(), answer) == ([{"n": 1}], [{"n": 2}])
    assert asked == [Read(A), Write(B)]


def test_a_failed_answer_is_thrown_back_into_the_operation() -> None:
    asked: list[Any] = []

    def answer(request: Any) -> Any:
        asked.append(request)
        if request == Write(B):
            raise StoreUnavailable("gone")
        return []

    with pytest.raises(StoreUnavailable, match="gone"):
        drive(_op(), answer)
    assert asked == [Read(A), Write(B), Write(Statement("RECORD FAILURE"))]


def test_adrive_is_drive_with_awaited_answers() -> None:
    async def answer(request: Any) -> Any:
        await asyncio.sleep(0)
        return [{"q": request.statement.query}]

    assert asyncio.run(adrive(_op(), answer)) == ([{"q": A.query}], [{"q": B.query}])


def test_scripted_runs_transactions_and_blocking_work_on_one_answer() -> None:
    def steps() -> Any:
        one = yield A
        two = yield B
        return one + two

    def op() -> Any:
        inside = yield InTx(steps)
        outside = yield Blocking(lambda: "worked")
        return inside, outside

    result, seen = scripted(op(), lambda statement: [{"q": statement.query}])
    assert result == ([{"q": A.query}, {"q": B.query}], "worked") and seen == [A, B]


class _Refuses:
    name = "refuses"

    def __init__(self, transient: bool) -> None:
        self.transient = transient
        self.calls = 0

    def extract(self, episode: Episode, current: Any) -> list[Any]:
        self.calls += 1
        error = ExtractionError("the model answered nonsense")
        error.transient = self.transient  # type: ignore[misc]
        raise error


class _Target:
    schema = default_schema()
    max_future = DEFAULT_MAX_FUTURE

    @staticmethod
    def clock() -> datetime:
        return NOW


def test_process_quarantines_a_terminal_extraction_error_and_marks_the_episode_done() -> None:
    episode = Episode(tenant_id="t", id="e1", content="Hello", occurred_at=NOW)
    extractor = _Refuses(transient=False)
    report, seen = scripted(process_op(_Target(), episode, [extractor]), lambda statement: [])
    assert extractor.calls == 1
    [entry] = report.quarantined
    assert entry.stage == "extract" and "nonsense" in entry.reason and report.written == 0
    assert seen[0].query == LINK_AND_READ and seen[-1].query == MARK_DONE
    assert any(s.query == q.STORE for s in seen)


def test_process_raises_a_transient_extraction_error_and_writes_nothing_after_it() -> None:
    episode = Episode(tenant_id="t", id="e1", content="Hello", occurred_at=NOW)
    seen: list[Statement] = []

    def answer(statement: Statement) -> list[Any]:
        seen.append(statement)
        return []

    with pytest.raises(ExtractionError):
        scripted(process_op(_Target(), episode, [_Refuses(transient=True)]), answer)
    assert [s.query for s in seen] == [LINK_AND_READ]

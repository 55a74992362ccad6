"""Messages name values as a reader writes them: a date is 1991-03-13, never a Python repr."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from sgam import Conflict, MemoryGraph, NotFound
from sgam.graph.models import shown


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def test_shown_writes_dates_and_times_in_iso() -> None:
    assert shown(date(1991, 3, 13)) == "1991-03-13"
    assert shown([utc(2026, 5, 22, 9, 30)]) == "[2026-05-22T09:30:00+00:00]"
    assert shown("1991-03-13") == "'1991-03-13'" and shown(42) == "42"


def test_confirm_lists_pending_dates_in_iso(graph: MemoryGraph, tenant: str) -> None:
    try:
        for n, day in enumerate(("1990-01-02", "1991-03-13")):
            graph.record_episode(tenant_id=tenant, id=f"e{n}", content=f"Mira's birthday is {day}.",
                                 occurred_at=utc(2026, 5, 22, n), actor="agent:assistant")
            result = graph.write(tenant_id=tenant, subject="mira", attribute="birthday", value=day,
                                 valid_from=utc(2026, 5, 22), source_episode_id=f"e{n}")
            assert result.outcome == "candidate"
        graph.record_episode(tenant_id=tenant, id="said", content="Yes, that is my birthday.",
                             occurred_at=utc(2026, 5, 23), actor="user:mira")
        # Two dates wait: confirming without naming one lists both.
        with pytest.raises(Conflict) as several:
            graph.confirm(tenant, "mira", "birthday", actor="user:mira", episode="said")
        assert "1990-01-02" in str(several.value) and "1991-03-13" in str(several.value)
        # A date that is not pending names itself and the pending ones.
        with pytest.raises(NotFound) as missing:
            graph.confirm(tenant, "mira", "birthday", date(1985, 7, 1), actor="user:mira", episode="said")
        assert "with value 1985-07-01 " in str(missing.value) and "1991-03-13" in str(missing.value)
        # The promotion's own message names the date too.
        done = graph.confirm(tenant, "mira", "birthday", "1991-03-13", actor="user:mira", episode="said")
        assert done.outcome == "promoted" and "(value 1991-03-13)" in done.message
        for text in (str(several.value), str(missing.value), done.message):
            assert "datetime." not in text, text
    finally:
        graph.delete_tenant(tenant)

"""One rule for the times a caller gives (API, CLI, named queries), and the read API's argument forms.

The oracle is the rule as the README states it: an instant is an ISO 8601 string with a timezone
or an aware datetime and means that instant; a date alone means midnight UTC of that day; a time
without a zone is refused, naming the argument.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgam.api import _Queries, instant_arg
from sgam.graph.errors import InvalidDelta, SgamError
from sgam.graph.models import parse_instant
from sgam.queries.loader import load_queries

ZONES = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
AWARE = st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1), timezones=ZONES)


@given(AWARE)
def test_an_aware_instant_means_itself(instant: datetime) -> None:
    for given_as in (instant, instant.isoformat(), f" {instant.isoformat()} "):
        parsed = parse_instant(given_as, "valid_at")
        assert parsed == instant and parsed.utcoffset() == timedelta(0)


@given(st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1)))
def test_z_is_utc(moment: datetime) -> None:
    text = moment.isoformat() + "Z"
    assert parse_instant(text, "known_at") == moment.replace(tzinfo=timezone.utc)


@given(st.dates())
def test_a_date_alone_is_midnight_utc(day: date) -> None:
    midnight = datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
    assert parse_instant(day.isoformat(), "valid_at") == midnight
    assert parse_instant(day, "valid_at") == midnight


@given(st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1)))
def test_a_time_without_a_zone_is_refused(moment: datetime) -> None:
    with pytest.raises(ValueError, match=r"^valid_at .* has no timezone"):
        parse_instant(moment.isoformat(), "valid_at")
    with pytest.raises(ValueError, match=r"^valid_at is a naive datetime"):
        parse_instant(moment, "valid_at")


@pytest.mark.parametrize("text", ["soon", "", "2026-13-45", "2026-02-30", "06/02/2026", "2026-06-02T25:00Z"])
def test_text_that_is_no_instant_names_the_argument_and_shows_one(text: str) -> None:
    with pytest.raises(InvalidDelta, match=r"^known_at .* is not an ISO 8601 instant; e\.g\. '2026-06-02T12:00:00Z', "
                                           r"or a date alone, '2026-06-02' \(midnight UTC\)$"):
        instant_arg(text, "known_at")


@pytest.mark.parametrize("value", [20260602, 1.5, None, ["2026-06-02"]])
def test_other_types_are_refused(value: object) -> None:
    expected = rf"^valid_at must be a datetime or an ISO 8601 string, not {type(value).__name__}"
    with pytest.raises(SgamError, match=expected):
        instant_arg(value, "valid_at")  # type: ignore[arg-type]


def test_named_queries_read_times_and_flags_by_the_same_rule() -> None:
    as_of = load_queries()["as-of"]
    bound = as_of.bind({"tenant": "t", "subject": "s", "valid_at": "2026-06-02",
                        "known_at": "2026-06-01T14:00:00+02:00"})
    assert (bound["valid_at"], bound["known_at"]) == (datetime(2026, 6, 2, tzinfo=timezone.utc),
                                                      datetime(2026, 6, 1, 12, tzinfo=timezone.utc))
    with pytest.raises(InvalidDelta, match=r"parameter 'valid_at' must be datetime .* has no timezone"):
        as_of.bind({"tenant": "t", "subject": "s", "valid_at": "2026-06-02T10:00"})
    history = load_queries()["history"]
    for given_as, expected in ((True, True), ("true", True), ("False", False), ("0", False), (None, None)):
        assert history.bind({"tenant": "t", "subject": "s", "current_only": given_as})["current_only"] is expected
    with pytest.raises(InvalidDelta, match="parameter 'current_only' must be bool"):
        history.bind({"tenant": "t", "subject": "s", "current_only": "sometimes"})


@pytest.mark.parametrize(("ids", "keywords", "expected"), [
    (("m-1",), {}, (None, "m-1")),
    (("mira", "m-1"), {}, ("mira", "m-1")),
    ((), {"memory_id": "m-1"}, (None, "m-1")),
    (("mira",), {"memory_id": "m-1"}, ("mira", "m-1")),
    (("m-1",), {"subject": "mira"}, ("mira", "m-1")),
])
def test_provenance_arguments(ids: tuple[str, ...], keywords: dict[str, str], expected: tuple) -> None:
    params = _Queries()._provenance_params("t", ids, keywords.get("memory_id"), keywords.get("subject"), None)
    assert (params["subject"], params["memory_id"]) == expected


@pytest.mark.parametrize(("ids", "keywords"), [
    ((), {}), (("a", "b", "c"), {}), (("mira", "m-1"), {"subject": "mira"}), (("a", "b"), {"memory_id": "m-1"}),
])
def test_provenance_arguments_that_do_not_fit(ids: tuple[str, ...], keywords: dict[str, str]) -> None:
    with pytest.raises(InvalidDelta, match=r"provenance takes \(tenant, memory_id\) or \(tenant, subject, memory_id\)"):
        _Queries()._provenance_params("t", ids, keywords.get("memory_id"), keywords.get("subject"), None)

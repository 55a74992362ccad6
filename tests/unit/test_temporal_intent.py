"""Temporal intent in questions (sgam.queries.temporal): a table of phrasings with the windows the
module's grammar specifies, written from that specification (not from the parser's output), and
properties over any asked_at."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgam.queries.temporal import MONTHS, time_intent

# Tuesday 1 December 2026, 15:00 UTC: the question's own time in the table.
ASKED = datetime(2026, 12, 1, 15, 0, tzinfo=timezone.utc)
US = timedelta(microseconds=1)


def day(y: int, m: int, d: int) -> tuple[datetime, datetime]:
    start = datetime(y, m, d, tzinfo=timezone.utc)
    return start, start + timedelta(days=1)


def month(y: int, m: int) -> tuple[datetime, datetime]:
    end = datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=timezone.utc)
    return datetime(y, m, 1, tzinfo=timezone.utc), end


def year(y: int) -> tuple[datetime, datetime]:
    return datetime(y, 1, 1, tzinfo=timezone.utc), datetime(y + 1, 1, 1, tzinfo=timezone.utc)


def before(y: int, m: int = 1, d: int = 1) -> tuple[datetime, datetime]:
    start = datetime(y, m, d, tzinfo=timezone.utc)
    return start - US, start


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


RESOLVED = [
    # relative days
    ("What did Mira say yesterday?", day(2026, 11, 30)),
    ("What was it the day before yesterday?", day(2026, 11, 29)),
    ("Where was the parcel 3 days ago?", day(2026, 11, 28)),
    ("What was the plan 10 days ago?", day(2026, 11, 21)),
    ("What did she prefer two weeks ago?", day(2026, 11, 17)),
    ("What was her address a week ago?", day(2026, 11, 24)),
    ("What was the status a month ago?", day(2026, 11, 1)),
    ("What was her plan six months ago?", day(2026, 6, 1)),
    ("Where did she live a year ago?", day(2025, 12, 1)),
    # calendar periods
    ("What changed last week?", (at(2026, 11, 23), at(2026, 11, 30))),
    ("What was open the previous month?", month(2026, 11)),
    ("Where did Mira live last year?", year(2025)),
    ("What is planned this year?", year(2026)),
    ("What happened this week?", (at(2026, 11, 30), at(2026, 12, 7))),
    ("What did she ask in the past 3 days?", (at(2026, 11, 28, 15), ASKED)),
    ("What changed over the last week?", (at(2026, 11, 24, 15), ASKED)),
    ("What did we book last weekend?", (at(2026, 11, 28), at(2026, 11, 30))),
    # weekdays: the latest one before today (today is a Tuesday), or the next one after it
    ("What did you think on Monday?", day(2026, 11, 30)),
    ("What did she say on Tuesday?", day(2026, 11, 24)),
    ("What was decided last Friday?", day(2026, 11, 27)),
    ("Who is on call next Friday?", day(2026, 12, 4)),
    ("What was her mood Sunday?", day(2026, 11, 29)),
    # years
    ("Where did Mira live in 2024?", year(2024)),
    ("Which plan did Ada have during 2023?", year(2023)),
    ("Was she a customer throughout 2025?", year(2025)),
    ("What was her plan before 2025?", before(2025)),
    ("What was her city as of 2024?", year(2024)),
    # months
    ("What was the plan in May 2024?", month(2024, 5)),
    ("What was the plan in May of 2024?", month(2024, 5)),
    ("Where did she live before June 2025?", before(2025, 6)),
    ("Where did Mira live last June?", month(2026, 6)),
    ("What was her plan last December?", month(2025, 12)),      # this December has not ended
    ("What is planned next May?", month(2027, 5)),
    ("Where did Mira live in June?", month(2026, 6)),           # past tense: the June that began
    ("Where will the team be in June?", month(2027, 6)),        # future tense: the next June
    ("What is the deadline in May?", month(2027, 5)),           # no tense: 5 months ahead < 7 back
    ("What is the plan in December?", month(2026, 12)),         # asked in December: this one
    # days
    ("What was her address as of March 3rd?", day(2026, 3, 3)),  # 'as of' without a year: the past one
    ("What was her plan on March 3, 2025?", day(2025, 3, 3)),
    ("What was her plan on the 3rd of March 2025?", day(2025, 3, 3)),
    ("What did she hold on 2026-03-03?", day(2026, 3, 3)),
    ("What did she hold before 2026-03-03?", before(2026, 3, 3)),
    ("What was the status as of 2026-11-15?", day(2026, 11, 15)),
    ("What is planned for December 25?", day(2026, 12, 25)),     # 24 days ahead < 341 back
    ("What did we have on December 25?", day(2025, 12, 25)),     # past tense
    ("What is due February 29?", day(2028, 2, 29)),              # the nearest Feb 29 that exists
    ("What is planned before May 3rd?", before(2027, 5, 3)),     # 153 days ahead < 212 back
]

UNRESOLVED = [
    ("What did Mira say recently?", "recently"),
    ("What has she liked lately?", "lately"),
    ("What did she want a few weeks ago?", "a few weeks ago"),
    ("Where did I live before I moved?", "before i moved"),
    ("Where did we go last summer?", "last summer"),
    ("What changed since 2025?", "since 2025"),
    ("What was due on February 30?", "february 30"),
    ("What is the deadline in June?", "in june"),                 # 6 months back = 6 ahead
    ("What was her plan in 2024 or in 2025?", "in 2024"),         # two different times
]

NOW_QUESTIONS = ["What is Mira's home city?", "When is Mira's passport deadline?",
                 "Where does Mira live now?", "What may Ada prefer?", "Which plan does cust-2024 hold?"]


@pytest.mark.parametrize(("question", "window"), RESOLVED, ids=[q for q, _ in RESOLVED])
def test_a_named_time_sets_its_window(question: str, window: tuple[datetime, datetime]) -> None:
    intent = time_intent(question, ASKED)
    assert (intent.start, intent.end) == window
    assert intent.unresolved == ()
    assert intent.phrase and intent.phrase in question.lower()


@pytest.mark.parametrize(("question", "phrase"), UNRESOLVED, ids=[q for q, _ in UNRESOLVED])
def test_an_unclear_time_is_reported_not_guessed(question: str, phrase: str) -> None:
    intent = time_intent(question, ASKED)
    assert intent.start is None and intent.end is None
    assert any(phrase in note for note in intent.unresolved)


@pytest.mark.parametrize("question", NOW_QUESTIONS)
def test_a_question_without_a_time_is_about_now(question: str) -> None:
    assert time_intent(question, ASKED) == time_intent(question, ASKED + timedelta(days=400))
    assert time_intent(question, ASKED).start is None
    assert time_intent(question, ASKED).unresolved == ()


def test_the_table_has_forty_phrasings() -> None:
    assert len(RESOLVED) + len(UNRESOLVED) >= 40


def test_a_month_back_from_the_31st_is_the_last_day_of_the_shorter_month() -> None:
    intent = time_intent("What was it a month ago?", at(2026, 3, 31, 9))
    assert (intent.start, intent.end) == day(2026, 2, 28)
    leap = time_intent("What was it a year ago?", at(2028, 2, 29, 9))
    assert (leap.start, leap.end) == day(2027, 2, 28)


def test_the_window_is_read_in_utc_whatever_the_zone_of_asked_at() -> None:
    lisbon_evening = datetime(2026, 12, 2, 1, 30, tzinfo=timezone(timedelta(hours=2)))  # 23:30 UTC on Dec 1
    intent = time_intent("What did she say yesterday?", lisbon_evening)
    assert (intent.start, intent.end) == day(2026, 11, 30)


instants = st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2090, 12, 31),
                        timezones=st.just(timezone.utc))


@settings(max_examples=200, deadline=None)
@given(asked=instants, n=st.integers(1, 400))
def test_n_days_ago_is_the_calendar_day_n_days_back(asked: datetime, n: int) -> None:
    intent = time_intent(f"What was it {n} days ago?", asked)
    assert intent.start is not None and intent.end is not None
    assert intent.start.date() == asked.date() - timedelta(days=n)
    assert intent.end - intent.start == timedelta(days=1) and intent.start.time().isoformat() == "00:00:00"


@settings(max_examples=200, deadline=None)
@given(asked=instants, m=st.integers(1, 12))
def test_last_month_name_is_the_latest_that_ended_before_this_month(asked: datetime, m: int) -> None:
    intent = time_intent(f"What was it last {MONTHS[m - 1]}?", asked)
    assert intent.start is not None and intent.end is not None
    this_month = datetime(asked.year, asked.month, 1, tzinfo=timezone.utc)
    assert intent.start.month == m and intent.start.day == 1
    assert intent.end <= this_month                                   # it ended before this month
    assert datetime(intent.start.year + 1, m, 1, tzinfo=timezone.utc) >= this_month  # and is the latest


@settings(max_examples=200, deadline=None)
@given(asked=instants, m=st.integers(1, 12))
def test_in_month_name_is_the_nearer_one_or_reported(asked: datetime, m: int) -> None:
    intent = time_intent(f"What is it in {MONTHS[m - 1]}?", asked)
    index = asked.year * 12 + asked.month - 1
    back = (index - (m - 1)) % 12          # months since the latest occurrence began
    ahead = (m - 1 - index) % 12 or 12     # months until the next one begins
    if back == 0:
        assert intent.start == datetime(asked.year, m, 1, tzinfo=timezone.utc)
    elif back == ahead:
        assert intent.start is None and intent.unresolved
    else:
        target = index - back if back < ahead else index + ahead
        assert intent.start == datetime(target // 12, target % 12 + 1, 1, tzinfo=timezone.utc)


@settings(max_examples=100, deadline=None)
@given(asked=instants, y=st.integers(1990, 2099))
def test_before_a_year_is_the_last_instant_of_the_year_before(asked: datetime, y: int) -> None:
    intent = time_intent(f"What was it before {y}?", asked)
    assert intent.end == datetime(y, 1, 1, tzinfo=timezone.utc)
    assert intent.instant == intent.start == intent.end - US
    assert date(y - 1, 12, 31) == intent.start.date()

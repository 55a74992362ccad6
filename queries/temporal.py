"""Temporal intent: does a question ask about now, or about another time, and which?

:func:`time_intent` reads a question against the instant it was asked (``asked_at``) and returns
the valid-time window it names, or none (the question is about now). It is a small fixed grammar,
not a general date parser: the same question and ``asked_at`` always give the same window, and a
phrase the grammar cannot pin down is reported, never guessed. (General parsers such as
``dateparser`` return one instant, not a window, and guess on purpose: "in May" becomes a date
chosen by settings and language detection, where a memory read has to say it could not decide.)

Calendar periods are UTC; weeks start on Monday; windows are half-open ``[start, end)``.

=========================================  =================================================
phrase                                      window
=========================================  =================================================
``yesterday``, ``the day before yesterday`` that day
``N days|weeks|months|years ago``           the day N units before ``asked_at`` (N in digits,
                                            ``a``/``an``/``one`` .. ``twelve``; a month or year
                                            back from the 31st or Feb 29 is the month's last day)
``last|previous week|month|year``           the calendar week / month / year before this one
``this week|month|year``                    this calendar week / month / year
``in the past|last N days|weeks|months``    ``[asked_at - N units, asked_at)``
``last weekend``                            Saturday and Sunday before the current week
``(on|last) Monday`` ...                    the latest Monday before today
``next Monday`` ...                         the first Monday after today
``in|during 2024``, ``throughout 2024``     the year
``May 2024``, ``in May of 2024``           the month
``last May``                                the latest May that ended before this month
``next May``                                the first May that starts after this month
``in|during May``                           the nearest May (see *tense* below)
``March 3rd``, ``3 March``, ``2026-03-03``  that day (a year may follow: ``March 3, 2026``)
``on|as of`` + a day                        that day (without a year, ``as of`` is the past one)
``before`` + a year, month or day           the instant just before it starts
=========================================  =================================================

*Tense*: a month or day without a year is the latest one that started by ``asked_at`` when the
question is in the past tense (``did``, ``was``, ``were``, ``had``, ``used to``), the next one that
has not ended when it is in the future tense (``will``, ``going to``), else the nearer of the two
(the current month or day when ``asked_at`` lies in it); two equally near ones are *ambiguous*.

*Reported, not resolved* (the question is answered for now, with a note): vague phrases
(``recently``, ``lately``, ``a while ago``, ``a few days ago``, ``the other day``, ``back then``),
seasons (``last summer``: which months depends on the hemisphere), times relative to an event
(``before I moved``, ``since we met``), open periods (``since 2025``, ``after May``), a date that
does not exist (``February 30``), and two different times in one question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Callable

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
EPSILON = timedelta(microseconds=1)

_MONTH = r"(?P<month>" + "|".join(MONTHS) + r")"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUM = r"(?P<n>\d{1,3}|" + "|".join(NUMBERS) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_PAST = re.compile(r"\b(did|was|were|had|used to)\b")
_FUTURE = re.compile(r"\b(will|going to|shall)\b")
# Phrases about time that name no window, each with the reason the note gives.
_VAGUE = [
    (re.compile(r"\b(?:recently|lately|a while ago|some time ago|a few (?:days|weeks|months|years) ago|"
                r"the other day|back then)\b"), "is vague: it names no date"),
    (re.compile(r"\b(?:last|this|next) (?:summer|winter|spring|autumn|fall)\b"),
     "names a season: which months depends on the hemisphere"),
    (re.compile(r"\b(?:before|after|since) (?:i|we|you|he|she|they|my|our|the) \w+"),
     "is relative to an event, not a date"),
    (re.compile(r"\b(?:since|after) (?:(?:19|20)\d\d|" + "|".join(MONTHS) + r")\b"),
     "is an open period, not a time to read the state at"),
]


@dataclass(frozen=True)
class TimeIntent:
    """What a question says about time: a window it names (``phrase`` set it), or none (now);
    ``unresolved`` holds phrases it names but does not pin down, each with the reason."""

    start: datetime | None = None
    end: datetime | None = None
    phrase: str | None = None
    unresolved: tuple[str, ...] = ()

    @property
    def instant(self) -> datetime | None:
        """The window's last instant (the state an evidence label is checked against)."""
        return None if self.end is None else self.end - EPSILON


class _Unresolved(Exception):
    """A phrase the grammar recognises but cannot pin down; the message says why."""


def _day(d: date) -> tuple[datetime, datetime]:
    start = datetime.combine(d, time(), timezone.utc)
    return start, start + timedelta(days=1)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    nxt = (year + month // 12, month % 12 + 1)
    return (datetime(year, month, 1, tzinfo=timezone.utc), datetime(*nxt, 1, tzinfo=timezone.utc))


def _year(year: int) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)


def _months_back(d: date, months: int) -> date:
    index = d.year * 12 + d.month - 1 - months
    year, month = divmod(index, 12)
    last = (_month(year, month + 1)[1] - timedelta(days=1)).day
    return date(year, month + 1, min(d.day, last))


def _number(text: str) -> int:
    return NUMBERS[text] if text in NUMBERS else int(text)


def _nearest(options: list[tuple[datetime, datetime]], ref: datetime, tense: str | None,
             what: str, step: Callable[[datetime], int]) -> tuple[datetime, datetime]:
    """Of a month's or day's occurrences (sorted), the one the tense rule picks (module doc);
    nearness is counted in whole steps (months or days) by ``step``."""
    past = [o for o in options if o[0] <= ref]
    future = [o for o in options if o[1] > ref]
    before, after = past[-1], future[0]
    if tense == "past" or before[1] > ref:
        return before
    if tense == "future":
        return after
    gap_before, gap_after = step(ref) - step(before[0]), step(after[0]) - step(ref)
    if gap_before == gap_after:
        raise _Unresolved(f"is ambiguous: the {what} before and the one after are equally near")
    return before if gap_before < gap_after else after


def _month_or_day(month: int, day: int | None, year: int | None, ref: datetime,
                  tense: str | None) -> tuple[datetime, datetime]:
    name = MONTHS[month - 1].capitalize()
    try:
        if year is not None:
            return _day(date(year, month, day)) if day else _month(year, month)
        if day is None:
            options = [_month(y, month) for y in range(ref.year - 1, ref.year + 2)]
            return _nearest(options, ref, tense, name, lambda t: t.year * 12 + t.month)
        options = [_day(date(y, month, day)) for y in range(ref.year - 4, ref.year + 5)
                   if day <= 28 or _valid(y, month, day)]
        if not options:
            raise ValueError
        return _nearest(options, ref, tense, f"{name} {day}", lambda t: t.toordinal())
    except ValueError:
        raise _Unresolved(f"is not a date: {name} {day}{'' if year is None else f', {year}'}") from None


def _valid(year: int, month: int, day: int) -> bool:
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


def _week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


# A rule without a handler is a named period, read by _named.
Rule = tuple[re.Pattern[str], Callable[[re.Match[str], datetime, str | None], tuple[datetime, datetime]] | None]


def _ago(m: re.Match[str], ref: datetime, tense: str | None) -> tuple[datetime, datetime]:
    n, unit, today = _number(m["n"]), m["unit"], ref.date()
    if unit in ("day", "week"):
        return _day(today - timedelta(days=n * (7 if unit == "week" else 1)))
    return _day(_months_back(today, n * (12 if unit == "year" else 1)))


def _past_span(m: re.Match[str], ref: datetime, tense: str | None) -> tuple[datetime, datetime]:
    n, unit = _number(m["n"] or "1"), m["unit"]
    if unit in ("day", "week"):
        return ref - timedelta(days=n * (7 if unit == "week" else 1)), ref
    back = _months_back(ref.date(), n * (12 if unit == "year" else 1))
    return datetime.combine(back, ref.timetz()), ref


def _calendar(m: re.Match[str], ref: datetime, tense: str | None) -> tuple[datetime, datetime]:
    shift = 0 if m["which"] == "this" else -1
    today = ref.date()
    if m["unit"] == "week":
        start = datetime.combine(_week_start(today) + timedelta(weeks=shift), time(), timezone.utc)
        return start, start + timedelta(weeks=1)
    if m["unit"] == "month":
        first = _months_back(today.replace(day=1), -shift)
        return _month(first.year, first.month)
    return _year(today.year + shift)


def _weekday(m: re.Match[str], ref: datetime, tense: str | None) -> tuple[datetime, datetime]:
    wanted, today = WEEKDAYS.index(m["weekday"]), ref.date()
    if m["which"] == "next":
        return _day(today + timedelta(days=(wanted - today.weekday() - 1) % 7 + 1))
    return _day(today - timedelta(days=(today.weekday() - wanted - 1) % 7 + 1))


def _weekend(m: re.Match[str], ref: datetime, tense: str | None) -> tuple[datetime, datetime]:
    saturday = _week_start(ref.date()) - timedelta(days=2)
    start = _day(saturday)[0]
    return start, start + timedelta(days=2)


def _relative_month(m: re.Match[str], ref: datetime, tense: str | None) -> tuple[datetime, datetime]:
    month = MONTHS.index(m["month"]) + 1
    this = ref.year * 12 + ref.month - 1
    occurrences = [y * 12 + month - 1 for y in range(ref.year - 1, ref.year + 2)]
    index = max(o for o in occurrences if o < this) if m["which"] == "last" else \
        min(o for o in occurrences if o > this)
    return _month(index // 12, index % 12 + 1)


def _named(groups: dict[str, str | None], ref: datetime, tense: str | None) -> tuple[datetime, datetime]:
    """A named year, month or day (``groups`` of one of the last four rules)."""
    iso = groups.get("iso")
    if iso:
        try:
            return _day(date.fromisoformat(iso))
        except ValueError:
            raise _Unresolved("is not a date") from None
    if groups.get("month") is None:
        return _year(int(str(groups["year"])))
    day = groups.get("day") or groups.get("day2")
    year = groups.get("year") or groups.get("year2")
    if groups.get("prefix") == "as of" and tense is None:
        tense = "past"
    return _month_or_day(MONTHS.index(str(groups["month"])) + 1, int(day) if day else None,
                         int(year) if year else None, ref, tense)


_DATE = (r"(?:(?P<iso>\d{4}-\d\d-\d\d)"
         r"|" + _MONTH + r"\s+" + _DAY + r"(?:,?\s+" + _YEAR + r")?(?!\d)"
         r"|(?P<day2>[0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month2>" + "|".join(MONTHS) + r")"
         r"(?:,?\s+(?P<year2>(?:19|20)\d\d))?)")
RULES: list[Rule] = [
    (re.compile(r"\b(?:the )?day before yesterday\b"), lambda m, r, t: _day(r.date() - timedelta(days=2))),
    (re.compile(r"\byesterday\b"), lambda m, r, t: _day(r.date() - timedelta(days=1))),
    (re.compile(r"\b" + _NUM + r" " + _UNIT + r" ago\b"), _ago),
    (re.compile(r"\b(?:in|over|during) the (?:past|last) (?:" + _NUM + r" )?" + _UNIT + r"\b"), _past_span),
    (re.compile(r"\blast weekend\b"), _weekend),
    (re.compile(r"\b(?P<which>last|previous|this) (?P<unit>week|month|year)\b"), _calendar),
    (re.compile(r"\b(?:(?P<which>on|last|next) )?(?P<weekday>" + "|".join(WEEKDAYS) + r")\b"), _weekday),
    (re.compile(r"\b(?P<which>last|next) " + _MONTH + r"\b"), _relative_month),
    # the last four are named periods (days, months, years), read by _named
    (re.compile(r"\b(?:(?P<prefix>before|on|as of|in|during|by) )?" + _DATE + r"\b"), None),
    (re.compile(r"\b(?:(?P<prefix>before|as of|in|during|throughout) )?" + _MONTH + r"(?: of)?,? " + _YEAR + r"\b"), None),
    (re.compile(r"\b(?P<prefix>before|in|during) " + _MONTH + r"\b"), None),
    (re.compile(r"\b(?P<prefix>before|in|during|throughout|as of) " + _YEAR + r"\b"), None),
]


def _span(rule: Rule, m: re.Match[str], ref: datetime, tense: str | None) -> tuple[datetime, datetime]:
    handler = rule[1]
    if handler is not None:
        return handler(m, ref, tense)
    groups = m.groupdict()
    if groups.get("month2"):
        groups = {**groups, "month": groups["month2"]}
    start, end = _named(groups, ref, tense)
    return (start - EPSILON, start) if groups.get("prefix") == "before" else (start, end)


def _vague(text: str) -> list[tuple[re.Match[str], str]]:
    """The vague phrases of ``text`` in order, a phrase that two patterns match reported once."""
    hits = sorted(((m, why) for pattern, why in _VAGUE for m in pattern.finditer(text)),
                  key=lambda hit: hit[0].start())
    kept: list[tuple[re.Match[str], str]] = []
    for m, why in hits:
        if not any(m.start() < k.end() and k.start() < m.end() for k, _ in kept):
            kept.append((m, why))
    return kept


def time_intent(question: str, asked_at: datetime) -> TimeIntent:
    """The valid-time window ``question`` names, read relative to ``asked_at`` (module doc)."""
    text = " ".join(question.lower().split())
    ref = asked_at.astimezone(timezone.utc)
    tense = "past" if _PAST.search(text) else "future" if _FUTURE.search(text) else None
    vague = _vague(text)
    unresolved = [f'"{m.group(0)}" {why}' for m, why in vague]
    taken: list[tuple[int, int]] = [m.span() for m, _ in vague]
    found: list[tuple[str, tuple[datetime, datetime]]] = []
    hits = sorted(((m, rule) for rule in RULES for m in rule[0].finditer(text)),
                  key=lambda hit: (hit[0].start(), -len(hit[0].group(0))))
    for m, rule in hits:
        if any(m.start() < end and start < m.end() for start, end in taken):
            continue
        taken.append(m.span())
        try:
            found.append((m.group(0), _span(rule, m, ref, tense)))
        except _Unresolved as exc:
            unresolved.append(f'"{m.group(0)}" {exc}')
    windows = {span for _, span in found}
    if len(windows) > 1:
        said = ", ".join(f'"{phrase}"' for phrase, _ in found)
        return TimeIntent(unresolved=(*unresolved, f"the question names several times ({said})"))
    if not found or unresolved:
        return TimeIntent(unresolved=tuple(unresolved))
    phrase, (start, end) = found[0]
    return TimeIntent(start, end, phrase)

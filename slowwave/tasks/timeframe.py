"""timeframe: the days a query names, and the window of event time search weighs for them.

Two kinds of naming, tried in this order:

- a date or a month with its year ("on 3 June, 2023", "October 13, 2023", "2023-06-03", "in
  April 2022"): ``named_dates``;
- a time counted back from when the question is asked ("two weeks ago", "last Tuesday", "in
  the past month", "yesterday", "last weekend"): ``counted_back``, from the day of the
  search's ``as_of``, or of now. What a person did "two weeks ago" is in what they told
  about then, and a general question ("any tips for my kitchen?") names no time and is
  searched as before. Words that look ahead or only at today ("tonight", "tomorrow", "this
  weekend") name nothing here: what to do tonight is asked of what is known, not of what was
  said today.

``temporal_window`` turns the days into the window a search's temporal channel reads: from
``temporal_before_days`` before them to ``temporal_after_days`` after (an event is often told
of days later), in UTC. A count back is loose ("two weeks ago" is not the fourteenth day to the
hour), so its days are widened by a quarter of the count each way (half where the count itself
is vague: "a few", "a couple of").
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, date, datetime, timedelta

from slowwave.models.settings import SearchSettings

Days = tuple[date, date]

_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_MONTH_YEAR = re.compile(rf"\b{_ORDINAL}\s+(?:of\s+)?{_MONTH},?\s*(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_ORDINAL},?\s*(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I)


def _month(name: str) -> int:
    return [m.lower() for m in calendar.month_abbr].index(name[:3].lower())


def _month_days(year: int, month: int) -> Days:
    """The first and last day of a month."""
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def named_dates(query: str) -> Days | None:
    """The first and last day of the date or month (with its year) the query names, if any:
    "on 3 June, 2023", "October 13, 2023", "2023-06-03", "in April 2022"."""
    try:
        if match := _ISO_DATE.search(query):
            day = date(int(match[1]), int(match[2]), int(match[3]))
            return day, day
        if match := _DAY_MONTH_YEAR.search(query):
            day = date(int(match[3]), _month(match[2]), int(match[1]))
            return day, day
        if match := _MONTH_DAY_YEAR.search(query):
            day = date(int(match[3]), _month(match[1]), int(match[2]))
            return day, day
        if match := _MONTH_YEAR.search(query):
            return _month_days(int(match[2]), _month(match[1]))
    except ValueError:  # "February 30, 2023": no such day
        return None
    return None


_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
# how many a vague count stands for
_VAGUE = {"a couple of": 2, "couple of": 2, "a couple": 2, "a few": 3, "few": 3, "several": 4}
_COUNT = (
    r"(\d{1,3}|a couple(?: of)?|couple of|a few|few|several|an?|one|two|three|four|five|six"
    r"|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(day|week|month|year)s?"
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# "three weeks ago", "a couple of months ago"
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)
# "in the past month", "over the last few weeks", "the past two years", "last 3 days" (a
# bare "last month" is the calendar's, below; "the last day of the trip" names no time)
_PAST = re.compile(
    rf"\b(?:(?:in|over|during|within|for|throughout)\s+the\s+(?:past|last|previous)"
    rf"|(?:the\s+)?past|last)\s+(?:{_COUNT}\s+)?{_UNIT}\b",
    re.I,
)
_LAST_WEEKDAY = re.compile(rf"\blast\s+({'|'.join(_WEEKDAYS)})\b", re.I)
_LAST_CALENDAR = re.compile(r"\blast\s+(weekend|week|month|year)\b", re.I)
_YESTERDAY = re.compile(r"\byesterday\b", re.I)
# "recently", "lately": the month up to today
_RECENTLY = re.compile(r"\b(?:recently|lately|of late)\b", re.I)
# "this month", "since the start of the year": from the unit's start to today
_THIS = re.compile(
    r"\b(?:this|since\s+the\s+(?:start|beginning)\s+of\s+(?:the|this))\s+(week|month|year)\b",
    re.I,
)
_MONTH_NAME = (
    r"(january|february|march|april|may|june|july|august|september|october|november|december)"
)
# "in March" with no year: the latest March; "from July to October"
_IN_MONTH = re.compile(rf"\b(?:in|during|throughout)\s+{_MONTH_NAME}\b(?!,?\s*\d)", re.I)
_MONTH_SPAN = re.compile(
    rf"\bfrom\s+{_MONTH_NAME}\s+(?:to|until|till|through)\s+{_MONTH_NAME}\b(?!,?\s*\d)", re.I
)


def _count(word: str | None) -> tuple[int, bool]:
    """How many a count says (1 when none is said), and whether it is vague."""
    if word is None:
        return 1, False
    word = " ".join(word.lower().split())
    if word in _VAGUE:
        return _VAGUE[word], True
    return (int(word) if word.isdigit() else _NUMBERS[word]), False


def counted_back(query: str, today: date) -> Days | None:
    """The first and last day of a time the query counts back from ``today``, if it does:
    "5 days ago", "two weeks ago" (the day that many back, widened by a quarter of the count
    each way, half for "a few"), "yesterday", "last Tuesday" (the latest Tuesday before today),
    "last weekend", "last week" / "last month" / "last year" (the calendar's one before this
    one), "in the past month", "over the last few weeks" (from that far back to today), "this
    month", "since the start of the year" (from its start to today), "in March" (the latest
    March), "from July to October", "recently" and "lately" (the month up to today)."""
    if match := _AGO.search(query):
        n, vague = _count(match[1])
        span = n * _UNIT_DAYS[match[2].lower()]
        day = today - timedelta(days=span)
        slack = timedelta(days=max(1, span // (2 if vague else 4)) if span > 1 else 0)
        return day - slack, min(day + slack, today)
    if _YESTERDAY.search(query):
        day = today - timedelta(days=1)
        return day, day
    if match := _LAST_WEEKDAY.search(query):
        back = (today.weekday() - _WEEKDAYS.index(match[1].lower())) % 7 or 7
        day = today - timedelta(days=back)
        return day, day
    # "in the last month" is the month up to today; "last month" bare, the calendar's
    if (match := _PAST.search(query)) and (match[1] or not _bare_last(match[0])):
        n, _ = _count(match[1])
        return today - timedelta(days=n * _UNIT_DAYS[match[2].lower()]), today
    if match := _LAST_CALENDAR.search(query):
        return _calendar_before(match[1].lower(), today)
    if match := _THIS.search(query):
        return _calendar_start(match[1].lower(), today), today
    if match := _MONTH_SPAN.search(query):
        first, last = _latest_month(match[1], today), _latest_month(match[2], today)
        if first[0] > last[0]:  # "from November to February": the November before
            first = _latest_month(match[1], first[0] - timedelta(days=1))
        return first[0], last[1]
    if match := _IN_MONTH.search(query):
        return _latest_month(match[1], today)
    if _RECENTLY.search(query):
        return today - timedelta(days=_UNIT_DAYS["month"]), today
    return None


def _calendar_start(unit: str, today: date) -> date:
    """The first day of the calendar's week (Monday), month or year ``today`` is in."""
    if unit == "week":
        return today - timedelta(days=today.weekday())
    if unit == "month":
        return today.replace(day=1)
    return date(today.year, 1, 1)


def _latest_month(name: str, today: date) -> Days:
    """The first and last day of the latest month of this name begun by ``today``."""
    month = _month(name)
    return _month_days(today.year if month <= today.month else today.year - 1, month)


def _bare_last(said: str) -> bool:
    """Whether a "last <unit>" is said without "the" before it ("last month", not "the last
    month"): the calendar's unit before this one, not the span up to today."""
    return said.lower().split()[0] == "last"


def _calendar_before(unit: str, today: date) -> Days:
    """The calendar's weekend, week, month or year before the one ``today`` is in."""
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        if today.weekday() >= 5:  # said at the weekend: the one before
            saturday -= timedelta(days=7)
        return saturday, saturday + timedelta(days=1)
    last = _calendar_start(unit, today) - timedelta(days=1)
    return _calendar_start(unit, last), last


def named_days(query: str, today: date) -> Days | None:
    """The days the query names: a date or a month with its year, else a time it counts back
    from ``today``."""
    return named_dates(query) or counted_back(query, today)


def temporal_window(
    query: str, policy: SearchSettings, now: datetime | None = None
) -> tuple[datetime, datetime] | tuple[None, None]:
    """When what the query's days name was told: from ``temporal_before_days`` ahead of them
    to ``temporal_after_days`` past them (an event is often told of days later), in UTC; a
    time counted back counts from ``now``'s day (now when not given)."""
    today = (now or datetime.now(UTC)).astimezone(UTC).date()
    named = named_days(query, today)
    if named is None:
        return None, None
    first, last = named
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    end = datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)
    return (
        start - timedelta(days=policy.temporal_before_days),
        end + timedelta(days=policy.temporal_after_days),
    )

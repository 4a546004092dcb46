"""grounding: a fact may only say what its sources say.

Every email address, URL, number (digits, number words, amounts such as ``$150,000`` or
``150k``), year, month and day and, at the ``names`` level, every proper name in a fact to be
written must occur in what the model was given for it: the messages of the chunk's episodes
(not only those it cites: a small model often cites the wrong one of two), their speakers
and times as the prompt shows them, or a fact the model was shown. Compared normalised:
case, punctuation and possessives aside, numbers by value (``two`` = ``2``, ``150k`` =
``$150,000``), a URL without its scheme and ``www.``. A date the model worked out from the
episode's time ("yesterday" on 8 May → 7 May; "last year") is grounded when it lies near the
episodes' span.

``ungrounded_span`` answers the first span that is not grounded, or None; the guard refuses
such an item and the decision log keeps the span (``tasks.guard``). What it checks is
``SLOWWAVE_GROUNDING``: ``off``, ``literals`` (everything but names) or ``names`` (everything).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, timedelta
from enum import StrEnum

from slowwave.models.consolidation import MONTHS, episode_time
from slowwave.models.episode import Episode
from slowwave.models.fact import Fact


class Grounding(StrEnum):
    """How strictly a fact must be grounded in its sources (``SLOWWAVE_GROUNDING``)."""

    off = "off"
    literals = "literals"  # emails, URLs, numbers, amounts, dates
    names = "names"  # the literals and proper names


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)
_URL = re.compile(
    r"(?:https?://|www\.)[^\s<>\"']+"
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|ai|app|co|uk|de|fr|edu|gov|info|me|ly)"
    r"\b(?:/[^\s<>\"']*)?",
    re.I,
)
_NUMBER = re.compile(
    r"(?<![\w.])\$?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:\s?(k|m|bn|thousand|million|billion)\b)?",
    re.I,
)
_ORDINAL_DIGITS = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.I)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_CAPITALISED = re.compile(r"\b[A-Z][^\W_]*(?:['’-][^\W_]+)*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")

_UNITS = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "dozen": 12,
    "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "twice": 2, "thrice": 3,
}  # fmt: skip
# In sources only: "one", "a couple" and "first" stand for numbers there, but in a fact they
# are as often words ("one of her friends", "for the first time") and are not checked.
_SOURCE_ONLY = {"one": 1, "first": 1, "once": 1, "single": 1, "couple": 2, "pair": 2}
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}
_MONTH = {m.lower(): i for i, m in enumerate(MONTHS, 1)}
_MONTH.update({m.lower()[:3]: i for i, m in enumerate(MONTHS, 1) if m != "May"})
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
# Words a sentence may start with that are not names (pronouns, articles, conjunctions,
# prepositions, adverbs of time): a capitalised word after a sentence's end is a name only
# when it is not one of these.
_NOT_NAMES = frozenset(
    re.findall(
        r"\w+",
        """a an the i he she it they we you his her its their our my your this that these those
    there here both either neither each every all some many most much few several no not
    and but or so yet nor if when while after before since until as because although though
    however also then now today tonight yesterday tomorrow recently currently lately soon
    later earlier once again still already always never often sometimes usually in on at of
    for with without from to by about into over under during between among through across
    what who whom whose which where why how one another other such being having""",
    )
)

YEAR_SLACK = 1  # "last year", "next year"
DAY_SLACK = timedelta(days=45)  # "yesterday", "last month", "next Friday"


@dataclass
class Sources:
    """What one item's facts may draw from, normalised for the comparison."""

    words: set[str] = field(default_factory=set)
    numbers: set[float] = field(default_factory=set)
    text: str = ""  # lowercase, for email addresses and URLs
    days: list[tuple[date, date]] = field(default_factory=list)  # the episodes' spans

    def add(self, other: Sources) -> None:
        self.words |= other.words
        self.numbers |= other.numbers
        self.text += "\n" + other.text
        self.days += other.days


def sources_of(texts: Iterable[str], spans: Sequence[tuple[date, date]] = ()) -> Sources:
    """The sources made of ``texts`` (messages, speakers, times, facts) and the days they span."""
    found = Sources(days=list(spans))
    lines = []
    for text in texts:
        lines.append(text.lower())
        found.words.update(_words(text))
        found.numbers.update(_numbers(text, source=True))
    found.text = "\n".join(lines)
    return found


def episode_sources(episode: Episode) -> Sources:
    """An episode's messages, speakers and time as the prompt shows them."""
    texts = [m.text for m in episode.messages]
    texts += sorted({m.speaker for m in episode.messages})
    texts.append(episode_time(episode))
    span = (episode.start_at.astimezone(UTC).date(), episode.end_at.astimezone(UTC).date())
    return sources_of(texts, [span])


def fact_sources(facts: Sequence[Fact]) -> Sources:
    return sources_of(f.fact for f in facts)


def ungrounded_span(fact: str, sources: Sources, level: Grounding) -> str | None:
    """The first span of ``fact`` its sources do not give, or None."""
    if level is Grounding.off:
        return None
    rest, linked = fact, _url(sources.text)
    for pattern in (_EMAIL, _URL):
        for match in pattern.finditer(rest):
            if _url(match.group(0)) not in linked:
                return match.group(0).rstrip(".,;:!?)")
        rest = pattern.sub(" ", rest)
    span = _ungrounded_number(rest, sources)
    if span is not None:
        return span
    span = _ungrounded_date_word(rest, sources)
    if span is not None or level is Grounding.literals:
        return span
    return _ungrounded_name(rest, sources)


def _url(text: str) -> str:
    """Lowercase, without schemes, ``www.`` and a final slash or punctuation."""
    text = re.sub(r"https?://", "", text.lower())
    text = re.sub(r"\bwww\.", "", text)
    return text.rstrip("/.,;:!?)")


def _words(text: str) -> set[str]:
    out: set[str] = set()
    for word in _WORD.findall(text.lower()):
        word = word.replace("’", "'")
        out.add(word)
        if word.endswith("'s"):
            out.add(word[:-2])
        out.update(word.split("'"))
    for part in re.findall(r"[^\W_]+", text.lower()):
        out.add(part)  # each part of a hyphenated or dotted word too
    return out


def _numbers(text: str, *, source: bool) -> Iterable[float]:
    for match in _NUMBER.finditer(text):
        value = float(match.group(1).replace(",", "") + (match.group(2) or ""))
        scale = (match.group(3) or "").lower()
        yield value * _SCALE.get(scale, 1)
        if source:
            yield value  # "150k" also says 150
    for match in _ORDINAL_DIGITS.finditer(text):
        yield float(match.group(1))
    words = [w.lower() for w in re.findall(r"[^\W\d_]+", text)]
    table = {**_UNITS, **_SOURCE_ONLY} if source else _UNITS
    for i, word in enumerate(words):
        if word in table:
            value = float(table[word])
            following = words[i + 1] if i + 1 < len(words) else ""
            yield value * _SCALE.get(following, 1)
            if source and following in _SCALE:
                yield value


def _ungrounded_number(text: str, sources: Sources) -> str | None:
    for match in _NUMBER.finditer(text):
        value = float(match.group(1).replace(",", "") + (match.group(2) or ""))
        value *= _SCALE.get((match.group(3) or "").lower(), 1)
        if value in sources.numbers or _near_date(text, match, value, sources):
            continue
        return match.group(0).strip()
    for match in re.finditer(r"[^\W\d_]+", text):
        word = match.group(0).lower()
        if word in _UNITS and word not in sources.words and _UNITS[word] not in sources.numbers:
            return match.group(0)
    return None


def _near_date(text: str, match: re.Match[str], value: float, sources: Sources) -> bool:
    """A year or a day of a month the model worked out from the episodes' time."""
    if not sources.days:
        return False
    if value.is_integer() and 1900 <= value <= 2100:
        years = {d.year for span in sources.days for d in span}
        return min(years) - YEAR_SLACK <= value <= max(years) + YEAR_SLACK
    if not value.is_integer() or not 1 <= value <= 31:
        return False
    around = text[max(0, match.start() - 12) : match.end() + 12].lower()
    months = [n for name, n in _MONTH.items() if re.search(rf"\b{name}\b", around)]
    if not months:
        return False
    for start, end in sources.days:
        for year in {start.year - 1, start.year, end.year, end.year + 1}:
            try:
                day = date(year, months[0], int(value))
            except ValueError:
                continue
            if start - DAY_SLACK <= day <= end + DAY_SLACK:
                return True
    return False


def _ungrounded_date_word(text: str, sources: Sources) -> str | None:
    """A month named in the fact and nowhere in its sources or near their span (a weekday is
    not checked: any date has one)."""
    near = {
        d.month for start, end in sources.days for d in _days_around(start, end)
    }  # months the episodes' span, widened by the slack, touches
    for match in re.finditer(r"[^\W\d_]+", text):
        word = match.group(0).lower()
        if word in _MONTH and match.group(0)[0].isupper():
            if word in sources.words or _MONTH[word] in near:
                continue
            return match.group(0)
    return None


def _days_around(start: date, end: date) -> Iterable[date]:
    day = start - DAY_SLACK
    while day <= end + DAY_SLACK:
        yield day
        day += timedelta(days=14)
    yield end + DAY_SLACK


def names_in(text: str) -> list[str]:
    """The proper names of ``text``: capitalised words, less a sentence's first word when it is
    a common one ("The", "She", "Being"), months, weekdays and "I"."""
    names = []
    for match in _CAPITALISED.finditer(text):
        word = match.group(0)
        before = text[: match.start()].rstrip()
        starts = not before or bool(_SENTENCE_END.search(before))
        lowered = word.lower().replace("’", "'")
        if starts and lowered in _NOT_NAMES:
            continue
        if lowered in _MONTH or lowered in _WEEKDAYS or lowered == "i":
            continue  # checked as dates
        names.append(word)
    return names


def _ungrounded_name(text: str, sources: Sources) -> str | None:
    for word in names_in(text):
        lowered = word.lower().replace("’", "'")
        parts = [p for p in re.split(r"['-]", lowered) if p and p != "s"]
        if all(p in sources.words for p in parts) or lowered in sources.words:
            continue
        return word
    return None

"""The change-check prompt and the answer schema it asks for, kept together.

A new fact and its nearest known fact about the same person are shown as a pair; the model
writes the known fact as it stands once the new one is true, and the known fact is out of
date when that sentence swaps one of its values for one of the new fact's (``replaced``).
Asked instead whether the known fact "still holds", the default model said no for 8 of 10
pairs, 4 of them wrongly ("Omar runs a small bakery in Lyon" beside "Omar prefers mornings
for meetings"); asked to name what each fact is about, it copied the example's words.
Rewriting is what a small model does well, and a copied sentence, the answer for everything
unrelated, changes nothing. One pair a request: shown several at once, it wrote the later
fact back as the rewrite of the known one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from slowwave.models.consolidation import MAX_FACT_CHARS
from slowwave.models.fact import numbers_in
from slowwave.models.merge import exactly_these_pairs
from slowwave.models.words import FUNCTION_WORDS

# pairs a chunk asks about; each in a request of its own: shown three at a time, the default
# model wrote the later fact back as the known one's rewrite for 6 of 23 pairs (15 of 23 right,
# against 19 of 22 one at a time)
MAX_PAIRS_PER_CHUNK = 20


class ChangeVerdict(BaseModel):
    """One pair's known fact as it stands once the later one is true."""

    model_config = ConfigDict(extra="forbid")

    pair: str = Field(description="The pair's id as shown (P1, P2, ...).")
    now: str = Field(
        description="The known fact with the later one's new value where the later one changes "
        "it; otherwise the known fact copied word for word.",
        json_schema_extra={"maxLength": MAX_FACT_CHARS},
    )


class ChangeJudgement(BaseModel):
    """The model's whole answer for one chunk's pairs."""

    model_config = ConfigDict(extra="forbid")

    pairs: list[ChangeVerdict] = Field(
        description="One verdict per pair shown, in order.",
        json_schema_extra={"maxItems": MAX_PAIRS_PER_CHUNK},
    )

    @classmethod
    def response_schema(cls, pairs: int) -> dict[str, Any]:
        """Exactly ``pairs`` verdicts, each naming one of the pairs shown."""
        return exactly_these_pairs(cls, "ChangeVerdict", pairs)


# words, numbers and times ("25:50", "3.5"), lower-cased; the function words a rewrite may
# add or drop without changing a value
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9:'’.,-]*[A-Za-z0-9]|[A-Za-z0-9]")
# and the verbs a rewrite may add or drop without changing a value
_NO_VALUE = FUNCTION_WORDS | {"has", "have", "had", "do", "does", "did", "being", "now", "still"}


def value_tokens(sentence: str) -> set[str]:
    """The words and numbers of ``sentence`` a value is written in."""
    return {t.lower().replace("’", "'") for t in _TOKEN.findall(sentence)} - _NO_VALUE


# a word with its quotes, brackets and trailing punctuation around it
_EDGES = "\"'“”‘’()[]{},;:"


def named_values(sentence: str, subjects: Collection[str] = ()) -> set[str]:
    """The values ``sentence`` names: its numbers (in digits) and the capitalised words inside
    it, a place, a person, a month, a title ("Manchester", "July", "TechCorp"), lower-cased;
    its first word, a sentence's first after a full stop, "I" and the ``subjects`` aside."""
    values = set(numbers_in(sentence))
    for subject in subjects:  # "The user said The user thinks ...": no value "the"
        sentence = re.sub(rf"\b{re.escape(subject)}\b", "_", sentence)
    opening = True
    for raw in sentence.split():
        word = raw.strip(_EDGES + ".!?…")
        for possessive in ("'s", "’s"):
            word = word.removesuffix(possessive)
        if not opening and word[:1].isupper() and word != "I":
            values.add(word.lower())
        opening = raw.rstrip(_EDGES).endswith((".", "!", "?", "…"))
    return values


def names_another_value(later: str, known: str, subjects: Collection[str] = ()) -> bool:
    """Whether ``later`` names a value ``known`` does not and ``known`` one ``later`` does not:
    a pair in which a place, a person or a number can be swapped ("Dana is moving to Manchester
    ..." beside "... a high school in Leeds."), unlike "Melanie showed Caroline a photo of
    bowls" beside "Melanie is supportive of Caroline", or "Omar hired an apprentice" beside
    "Omar runs a bakery in Lyon"."""
    mine, theirs = named_values(later, subjects), named_values(known, subjects)
    return bool(mine - theirs) and bool(theirs - mine)


def replaced(known: str, later: str, now: str) -> bool:
    """Whether ``now``, the model's ``known`` fact as it stands once ``later`` is true, swapped
    a value of ``known`` for one of ``later``: it is a rewrite of ``known`` (keeps a word of it
    that ``later`` does not say), drops a word or number of it and adds one that ``later``
    says ("The user owns 4 bikes." for "The user owns 3 bikes." once "The user now has 4
    bikes"). A copy changes nothing; nor does the later fact written back (the answer to a
    question the model did not follow), a rewrite that only adds ("Omar runs a bakery in Lyon
    with his husband Theo and his apprentice Lea": both hold), or one whose new words come
    from neither fact (the model's own slip, "his wife Theo")."""
    before, after, said = value_tokens(known), value_tokens(now), value_tokens(later)
    if (after & before) - said and before - after and (after - before) & said:
        return True
    # a number swapped, the later fact written back or not: "The user attended five sessions
    # of the bereavement support group last year." for "... three sessions ...": the rewrite
    # states a number of the later fact in place of the known one's, about the same thing (a
    # word beside the subject in common); "The user has 2 cats." for "The user owns 3 bikes."
    # shares only the subject
    old, new, stated = numbers_in(known), numbers_in(later), numbers_in(now)
    return bool(old and stated & (new - old) and not stated & old and len(after & before) >= 2)


# two sentences whose words beside their numbers are this alike (Jaccard of their stems) state
# one count at two times: "The user attended five sessions of the bereavement support group and
# found it really helpful in processing their emotions" after "The user did attend three
# sessions of the bereavement support group, and it really helped The user process The user's
# emotions." (0.82); no two of LoCoMo's 1,755 gold observations about one person that state
# different numbers reach even 0.6
ALIKE_BUT_FOR_NUMBERS = 0.75
_STEM_ENDINGS = ("ing", "ful", "ed", "es", "s")


def _stems(sentence: str) -> set[str]:
    """The word stems of ``sentence`` beside its numbers and its function words."""
    stems = set()
    for raw in re.findall(r"[a-z]+(?:['’][a-z]+)?", sentence.lower()):
        word = re.sub(r"['’]s$", "", raw)
        if word in _NO_VALUE or numbers_in(word):
            continue
        for ending in _STEM_ENDINGS:
            if word.endswith(ending) and not word.endswith("ss") and len(word) > len(ending) + 2:
                word = word[: -len(ending)]
                break
        stems.add(word)
    return stems


def alike_but_for_numbers(later: str, known: str) -> bool:
    """Whether ``later`` states another number for what ``known`` states, in the same words
    otherwise: a count, a time or a score that changed, which needs no model to tell (shown the
    pair, the default model copied "three sessions" back beside "five sessions")."""
    old, new = numbers_in(known), numbers_in(later)
    if not old or not new or old == new:
        return False
    mine, theirs = _stems(later), _stems(known)
    return len(mine & theirs) >= ALIKE_BUT_FOR_NUMBERS * max(len(mine | theirs), 1)


_SWAP_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")


def one_word_swapped(later: str, known: str) -> tuple[str, str] | None:
    """The word ``known`` has where ``later`` has another, when the two say the same in the same
    words but that one ("Kenji works at a night shift job." → "... a day shift job."): the
    same statement with another value, as the model meant in proposing it as an update. None
    where they differ otherwise, or in a function word ("a" → "the") or a number (a count:
    ``count_changed``)."""
    old, new = _SWAP_WORD.findall(known.lower()), _SWAP_WORD.findall(later.lower())
    if len(old) != len(new) or len(old) < 3:
        return None
    apart = [(o, n) for o, n in zip(old, new, strict=True) if o != n]
    if len(apart) != 1:
        return None
    (was, now) = apart[0]
    if {was, now} & (FUNCTION_WORDS | _COUNTING) or was.isdigit() or now.isdigit():
        return None
    return was, now


# number words that count something ("three sessions"); "one", "once", "none" and the
# ordinals are left out: "one of the ...", "the first time" count nothing
_COUNTING = {
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
    "twice", "thrice",
}  # fmt: skip
# words beside a number that say nothing of what it counts (stems)
_NOT_UNITS = {
    "which", "who", "whose", "where", "when", "while", "includ", "last", "next", "about",
    "around", "over", "nearly", "almost", "than", "only", "just", "per", "at", "by", "to",
    "from", "for", "with", "within", "after", "before", "since", "until", "or", "more", "less",
    # a 5K, a 10k: a race's distance, another race and not another count of one
    "k",
}  # fmt: skip
# a number of years, days, ... is a time or a duration ("three years ago", "for 5 years"),
# stated anew as time passes, not a count that changed ...
_TIME_UNITS = {"year", "month", "week", "day", "hour", "minut", "second", "decade", "tim"}  # stems
# ... unless it is how long something has gone on until now ("for 4 weeks now", "it's already
# been 3 weeks", "has been living there for 3 months"): that value grows, and the later one is
# what holds (LongMemEval: "How long have I had my cat?", 6 months, then 9)
_ONGOING_AFTER = {"now", "already", "so"}  # "so far"
_ONGOING_BEFORE = {"been", "already"}
_APPROXIMATELY = {"about", "around", "nearly", "almost", "over", "roughly", "only", "just"}
_COUNT_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[A-Za-z]+(?:['’][A-Za-z]+)?")
# words between a number and what it counts that say nothing of what ("27 different species")
_COUNT_MODIFIERS = {"different", "unique", "distinct", "separate", "individual", "total"}
# a count named before its number: "the species count is now 32", "the number of books the
# user owns is 12"
_COUNT_NOUNS = {"count", "total", "tally", "number"}
_COUNT_VERBS = {"is", "are", "was", "reached", "at", "to"}
# a sentence that names a best or a record ("a personal best of 25:50", "her fastest time"):
# the times it states are that best's, a value that changes when it is beaten
_BEST = re.compile(r"\b(?:personal best|personal record|best time|fastest|record time|PR)\b", re.I)


def counts(sentence: str) -> dict[str, frozenset[str]]:
    """Each number ``sentence`` states, by what it counts: the stem of the word after it
    ("five sessions" → session, "4 MCU films" → mcu) or, for digits, of the word before it
    ("on page 200" → page#). A number beside a function word only ("a time of 27:12") is
    not counted, unless it is a time in a sentence that names a best or a record ("a
    personal best time of 25:50" → best#): a best beaten is a value that changed."""
    tokens = _COUNT_TOKEN.findall(sentence)
    found: dict[str, set[str]] = {}
    if _BEST.search(sentence):
        for token in tokens:
            if ":" in token and token[0].isdigit():
                found.setdefault("best#", set()).add(token)
    lowered = [token.lower() for token in tokens]
    for i, token in enumerate(tokens):
        digits = token[0].isdigit()
        if not digits and lowered[i] not in _COUNTING:
            continue
        value = next(iter(numbers_in(token)), None)
        if value is None:
            continue
        following = i + 1
        while following < len(tokens) - 1 and lowered[following] in _COUNT_MODIFIERS:
            following += 1
        after = _stems(tokens[following]) - _NOT_UNITS if following < len(tokens) else set()
        before = _stems(tokens[i - 1]) - _NOT_UNITS if digits and i > 0 else set()
        units = (
            after or {f"{unit}#" for unit in before} or _named_before(lowered, i)
        ) - _TIME_UNITS
        if after & _TIME_UNITS and _ongoing(lowered, i):
            units = {f"{unit}~" for unit in after & _TIME_UNITS}
        for unit in units:
            found.setdefault(unit, set()).add(value)
    return {unit: frozenset(values) for unit, values in found.items()}


def _named_before(tokens: Sequence[str], at: int) -> set[str]:
    """What the number at ``at`` (lowercase tokens) counts where the sentence named it before:
    "the species count (of woodpeckers) is now 32" → speci, woodpecker; "the number of books
    ... is 12" → book. The number follows "is", "reached", "at" or "to" (with "now" or
    "currently" between) and the count noun comes earlier in the sentence."""
    start = at - 1
    while start >= 0 and tokens[start] in {"now", "currently", "up"}:
        start -= 1
    if start < 0 or tokens[start] not in _COUNT_VERBS:
        return set()
    units: set[str] = set()
    for n in range(start):
        if tokens[n] not in _COUNT_NOUNS:
            continue
        if n > 0 and not re.search(r"['’]", tokens[n - 1]):
            units |= _stems(tokens[n - 1]) - _NOT_UNITS - _COUNT_MODIFIERS - _COUNT_NOUNS
        if n + 2 < start and tokens[n + 1] == "of":
            units |= _stems(tokens[n + 2]) - _NOT_UNITS - _COUNT_MODIFIERS
    return units


def _ongoing(tokens: Sequence[str], at: int) -> bool:
    """Whether the number of time units at ``at`` (lowercase tokens) is how long something has
    gone on until now: "now", "already" or "so far" after the unit, "been" or "already" just
    before the number, or "for" before it in a sentence that says "been"; never "... ago"."""
    following = tokens[at + 2] if at + 2 < len(tokens) else ""
    if following == "ago":
        return False
    if following in _ONGOING_AFTER or _ONGOING_BEFORE & set(tokens[max(at - 3, 0) : at]):
        return True
    start = at - 1
    while start >= 0 and tokens[start] in _APPROXIMATELY:
        start -= 1
    return start >= 0 and tokens[start] == "for" and "been" in tokens


def _thing_words(sentence: str) -> set[str]:
    """The stems that say what ``sentence`` is about: not its subject (its first word, a name or
    "the user"), its numbers, its units of time nor the words that say a duration runs on."""
    first = re.findall(r"[A-Za-z]+", sentence)[:1]
    return (
        _stems(sentence)
        - _stems(" ".join(first))
        - _TIME_UNITS
        - _NOT_UNITS
        - _ONGOING_AFTER
        - _ONGOING_BEFORE
        - _APPROXIMATELY
        - {"user", "far"}
    )


def count_changed(later: str, known: str) -> bool:
    """Whether ``later`` states another count of a thing ``known`` counts: "The user attended
    five sessions of the bereavement support group last year." after "... three sessions
    ...", "... now on page 220" after "... on page 200", "5 MCU films" after "4 MCU films"."""
    return bool(_changed_units(later, known))


def _changed_units(later: str, known: str) -> set[str]:
    """The units ``later`` counts with other values than ``known`` does (``count_changed``)."""
    mine, theirs = counts(later), counts(known)
    changed = {
        unit for unit, values in mine.items() if unit in theirs and values.isdisjoint(theirs[unit])
    }
    if changed and all(unit.endswith("~") for unit in changed):
        # a duration: of the same thing ("sticking to the tidying routine for 4 weeks now"
        # after "... 3 weeks"), not of another one ("playing piano for 5 years" beside "learning
        # guitar for 3 years")
        return changed if _thing_words(later) & _thing_words(known) else set()
    return changed


def states_replaced_count(later: str, known: str, other: str) -> bool:
    """Whether ``other`` states the count that ``later`` replaces in ``known``: for a unit whose
    value changed between them, ``other`` states the known value ("The user reached 500
    followers last week." beside "The user has 500 followers on Instagram.", once "The user is
    now at 600 followers." updates the latter), not a third one ("wants 1,000 followers")."""
    theirs, its = counts(known), counts(other)
    return any(
        unit in its and not its[unit].isdisjoint(theirs[unit])
        for unit in _changed_units(later, known) & _changed_units(later, other)
    )


EXAMPLE = json.dumps(
    {
        "pairs": [
            {"pair": "P1", "now": "Priya works at a clinic in Porto."},
            {"pair": "P2", "now": "Priya keeps three tortoises."},
        ]
    },
    separators=(",", ":"),
)

CHANGE_SYSTEM_PROMPT = f"""You keep a memory of facts about people up to date.
Each pair (P1, P2, ...) shows a known fact and a later fact about the same person. Write the
known fact as it stands once the later fact is true:
- if the later fact gives a new value for what the known fact states (another city or job,
  another number, a new frequency, a new best time), write the known fact with the new value;
- otherwise (the later fact is about something else, or agrees with it) copy the known fact
  exactly, word for word.
Answer with JSON only, like this example:
{EXAMPLE}
for P1 Known: Priya works as a nurse in Lisbon. Later: Priya is moving to Porto for a job at a
clinic. P2 Known: Priya keeps three tortoises. Later: Priya started a pottery class."""


def render_change_prompt(pairs: Sequence[tuple[str, str]]) -> str:
    """The pairs of one chunk: (known sentence, later sentence), shown as P1, P2, ..."""
    lines = []
    for i, (known, later) in enumerate(pairs):
        lines += [f"P{i + 1}", f"Known: {known}", f"Later: {later}", ""]
    lines.append("Answer with each known fact as it stands now, as JSON.")
    return "\n".join(lines)

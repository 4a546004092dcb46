"""speaker check: a fact about one speaker must come from that speaker, not the other.

The small default model often hands one speaker's words or facts to the other: Melanie says
"They were stoked for the dinosaur exhibit!" and the fact written is "Caroline's kids were
stoked for the dinosaur exhibit!"; Joanna thanks Nate ("Your support means a lot") and the
fact is "Nate's support means a lot."; a fact shown about James comes back as new with John's
name. Grounding cannot see it: every name in such a fact is in the messages. What can is the
fact with the speakers' names masked:

- it is nearer to a message of another speaker than to every message of its subject's own, by
  more than ``MARGIN`` (cosine of the embeddings);
- or it says what a fact shown to the model says of another speaker (``SAME_FACT``).

A fact is checked when it starts with the name of one of its chunk's speakers (its subject,
"Caroline ..." or "Caroline's ...") and names no other speaker of the chunk: a fact about two
people may come from either. A fact about someone who is not a speaker ("Mia climbs
overhangs", or "Dana ..." in a chat of ``user`` and ``assistant``) is not checked.
``SLOWWAVE_CHECK_SPEAKER`` turns the check off.

A new fact whose messages are another speaker's is given to that speaker (``given_to``: the
subject's name, in the sentence, keywords and slot, becomes theirs, and the decision log says
so) unless it has a pronoun of the subject's ("Jon launched a campaign for his store": "his"
would stay Jon's), and then it is refused. Every misattributed fact the default model wrote
on LoCoMo's first two sessions (ten, on two days) was the other speaker's: refused, it took
with it the only fact of its session that search could find.

``MARGIN`` was chosen on LoCoMo's gold observations, each checked against its own session: of
the 1,410 that have a speaker as their subject, 242 have another speaker's message nearest
(the other one often echoes: "Wow, a charity race!"), 61 by more than 0.1, 21 by more than
0.2. The wrong facts the default model writes lie further off (0.29 for "Nate's support
means a lot.", 0.41 for Caroline's kids).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from slowwave.models.embedding.base import Embedder, Vectors
from slowwave.models.episode import Episode
from slowwave.models.fact import Fact

MARGIN = 0.2
SAME_FACT = 0.95
MASK = "someone"
ROLES = frozenset({"user", "assistant", "system", "tool"})
# pronouns that would still point at the subject once the fact is given to another speaker
_PERSONAL = re.compile(r"\b(?:he|him|his|himself|she|her|hers|herself)\b", re.IGNORECASE)


class Misattribution(NamedTuple):
    """A fact about ``subject`` that is another's: ``said_by`` said it (None: a fact shown
    says it of another speaker)."""

    subject: str
    why: str
    said_by: str | None


class SpeakerCheck:
    """One chunk's messages and the facts shown for it, names masked, embedded with the facts
    to check in one batch (``prepare``)."""

    def __init__(self, episodes: Sequence[Episode], shown: Sequence[Fact], embedder: Embedder):
        messages = [m for e in episodes for m in e.messages if m.text.strip()]
        self.embedder = embedder
        self.speakers = sorted({m.speaker for m in messages if _is_name(m.speaker)})
        self._names = (
            re.compile(r"\b(?:" + "|".join(map(re.escape, self.speakers)) + r")(?:['’]s)?\b")
            if len(self.speakers) > 1
            else None
        )
        self._said_by = [m.speaker for m in messages]
        self._texts = [m.text for m in messages]
        about = [(f.fact, self.subject(f.fact)) for f in shown]
        self._shown_of = [subject for _, subject in about if subject is not None]
        self._shown_texts = [text for text, subject in about if subject is not None]
        self._messages = self._shown = _none(embedder)
        self._facts: dict[str, Vectors] = {}

    def prepare(self, facts: Iterable[str]) -> None:
        """Embed the messages, the facts shown and those of ``facts`` that name a subject, in
        one batch (nothing when no fact does)."""
        todo = [f for f in dict.fromkeys(facts) if f not in self._facts and self.subject(f)]
        if not todo:
            return
        first = not len(self._messages) and bool(self._texts)
        texts = (self._texts + self._shown_texts if first else []) + todo
        vectors = self._embed(texts)
        if first:
            self._messages = vectors[: len(self._texts)]
            self._shown = vectors[len(self._texts) : len(self._texts) + len(self._shown_texts)]
            vectors = vectors[len(self._texts) + len(self._shown_texts) :]
        self._facts.update(zip(todo, vectors, strict=True))

    def misattributed(self, fact: str) -> Misattribution | None:
        """Why ``fact`` is not its subject's, when another speaker said it or a fact shown says
        it of another; else None."""
        subject = self.subject(fact)
        if subject is None:
            return None
        self.prepare([fact])
        vector = self._facts[fact]
        to_shown = self._shown @ vector
        for other, similarity in zip(self._shown_of, to_shown, strict=True):
            if other != subject and similarity >= SAME_FACT:
                return Misattribution(subject, f"a fact shown says it of {other}", None)
        said = list(zip((float(s) for s in self._messages @ vector), self._said_by, strict=True))
        own = max((s for s, by in said if by == subject), default=0.0)
        others = [(s, by) for s, by in said if by != subject]
        if others and max(others)[0] > own + MARGIN:
            by = max(others)[1]
            return Misattribution(subject, f"the messages nearest to it are {by}'s", by)
        return None

    def given_to(self, fact: str, found: Misattribution) -> str | None:
        """``fact`` with its subject's name made the name of the speaker who said it; None
        when a fact shown says it (it is a copy) or a pronoun of the subject's would stay."""
        if found.said_by is None or _PERSONAL.search(fact):
            return None
        return renamed(fact, found.subject, found.said_by)

    def subject(self, fact: str) -> str | None:
        """The speaker ``fact`` is about: it starts with their name and names no other."""
        if self._names is None or self._names.match(fact.strip()) is None:
            return None
        named = {_name(m.group(0)) for m in self._names.finditer(fact)}
        return named.pop() if len(named) == 1 else None

    def _embed(self, texts: Sequence[str]) -> Vectors:
        assert self._names is not None
        return self.embedder.embed([self._names.sub(MASK, t) for t in texts])


def renamed(text: str, subject: str, to: str, *, ignore_case: bool = False) -> str:
    """``text`` with the name ``subject`` (a possessive's too) made ``to``; ``ignore_case`` for
    keywords and slots, which may be lower-cased."""
    flags = re.IGNORECASE if ignore_case else 0
    return re.sub(rf"\b{re.escape(subject)}\b", to, text, flags=flags)


def _none(embedder: Embedder) -> Vectors:
    return np.zeros((0, embedder.dim), dtype=np.float32)


def _name(found: str) -> str:
    return found.removesuffix("'s").removesuffix("’s")


def _is_name(speaker: str) -> bool:
    """A person's name, not a role: ``Caroline``, not ``user`` or ``assistant``."""
    return speaker[:1].isupper() and speaker.lower() not in ROLES

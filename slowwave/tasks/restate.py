"""restate: an item that reads as a message is written as a fact about its speaker, not refused.

The small default model often hands back a speaker's own sentence as the fact: "I'm moving to
Manchester in July for a new job at a sixth-form college." (Dana's words, proposed as an
update of where she teaches), or "Theo and I want to open a second shop near the river next
year." The guard refuses a fact that says "I" (it is a message, not a fact about someone), and
with it the one thing the chunk taught. Where the only defect is the speaker's own first
person, the rewrite is mechanical and needs no model:

- the speaker is the one whose message in the chunk shares the most words with the item (an
  agent's own "I" is not restated: it says nothing about the person);
- a speaker known only by a chat role (``user``) is named as the chunk names them: their own
  introduction ("I'm Dana", "my name is Dana"), else the name the facts shown and the answer's
  other facts use most among those they start with, else "The user";
- "I'm" / "I am" → "Dana is", "I've" → "Dana has", "I'll" → "Dana will", "I" and a verb →
  "Dana" and the verb in the third person ("I teach" → "Dana teaches"; a past tense, a modal,
  "and I" in a compound subject stay as they are), "my" / "mine" → "Dana's", "me" → "Dana",
  "our" before something of theirs ("our shop") → "Dana's", and once the sentence has named
  them, "their", "theirs" and "them" ("Dana loves climbing with their sister"; "The user" is
  "the user" inside a sentence); an opening "Big news:", "Yes," or "By the way," is dropped
  (from any fact, first person or not: ``without_opening``), and so is a request to the agent
  that closes a statement ("..., can you recommend some lessons?": ``without_request``).

A sentence with what no rule rewrites ("myself", "we", "us", "I" before a word that is no
verb it knows) is left as it was, and the guard refuses it as before. The restated sentence
then goes through every other rule of the guard (grounding, one statement, the speaker check).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from slowwave.models.consolidation import AGENT_ROLES
from slowwave.models.episode import Episode
from slowwave.models.words import FUNCTION_WORDS
from slowwave.tasks.grounding import names_in

# chat roles: an agent's ("assistant", AGENT_ROLES) "I" is not a person's; a person's is named
PERSON_ROLES = frozenset({"user", "human", "customer"})

_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”")
_OPENING = re.compile(
    r"^(?:big news|good news|news|update|yes|yeah|yep|no|nope|well|oh|wow|so|okay|ok|"
    r"actually|guess what|fun fact|by the way|btw|speaking of which|anyway|incidentally|"
    r"oh and|also|plus|besides)\s*[:,!.—–-]+\s*",
    re.I,
)
_INTRODUCTION = re.compile(
    r"\b(?:I'm|I am|my name is|call me|this is)\s+([A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\b"
)
# another speaker greeting a person by name as their message opens: "Congratulations, Dana!",
# "Good morning, Omar!" (not a letter they draft for them: "... Dear Jason, I hope ...")
_ADDRESSED = re.compile(
    r"^\W*(?i:hi|hello|hey|thanks|thank you|congratulations|congrats|good morning|"
    r"good afternoon|good evening|well done|nice to meet you),?\s+"
    r"([A-Z][a-z]+)\b(?!\s+[A-Z])"
)
# words a capitalised word after "I'm" is not a name when it is
_NOT_A_NAME = frozenset(
    {"So", "Not", "Just", "Really", "Very", "Also", "Still", "Always", "Never", "Sorry", "Glad"}
)
# verbs that stay as they are after "I" (past tenses, modals)
_UNCHANGED = frozenset(
    [
        "can",
        "could",
        "should",
        "would",
        "might",
        "must",
        "may",
        "shall",
        "will",
        "did",
        "had",
        "was",
        "were",
        "used",
        "went",
        "got",
        "took",
        "made",
        "saw",
        "ran",
        "came",
        "found",
        "began",
        "bought",
        "built",
        "felt",
        "gave",
        "heard",
        "kept",
        "knew",
        "left",
        "lost",
        "met",
        "paid",
        "put",
        "set",
        "cut",
        "hit",
        "quit",
        "read",
        "said",
        "sent",
        "sold",
        "spent",
        "taught",
        "thought",
        "told",
        "won",
        "wrote",
        "became",
        "brought",
        "caught",
        "chose",
        "drove",
        "ate",
        "fell",
        "flew",
        "forgot",
        "grew",
        "hurt",
        "let",
        "lit",
        "rode",
        "rose",
        "sang",
        "sat",
        "slept",
        "spoke",
        "stood",
        "swam",
        "threw",
        "understood",
        "woke",
        "wore",
        "won't",
        "can't",
        "couldn't",
        "didn't",
        "wouldn't",
        "shouldn't",
        "wasn't",
    ]
)
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "am": "is", "don't": "doesn't",
              "haven't": "hasn't", "be": "is"}  # fmt: skip
# adverbs between "I" and its verb: "I really love", "I just started"
_ADVERBS = frozenset(
    [
        "really",
        "also",
        "just",
        "still",
        "usually",
        "always",
        "never",
        "often",
        "finally",
        "recently",
        "actually",
        "sometimes",
        "currently",
        "now",
        "mostly",
        "only",
        "even",
        "already",
        "rarely",
        "seldom",
        "definitely",
        "totally",
    ]
)
_CONTRACTED = (
    (re.compile(r"\bI'm\b|\bI am\b|\bI’m\b"), "{p} is"),
    (re.compile(r"\bI've\b|\bI’ve\b"), "{p} has"),
    (re.compile(r"\bI'll\b|\bI’ll\b|\bI will\b"), "{p} will"),
    (re.compile(r"\bI'd\b|\bI’d\b"), "{p} would"),
)
# "our" stays before what is everyone's ("pets bring joy to our lives")
_SHARED = frozenset(
    [
        "lives",
        "life",
        "world",
        "planet",
        "society",
        "community",
        "generation",
        "time",
        "times",
        "future",
        "health",
        "country",
        "culture",
        "environment",
        "species",
        "age",
    ]
)
# "my", "mine", "me" (not "me-time") and "our" with what it owns, in one pass from the left
_OBJECT = re.compile(r"\b(?:([Mm]y|[Mm]ine|me)\b(?!-)|[Oo]ur\s+(\w+))")
# a question to the agent after a statement: "..., can you recommend ...?", "... - any tips?"
_REQUEST = re.compile(
    r"(?:\s*[,;:—–]|\s+-)\s*(?:and\s+|so\s+|but\s+)?(?i:can|could|would|will|do|does|should|"
    r"is|are|was|have|did|any|what|how|where|which|who|when|why)\b[^.!?]*\?\s*$"
)
APOSTROPHE_S = "'s"
_FIRST_PERSON = re.compile(r"\b(I|I'm|I’m|I've|I’ve|I'd|I’d|I'll|I’ll|my|mine|me|our)\b")


def speaks_in_first_person(fact: str) -> bool:
    """Whether ``fact`` (quotes aside) says I, me, my, mine or our."""
    return _FIRST_PERSON.search(_QUOTED.sub(" ", fact)) is not None


def said_by(fact: str, episodes: Sequence[Episode]) -> tuple[str, Episode] | None:
    """The speaker and the episode of the message of ``episodes`` that shares the most words
    with ``fact`` (the latest of equals); None when no message shares a word."""
    words = content_words(fact)
    best, found = 0, None
    for episode in episodes:
        for message in episode.messages:
            shared = len(words & content_words(message.text))
            if shared and shared >= best:
                best, found = shared, (message.speaker, episode)
    return found


def speaker_of(fact: str, episodes: Sequence[Episode]) -> str | None:
    """The speaker of ``said_by``, or None."""
    found = said_by(fact, episodes)
    return found[0] if found is not None else None


def person_named(speaker: str, episodes: Sequence[Episode], known: Iterable[str]) -> str | None:
    """How a fact names ``speaker``: their name; for a person's chat role, the name the chat
    gives them in ``episodes`` (their own introduction, "I'm Dana"; another speaker greeting
    them, "Congratulations, Dana!"), else the name that the facts already stored (``known``)
    start with more often than any other and more often than "The user"; else "The user".
    None for an agent's role.

    The facts a model writes name many things first: "Giant Jenga is a fantastic choice",
    "Los Angeles is a hub for philanthropy", "Jack met Tom at a networking event" (Jack being
    someone the user talks about) once named the user Giant, Los and Jack. So a stored fact's
    first word counts only as a name on its own (never before another capitalised word), not
    in -ing ("Reaching the Gold level ..."), and not one the speaker's own messages mention:
    people rarely say their own name but to introduce themselves."""
    role = speaker.strip().lower()
    if role in AGENT_ROLES:
        return None
    if role not in PERSON_ROLES:
        return speaker.strip()
    own = [m.text for e in episodes for m in e.messages if m.speaker.strip().lower() == role]
    others = [m.text for e in episodes for m in e.messages if m.speaker.strip().lower() != role]
    for found in [*map(_INTRODUCTION.search, own), *map(_ADDRESSED.search, others)]:
        if found is not None and found.group(1).split()[0] not in _NOT_A_NAME:
            return found.group(1)
    plain = [sentence for sentence in known if not speaks_in_first_person(sentence)]
    leading = Counter(name for sentence in plain if (name := subject_name(sentence)))
    mentioned = " ".join(own)

    def alone(name: str) -> bool:
        return (
            name != "The user"
            and not name.endswith("ing")
            and not any(re.search(rf"\b{re.escape(name)}\s+[A-Z]", s) for s in plain)
            and re.search(rf"\b{re.escape(name)}\b", mentioned) is None
        )

    ranked = [(name, n) for name, n in leading.most_common() if alone(name)]
    if ranked and ranked[0][1] > max([leading["The user"], *(n for _, n in ranked[1:2])]):
        return ranked[0][0]
    return "The user"


def without_opening(sentence: str) -> str:
    """``sentence`` without a message's opening ("By the way, ", "Big news: "), its first
    letter a capital: what follows is the fact."""
    text = _OPENING.sub("", sentence.strip())
    return text[:1].upper() + text[1:]


def subject_name(sentence: str) -> str | None:
    """The name ``sentence`` starts with ("Dana teaches ...", "Dana's sister ..."), or "The
    user" for a person known only by that role, if any."""
    text = without_opening(sentence)  # "By the way, The user has ..."
    if re.match(r"the user\b", text, re.I):
        return "The user"
    names = names_in(text)
    if names and text.startswith(names[0]):
        return names[0].removesuffix("'s").removesuffix("’s")
    return None


def restate(fact: str, person: str) -> str | None:
    """``fact`` in the third person about ``person``; None when something in it cannot be
    rewritten mechanically (or nothing needed to be)."""
    text = _OPENING.sub("", fact.strip())
    if not speaks_in_first_person(text) or re.search(r"\b(myself|we|us)\b", text, re.I):
        return None
    # contractions first: "and I'm happy" is "and Dana is happy", not "and Dana'm happy"
    for pattern, replacement in _CONTRACTED:
        text = pattern.sub(replacement.format(p=person), text)
    text = re.sub(r"\b(and|or) I\b", lambda m: f"{m.group(1)} {person}", text)
    text = re.sub(r"^I and\b", f"{person} and", text)
    text = re.sub(r"\bI\s+((?:\w+\s+)?)([\w'’]+)", lambda m: _subject(m, person), text)
    if re.search(r"\bI\b", text):
        return None  # "I" before a word that is no verb known here
    text = _objects(text, person)
    text = text[:1].upper() + text[1:]
    if person == "The user":  # a role, not a name: "... reminded the user of their friend"
        text = text[:1] + re.sub(r"\bThe user\b", "the user", text[1:])
    return text if text != fact.strip() else None


def without_request(sentence: str) -> str:
    """``sentence`` without a request to the agent that closes it: "I've been getting back
    into the guitar, can you recommend some lessons?" says "I've been getting back into the
    guitar."; a sentence that is all question stays as it was."""
    found = _REQUEST.search(sentence)
    if found is None or len(_WORD.findall(sentence[: found.start()])) < 3:
        return sentence
    return sentence[: found.start()].rstrip() + "."


def _objects(text: str, person: str) -> str:
    """ "my", "mine", "me" and "our X" about ``person``, from the left: their name until the
    sentence names them ("Dana's sister"), then "their", "theirs" and "them" ("Dana loves
    climbing with their sister")."""
    out, last = [], 0
    named = re.search(rf"\b{re.escape(person)}\b", text, re.I)
    for match in _OBJECT.finditer(text):
        word, owned = match.group(1), match.group(2)
        said = named is not None and named.start() < match.start()
        if owned is not None and owned.lower() in _SHARED:
            continue  # "our lives": everyone's
        if owned is not None:
            new = f"{'their' if said else person + APOSTROPHE_S} {owned}"
        elif word.lower() == "me":
            new = "them" if said else person
        else:
            new = ("their" if word.lower() == "my" else "theirs") if said else person + APOSTROPHE_S
        out += [text[last : match.start()], new]
        last = match.end()
        if named is None or named.start() > match.start():
            named = match  # named from here on
    return "".join([*out, text[last:]])


def _subject(match: re.Match[str], person: str) -> str:
    adverb, verb = match.group(1), match.group(2)
    if adverb and adverb.strip().lower() not in _ADVERBS:
        verb, adverb = adverb.strip(), ""  # "I <verb> <object>": the first word is the verb
        rest = match.group(2)
        inflected = _third_person(verb)
        return match.group(0) if inflected is None else f"{person} {inflected} {rest}"
    inflected = _third_person(verb)
    return match.group(0) if inflected is None else f"{person} {adverb}{inflected}"


def _third_person(verb: str) -> str | None:
    lowered = verb.lower().replace("’", "'")
    if lowered in _IRREGULAR:
        return _IRREGULAR[lowered]
    if lowered in _UNCHANGED or lowered.endswith("ed") or "'" in lowered:
        return verb
    if not lowered.isalpha() or lowered in FUNCTION_WORDS:
        return None
    if re.search(r"(s|sh|ch|x|z|o)$", lowered):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lowered):
        return verb[:-1] + "ies"
    return verb + "s"


def content_words(text: str) -> set[str]:
    return {
        w.lower().replace("’", "'")
        for w in _WORD.findall(text)
        if w.lower().replace("’", "'") not in FUNCTION_WORDS
    }

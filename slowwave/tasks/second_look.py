"""second look: a person's message that no item of the chunk's answer covers is asked about
again, alone, in one short request (``models.second_look``), shared by chunks of one tenant
answered together while it shows no more than one chunk's may (``shared_looks``).

Between the guard and embed. A person's message (not an agent's role) is read a statement at a
time: a sentence that says something (at least ``MIN_WORDS`` content words, not a question) is
covered when an item of the guarded plan shares at least ``COVERED_SHARE`` of its content words
(or ``COVERED_WORDS`` of a long one). A message with a statement no item covers is uncovered,
and what is shown of it is those statements: a chat message often says two things ("I'm
thinking of getting Emily to audition. The play I attended was The Glass Menagerie, have you
heard of it?"), the answer states the first, and the second is the one a question later asks
about. The ``second_look_messages`` uncovered messages whose uncovered statements have the most
content words are shown, oldest first, each with the name the chunk's facts give its speaker
(``tasks.restate``), without the message it answers. What the answer states goes through the guard
like any item (grounding, restating, the speaker check) as a ``new`` fact citing the message's
episode, and the change check then asks whether it ends a known fact about the same person: what
a person says of a change in their life is the message a small model most often passes over.
A statement shown that the answer still leaves open, in its speaker's first person, naming
something and counting nothing, is restated without the model where the answer stated something
of its message (``restated_left``). A count said again needs no model (``counted_again``): it is
the ``update`` of the fact it counts again, and an item of the same answer that writes the old
count once more is refused (``old_counts_dropped``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from slowwave.models.category import Category
from slowwave.models.change import count_changed, counts
from slowwave.models.chunk import OpenChunk
from slowwave.models.consolidation import (
    ConsolidatedFact,
    ConsolidationOutput,
    FactAction,
    episode_short_id,
    fact_short_id,
    keywords_of,
    said_by_agent,
)
from slowwave.models.episode import Episode, Message
from slowwave.models.fact import Fact, numbers_in
from slowwave.models.llm.base import (
    GenerationRequest,
    Purpose,
    StructuredModel,
    generate_watched,
    shares,
)
from slowwave.models.llm.tokens import answer_cap
from slowwave.models.plan import PlannedAction, Rejection, renumber_references
from slowwave.models.run import RunSummary
from slowwave.models.second_look import (
    SECOND_LOOK_SYSTEM_PROMPT,
    SecondLookAnswer,
    ShownMessage,
    longest_prompt,
    message_short_id,
    render_second_look_prompt,
)
from slowwave.models.settings import ConsolidationSettings
from slowwave.models.tenant import tenant_of
from slowwave.tasks.grounding import names_in
from slowwave.tasks.guard import not_self_contained, statements_of
from slowwave.tasks.restate import (
    content_words,
    person_named,
    restate,
    subject_name,
    without_request,
)

logger = logging.getLogger(__name__)

MIN_WORDS = 4
COVERED_SHARE = 0.4
COVERED_WORDS = 5
_SENTENCE = re.compile(r"[^.!?…]+[.!?…]*")
# how a question opens (after an opener such as "also" or "by the way"); a sentence that ends
# with "?" but opens otherwise states something before its tag ("The play I saw was X, have
# you heard of it?")
_QUESTION_OPENS = frozenset(
    """do does did can could would will should shall may might must is are was were am have has
    had what how where when why which who whom whose any anything""".split()  # noqa: SIM905
)
_USER = re.compile(r"\busers?\b", re.I)
# said to the other speaker ("... the photo you sent"): no fact about the person alone
_ADDRESSED = re.compile(r"\b(?:you|your|yours|yourself)\b", re.I)
_OPENERS = frozenset("also and but so anyway oh well ok okay btw by the way now then".split())  # noqa: SIM905


@dataclass(frozen=True)
class Uncovered:
    """A person's message with statements no item covers: its episode's index among the
    chunk's visible episodes, and those statements (what is shown of it)."""

    episode: int
    message: Message
    sentences: tuple[str, ...] = ()

    @property
    def statements(self) -> str:
        return " ".join(self.sentences)


def uncovered_messages(
    episodes: Sequence[Episode], actions: Sequence[PlannedAction], limit: int
) -> list[Uncovered]:
    """The ``limit`` uncovered messages of ``episodes`` that say the most, oldest first."""
    found: list[tuple[int, int, Uncovered]] = []  # (words left, order, message)
    for order, (e, message, left) in enumerate(_uncovered(episodes, actions)):
        words = sum(len(w) for _, w in left)
        found.append((words, order, Uncovered(e, message, tuple(t for t, _ in left))))
    chosen = sorted(found, key=lambda f: (-f[0], f[1]))[:limit]
    return [u for _, _, u in sorted(chosen, key=lambda f: f[1])]


def _uncovered(
    episodes: Sequence[Episode], actions: Sequence[PlannedAction], *, numbers: bool = False
) -> Iterator[tuple[int, Message, list[tuple[str, set[str]]]]]:
    """Each person's message with statements no item of ``actions`` covers, in order: its
    episode's index, the message and those statements. ``numbers``:
    an item covers a statement only if it also states every number the statement does (the
    answer wrote "excited to use their new beans in their French press" of a message that
    also said "1 tablespoon of coffee for every 5 ounces of water")."""
    stated = [(content_words(a.fact), numbers_in(a.fact)) for a in actions if a.fact]
    for e, episode in enumerate(episodes):
        for message in episode.messages:
            if not said_by_agent(message):
                left = [
                    (sentence, words)
                    for sentence, words in statements(message.text)
                    if not _covered(words, numbers_in(sentence) if numbers else frozenset(), stated)
                ]
                if left:
                    yield e, message, left


def statements(text: str) -> list[tuple[str, set[str]]]:
    """The sentences of ``text`` that say something, each with its content words: at least
    ``MIN_WORDS`` of them, and not a question (one that ends with "?" and opens as a question
    does, after an opener such as "also" or "by the way")."""
    found = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group(0).strip()
        words = content_words(sentence)
        if len(words) >= MIN_WORDS and not _asks(sentence):
            found.append((sentence, words))
    return found


def _asks(sentence: str) -> bool:
    if not sentence.endswith("?"):
        return False
    words = re.findall(r"[a-z]+(?:['’][a-z]+)?", sentence.lower())
    first = next((w for w in words if w not in _OPENERS), "")
    # "what's", "who's", "don't", "can't": a question word with a contraction on it
    first = first.replace("’", "'")
    if first.endswith("n't"):
        first = {"ca": "can", "wo": "will"}.get(first[:-3], first[:-3])
    return first.partition("'")[0] in _QUESTION_OPENS


def _covered(
    words: set[str], numbers: frozenset[str], stated: Sequence[tuple[set[str], frozenset[str]]]
) -> bool:
    need = min(COVERED_SHARE * len(words), COVERED_WORDS)
    return any(len(words & fact) >= need and numbers <= said for fact, said in stated)


@dataclass(frozen=True)
class Look:
    """One chunk's second look: its index among the chunks, the messages, and how each was
    shown (its person, its statements)."""

    chunk: int
    messages: list[Uncovered]
    shown: list[ShownMessage]


def second_look(
    model: StructuredModel,
    chunks: Sequence[tuple[OpenChunk, Sequence[PlannedAction]]],
    policy: ConsolidationSettings,
    summary: RunSummary,
) -> dict[int, ConsolidationOutput]:
    """Ask about each chunk's uncovered messages, every chunk's request in one ``generate``
    call; by chunk index, the items the answers state (``new``, citing the message's episode).
    A chunk whose answer cannot be read gets none. Its tokens are the chunk's, added to its
    plan's (the chunk's row and the run's totals both count them)."""
    if not policy.second_look or policy.second_look_messages < 1:
        return {}
    found: dict[int, ConsolidationOutput] = {}
    for c, (item, actions) in enumerate(chunks):
        counted = counted_again(item, actions)
        if counted:
            summary.second_look_facts += len(counted)
            found[c] = ConsolidationOutput(facts=counted)
    looks: list[Look] = []
    for c, (item, actions) in enumerate(chunks):
        messages = uncovered_messages(item.visible, actions, policy.second_look_messages)
        if not messages:
            continue
        known = [f.fact for f in item.facts]  # stored facts: how a role's person is named
        looks.append(Look(c, messages, [_shown(u, item.visible, known) for u in messages]))
    shared = shared_looks(looks, [chunks[look.chunk][0] for look in looks], policy)
    if not shared:
        return found
    requests = [_request(chunks[group[0].chunk][0], group) for group in shared]
    summary.model_calls += len(requests)
    summary.second_look_messages += sum(len(look.messages) for look in looks)
    answers = generate_watched(model, requests)
    for group, answer in zip(shared, answers, strict=True):
        parts = shares(answer, [len(look.messages) for look in group])
        read = _read(answer.text)
        offset = 0
        for g, (look, part) in enumerate(zip(group, parts, strict=True)):
            item = chunks[look.chunk][0]
            item.plan.charge(part, calls=1 if g == 0 else 0)  # its chunk's share of the cost
            answered = None if read is None else _items(look, read, offset)
            offset += len(look.messages)
            facts = [fact for _, fact in answered or [] if fact is not None]
            kept = restated_left(look, answered or [], item.visible)
            summary.second_look_facts += len(facts)
            summary.second_look_restated += len(kept)
            if facts or kept:
                earlier = found.get(look.chunk)
                found[look.chunk] = ConsolidationOutput(
                    facts=(earlier.facts if earlier is not None else []) + facts + kept
                )
    return found


def shared_looks(
    looks: Sequence[Look], items: Sequence[OpenChunk], policy: ConsolidationSettings
) -> list[list[Look]]:
    """The chunks' looks as requests: the looks of one tenant's chunks answered together
    share one, in order, while it shows at most ``second_look_messages`` messages and no more
    characters than that many at their cut: no request is larger than one chunk's may be.
    Every request sends the whole system prompt (more than half of a look's prompt tokens),
    and a chat's chunk often leaves one to three messages uncovered. Larger requests were
    measured and refused: shown up to 15 short messages, the small default model wrote one
    message's words under another's label, and precision fell from 0.61 to 0.55 on the six
    LoCoMo nights (``benchmarks.nightly_cost``; the benchmarks page)."""
    most_messages = policy.second_look_messages
    most_chars = longest_prompt(most_messages)
    groups: list[list[Look]] = []
    last: dict[str, tuple[list[Look], int, int]] = {}  # by tenant: its group, messages, chars
    for look, item in zip(looks, items, strict=True):
        tenant = tenant_of(item.visible[0].conversation_id)
        chars = len(render_second_look_prompt(look.shown))
        group, messages, shown = last.get(tenant, ([], most_messages, most_chars))
        if messages + len(look.messages) > most_messages or shown + chars > most_chars:
            group, messages, shown = [], 0, 0
            groups.append(group)
        group.append(look)
        last[tenant] = (group, messages + len(look.messages), shown + chars)
    return groups


def _request(first: OpenChunk, group: Sequence[Look]) -> GenerationRequest:
    shown = [s for look in group for s in look.shown]
    user = render_second_look_prompt(shown)
    return GenerationRequest(
        chunk_id=f"{first.plan.chunk_id}:{Purpose.second_look.value}",
        purpose=Purpose.second_look,
        system=SECOND_LOOK_SYSTEM_PROMPT,
        user=user,
        json_schema=SecondLookAnswer.response_schema(len(shown)),
        max_tokens=answer_cap(user, len(shown)),
    )


def _read(text: str | None) -> SecondLookAnswer | None:
    try:
        return SecondLookAnswer.model_validate_json((text or "").strip())
    except ValidationError:
        logger.warning("second look: an answer that is not a list of facts was ignored")
        return None


def restated_left(
    look: Look,
    answered: Sequence[tuple[int, ConsolidatedFact | None]],
    episodes: Sequence[Episode],
) -> list[ConsolidatedFact]:
    """The statements of the messages the second look's answer stated something of that it
    still leaves open and that name something (a name that is no speaker's) and count nothing,
    each in its speaker's own first person: restated in the third person without the model
    (``tasks.restate``), as a ``new`` fact citing the message's episode. The small model often
    writes one message's fact under another's label, copies the message whole (the guard keeps
    a fact's first sentence), or leaves out the clause a later question asks about: "The play I
    attended was actually a production of The Glass Menagerie, have you heard of it?" is, said
    by the user, "The play the user attended was actually a production of The Glass
    Menagerie." ``answered``: the answer's items by message index, None for one that is about
    no one of the speaker's. A message the answer states nothing of is left as the model
    judged it (a message may give no fact). What no rule rewrites ("we", "myself"), what names
    nothing of its own ("I'll check out some of these channels") and what is said to the other
    speaker ("I loved the photo you sent") stay unsaid, and so does a number: a count, a score
    or a sum is the value a later session most often changes, and written without the model's
    judgement it stayed active beside the later value (on LongMemEval's thirty, "... has
    written four so far ..." beside seven, "... highest score so far is 124 points ..." beside
    132); a count said again is ``counted_again``'s."""
    first = [statements_of(f.fact)[0] for _, f in answered if f is not None]
    stated = [(content_words(s), numbers_in(s)) for s in first]
    speakers = {m.speaker.lower() for e in episodes for m in e.messages}
    asked = {index for index, _ in answered}
    items: list[ConsolidatedFact] = []
    for index, (uncovered, shown) in enumerate(zip(look.messages, look.shown, strict=True)):
        if index not in asked:
            continue
        person = shown.person
        own = {part.lower() for part in person.split()} | speakers
        for sentence in uncovered.sentences:
            if numbers_in(sentence) or _covered(content_words(sentence), frozenset(), stated):
                continue  # a count is never restated here: see above
            restated = restate(without_request(sentence), person)
            if restated is None or not_self_contained(restated) or _ADDRESSED.search(restated):
                continue
            # a name inside the sentence: its first word is capitalised whatever it is
            # ("Maybe the user can find a similar deal again.")
            inside = restated.split(None, 1)[1] if " " in restated else ""
            if not [n for n in names_in(inside) if n.lower().removesuffix("'s") not in own]:
                continue
            items.append(
                ConsolidatedFact(
                    fact=restated,
                    category=Category.experience.value,
                    keywords=keywords_of(restated, person),
                    episodes=[episode_short_id(uncovered.episode)],
                    action=FactAction.new,
                )
            )
            stated.append((content_words(restated), numbers_in(restated)))
    return items


def counted_again(item: OpenChunk, actions: Sequence[PlannedAction]) -> list[ConsolidatedFact]:
    """The statements of a person's messages that no item covers with their numbers (an item
    that shares their words but not their count leaves them open) and that count again, with
    another number, what a related fact about that person counts ("I've attended five sessions
    now" beside "The user attended three sessions of the bereavement support group."), each
    restated in the third person as the ``update`` of that fact, citing its episode, without
    the model (``models.change.count_changed``; a pair of such sentences can read apart, 0.46
    by their vectors on LongMemEval, below where the change check looks). A small model
    most often passes over the sentence that says a count changed, and it needs no model to
    say it: on LongMemEval's knowledge-update questions, 17 of 49 have such a pair in the
    user's own messages; on LoCoMo's messages against its gold observations, 3 (James's dogs)."""
    known = [f for f in item.facts if f.invalid_at is None and counts(f.fact)]
    if not known:
        return []
    names = [f.fact for f in item.facts]
    items: list[ConsolidatedFact] = []
    taken: set[str] = set()
    for e, message, left in _uncovered(item.visible, actions, numbers=True):
        person = person_named(message.speaker, item.visible, names) or message.speaker
        for sentence, _ in left:
            restated = restate(sentence, person)
            subject = subject_name(restated) if restated is not None else None
            if restated is None or subject is None or restated in taken:
                continue
            same = (f for f in known if subject_name(f.fact) == subject)
            again = next((f for f in same if count_changed(restated, f.fact)), None)
            if again is None:
                continue
            taken.add(restated)
            items.append(
                ConsolidatedFact(
                    fact=restated,
                    category=again.category.value,
                    keywords=keywords_of(restated, person),
                    episodes=[episode_short_id(e)],
                    action=FactAction.update,
                    existing_fact_id=fact_short_id(item.facts.index(again)),
                )
            )
    return items


def old_counts_dropped(
    actions: Sequence[PlannedAction], facts: Sequence[Fact]
) -> tuple[list[PlannedAction], list[Rejection]]:
    """The chunk's actions less the model's items that state the count a restated message
    replaces in the same chunk, each refused with its reason. Beside a message that counts
    again ("I remember attending five sessions"), the model can write the known fact's count
    once more as a new fact citing that very message ("The user attended three sessions ...",
    on LongMemEval): written, it would stay active beside the update that ended the known fact.
    Such an item counts what the update counts with another number, the known fact's own."""
    known = {f.id: f.fact for f in facts}
    updates = [
        (a.fact, known[a.target_id])
        for a in actions
        if a.second_look and a.proposed is FactAction.update and a.fact and a.target_id in known
    ]
    if not updates:
        return list(actions), []
    kept: list[PlannedAction] = []
    refused: list[Rejection] = []
    for i, action in enumerate(actions):
        old = None if action.second_look else _replaced(action.fact, updates)
        if old is None or any(a.target_ref == i for a in actions):
            kept.append(action)
            continue
        reason = f"states the count that a message of the same chunk counts again: {old[0]!r} "
        refused.append(Rejection.of(action, reason + f"updates {old[1]!r}"))
    renumber_references(actions, kept)
    return kept, refused


def _replaced(fact: str | None, updates: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The (update, known fact) pair whose old count ``fact`` states for the same person."""
    if not fact:
        return None
    for now, before in updates:
        if (
            subject_name(now) == subject_name(fact)
            and count_changed(now, fact)
            and not count_changed(fact, before)
        ):
            return now, before
    return None


def _shown(uncovered: Uncovered, episodes: Sequence[Episode], known: Sequence[str]) -> ShownMessage:
    message = uncovered.message
    person = person_named(message.speaker, episodes, known) or message.speaker
    return ShownMessage(person, uncovered.statements or message.text)


def about_the_speaker(fact: str, shown: ShownMessage) -> bool:
    """Whether a fact of the second look is about the message's speaker or someone they name:
    it names the speaker (or a chat's ``user``), or a name their message says. What it says of
    no one of theirs is no fact about them: a remark ("Music discovery is a great topic!"), or
    another speaker's words (when the message it answered was shown beside it, an assistant's
    opening line: "Podcasts are an excellent way to stay informed!")."""
    lowered = fact.lower()
    if shown.person.lower() in lowered or _USER.search(fact):
        return True
    return any(name in shown.text for name in names_in(fact))


def _items(
    look: Look, answer: SecondLookAnswer, offset: int = 0
) -> list[tuple[int, ConsolidatedFact | None]]:
    """The answer's items about this look's messages (shown from M{offset + 1} on) by the
    index of the message each names; None in place of one about no one of the speaker's."""
    by_id = {message_short_id(offset + i): i for i in range(len(look.messages))}
    items: list[tuple[int, ConsolidatedFact | None]] = []
    for stated in answer.facts:
        index = by_id.get(stated.message.strip().upper())
        if index is None:
            continue
        if not about_the_speaker(stated.fact, look.shown[index]):
            items.append((index, None))
            continue
        uncovered = look.messages[index]
        person = subject_name(stated.fact) or uncovered.message.speaker
        fact = ConsolidatedFact(
            fact=stated.fact,
            category=stated.category,
            keywords=keywords_of(stated.fact, person),
            episodes=[episode_short_id(uncovered.episode)],
            action=FactAction.new,
        )
        items.append((index, fact))
    return items

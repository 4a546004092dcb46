"""changes: an update the model proposed without naming the fact it updates, and a fact the
second look found in a message the answer passed over (``tasks.second_look``), is checked
against the nearest known fact about the same person, between embed and apply.

The guard writes an ``update`` whose ``existing_fact_id`` names no fact shown as ``new`` (it
cannot guess the target), so "Dana is moving to Manchester in July for a new job ..." was
written beside "Dana is teaching chemistry at a high school in Leeds." and both stayed active.
Here, of each such fact's ``NEAREST_CANDIDATES`` nearest active facts of the conversation
(cosine from ``lower`` to the dedupe threshold; none the plan ends or acts on), the nearest that
starts with the same person's name and holds another value of a kind the new one names (a place,
a name, a number: ``models.change.names_another_value``) is shown with it as a pair: on one
night of short episodes, 4 of the 21 pairs asked before, the one real change (Dana's move) among
them; a change of a common word ("day shifts" after "nights") goes unasked, unless the model's
update says what the known fact says with that one word changed ("Kenji works at a day shift
job." after "... a night shift job.": ``models.change.one_word_swapped``), which is the update
the model meant, made without asking. Each pair is in a
short request of its own and every request in one ``generate`` call (``models.change``). The
model writes the known fact as it stands once the new one holds; a rewrite that takes a value
from the new fact turns the action into the update it is: the known fact ends at the new one's
event time and the new one supersedes it (lineage, revertible). A copy, or an answer that cannot
be read, leaves every fact as written. The model's own updates and the second look's facts are
checked; a ``new`` fact of the answer only beside a known fact about the same person that reads
alike (``NUMBERS_LOWER``) and states other numbers, which is how a count, a time or a score
changes ("five sessions" after "three"). No category is required of the pair: the model files a
move under identity one time and under goal the next, and the rewrite, unlike the yes or no it
replaced, leaves "Kenji plays in a community orchestra every Sunday." as it was beside "Kenji
switched to day shifts at the same hospital."
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import psycopg
from pydantic import ValidationError

from slowwave import sql
from slowwave.models.change import (
    CHANGE_SYSTEM_PROMPT,
    MAX_PAIRS_PER_CHUNK,
    ChangeJudgement,
    alike_but_for_numbers,
    count_changed,
    counts,
    names_another_value,
    one_word_swapped,
    render_change_prompt,
    replaced,
    states_replaced_count,
)
from slowwave.models.chunk import PreparedChunk
from slowwave.models.consolidation import FactAction
from slowwave.models.fact import other_numbers
from slowwave.models.llm.base import Purpose, StructuredModel
from slowwave.models.plan import PlannedAction
from slowwave.models.run import RunSummary
from slowwave.models.settings import ConsolidationSettings
from slowwave.tasks.pair_requests import ask_by_chunk, written_facts
from slowwave.tasks.restate import subject_name

logger = logging.getLogger(__name__)

# the nearest active facts looked at for one about the same person
NEAREST_CANDIDATES = 3
# a new fact of the answer is asked about with a known one that states other numbers from this
# cosine on: "... five sessions of the bereavement support group ..." beside "... three
# sessions ..." was 0.91, a new 5K best beside the old one 0.68 (MiniLM, LongMemEval)
NUMBERS_LOWER = 0.6
# ... and from this cosine on, one that counts again a thing the known fact counts
# (``models.change.count_changed``): "5 MCU films" after "4 MCU films" was 0.52 in sentences
# that read apart; of LoCoMo's gold observations about one person in two sessions, the pairs
# it finds from 0.5 on are three, each a real change ("James already has three dogs" after
# "James has two dogs")
COUNTS_LOWER = 0.5
# the active facts near an update's new count looked at for others stating the count it replaces
# (the model can write one count twice, in two sentences: "The user has 500 followers on
# Instagram." and "The user reached 500 followers last week.", LongMemEval)
REPLACED_CANDIDATES = 10


@dataclass(frozen=True)
class Pair:
    """An unnamed update (action ``index`` of chunk ``chunk``) and the known fact it may end."""

    chunk: int
    index: int
    known_id: UUID
    known_fact: str
    similarity: float
    # the word the known fact has where the model's unnamed update has another, the rest alike
    # (``models.change.one_word_swapped``): the update it meant
    swap: tuple[str, str] | None = None


def find_changes(
    conn: psycopg.Connection,
    model: StructuredModel,
    prepared: Sequence[PreparedChunk],
    policy: ConsolidationSettings,
    summary: RunSummary,
) -> None:
    """Ask about the chunks' unnamed updates in one call; turn each whose known fact no longer
    holds into an update of that fact, in place. A pair alike but for its numbers is such an
    update without asking (``models.change.alike_but_for_numbers``)."""
    if not policy.change_check:
        return
    pairs = _pairs(conn, prepared, policy)
    taken: set[tuple[int, UUID]] = set()
    for pair in pairs:
        later = prepared[pair.chunk].plan.actions[pair.index].fact or ""
        if (pair.chunk, pair.known_id) in taken:
            continue
        if alike_but_for_numbers(later, pair.known_fact):
            why = "alike but for its numbers, it states another count than"
        elif count_changed(later, pair.known_fact):
            why = "it counts again a thing counted by"
        elif pair.swap is not None:
            why = f"the model's update says {pair.swap[1]!r} where it says {pair.swap[0]!r}, as"
        else:
            continue
        taken.add((pair.chunk, pair.known_id))
        _update(
            prepared,
            pair,
            f"change check: {why} its nearest fact about the same person "
            f"(cosine {pair.similarity:.2f}): {pair.known_fact!r}",
        )
        summary.changes_found += 1
    decided = {(p.chunk, p.index) for p in pairs if (p.chunk, p.known_id) in taken}
    asked = ask_by_chunk(
        model,
        prepared,
        [p for p in pairs if (p.chunk, p.index) not in decided],
        purpose=Purpose.change,
        system=CHANGE_SYSTEM_PROMPT,
        render=lambda item, pairs: render_change_prompt(
            [(p.known_fact, item.plan.actions[p.index].fact or "") for p in pairs]
        ),
        schema=ChangeJudgement.response_schema,
        limit=MAX_PAIRS_PER_CHUNK,
        summary=summary,
        per_request=1,
    )
    summary.change_pairs += len(decided) + sum(len(shown) for _, shown, _ in asked)
    for c, shown, answer in asked:
        for pair, now in _out_of_date(shown, answer.text, prepared):
            if (c, pair.known_id) in taken:  # one update per known fact and chunk
                continue
            taken.add((c, pair.known_id))
            second_look = prepared[c].plan.actions[pair.index].second_look
            _update(
                prepared,
                pair,
                f"change check: {'the second look' if second_look else 'the model'}"
                f"'s fact names none it updates; its nearest fact about the same person "
                f"(cosine {pair.similarity:.2f}) no longer holds once it does: "
                f"rewritten as {now!r}",
            )
            summary.changes_found += 1
    end_replaced_counts(conn, prepared, summary)


def end_replaced_counts(
    conn: psycopg.Connection, prepared: Sequence[PreparedChunk], summary: RunSummary
) -> None:
    """Beside each update whose new fact counts again what its known fact counts (the model's,
    the second look's or the change check's), end every other active fact about the same person
    that states the count it replaces (``models.change.states_replaced_count``): of the
    ``REPLACED_CANDIDATES`` facts of the conversation nearest the new one, from
    ``COUNTS_LOWER`` on, none the plans end or act on. An update ends one fact, and the model
    may have written the old count twice; left, the second stays active beside the new
    count. Each is an ``invalidate`` of the update's chunk, at the update's event time."""
    written = written_facts(
        prepared,
        lambda a: (
            a.action is FactAction.update and a.target_id is not None and bool(counts(a.fact or ""))
        ),
    )
    if not written.vectors:
        return
    targets = {prepared[c].plan.actions[index].target_id for c, index, _ in written.origin}
    known: dict[UUID, str] = dict(
        conn.execute(
            sql.statement("facts_existing"), {"ids": sorted(t for t in targets if t is not None)}
        ).fetchall()
    )
    rows = conn.execute(
        sql.statement("change_nearest"),
        {
            "vectors": written.vectors,
            "conversations": written.conversations,
            "candidates": REPLACED_CANDIDATES,
            "excluded": sorted(written.excluded),
            "lower": COUNTS_LOWER,
        },
    ).fetchall()
    ended: set[UUID] = set()
    for ordinal, fact_id, fact, similarity in rows:  # nearest first
        c, index, _ = written.origin[ordinal - 1]
        update = prepared[c].plan.actions[index]
        later = update.fact or ""
        known_fact = known.get(update.target_id)
        if (
            known_fact is None
            or fact_id in ended
            or _subjects(fact) != _subjects(later)
            or not states_replaced_count(later, known_fact, fact)
        ):
            continue
        ended.add(fact_id)
        prepared[c].plan.actions.append(
            PlannedAction(
                action=FactAction.invalidate,
                proposed=update.proposed,  # the model proposed the fact, not this ending
                target_id=fact_id,
                episode_ids=update.episode_ids,
                cited=update.cited,
                event_time=update.event_time,
                reason=f"change check: states the count that {later!r} replaces in "
                f"{known_fact!r}, which it updates (cosine {similarity:.2f})",
            )
        )
        summary.changes_found += 1


def _update(prepared: Sequence[PreparedChunk], pair: Pair, reason: str) -> None:
    """The pair's later fact made the update of its known fact."""
    action = prepared[pair.chunk].plan.actions[pair.index]
    action.action = FactAction.update
    action.target_id = pair.known_id
    action.add_reason(reason)


def _pairs(
    conn: psycopg.Connection, prepared: Sequence[PreparedChunk], policy: ConsolidationSettings
) -> list[Pair]:
    """Each new fact of a chunk ready for apply with the nearest of its nearest active facts
    that starts with the same person's name: for any new fact, the nearest from
    ``NUMBERS_LOWER`` on that states other numbers ("The user attended five sessions ..."
    beside "... three sessions ...", even behind a nearer fact without them); else, for an
    unnamed update or a fact of the second look, the nearest in the range (``lower`` to the
    dedupe threshold) that names a value the fact names another of
    (``models.change.names_another_value``)."""
    written = written_facts(
        prepared,
        lambda a: a.action is FactAction.new and subject_name(a.fact or "") is not None,
    )
    if not written.vectors:
        return []
    rows = conn.execute(
        sql.statement("change_nearest"),
        {
            "vectors": written.vectors,
            "conversations": written.conversations,
            "candidates": NEAREST_CANDIDATES,
            "excluded": sorted(written.excluded),
            "lower": policy.gray_zone_lower,
        },
    ).fetchall()
    pairs: dict[int, Pair] = {}
    numbered: set[int] = set()  # the fact's pair states other numbers: no nearer one replaces it
    for ordinal, known_id, known_fact, similarity in rows:  # nearest first
        c, index, _ = written.origin[ordinal - 1]
        action = prepared[c].plan.actions[index]
        fact = action.fact or ""
        subjects = _subjects(fact)
        if ordinal in numbered or _subjects(known_fact) != subjects:
            continue
        if other_numbers(fact, known_fact):
            # a count that changed, even behind a nearer fact
            counted = count_changed(fact, known_fact) and similarity >= COUNTS_LOWER
            if similarity >= NUMBERS_LOWER or counted:
                pairs[ordinal] = Pair(c, index, known_id, known_fact, float(similarity))
                numbered.add(ordinal)
            continue
        unnamed = action.proposed is FactAction.update or action.second_look
        swapped = (
            one_word_swapped(fact, known_fact) if action.proposed is FactAction.update else None
        )
        if (
            ordinal not in pairs
            and unnamed
            and (
                swapped is not None
                or (
                    similarity < policy.dedupe_threshold
                    and names_another_value(fact, known_fact, subjects)
                )
            )
        ):
            pairs[ordinal] = Pair(c, index, known_id, known_fact, float(similarity), swapped)
    return [pairs[ordinal] for ordinal in sorted(pairs)]


_AND_NAME = re.compile(r"\s+and\s+([A-Z][\w'’-]*)")


def _subjects(sentence: str) -> tuple[str, ...]:
    """Who ``sentence`` is about: its subject's name and a second one joined by "and" ("Theo
    and Omar want ..."): "Theo and Lea want ..." is not about the same people."""
    first = subject_name(sentence)
    if first is None:
        return ()
    text = sentence.strip()
    rest = text[text.find(first) + len(first) :].removeprefix("'s").removeprefix("’s")
    second = _AND_NAME.match(rest)
    return (first, second.group(1)) if second else (first,)


def _out_of_date(
    pairs: Sequence[Pair], text: str | None, prepared: Sequence[PreparedChunk]
) -> list[tuple[Pair, str]]:
    """The pairs whose known fact the answer rewrote with a value of the later one
    (``models.change.replaced``); none from an answer that cannot be read."""
    try:
        judgement = ChangeJudgement.model_validate_json((text or "").strip())
    except ValidationError:
        logger.warning("change check: an answer that is not a judgement was ignored")
        return []
    shown = {f"P{i + 1}": pair for i, pair in enumerate(pairs)}
    found = []
    for verdict in judgement.pairs:
        pair = shown.pop(verdict.pair.strip().upper(), None)
        if pair is None:
            continue
        later = prepared[pair.chunk].plan.actions[pair.index].fact or ""
        if replaced(pair.known_fact, later, verdict.now):
            found.append((pair, verdict.now))
    return found

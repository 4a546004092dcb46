"""Episodic memories: the episodes a search returns beside its facts.

What was said this morning is found before any run consolidates it, and what a run's model
failed to extract is still found: a search ranks the conversation's episodes, pending and
consolidated, by how well their messages match the query (``sql/statements/
search_episodes.sql``), weighs each by its FSRS retrievability (``retrievability_weight``;
seed 000: FSRS applies to episodic memory only) and gives each one's text whole or cut to a
token budget around the messages that match best. A search that returns an episode reviews
it (the ``fsrs`` scheduler, rated Good); ``context`` reviews nothing (seed 001's
``context_pre_retrieve``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import zip_longest
from typing import Any, TypeVar
from uuid import UUID

import numpy as np
import psycopg
from fsrs import Card, Rating, Scheduler, State
from psycopg.rows import dict_row

from slowwave import sql
from slowwave.models.consolidation import is_agent_role
from slowwave.models.embedding.base import Embedder, as_queries
from slowwave.models.episode import EpisodicHit
from slowwave.models.llm.tokens import average_tokens
from slowwave.models.settings import SearchSettings
from slowwave.models.words import FUNCTION_WORDS
from slowwave.tasks.timeframe import temporal_window

# Reviews are computed the same on every replica: no fuzzing of intervals.
_SCHEDULER = Scheduler(enable_fuzzing=False)
_WORD = re.compile(r"\w+")
# A card's id is the episode's (the scheduler never reads it); given none, fsrs makes one from
# the clock and sleeps a millisecond so the next differs, which a search weighing dozens pays.
_CARD_ID = 0


def card(row: dict[str, Any]) -> Card:
    """An episode's FSRS card: as stored, or, never reviewed, reviewed once at its end."""
    if row["reviewed_at"] is None:
        new = Card(card_id=_CARD_ID)
        first, _ = _SCHEDULER.review_card(new, Rating.Good, row["end_at"].astimezone(UTC))
        return first
    return Card(
        card_id=_CARD_ID,
        state=State(row["review_state"]),
        step=row["review_step"],
        stability=row["review_stability"],
        difficulty=row["review_difficulty"],
        last_review=row["reviewed_at"].astimezone(UTC),
        due=row["reviewed_at"].astimezone(UTC),
    )


def retrievability(row: dict[str, Any], at: datetime) -> float:
    """The probability the episode is recalled at ``at`` (no earlier than its last review)."""
    shown, at = card(row), at.astimezone(UTC)
    last = shown.last_review or at
    return float(_SCHEDULER.get_card_retrievability(shown, max(at, last)))


def lines(messages: Sequence[dict[str, Any]]) -> list[str]:
    return [f"{m.get('speaker', '')}: {m.get('text', '')}" for m in messages]


def excerpt(
    messages: Sequence[dict[str, Any]],
    query: str,
    budget: int,
    window: tuple[int, int] | None = None,
) -> tuple[str, bool]:
    """The episode's text within ``budget`` tokens: whole when it fits, else centred on the
    messages that answer the query, and their neighbours, nearer ones first (``…`` where
    messages were left out); a single message longer than the budget is cut.

    What answers is what each channel of the search found, taken in turn as the search fuses
    its channels: the messages whose text shares the query's words (``query_words``: "Where
    does the user work?" asks for "work", not "where" or "the"), most shared first, and the
    messages ``[start, stop)`` of the episode's window nearest the query's meaning
    (``window``): "I'm a research engineer at Anthropic" shares no word with that question,
    and a later message about an email draft that said "the" and "does" was shown in its
    place. Taken in turn, neither channel fills the budget alone: the best-matching message
    only, then the window's eight, left out a chat's second mention of what was asked ("I
    recently tried baking…" after the sourdough question), and the matching messages before
    the window left out what the window alone found (LoCoMo's messages are short: a dozen share
    a word with the question). A message sharing words is taken so only while it takes at
    most half the budget; a longer one (most often an assistant's long answer that repeats the
    question's words) comes after the window's messages: where it fitted the budget it took
    it whole and left out what the window found. Asked what the agent said ("which shoe did
    you recommend", "can you remind me", ``asks_what_agent_said``), that long answer is what
    is asked for: the agent's message sharing most words goes first (of two sharing as many,
    the later, its last word on it: "here's an updated version of the sheet"), and where it
    alone is over the budget, its start is the excerpt (where a list or a recipe begins)."""
    shown = lines(messages)
    costs = [average_tokens(line) + 1 for line in shown]
    if sum(costs) <= budget:
        return "\n".join(shown), False
    wanted = query_words(query)
    overlap = [len(wanted & query_words(str(m.get("text", "")))) for m in messages]

    def most_words(among: Sequence[int]) -> int:
        return max(among, key=lambda i: (overlap[i], -i))

    anchors: list[int] = []
    if asks_what_agent_said(query):
        agents = [i for i, m in enumerate(messages) if is_agent_role(str(m.get("speaker", "")))]
        answered = max(agents, key=lambda i: (overlap[i], i)) if agents else None
        if answered is not None and overlap[answered] > 0:
            if costs[answered] > budget:
                return _start_of(shown[answered], costs[answered], budget), True
            anchors.append(answered)
    sharing = sorted(
        (i for i in range(len(shown)) if overlap[i] > 0 and costs[i] * 2 <= budget),
        key=lambda i: (-overlap[i], i),
    )
    nearest: list[int] = []
    if window is not None:
        start, stop = max(0, window[0]), min(len(shown), window[1])
        middle = (start + stop - 1) / 2
        nearest = sorted(range(start, stop), key=lambda i: (-overlap[i], abs(i - middle), i))
    anchors += [i for pair in zip_longest(sharing, nearest) for i in pair if i is not None]
    best = most_words(range(len(shown)))
    if overlap[best] > 0 or window is None:  # a long one, after the window's
        anchors.append(best)
    if not anchors:  # a window past the episode's messages (it grew since): its start
        anchors.append(0)
    kept: set[int] = set()
    used = 0
    for i in anchors:
        if i not in kept and used + costs[i] <= budget:
            kept.add(i)
            used += costs[i]
    if not kept:  # the best message alone is longer than the budget: its start
        return _start_of(shown[anchors[0]], costs[anchors[0]], budget), True
    centres = set(kept)
    for step in range(1, len(shown)):  # then the neighbours, nearest the anchors first
        for i in sorted({j + d for j in centres for d in (-step, step)}):
            if 0 <= i < len(shown) and i not in kept and used + costs[i] <= budget:
                kept.add(i)
                used += costs[i]
    parts: list[str] = []
    ordered = sorted(kept)
    for n, i in enumerate(ordered):
        if (n and ordered[n - 1] != i - 1) or (not n and i > 0):
            parts.append("…")
        parts.append(shown[i])
    if ordered[-1] < len(shown) - 1:
        parts.append("…")
    return "\n".join(parts), True


def _start_of(line: str, cost: int, budget: int) -> str:
    """The start of a message ``line`` of ``cost`` tokens that fits ``budget``, marked cut."""
    return line[: max(1, len(line) * budget // cost)].rstrip() + " …"


_SUFFIXES = ("ing", "ed", "es", "s")
# words a question is made of that say nothing of what it asks
_QUESTION_WORDS = frozenset({"do", "does", "did", "which", "why", "can", "could", "would"})


def query_words(text: str) -> set[str]:
    """The words of ``text`` that can answer or ask something, lower-cased, without the
    function words, with a plural's or a tense's ending dropped ("works", "worked" and
    "working" are "work") and then a final "e" ("recipe" and "recipes" are "recip", "store"
    and "stored" "stor"), each only where four letters are left."""
    found = set()
    for word in _WORD.findall(text.lower()):
        if word in FUNCTION_WORDS or word in _QUESTION_WORDS:
            continue
        for suffix in _SUFFIXES:
            if len(word) > len(suffix) + 3 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        if len(word) > 4 and word.endswith("e"):
            word = word[:-1]
        found.add(word)
    return found


Embed = Callable[[list[str]], Any]
"""Texts in, their vectors out (an embedder's ``embed``, or a server's batcher's)."""


@dataclass(frozen=True)
class Window:
    """Messages ``[start, stop)`` of an episode, embedded as one text."""

    episode_id: UUID
    start: int
    stop: int
    text: str


def missing_windows(conn: psycopg.Connection, conversation_id: str, size: int) -> list[Window]:
    """The conversation's messages not yet in a window (``episode_windows_missing``): new
    episodes, and what pending ones took since, in windows of ``size`` messages."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("episode_windows_missing"),
            {"conversation_id": conversation_id, "window": size},
        ).fetchall()
    windows = []
    for row in rows:
        messages = row["messages"]
        for start in range(row["messages_from"], len(messages), size):
            stop = min(start + size, len(messages))
            windows.append(Window(row["id"], start, stop, "\n".join(lines(messages[start:stop]))))
    return windows


def write_windows(conn: psycopg.Connection, windows: Sequence[Window], vectors: Any) -> int:
    """Store the windows' embeddings; a forget that came after ``missing_windows`` leaves
    nothing to write. How many were written."""
    if not windows:
        return 0
    try:
        with conn.transaction():
            conn.execute(
                sql.statement("episode_windows_write"),
                {
                    "episodes": [w.episode_id for w in windows],
                    "froms": [w.start for w in windows],
                    "tos": [w.stop for w in windows],
                    "embeddings": list(vectors),
                },
            )
    except psycopg.errors.ForeignKeyViolation:  # forgotten between the read and the write
        return 0
    return len(windows)


def embed_windows(
    conn: psycopg.Connection,
    embed: Embed,
    conversation_id: str,
    size: int,
    limit: int | None = None,
) -> int | None:
    """Embed the conversation's messages not yet in a window, on one connection. How many
    windows; None, and nothing embedded, when more than ``limit`` are missing (a server's
    search embeds the few a conversation's latest messages make, and leaves a backlog to its
    thread, which reads and writes on two connections and holds neither while it embeds)."""
    windows = missing_windows(conn, conversation_id, size)
    if not windows:
        return 0
    if limit is not None and len(windows) > limit:
        return None
    return write_windows(conn, windows, embed([w.text for w in windows]))


def search_memories(
    conn: psycopg.Connection,
    embedder: Embedder,
    query: str,
    conversation_id: str,
    *,
    k: int,
    memory_tokens: int,
    as_of: datetime | None = None,
    policy: SearchSettings | None = None,
    vector: np.ndarray | None = None,
    now: datetime | None = None,
    embed_first: bool = True,
) -> list[EpisodicHit]:
    """The ``k`` episodes of ``conversation_id`` that best answer ``query`` (``vector``: its
    embedding, when the caller has it), each with its text within ``memory_tokens``; none
    when ``k`` is 0. The conversation's messages not embedded yet are, first (``embed_first``;
    a server has a thread of its own do it, and searches with what is embedded so far)."""
    policy = policy or SearchSettings()
    if k < 1:
        return []
    use_vector = policy.memory_vector_weight > 0
    if use_vector:
        if embed_first:
            embed_windows(conn, embedder.embed, conversation_id, policy.memory_window)
        if vector is None:
            vector = embedder.embed(as_queries(embedder, [query]))[0]
    at = as_of or now or datetime.now(UTC)
    ranked = _weighed(
        conn, embedder, query, conversation_id, vector, k=k, as_of=as_of, at=at, policy=policy
    )
    if not ranked:
        return []
    best = ranked[0][0] or 1.0  # the best one scores 1
    if asks_about_now(query):  # what replaced an episode's facts before it
        ranked = successors_first(ranked, lambda s: s[3]["id"], lambda s: s[3]["replaced_by"])
    offered = alternatives(query)
    if offered and k > len(offered):  # each alternative's best episode after the question's
        place = min(ALTERNATIVES_AFTER, k - len(offered))
        vectors = embedder.embed(as_queries(embedder, list(offered))) if use_vector else None
        score_of = {s[3]["id"]: s[0] for s in ranked}
        picked: list[Weighed] = []
        for n, text in enumerate(offered):
            own = _weighed(
                conn, embedder, text, conversation_id, None if vectors is None else vectors[n],
                k=1, as_of=as_of, at=at, policy=policy,
            )  # fmt: skip
            shown = {s[3]["id"] for s in ranked[:place] + picked}
            if own and own[0][3]["id"] not in shown:
                picked.append((score_of.get(own[0][3]["id"], 0.0), *own[0][1:]))
        moved = {s[3]["id"] for s in picked}
        ranked = ranked[:place] + picked + [s for s in ranked[place:] if s[3]["id"] not in moved]
    scored = ranked[:k]
    hits = []
    for score, _, recall, row in scored:
        nearest = None if row["best_from"] is None else (row["best_from"], row["best_to"])
        text, cut = excerpt(row["messages"], query, memory_tokens, nearest)
        hits.append(
            EpisodicHit(
                id=row["id"],
                conversation_id=row["conversation_id"],
                start_at=row["start_at"],
                end_at=row["end_at"],
                pending=row["pending"],
                superseded=bool(row["replaced_by"]),
                messages=len(row["messages"]),
                text=text,
                excerpt=cut,
                score=round(score / best, 6),
                ranks={
                    "fulltext": row["fulltext_rank"],
                    "vector": row["vector_rank"],
                    "temporal": row["temporal_rank"],
                },
                retrievability=round(recall, 6),
                reviews=row["reviews"],
            )
        )
    return hits


Weighed = tuple[float, int, float, dict[str, Any]]


def _weighed(
    conn: psycopg.Connection,
    embedder: Embedder,
    query: str,
    conversation_id: str,
    vector: np.ndarray | None,
    *,
    k: int,
    as_of: datetime | None,
    at: datetime,
    policy: SearchSettings,
) -> list[Weighed]:
    """The episodes ``search_episodes`` fuses for ``query`` (its embedding ``vector``; none:
    the vector channel off), each as (its fused score weighed by its retrievability at ``at``,
    its place in the fusion, that retrievability, its row), best first."""
    time_from, time_to = (
        temporal_window(query, policy, at) if policy.memory_temporal_weight > 0 else (None, None)
    )
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("search_episodes"),
            {
                "conversation_id": conversation_id,
                "query": query,
                "as_of": as_of,
                "candidates": max(policy.candidates, k),
                "rrf_k": policy.rrf_k,
                "vector": np.zeros(embedder.dim, dtype=np.float32) if vector is None else vector,
                "vector_weight": policy.memory_vector_weight if vector is not None else 0.0,
                "time_from": time_from,
                "time_to": time_to,
                "temporal_weight": policy.memory_temporal_weight if time_from is not None else 0.0,
            },
            prepare=False,  # a generic plan (psycopg prepares from the sixth run) is 7x slower
        ).fetchall()
    w = policy.retrievability_weight
    scored = []
    for n, row in enumerate(rows):
        recall = retrievability(row, at)
        scored.append((row["fused"] * (1 - w + w * recall), n, recall, row))
    scored.sort(key=lambda s: (-s[0], s[1]))  # ties: as the fusion had them
    return scored


def alternatives(query: str) -> tuple[str, ...]:
    """The alternatives a question offers after a comma, each what one of the episodes it
    compares says: "Which did I set up first, the smart thermostat or the mesh network?" →
    ("the smart thermostat", "the mesh network"); none in "…, or less?" or "a friend or
    not?"."""
    offered = _ALTERNATIVES.search(query)
    return (offered["first"], offered["second"]) if offered else ()


def record_reviews(conn: psycopg.Connection, ids: Sequence[UUID], at: datetime) -> int:
    """Review these episodes at ``at`` (rated Good: a search returned them), in one
    transaction; an episode locked by a run or another review is passed over. How many."""
    if not ids:
        return 0
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql.statement("episode_reviews_lock"), {"ids": list(ids)}).fetchall()
        cards = []
        at = at.astimezone(UTC)
        for row in rows:
            before = card(row)
            when = max(at, before.last_review or at)
            after, _ = _SCHEDULER.review_card(before, Rating.Good, when)
            cards.append((row["id"], after, when))
        if cards:
            cur.execute(
                sql.statement("episode_reviews_write"),
                {
                    "ids": [c[0] for c in cards],
                    "stability": [c[1].stability for c in cards],
                    "difficulty": [c[1].difficulty for c in cards],
                    "state": [int(c[1].state) for c in cards],
                    "step": [c[1].step for c in cards],
                    "at": [c[2] for c in cards],
                },
            )
    return len(cards)


def tail(messages: Sequence[dict[str, Any]], budget: int) -> tuple[str, bool]:
    """The episode's last messages within ``budget`` tokens (``…`` before them when earlier
    ones were left out): what was said most recently."""
    shown, used, kept = lines(messages), 0, []
    for line in reversed(shown):
        cost = average_tokens(line) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    if not kept:
        return excerpt(messages[-1:], "", budget)[0], True
    cut = len(kept) < len(shown)
    return "\n".join((["…"] if cut else []) + kept[::-1]), cut


def latest_memories(
    conn: psycopg.Connection,
    conversation_id: str,
    n: int,
    budget: int,
    *,
    as_of: datetime | None = None,
) -> str:
    """The ``n`` latest episodes' last messages, within ``budget`` tokens shared between them,
    as seed 000's ``## Episodic Memories`` section (a context's option: no query, no review);
    empty when there are none or no room."""
    if n < 1 or budget < 16:
        return ""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("episodes_latest"),
            {"conversation_id": conversation_id, "as_of": as_of, "limit": n},
        ).fetchall()
    parts = ["## Episodic Memories"]
    each = (budget - average_tokens(parts[0])) // max(len(rows), 1)
    for rank, row in enumerate(rows, 1):
        head = f"## Memory {rank} ({_when(row['start_at'], row['pending'])})"
        text, _ = tail(row["messages"], each - average_tokens(head) - 1)
        parts += [head, text]
    return "\n".join(parts) if rows and each > 16 else ""


def _when(start: datetime, pending: bool, superseded: bool = False) -> str:
    when = start.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    state = "pending" if pending else "consolidated, superseded" if superseded else "consolidated"
    return f"{when}, {state}"


# a question about how things stand now: "where does Dana live now", "do I still run", "how
# many bikes do I currently own"
_NOW = re.compile(
    r"\b(?:now|nowadays|currently|current|presently|at present|at the moment|these days|"
    r"still|any ?more|latest|most recent(?:ly)?)\b",
    re.I,
)

# a question about what the agent said: "the restaurant you recommended", "I remember you told
# me", "how many eggs did you say"; a request ("can you recommend") asks for something new
_AGENT_SAID = re.compile(
    r"\byou\s+(?:\w+\s+){0,2}?(?:said|told|recommended|mentioned|provided|suggested|gave|"
    r"wrote|made|listed|explained|described|shared|offered|showed)\b|"
    r"\bdid you\s+(?:say|tell|recommend|mention|provide|suggest|give|write|make|list|explain|"
    r"describe|share|offer|show)\b|"
    r"\bremind me\b|\bour (?:previous|last|earlier) (?:chat|conversation)\b",
    re.I,
)

# Where each alternative's best episode goes: after the question's own best five (or fewer,
# where ``k`` leaves no room for them after five), so a longer list begins as a shorter one
ALTERNATIVES_AFTER = 5
# "…, the bike or the car?": a question that ends offering two alternatives after a comma
_ALTERNATIVES = re.compile(r",\s*(?P<first>[^,?]+?)\s+or\s+(?P<second>[^,?]+?)\s*\?\s*$", re.I)

T = TypeVar("T")


def successors_first(
    ranked: Sequence[T], key: Callable[[T], Any], successors: Callable[[T], Sequence[Any]]
) -> list[T]:
    """``ranked`` in its order, but each item after those of its ``successors`` (by ``key``)
    that are in it: asked where Dana lives now, the episode where she said she is moving to
    Manchester comes before the one where she said she teaches in Leeds, which matches the
    question's words better, when a fact of the first replaced one of the second."""
    by_key = {key(item): item for item in ranked}
    position = {key(item): n for n, item in enumerate(ranked)}
    out: list[T] = []
    done: set[Any] = set()

    def emit(item: T, seen: frozenset[Any]) -> None:
        if key(item) in done:
            return
        for later in sorted(
            (by_key[k] for k in successors(item) if k in by_key and k not in seen),
            key=lambda other: position[key(other)],
        ):
            emit(later, seen | {key(item)})
        if key(item) not in done:
            done.add(key(item))
            out.append(item)

    for item in ranked:
        emit(item, frozenset())
    return out


def asks_what_agent_said(query: str) -> bool:
    """Whether ``query`` asks what the agent itself said (``_AGENT_SAID``): "you recommended",
    "did you say", "can you remind me", "our previous chat", not "can you recommend"."""
    return _AGENT_SAID.search(query) is not None


def asks_about_now(query: str) -> bool:
    """Whether ``query`` asks how things stand now (``_NOW``), where what a later episode
    replaced is not the answer."""
    return _NOW.search(query) is not None


def render_memories(hits: Sequence[EpisodicHit]) -> str:
    """Seed 000's section: ``## Episodic Memories``, then ``## Memory 1 [rank: 1, score: …]``
    and its text, when, whether it is consolidated yet and whether what it taught was since
    replaced (superseded)."""
    if not hits:
        return ""
    parts = ["## Episodic Memories"]
    for rank, hit in enumerate(hits, 1):
        parts += [f"## Memory {rank} [rank: {rank}, score: {hit.score:.2f}]"]
        parts += [f"({_when(hit.start_at, hit.pending, hit.superseded)})", hit.text]
    return "\n".join(parts)

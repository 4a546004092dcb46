"""Cut a conversation's pending episodes into chunks that fit the model's context.

A chunk holds at most ``max_episodes`` episodes, or more short ones while they stay within
``min_tokens`` tokens together (each call sends the whole system prompt, so two-message
episodes share one rather than pay one each; so does a conversation's last episode that the
count would leave alone), and, when the context is known, at most
``max_tokens`` tokens of rendered episodes. An episode too long for one chunk is split by
messages into consecutive parts (and a message too long for one part, by text), so nothing is
ever sent over budget. Pure: no database, no runtime; the token counter is passed in.

Tokens are counted line by line (each rendered line plus its newline) and summed. That is
exact for ``estimate_tokens`` up to rounding in our favour; for a real tokenizer a joined text
can differ by a token or so per line boundary, which the safety margin absorbs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from slowwave.models.category import Category
from slowwave.models.consolidation import (
    DEEP_EXTRACTION,
    MAX_FACT_CHARS,
    SYSTEM_PROMPT,
    episode_short_id,
    fact_short_id,
    render_episode_lines,
    render_fact_line,
    render_message_line,
    render_user_prompt,
    shown_surprise,
)
from slowwave.models.episode import Episode, Message
from slowwave.models.fact import Fact
from slowwave.models.llm.base import prompt_limits
from slowwave.models.llm.tokens import TokenCounter, estimate_tokens
from slowwave.models.settings import Settings

# The safety margin kept out of every budget: 5% of the context plus 64 tokens. It absorbs the
# chat template's role markers (2-30 tokens), per-line counting that a tokenizer merges
# differently across line breaks, and an estimate that undercounts short lines by a token.
MARGIN_FRACTION = 0.05
MARGIN_TOKENS = 64

_SENTENCE_END = re.compile(r"[.!?…。！？]+[\"')\]]*\s+")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class ChunkBudget:
    """How much one chunk may hold.

    ``max_tokens`` is the episodes' share of the prompt; None means no token limit, and the
    episode count alone decides (today's behaviour). A chunk that holds ``max_episodes``
    takes one more episode while the whole stays within ``min_tokens`` (0: never).
    ``flashbulb_surprise`` decides which episodes add an "## Attention" line to the prompt;
    0.0 charges every episode for one. ``lone_joins``: a conversation's last episode, which the
    count would leave alone in a chunk, joins the chunk before it while ``max_tokens`` allows.
    """

    max_episodes: int
    max_tokens: int | None = None
    count: TokenCounter = estimate_tokens
    flashbulb_surprise: float = 0.0
    min_tokens: int = 0
    lone_joins: bool = False

    def __post_init__(self) -> None:
        if self.max_episodes < 1:
            raise ValueError(f"max_episodes must be at least 1, not {self.max_episodes}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be positive or None, not {self.max_tokens}")
        if self.min_tokens < 0:
            raise ValueError(f"min_tokens must not be negative, not {self.min_tokens}")

    def full(self, episodes: int, tokens: int, adding: int) -> bool:
        """Whether a chunk of ``episodes`` episodes and ``tokens`` tokens cannot take one of
        ``adding`` tokens more."""
        if self.max_tokens is not None and tokens + adding > self.max_tokens:
            return True
        return episodes >= self.max_episodes and tokens + adding > self.min_tokens


def chunk_budget(
    context_tokens: int | None,
    answer_tokens: int,
    fixed_prompt_tokens: int,
    facts_reserve_tokens: int,
    max_episodes: int,
    count: TokenCounter = estimate_tokens,
    flashbulb_surprise: float = 0.0,
    min_tokens: int = 0,
    lone_joins: bool = False,
) -> ChunkBudget:
    """The budget left for episodes once the answer, the fixed prompt, the facts and the margin
    are set aside; an unknown context (None) leaves only the episode count (and the floor
    below which short episodes share a chunk)."""
    if context_tokens is None:
        return ChunkBudget(max_episodes, None, count, flashbulb_surprise, min_tokens, lone_joins)
    margin = math.ceil(context_tokens * MARGIN_FRACTION) + MARGIN_TOKENS
    left = context_tokens - answer_tokens - fixed_prompt_tokens - facts_reserve_tokens - margin
    if left <= 0:
        raise ValueError(
            f"no room for episodes: context {context_tokens} - answer {answer_tokens} - fixed "
            f"prompt {fixed_prompt_tokens} - facts {facts_reserve_tokens} - margin {margin} = "
            f"{left} tokens; raise the context length or lower max_tokens / the facts shown"
        )
    return ChunkBudget(max_episodes, left, count, flashbulb_surprise, min_tokens, lone_joins)


def fixed_prompt_tokens(count: TokenCounter) -> int:
    """Tokens of the prompt without facts or episodes: system prompt, headers, closing line."""
    return count(SYSTEM_PROMPT) + count(render_user_prompt([], [], 1.0)) + count("## Attention\n\n")


def facts_reserve_tokens(limit: int, count: TokenCounter) -> int:
    """Room for ``limit`` existing facts of the longest allowed length (about 3 chars a token).

    The facts are not known when chunks are cut; the caller keeps the facts it shows within
    this reserve.
    """
    widest = max((c.value for c in Category), key=len)
    prefix = f"[{fact_short_id(limit)}] [{widest}] "
    return limit * (count(prefix) + math.ceil(MAX_FACT_CHARS / 3) + 1)


def _line_fits(speaker: str, room: int, count: TokenCounter) -> Callable[[str], bool]:
    """Whether a message text, shown as the speaker's line, fits in ``room`` tokens."""
    return lambda text: count(f"{speaker}: {text}\n") <= room


def _tokens(lines: Iterable[str], count: TokenCounter) -> int:
    return sum(count(line + "\n") for line in lines)


def episode_tokens(
    episode: Episode, count: TokenCounter, *, index: int = 0, deep: bool = False
) -> int:
    """Tokens the episode costs in the prompt as E{index + 1}; ``deep`` adds its attention line."""
    lines = render_episode_lines(index, episode)
    if deep:
        deep_line = DEEP_EXTRACTION.format(
            episode_id=episode_short_id(index), surprise=shown_surprise(episode)
        )
        lines.append(deep_line)
    return _tokens(lines, count)


# ── parts ──────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class EpisodePart:
    """An episode, or a consecutive run of its messages, as one item of a chunk.

    ``episode`` keeps the original's id, time range and surprise but holds only this part's
    messages; a message split by text appears as a piece (same speaker, part of the text).
    ``first_message`` is the index, in the ORIGINAL messages, of its first message or piece.
    ``end_message`` is the resume offset once this part is applied: messages [0, end_message)
    are consolidated. It counts whole messages only: a part that ends in a piece which is not
    its message's last leaves the offset at that message, so a resumed run shows the whole
    message again (some pieces twice; the model reinforces rather than duplicates).
    ``part`` / ``parts`` number the parts of what was left of the episode (1-based).
    """

    episode: Episode
    first_message: int
    end_message: int
    part: int
    parts: int
    message_count: int  # messages in the original episode
    tokens: int

    @property
    def completes_episode(self) -> bool:
        """Applying this part leaves nothing of the episode pending."""
        return self.end_message == self.message_count


def split_episode(
    episode: Episode, budget: ChunkBudget, done_messages: int = 0
) -> list[EpisodePart]:
    """Parts of the episode from message ``done_messages`` on, each within the token budget.

    One part when it fits (the episode itself when nothing was done). Otherwise messages are
    grouped greedily; the summary is repeated in each part unless it would take more than half
    of the budget. No parts when an earlier run consolidated every message.
    """
    total = len(episode.messages)
    if not 0 <= done_messages <= total:
        raise ValueError(f"episode {episode.id}: {done_messages} done of {total} messages")
    if done_messages and done_messages == total:
        return []
    count, limit = budget.count, budget.max_tokens
    # cost as the widest short id a chunk can give it (E99 where short episodes may pack past
    # the count: a hundred in a chunk would be a token over per line, which the margin takes)
    # (one more where a lone last episode joins the chunk before it)
    most = budget.max_episodes + budget.lone_joins
    index = max(most, 99 if budget.min_tokens else 0) - 1
    deep = shown_surprise(episode) >= budget.flashbulb_surprise
    rest = episode
    if done_messages:
        rest = episode.model_copy(update={"messages": episode.messages[done_messages:]})
    tokens = episode_tokens(rest, count, index=index, deep=deep)
    if limit is None or tokens <= limit:
        return [EpisodePart(rest, done_messages, total, 1, 1, total, tokens)]

    shell = episode.model_copy(update={"messages": []})
    if episode_tokens(shell, count, index=index, deep=deep) * 2 > limit:
        shell = shell.model_copy(update={"summary": None})
    room = limit - episode_tokens(shell, count, index=index, deep=deep)
    if not rest.messages:
        raise ValueError(
            f"episode {episode.id}: no messages, and its summary exceeds {limit} tokens"
        )
    if room <= 0:
        raise ValueError(
            f"episode {episode.id}: its header alone takes {limit - room} of the {limit} "
            "tokens a chunk may hold"
        )
    # groups of (original index, message or piece, whether it ends its message)
    groups: list[list[tuple[int, Message, bool]]] = [[]]
    used = 0
    for i in range(done_messages, total):
        message = episode.messages[i]
        cost = count(render_message_line(message) + "\n")
        if cost <= room:
            if used + cost > room:
                groups.append([])
                used = 0
            groups[-1].append((i, message, True))
            used += cost
            continue
        pieces = split_text(message.text, _line_fits(message.speaker, room, count), episode.id)
        for j, text in enumerate(pieces):
            if groups[-1]:
                groups.append([])
            piece = message.model_copy(update={"text": text})
            groups[-1].append((i, piece, j == len(pieces) - 1))
            used = count(render_message_line(piece) + "\n")

    parts = []
    for n, group in enumerate(groups, start=1):
        last, _, ends = group[-1]
        part = shell.model_copy(update={"messages": [m for _, m, _ in group]})
        cost = episode_tokens(part, count, index=index, deep=deep)
        end = last + 1 if ends else last
        parts.append(EpisodePart(part, group[0][0], end, n, len(groups), total, cost))
    return parts


def split_text(text: str, fits: Callable[[str], bool], episode_id: UUID | None = None) -> list[str]:
    """Consecutive pieces of ``text`` that each fit and that join back to it exactly.

    Each piece is the longest prefix that fits, cut after a sentence end when that keeps at
    least half of what a cut at whitespace would, else at whitespace, else anywhere.
    """
    pieces = []
    while not fits(text):
        cut = _sentence_or_word_cut(text, fits) or _last_fitting(
            range(1, len(text) + 1), text, fits
        )
        if not cut:
            raise ValueError(f"episode {episode_id}: the budget cannot show even one character")
        pieces.append(text[:cut])
        text = text[cut:]
    if text or not pieces:
        pieces.append(text)
    return pieces


def _sentence_or_word_cut(text: str, fits: Callable[[str], bool]) -> int:
    sentence = _last_fitting([m.end() for m in _SENTENCE_END.finditer(text)], text, fits)
    word = _last_fitting([m.end() for m in _WHITESPACE.finditer(text)], text, fits)
    return sentence if sentence * 2 >= word else word


def _last_fitting(cuts: Sequence[int], text: str, fits: Callable[[str], bool]) -> int:
    """The largest cut whose prefix fits (0 if none), by bisection: counts grow with length."""
    lo, hi, best = 0, len(cuts) - 1, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if cuts[mid] < len(text) and fits(text[: cuts[mid]]):
            best, lo = cuts[mid], mid + 1
        else:
            hi = mid - 1
    return best


# ── packing ────────────────────────────────────────────────────────────────────────────────


class Unsplittable(ValueError):
    """An episode that no cut makes fit the budget (its header or summary alone is over it)."""


def pack(
    episodes: Sequence[Episode],
    budget: ChunkBudget,
    offsets: Mapping[UUID, int] | None = None,
    refused: dict[UUID, str] | None = None,
) -> list[list[EpisodePart]]:
    """Chunks of episode parts, oldest first, filled greedily within the budget.

    ``offsets`` gives, per episode id, how many of its messages an earlier run consolidated.
    Parts of a split episode are packed like whole episodes, so a short last part shares its
    chunk with the next episodes; two parts of one episode never share a chunk. Without a
    token limit the grouping is exactly the old ``chunked(episodes, max_episodes)``.

    An episode no cut makes fit is left out and its reason put in ``refused`` when given
    (the caller quarantines it); without ``refused`` it raises ``Unsplittable``.
    """
    offsets = offsets or {}
    chunks: list[list[EpisodePart]] = []
    used = 0
    for episode in sorted(episodes, key=lambda e: (e.start_at, e.end_at, e.id)):
        try:
            parts = split_episode(episode, budget, offsets.get(episode.id, 0))
        except ValueError as exc:
            if refused is None:
                raise Unsplittable(str(exc)) from exc
            refused[episode.id] = f"cannot be cut to fit the model's context: {exc}"
            continue
        for part in parts:
            chunk = chunks[-1] if chunks else []
            if (
                not chunk
                or budget.full(len(chunk), used, part.tokens)
                or chunk[-1].episode.id == episode.id
            ):
                chunks.append([])
                used = 0
            chunks[-1].append(part)
            used += part.tokens
    if budget.lone_joins:
        _join_lone_last(chunks, budget)
    return chunks


def _join_lone_last(chunks: list[list[EpisodePart]], budget: ChunkBudget) -> None:
    """The last chunk, when it holds one part, joined to the chunk before it: one request
    fewer, whose system prompt (most of a short chunk's tokens) is not sent again. Not when the
    two hold parts of one episode, nor past the token limit."""
    if len(chunks) < 2 or len(chunks[-1]) != 1:
        return
    (lone,), before = chunks[-1], chunks[-2]
    if before[-1].episode.id == lone.episode.id:
        return
    tokens = sum(p.tokens for p in before) + lone.tokens
    if budget.max_tokens is not None and tokens > budget.max_tokens:
        return
    before.append(chunks.pop()[0])


# ── the run's budget, and chunks as the stages see them ───────────────────────────────────


def run_budget(model: object, settings: Settings) -> ChunkBudget:
    """The budget of one run: the runtime's context and tokenizer (``prompt_limits``), the
    answer's ``llm_max_tokens``, the prompt, room for ``related_facts_limit`` facts,
    ``chunk_size`` and ``chunk_min_tokens``."""
    context, count = prompt_limits(model)
    return chunk_budget(
        context,
        settings.llm.max_tokens,
        fixed_prompt_tokens(count),
        facts_reserve_tokens(settings.consolidation.related_facts_limit, count),
        settings.consolidation.chunk_size,
        count,
        settings.consolidation.flashbulb_surprise,
        settings.consolidation.chunk_min_tokens,
        settings.consolidation.chunk_lone_joins,
    )


def as_episodes(chunk: Sequence[EpisodePart]) -> list[Episode]:
    """A chunk of parts as the stages take it: each part an episode that says which of the
    stored episode's messages it holds (``messages_from``) and, when it does not finish the
    episode, where it leaves it (``messages_to``)."""
    return [
        part.episode.model_copy(
            update={
                "messages_from": part.first_message,
                "messages_to": None if part.completes_episode else part.end_message,
            }
        )
        for part in chunk
    ]


def fit_facts(facts: Sequence[Fact], budget: ChunkBudget, limit: int) -> list[Fact]:
    """The facts to show, best first, kept within the room the budget reserved for them."""
    if budget.max_tokens is None:
        return list(facts)
    room = facts_reserve_tokens(limit, budget.count)
    shown: list[Fact] = []
    for fact in facts:
        cost = budget.count(render_fact_line(len(shown), fact) + "\n")
        if cost > room:
            break
        shown.append(fact)
        room -= cost
    return shown

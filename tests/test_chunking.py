"""Chunks cut by a token budget: pure logic, no database and no model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slowwave.models.consolidation import SYSTEM_PROMPT, render_user_prompt
from slowwave.models.episode import Episode, Message
from slowwave.models.llm.tokens import TokenizerCounter, estimate_tokens, model_token_counter
from slowwave.tasks.chunking import (
    ChunkBudget,
    EpisodePart,
    chunk_budget,
    episode_tokens,
    facts_reserve_tokens,
    fixed_prompt_tokens,
    pack,
    render_episode_lines,
    split_episode,
    split_text,
)
from tests.fix_episodes import at, make_episode


def long_episode(key: str, texts: list[str], day: int = 1, **fields: object) -> Episode:
    episode = make_episode("c", key, "", at(2024, 1, day))
    messages = [Message(speaker="user" if i % 2 else "bot", text=t) for i, t in enumerate(texts)]
    return episode.model_copy(update={"messages": messages, **fields})


def words(n: int, start: int = 0) -> str:
    return " ".join(f"w{i}" for i in range(start, start + n))


def chunk_tokens(chunk: list[EpisodePart], budget: ChunkBudget) -> int:
    """Recount a chunk as the prompt shows it (E1, E2, ...), not from the parts' own counts."""
    total = 0
    for i, p in enumerate(chunk):
        surprise = p.episode.surprise
        assert surprise is not None
        deep = surprise >= budget.flashbulb_surprise
        total += episode_tokens(p.episode, budget.count, index=i, deep=deep)
    return total


def rebuilt_messages(parts: list[EpisodePart]) -> list[Message]:
    """An episode's messages put back together from its parts, pieces joined."""
    messages: list[Message] = []
    open_piece = False
    for part in parts:
        shown = list(part.episode.messages)
        if open_piece:
            first = shown.pop(0)
            messages[-1] = messages[-1].model_copy(update={"text": messages[-1].text + first.text})
        messages += shown
        open_piece = part.end_message == part.first_message + len(part.episode.messages) - 1
    return messages


# ── budget ───────────────────────────────────────────────────────────────────────────────


def test_budget_is_context_minus_answer_fixed_prompt_facts_and_margin() -> None:
    budget = chunk_budget(8192, 1024, 600, 2000, 8)
    margin = 410 + 64
    assert budget.max_tokens == 8192 - 1024 - 600 - 2000 - margin
    assert budget.max_episodes == 8


def test_unknown_context_leaves_only_the_episode_count() -> None:
    assert chunk_budget(None, 1024, 600, 2000, 8).max_tokens is None


def test_budget_that_leaves_no_room_names_every_number() -> None:
    with pytest.raises(ValueError, match=r"context 2048 - answer 1024 - fixed prompt 600"):
        chunk_budget(2048, 1024, 600, 400, 8)


def test_default_settings_leave_room_for_episodes() -> None:
    fixed = fixed_prompt_tokens(estimate_tokens)
    facts = facts_reserve_tokens(20, estimate_tokens)
    budget = chunk_budget(8192, 1024, fixed, facts, 8)
    assert budget.max_tokens is not None and budget.max_tokens > 2500


# ── rendering ────────────────────────────────────────────────────────────────────────────


def test_episode_rendering_matches_the_consolidation_prompt() -> None:
    plain = make_episode("c", "k1", "I moved to Lisbon.", at(2024, 1, 1))
    summarised = long_episode("k2", ["hi", "hello there"], day=2, summary="Greetings.")
    prompt = render_user_prompt([], [plain, summarised], 0.85)
    assert "\n".join(render_episode_lines(0, plain)) in prompt
    assert "\n".join(render_episode_lines(1, summarised)) in prompt


def test_fixed_prompt_and_episode_tokens_cover_the_whole_prompt() -> None:
    episode = long_episode("k", ["one two", "three"], summary="Sum.", surprise=0.9)
    user = render_user_prompt([], [episode], 0.85)
    whole = estimate_tokens(SYSTEM_PROMPT) + estimate_tokens(user)
    parts = fixed_prompt_tokens(estimate_tokens) + episode_tokens(
        episode, estimate_tokens, deep=True
    )
    assert whole <= parts <= whole + 3


def chunked(episodes: Sequence[Episode], size: int) -> list[list[Episode]]:
    """The old rule: oldest first, ``size`` episodes a chunk."""
    ordered = sorted(episodes, key=lambda e: (e.start_at, e.end_at, e.id))
    return [list(ordered[i : i + size]) for i in range(0, len(ordered), size)]


# ── without a token limit ────────────────────────────────────────────────────────────────


def test_episode_count_alone_groups_exactly_like_chunked() -> None:
    episodes = [
        make_episode("c", f"k{i}", words(200 * i), at(2024, 1, 1) + timedelta(hours=(7 * i) % 11))
        for i in range(19)
    ]
    budget = ChunkBudget(max_episodes=4)
    grouped = [[p.episode for p in chunk] for chunk in pack(episodes, budget)]
    expected = chunked(episodes, 4)
    assert [[e.id for e in c] for c in grouped] == [[e.id for e in c] for c in expected]
    assert all(
        g is e
        for gc, ec in zip(grouped, expected, strict=True)
        for g, e in zip(gc, ec, strict=True)
    )


# ── with a token limit ───────────────────────────────────────────────────────────────────


def test_every_chunk_fits_the_token_budget() -> None:
    episodes = [
        long_episode(f"k{i}", [words(40 * (i % 5 + 1), j) for j in range(i % 4 + 1)], day=i + 1)
        for i in range(12)
    ]
    budget = ChunkBudget(max_episodes=8, max_tokens=600)
    chunks = pack(episodes, budget)
    assert len(chunks) > len(chunked(episodes, 8))
    for chunk in chunks:
        assert len(chunk) <= 8
        assert chunk_tokens(chunk, budget) <= 600


def test_oversized_episode_is_split_into_consecutive_parts_that_keep_its_identity() -> None:
    texts = [words(30, 100 * i) for i in range(12)]
    episode = long_episode("big", texts, summary="A long talk.")
    budget = ChunkBudget(max_episodes=8, max_tokens=300)
    parts = split_episode(episode, budget)
    assert len(parts) > 1
    assert [p.part for p in parts] == list(range(1, len(parts) + 1))
    assert {p.parts for p in parts} == {len(parts)}
    for part in parts:
        assert part.episode.id == episode.id
        assert (part.episode.start_at, part.episode.end_at) == (episode.start_at, episode.end_at)
        assert part.episode.summary == "A long talk."
        assert part.tokens <= 300
    assert [p.first_message for p in parts[1:]] == [p.end_message for p in parts[:-1]]
    assert parts[0].first_message == 0 and parts[-1].completes_episode
    assert rebuilt_messages(parts) == episode.messages


def test_parts_of_one_episode_never_share_a_chunk() -> None:
    episode = long_episode("big", [words(30, 100 * i) for i in range(12)])
    small = make_episode("c", "small", "ok", at(2024, 1, 2))
    chunks = pack([episode, small], ChunkBudget(max_episodes=8, max_tokens=300))
    for chunk in chunks:
        ids = [p.episode.id for p in chunk]
        assert len(ids) == len(set(ids))
    assert chunks[-1][-1].episode.id == small.id


def test_oversized_message_is_split_into_pieces_never_over_budget() -> None:
    text = " ".join(f"Sentence number {i} says something." for i in range(200))
    episode = long_episode("huge", ["before", text, "after"])
    budget = ChunkBudget(max_episodes=8, max_tokens=250)
    parts = split_episode(episode, budget)
    assert all(p.tokens <= 250 for p in parts)
    assert rebuilt_messages(parts) == episode.messages
    pieces = [p for p in parts if p.first_message == 1 and p.end_message == 1]
    assert pieces, "the long message is cut into pieces that do not advance the offset"
    assert all(p.episode.messages[-1].text.endswith(". ") for p in pieces)


def test_text_without_spaces_is_cut_hard() -> None:
    text = "x" * 1000
    pieces = split_text(text, lambda t: estimate_tokens(t) <= 50)
    assert "".join(pieces) == text
    assert all(estimate_tokens(p) <= 50 for p in pieces)
    assert len(pieces) == 7


def test_budget_too_small_for_a_header_says_so() -> None:
    episode = long_episode("k", [words(100)])
    with pytest.raises(ValueError, match="header alone"):
        split_episode(episode, ChunkBudget(max_episodes=8, max_tokens=20))


# ── offsets ──────────────────────────────────────────────────────────────────────────────


def test_offsets_resume_after_the_messages_already_consolidated() -> None:
    episode = long_episode("big", [words(30, 100 * i) for i in range(12)])
    other = make_episode("c", "other", "hello", at(2024, 1, 2))
    budget = ChunkBudget(max_episodes=8, max_tokens=300)
    first = split_episode(episode, budget)[0]
    resumed = pack([episode, other], budget, {episode.id: first.end_message})
    parts = [p for chunk in resumed for p in chunk if p.episode.id == episode.id]
    assert parts[0].first_message == first.end_message
    assert rebuilt_messages(parts) == episode.messages[first.end_message :]
    assert resumed[-1][-1].episode.id == other.id


def test_fully_consolidated_episode_yields_no_parts() -> None:
    episode = long_episode("k", ["a", "b"])
    assert split_episode(episode, ChunkBudget(max_episodes=8), done_messages=2) == []
    with pytest.raises(ValueError, match="3 done of 2"):
        split_episode(episode, ChunkBudget(max_episodes=8), done_messages=3)


# ── property ─────────────────────────────────────────────────────────────────────────────

TEXT = st.text(alphabet=st.sampled_from(list("ab cd.\n!é東 ")), max_size=400)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    conversation=st.lists(
        st.tuples(st.lists(TEXT, max_size=6), st.integers(0, 6), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    max_episodes=st.integers(1, 5),
    max_tokens=st.integers(150, 700),
    word_counter=st.booleans(),
)
def test_every_chunk_fits_and_parts_give_back_every_message(
    conversation: list[tuple[list[str], int, bool]],
    max_episodes: int,
    max_tokens: int,
    word_counter: bool,
) -> None:
    count = (lambda t: len(t.split()) + 1) if word_counter else estimate_tokens
    budget = ChunkBudget(max_episodes, max_tokens, count, flashbulb_surprise=0.85)
    episodes, offsets = [], {}
    for n, (texts, offset, flashbulb) in enumerate(conversation):
        episode = long_episode(f"k{n}", texts, day=n + 1, surprise=0.9 if flashbulb else 0.5)
        episodes.append(episode)
        offsets[episode.id] = min(offset, len(texts))
    chunks = pack(episodes, budget, offsets)
    for chunk in chunks:
        assert 1 <= len(chunk) <= max_episodes
        assert chunk_tokens(chunk, budget) <= max_tokens
        if not word_counter:  # the estimate of the joined text stays within the sum of its lines
            text = "\n".join(
                line for i, p in enumerate(chunk) for line in render_episode_lines(i, p.episode)
            )
            assert estimate_tokens(text) <= max_tokens
    flat = [p for chunk in chunks for p in chunk]
    for episode in episodes:
        parts = [p for p in flat if p.episode.id == episode.id]
        start = offsets[episode.id]
        assert rebuilt_messages(parts) == episode.messages[start:]
        assert [p.first_message for p in parts[:1]] == ([start] if parts else [])
        assert all(p.completes_episode for p in parts[-1:])
    order = [p.episode.id for p in flat]
    assert order == sorted(order, key=[e.id for e in episodes].index)


# ── token counters ───────────────────────────────────────────────────────────────────────


def test_estimate_counts_digits_punctuation_and_non_ascii_conservatively() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcdef") == 2
    assert estimate_tokens("2024-01-01") == 10
    assert estimate_tokens("東京") == 4
    assert estimate_tokens("a" * 7) == 3


def test_folder_without_tokenizer_falls_back_to_the_estimate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO"):
        assert model_token_counter(tmp_path) is estimate_tokens
    assert "estimated" in caplog.text


def test_folder_with_a_tokenizer_counts_with_it(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    count = model_token_counter(tmp_path)
    assert isinstance(count, TokenizerCounter)
    assert count("hello world hello other") == 4


# ── short episodes share a chunk ─────────────────────────────────────────────────────────


def test_short_episodes_share_a_chunk_beyond_the_episode_count_up_to_the_token_floor() -> None:
    short = [long_episode(f"s{i}", [f"short message {i}", "reply"], day=i + 1) for i in range(7)]
    one = episode_tokens(short[0], estimate_tokens, index=98, deep=True)  # as pack costs it
    budget = ChunkBudget(max_episodes=2, min_tokens=3 * one + 1)
    chunks = pack(short, budget)
    # three short episodes fit under the floor, a fourth would not: 3 + 3 + 1, not 2 + 2 + 2 + 1
    assert [len(c) for c in chunks] == [3, 3, 1]
    assert [p.episode.id for c in chunks for p in c] == [e.id for e in short]
    assert all(chunk_tokens(c, budget) <= budget.min_tokens for c in chunks)


def test_long_episodes_still_go_the_episode_count_a_chunk_under_a_token_floor() -> None:
    long = [long_episode(f"l{i}", [words(150, 10 * i)], day=i + 1) for i in range(5)]
    budget = ChunkBudget(max_episodes=2, min_tokens=episode_tokens(long[0], estimate_tokens))
    assert [len(c) for c in pack(long, budget)] == [2, 2, 1]


def test_a_floor_never_packs_past_the_context_budget() -> None:
    short = [long_episode(f"s{i}", [words(20)], day=i + 1) for i in range(6)]
    one = episode_tokens(short[0], estimate_tokens, index=98, deep=True)
    budget = ChunkBudget(max_episodes=1, max_tokens=2 * one, min_tokens=100 * one)
    chunks = pack(short, budget)
    assert [len(c) for c in chunks] == [2, 2, 2]
    assert all(chunk_tokens(c, budget) <= 2 * one for c in chunks)


# ── a lone last episode joins the chunk before it ─────────────────────────────────────────


def test_a_lone_last_episode_joins_the_chunk_before_it() -> None:
    episodes = [long_episode(f"e{i}", [f"message {i}", "reply"], day=i + 1) for i in range(5)]
    alone = pack(episodes, ChunkBudget(max_episodes=2))
    joined = pack(episodes, ChunkBudget(max_episodes=2, lone_joins=True))
    assert [len(c) for c in alone] == [2, 2, 1]
    assert [len(c) for c in joined] == [2, 3]
    assert [p.episode.id for c in joined for p in c] == [e.id for e in episodes]
    # one episode in all is a chunk of its own: there is nothing before it to join
    assert [len(c) for c in pack(episodes[:1], ChunkBudget(2, lone_joins=True))] == [1]


def test_a_lone_last_episode_stays_alone_where_joining_would_pass_the_context_budget() -> None:
    episodes = [long_episode(f"e{i}", [words(30, 100 + 40 * i)], day=i + 1) for i in range(3)]
    one = max(episode_tokens(e, estimate_tokens, index=2, deep=True) for e in episodes)
    budget = ChunkBudget(max_episodes=2, max_tokens=2 * one + 2, lone_joins=True)
    chunks = pack(episodes, budget)
    assert [len(c) for c in chunks] == [2, 1]
    assert all(chunk_tokens(c, budget) <= budget.max_tokens for c in chunks)  # type: ignore[operator]


def test_the_last_part_of_a_split_episode_never_joins_its_own_earlier_part() -> None:
    episode = long_episode("long", [words(40, 100), words(40, 200)])
    alone = [episode.model_copy(update={"messages": [m]}) for m in episode.messages]
    one_message = max(episode_tokens(e, estimate_tokens, index=2, deep=True) for e in alone)
    budget = ChunkBudget(max_episodes=2, max_tokens=one_message + 1, lone_joins=True)
    chunks = pack([episode], budget)
    assert [len(c) for c in chunks] == [1, 1]
    assert {p.episode.id for c in chunks for p in c} == {episode.id}

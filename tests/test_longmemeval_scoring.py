"""The LongMemEval benchmark's scoring rule: how a fact "states" an answer (numbers in digits
and words, times, two thirds of an answer's words, a word shared with the question), and the
superseded values a knowledge-update question's earlier session gives."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks.longmemeval import (
    KNOWLEDGE_UPDATE,
    SINGLE_SESSION_USER,
    Question,
    alternatives,
    answered_by,
    numbers,
    parse_date,
    read_questions,
    score,
    states,
    still_stating_superseded,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("25 minutes and 50 seconds", {"25", "50"}),
        ("a personal best of 25:50", {"25", "50"}),
        ("at 6:00 pm", {"6"}),
        ("7:30 am", {"7", "30"}),
        ("five sessions", {"5"}),
        ("twenty-five postcards", {"25"}),
        ("We've met up twice.", {"2"}),
        ("1,300 followers", {"1300"}),
        ("$420", {"420"}),
        ("a charity 5K run with my Canon EOS 80D", set()),  # glued to letters: a name
        ("one of my friends", set()),
        ("my 5th project, on February 14th", {"5", "14"}),
    ],
)
def test_numbers_are_read_in_digits_words_and_clock_times(text: str, expected: set[str]) -> None:
    assert numbers(text) == expected


def test_an_answer_with_an_alternative_accepts_either() -> None:
    assert alternatives("25 minutes and 50 seconds (or 25:50)") == [
        "25 minutes and 50 seconds",
        "25:50",
    ]


@pytest.mark.parametrize(
    ("fact", "value", "question", "expected"),
    [
        (
            "The user set a personal best of 25:50 in a charity 5K run.",
            "25 minutes and 50 seconds",
            "What was my personal best time in the charity 5K run?",
            True,
        ),
        (
            "The user set a personal best of 27:12 in a charity 5K run.",
            "25 minutes and 50 seconds",
            "What was my personal best time in the charity 5K run?",
            False,
        ),
        (
            "The user's friend Rachel moved back to the suburbs.",
            "the suburbs",
            "Where did Rachel move to after her recent relocation?",
            True,
        ),
        (
            "The user has written seven short stories.",
            "seven",
            "How many short stories have I written since I started writing regularly?",
            True,
        ),
        (  # the number, but about something the question does not ask
            "The user owns 7 houseplants.",
            "seven",
            "How many short stories have I written since I started writing regularly?",
            False,
        ),
        (
            "The user is obsessed with Kansas City Masterpiece BBQ sauce.",
            "Kansas City Masterpiece",
            "What brand of BBQ sauce am I currently obsessed with?",
            True,
        ),
    ],
)
def test_a_fact_states_a_value_with_its_numbers_or_words_and_a_word_of_the_question(
    fact: str, value: str, question: str, expected: bool
) -> None:
    assert states(fact, value, question) is expected


def _question(question: str, answer: str, earlier: str, later: str) -> Question:
    day = datetime(2023, 5, 1, tzinfo=UTC)
    turn = {"role": "user", "has_answer": True}
    return Question(
        id="q",
        type=KNOWLEDGE_UPDATE,
        question=question,
        answer=answer,
        asked_at=datetime(2023, 6, 1, tzinfo=UTC),
        sessions=[(day, [{**turn, "content": earlier}]), (day, [{**turn, "content": later}])],
    )


def test_the_superseded_value_is_a_number_of_the_earlier_evidence_not_in_the_answer() -> None:
    q = _question(
        "What was my personal best time in the charity 5K run?",
        "25 minutes and 50 seconds (or 25:50)",
        "I set a personal best time in a charity 5K run with a time of 27:12.",
        "I'm hoping to beat my personal best time of 25:50 this time.",
    )
    assert q.superseded_numbers() == {"27", "12"}
    old = "The user set a personal best of 27:12 in a charity 5K run."
    new = "The user's personal best in the charity 5K run is 25:50."
    assert still_stating_superseded(q, [old, new]) == old
    assert still_stating_superseded(q, [new]) is None
    assert answered_by(q, [old, new]) == new


def test_a_question_dated_hours_before_its_last_session_is_scored_after_it() -> None:
    """The file dates three knowledge-update questions on the day of their last session, hours
    before its time; that session holds the answer, and its facts are valid from it."""
    q = _question("How long have I had my cat?", "9 months", "six months with Luna", "9 months")
    last = datetime(2023, 11, 30, 11, 13, tzinfo=UTC)
    q = replace(
        q,
        asked_at=datetime(2023, 11, 30, 3, 32, tzinfo=UTC),
        sessions=[q.sessions[0], (last, q.sessions[-1][1])],
    )
    new = "The user has had their cat Luna for about 9 months now."
    assert score(q, [(new, last, None)])["stated_by"] == new
    later = replace(q, asked_at=datetime(2023, 12, 5, tzinfo=UTC))  # scored when asked
    assert later.scored_at == later.asked_at
    assert score(later, [(new, datetime(2023, 12, 6, tzinfo=UTC), None)])["stated_by"] is None


def test_dates_are_read_as_utc() -> None:
    assert parse_date("2023/05/25 (Thu) 20:21") == datetime(2023, 5, 25, 20, 21, tzinfo=UTC)


def test_as_many_questions_are_read_as_asked_none_for_zero(longmemeval_path: Path) -> None:
    assert read_questions(longmemeval_path, SINGLE_SESSION_USER, 0) == []
    two = read_questions(longmemeval_path, KNOWLEDGE_UPDATE, 2)
    assert [q.type for q in two] == [KNOWLEDGE_UPDATE] * 2
    assert all(not q.id.endswith("_abs") for q in two)
    dates = [at for at, _ in two[0].sessions]
    assert dates == sorted(dates)  # replayed oldest first

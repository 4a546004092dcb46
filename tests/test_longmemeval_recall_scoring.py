"""The LongMemEval retrieval benchmark's scoring rule: which evidence turns an episode's text,
as a search returned it, carries; which sessions make the haystack."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.longmemeval_recall import carried, evidence_turns, read_haystack
from slowwave.tasks.memories import excerpt

MESSAGES = [
    {"speaker": "user", "text": "I moved my 5K best down to 25:50 last weekend."},
    {"speaker": "assistant", "text": "Congratulations! " + "Here is a plan to keep going. " * 40},
    {"speaker": "user", "text": "Thanks, and my sister visits in May."},
]


def test_a_whole_episode_carries_every_turn_and_an_excerpt_only_what_it_shows() -> None:
    whole, cut = excerpt(MESSAGES, "what is my 5K best", 10_000)
    assert not cut
    assert carried(whole, MESSAGES) == {0, 1, 2}
    short, cut = excerpt(MESSAGES, "when does my sister visit", 30)
    assert cut  # the two short turns fit, the long answer between them does not
    assert carried(short, MESSAGES) == {0, 2}


def test_a_message_cut_to_the_budget_counts_for_its_turn() -> None:
    text, cut = excerpt(MESSAGES[1:2], "a plan to keep going", 20)
    assert cut and text.endswith(" …")
    assert carried(text, MESSAGES[1:2]) == {0}
    assert carried(text, MESSAGES) == {1}


def test_the_haystack_of_the_first_questions_is_their_sessions_each_once(tmp_path: Path) -> None:
    def question(qid: str, sessions: list[str], answer_turn: int) -> dict[str, object]:
        return {
            "question_id": qid,
            "question_type": "knowledge-update",
            "question": "How many bikes do I own?",
            "answer": "4",
            "question_date": "2023/06/01 (Thu) 00:58",
            "haystack_session_ids": sessions,
            "haystack_dates": [f"2023/05/0{i + 1} (Mon) 10:00" for i in range(len(sessions))],
            "haystack_sessions": [
                [
                    {"role": "user", "content": f"{s} {t}", "has_answer": t == answer_turn}
                    for t in range(3)
                ]
                for s in sessions
            ],
            "answer_session_ids": sessions[-1:],
        }

    data = tmp_path / "lme.json"
    data.write_text(
        json.dumps(
            [
                question("q1", ["a", "b"], 1),
                question("q2_abs", ["c"], 0),  # an abstention question: left out
                question("q3", ["b", "d"], 2),
                question("q4", ["e"], 0),
            ]
        )
    )
    first = read_haystack(data, questions=2)
    assert [q["question_id"] for q in first.questions] == ["q1", "q3"]
    assert sorted(first.sessions) == ["a", "b", "d"]
    every = read_haystack(data)
    assert [q["question_id"] for q in every.questions] == ["q1", "q3", "q4"]
    assert sorted(every.sessions) == ["a", "b", "c", "d", "e"]  # distractors too
    assert evidence_turns(first.questions[1]) == {("b", 2), ("d", 2)}


def test_a_message_of_several_lines_counts_when_it_is_shown_whole() -> None:
    """LongMemEval's assistants answer in lists: a message of several lines is one turn."""
    messages = [
        {"speaker": "user", "text": "What should I pack?"},
        {"speaker": "assistant", "text": "Here is a list:\n1. Adapters\n2. A charger"},
        {"speaker": "user", "text": "Thanks"},
    ]
    whole, cut = excerpt(messages, "pack adapters", 10_000)
    assert not cut
    assert carried(whole, messages) == {0, 1, 2}
    assert carried("assistant: Here is a list:\n1. Adapters", messages) == set()  # a part

"""Reranking a search: the best candidates of both lists, facts and episodic memories, put in
the order a reranker scores them; the shipped cross-encoder (ms-marco-MiniLM-L-12-v2 from its
pinned wheel) scores what answers a query above what only shares its words; a reranker that is
not prepared is a clear error, never a search that silently did not rerank.

The test that loads the model skips where it is not prepared in the repository's
``.slowwave/models``, unless ``SLOWWAVE_REQUIRE_ONNX=1`` (CI prepares it) makes that a failure.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import slowwave.errors
from slowwave.models.embedding.base import Embedder
from slowwave.models.embedding.catalog import MS_MARCO_MINILM
from slowwave.models.rerank import load_reranker
from slowwave.models.settings import Settings
from slowwave.service import Caller, Service
from slowwave.sql.db import Database

START = datetime(2025, 3, 4, 18, 0, tzinfo=UTC)


class ByWord:
    """A reranker double: a text scores the number of times it says ``word``."""

    name = "by-word"

    def __init__(self, word: str) -> None:
        self.word = word
        self.asked: list[int] = []
        self.closed = False

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.asked.append(len(texts))
        return [float(t.lower().count(self.word)) for t in texts]

    def close(self) -> None:
        self.closed = True


def _episode(n: int, text: str) -> list[dict[str, Any]]:
    """One message, a day after the one before: an episode of its own."""
    at = START + timedelta(days=n)
    return [{"message_id": f"m{n}", "timestamp": at.isoformat(), "speaker": "Dana", "text": text}]


def test_a_reranked_search_returns_the_memories_in_the_rerankers_order_and_fuses_by_its_scores(
    settings: Settings, db: Database, embedder: Embedder
) -> None:
    conversation = f"rerank-{uuid.uuid4().hex[:8]}"
    said = [
        "Chemistry again today, the lab burners are old and the lab smells.",
        "The lab at school needs new burners, I keep fixing them in the lab.",
        "We are moving to Manchester in July, a new job at a sixth-form college.",
    ]
    reranker = ByWord("manchester")
    operator = Caller.operator()
    service = Service(settings, db, embedder, reranker=reranker)
    try:
        for n, text in enumerate(said):
            service.record(operator, conversation, _episode(n, text))
        first = service.search(operator, "the lab burners", conversation, memories=2, fused=True)
        again = service.search(
            operator, "the lab burners", conversation, memories=2, fused=True, rerank=True
        )
    finally:
        service.close()

    assert "Manchester" not in " ".join(m.text for m in first.memories)
    assert all(m.ranks.get("rerank") is None for m in first.memories)
    assert reranker.asked == [0, 3]  # no fact yet; every memory the first stage found, not 2
    (top, second) = again.memories
    assert "Manchester" in top.text and (top.ranks["rerank"], second.ranks["rerank"]) == (1, 2)
    assert again.ranked is not None and [r.id for r in again.ranked] == [top.id, second.id]
    assert [r.score for r in again.ranked] == [1.0, 0.0]  # the reranker's, not a fused rank's
    assert reranker.closed is False  # lent to the service: the lender closes it


def test_the_setting_turns_reranking_on_and_a_reranker_not_prepared_is_a_clear_error(
    settings: Settings, db: Database, embedder: Embedder, tmp_path: Path
) -> None:
    conversation = f"rerank-{uuid.uuid4().hex[:8]}"
    operator = Caller.operator()
    on = settings.evolve(search_rerank=True, home=tmp_path)
    service = Service(on, db, embedder)
    try:
        service.record(operator, conversation, _episode(0, "Teaching chemistry in Leeds."))
        with pytest.raises(slowwave.errors.ModelNotPrepared) as refused:
            service.search(operator, "where does Dana teach", conversation)
        # asked not to, per call, it searches without the model
        plain = service.search(operator, "where does Dana teach", conversation, rerank=False)
    finally:
        service.close()

    assert refused.value.status == 503 and refused.value.code == "model_not_prepared"
    assert f"slowwave models setup --model {MS_MARCO_MINILM.name}" in str(refused.value)
    assert "Leeds" in plain.memories[0].text


def test_the_cross_encoder_scores_what_answers_above_what_only_shares_the_querys_words(
    settings: Settings, tmp_path: Path, prepared_reranker: Path
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / MS_MARCO_MINILM.name).symlink_to(prepared_reranker)
    reranker = load_reranker(settings.evolve(home=tmp_path, search_rerank=True))
    query = "Where did Dana move to?"
    texts = [
        "Dana asked where the new lab would move to next term.",  # the query's words
        "Dana is moving to Manchester in July for a new job.",  # the answer
        "Mia goes bouldering every Saturday.",  # neither
    ]
    scores = reranker.score(query, texts)

    assert scores.index(max(scores)) == 1 and scores[2] == min(scores)
    assert reranker.score(query, texts[1:2]) == scores[1:2]  # a pair scores alike alone

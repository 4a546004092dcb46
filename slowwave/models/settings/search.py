"""Settings: retrieval."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings

from slowwave.models.settings.group import group_config


class SearchSettings(BaseSettings):
    """Retrieval: the channels, their fusion and weights."""

    model_config = group_config("SLOWWAVE_SEARCH_")

    rrf_k: int = Field(
        validation_alias=AliasChoices("SLOWWAVE_RRF_K"),
        default=10,
        ge=1,
        description="Reciprocal rank fusion constant: score = sum of 1 / (rrf_k + rank).",
    )
    candidates: int = Field(
        default=100, ge=1, description="Candidates each ranker contributes before fusion."
    )
    diversity: float = Field(
        default=0.55,
        gt=0,
        le=1,
        description="Search: the n-th best fact (n from 0) of one source episode has its score "
        "multiplied by a factor to the power n, so one episode's facts do not crowd the others "
        "out of the top k; this is the factor when the best episodes answer the query alike "
        "(a question whose evidence spans episodes). Both factors 1: no diversification.",
    )
    diversity_dominant: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description="Search: the diversity factor when one episode answers the query far "
        "better than any other, so its facts stay together; between the two, the factor moves "
        "with the square of the second best episode's summed score over the best one's.",
    )
    session_weight: float = Field(
        default=1.0,
        ge=0,
        description="Search: weight of the session channel: every source episode's best fact in "
        "the order of the episodes' summed scores, then their second best, and so on; scaled "
        "by the second best episode's sum over the best one's (0: off).",
    )
    temporal_weight: float = Field(
        default=2.0,
        ge=0,
        description="Search: weight of the temporal channel in the fusion: when the query names "
        "a date, a month with its year or a time counted back from the search's time (\"two "
        'weeks ago", "last Tuesday", "in the past month"), the facts valid from within '
        "that window, nearest the query first (0: off).",
    )
    temporal_before_days: int = Field(
        default=1,
        ge=0,
        description="Search: the temporal channel's window starts this many days before the "
        "date the query names.",
    )
    temporal_after_days: int = Field(
        default=14,
        ge=0,
        description="Search: the temporal channel's window ends this many days after the date "
        "the query names (an event is often told of days later).",
    )
    episode_weight: float = Field(
        default=1.0,
        ge=0,
        description="Search: weight of the episode channel in the fusion: facts ranked by how "
        "well their source episode's transcript matches the query's words (BM25), then by "
        "similarity (0: off).",
    )
    memories: int = Field(
        default=5,
        ge=0,
        le=100,
        description="Search: how many episodic memories (the conversation's episodes, pending "
        "and consolidated, ranked by how well their messages match the query) an answer gives "
        "beside its facts, unless the call says (0: facts only).",
    )
    memory_tokens: int = Field(
        default=300,
        ge=16,
        le=100_000,
        description="Search: the most tokens of one episodic memory's text an answer carries, "
        "unless the call says: a longer episode is cut to the message that shares most of the "
        "query's words, the window nearest its meaning and the messages around them (marked "
        "as an excerpt).",
    )
    retrievability_weight: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Search: how much an episode's FSRS retrievability (from its last review: "
        "a search that returned it, or the end of the episode) weighs its score: score = match "
        "x (1 - w + w x retrievability). 0.3, the largest weight tried that did not lower the "
        "episodes' session recall@10 on LoCoMo (benchmarks.locomo_recall: 0.9339 at 0, 0.9337 "
        "at 0.1, 0.9341 at 0.3).",
    )
    memory_window: int = Field(
        default=8,
        ge=1,
        le=256,
        description="Search: episodic memories are embedded in windows of this many "
        "consecutive messages (a whole episode is longer than the embedding model reads); an "
        "episode ranks by its nearest window in the vector channel.",
    )
    rerank: bool = Field(
        default=False,
        description="Search: put the best candidates, facts and episodic memories, in the order "
        "a cross-encoder scores them against the query (SLOWWAVE_SEARCH_RERANK_MODEL), unless "
        "the call says. Off by default: it adds about 0.9 s to a search on two cores (what it "
        "finds and costs: docs, Benchmarks, Reranking).",
    )
    rerank_model: str = Field(
        default="ms-marco-minilm-l-12-v2",
        description="Search: the reranker, a catalog model (`slowwave models setup --model "
        "ms-marco-minilm-l-12-v2`) or a directory holding a cross-encoder's model.onnx and "
        "tokenizer.json.",
    )
    rerank_candidates: int = Field(
        default=20,
        ge=1,
        le=100,
        description="Search: with reranking, how many of the best facts and of the best "
        "episodic memories the reranker reads (each list; at least the k asked for).",
    )
    memory_vector_weight: float = Field(
        default=0.5,
        ge=0,
        description="Search: weight of the episodic memories' vector channel against their "
        "full-text channel in the fusion (0: full text only, and no episode is embedded). At "
        "0.5 rather than 1, LongMemEval's session recall@5 is 0.891 rather than 0.843 and "
        "LoCoMo's fused recall@10 0.952 rather than 0.953 (benchmarks.longmemeval_recall, "
        "benchmarks.locomo_recall).",
    )
    memory_temporal_weight: float = Field(
        default=1.0,
        ge=0,
        description="Search: weight of the episodic memories' temporal channel in the fusion: "
        "when the query names a date, a month with its year or a time counted back from the "
        'search\'s time ("two weeks ago", "last Tuesday"), the episodes begun within '
        "`temporal_before_days` before it to `temporal_after_days` after it, nearest the query "
        "first (0: off).",
    )

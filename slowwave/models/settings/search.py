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
        "a date or a month with its year, the facts valid from within that window, nearest "
        "the query first (0: off).",
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

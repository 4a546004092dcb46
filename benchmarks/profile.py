"""Conversation profiles written by a real model: size, coverage and grounding.

LoCoMo's gold observations of the first ``--sessions`` sessions of the chosen conversations
are consolidated with the replay runtime; then ``--model`` on ``--engine`` writes each
conversation's profile (``tasks.profile.refresh_profiles``, one call for all of them) within
``SLOWWAVE_PROFILE_MAX_TOKENS``. Per conversation: active facts and their tokens, the
profile's tokens, seconds, keyword coverage (the share of the facts' distinct keywords the
profile names) and grounding (the share of the profile's sentences whose embedding is within
cosine 0.7 of some active fact: what the model wrote that the facts say).

    python -m benchmarks.profile [--conversations conv-26 conv-30] [--sessions 6]
        [--model NAME] [--engine llamacpp|openai|vllm] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.locomo_extraction import fresh_database, select_subset
from benchmarks.locomo_recall import DEFAULT_DATA
from slowwave.models.embedding import load_embedder
from slowwave.models.llm import load_model
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.llm.tokens import average_tokens
from slowwave.models.processes import unwind_on_sigterm
from slowwave.models.settings import Settings, setting_default
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.load import load_episodes
from slowwave.tasks.profile import read_profile, refresh_profiles

GROUNDED = 0.7
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", nargs="*", default=["conv-26", "conv-30"])
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--model", default=setting_default("llm_model"))
    parser.add_argument("--engine", default="llamacpp")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    settings = Settings(llm_model=args.model, llm_runtime=args.engine, replay_data=args.data)
    embedder = load_embedder(settings)
    subset = select_subset(args.data, args.conversations, args.sessions)
    policy = settings.evolve(profiles=True).consolidation
    model = load_model(settings)
    figures: dict[str, Any] = {"model": model.name, "max_tokens": policy.profile_max_tokens}
    try:
        with fresh_database(settings) as db, db.connection() as conn:
            load_episodes(conn, subset.episodes)
            consolidate(db, LoCoMoReplayModel(args.data), embedder, settings, kind="backfill")
            started = time.perf_counter()
            report = refresh_profiles(conn, model, subset.conversations, policy)
            figures["seconds_per_profile"] = round(
                (time.perf_counter() - started) / max(len(subset.conversations), 1), 1
            )
            figures["written"], figures["failed"] = report.written, report.failed
            for conversation in subset.conversations:
                facts = conn.execute(
                    "SELECT fact, keywords FROM semantic_memory "
                    "WHERE conversation_id = %s AND invalid_at IS NULL",
                    (conversation,),
                ).fetchall()
                profile = read_profile(conn, conversation)
                text = (profile.profile if profile else None) or ""
                figures[conversation] = _measure(embedder, facts, text)
    finally:
        model.close()
    for key, value in figures.items():
        print(f"{key}: {value}")
    if args.json:
        print(json.dumps(figures))


def _measure(embedder: Any, facts: list[tuple[str, list[str]]], text: str) -> dict[str, Any]:
    keywords = {k.lower() for _, ks in facts for k in ks}
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    grounded = 0.0
    if sentences and facts:
        sims = embedder.embed(sentences) @ np.asarray(embedder.embed([f for f, _ in facts])).T
        grounded = float(np.mean(sims.max(axis=1) >= GROUNDED))
    return {
        "facts": len(facts),
        "facts_tokens": sum(average_tokens(f) for f, _ in facts),
        "profile_tokens": average_tokens(text),
        "keyword_coverage": round(
            sum(k in text.lower() for k in keywords) / max(len(keywords), 1), 3
        ),
        "sentences": len(sentences),
        "grounded_share": round(grounded, 3),
        "profile": text,
    }


if __name__ == "__main__":
    main()

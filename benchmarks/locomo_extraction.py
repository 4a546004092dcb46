"""Extraction quality of a real model runtime on LoCoMo: precision, recall, tokens per episode.

Ingests the LoCoMo conversations (or some of them, or their first sessions), consolidates them
with the configured runtime (``SLOWWAVE_LLM_RUNTIME``: the CPU vLLM default, or any
OpenAI-compatible endpoint), then matches the facts it extracted to the gold observations of
the same sessions by embedding similarity (cosine at or above ``--match``):

- precision: the share of extracted facts that match some gold observation of their episode;
- recall: the share of gold observations matched by some extracted fact of their episode.

With the small CPU model the figures are low; the harness is the point.

    python -m benchmarks.locomo_extraction [--conversations conv-30 ...] [--sessions N]
        [--match 0.7] [--data PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", nargs="*", default=None)
    parser.add_argument("--sessions", type=int, default=None, help="first N sessions of each")
    parser.add_argument("--match", type=float, default=0.7, help="cosine that counts as a match")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()

    from models.embedding import load_embedder
    from models.llm import load_model
    from models.settings import Settings
    from sql.db import Database, migrate
    from tasks.consolidate import consolidate
    from tasks.ingest.load import load_episodes
    from tasks.ingest.locomo import read_locomo

    episodes = [
        e
        for e in read_locomo(args.data, surprise=0.5)
        if (args.conversations is None or e.conversation_id in args.conversations)
        and (args.sessions is None or int(e.external_key.rsplit("_", 1)[1]) <= args.sessions)
    ]
    gold: dict[str, list[str]] = defaultdict(list)  # episode key → observations
    for conversation in json.loads(args.data.read_text(encoding="utf-8")):
        for key, by_speaker in conversation.get("observation", {}).items():
            session = key.removesuffix("_observation")
            for items in by_speaker.values():
                gold[f"locomo:{conversation['sample_id']}:{session}"] += [s for s, _ in items]

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="slowwave-extraction-") as home:
        base = Settings()
        settings = base.model_copy(update={"home": Path(home), "database_url": None})
        embedder = load_embedder(settings)
        model = load_model(settings)
        try:
            with Database(settings) as db:
                migrate(db)
                with db.connection() as conn:
                    load_episodes(conn, episodes)
                summary = consolidate(db, model, embedder, settings)
                with db.connection() as conn:
                    extracted = conn.execute(
                        "SELECT e.external_key, d.proposed_fact FROM decision_log d "
                        "JOIN episodic_memory e ON e.id = ANY(d.episode_ids) "
                        "WHERE d.action IN ('new', 'merge', 'update')"
                    ).fetchall()
        finally:
            model.close()
    figures = _match(extracted, gold, [e.external_key for e in episodes], embedder, args.match)
    figures.update(
        {
            "runtime": settings.llm_runtime,
            "episodes": len(episodes),
            "episodes_consolidated": summary.episodes_consolidated,
            "chunks_failed": summary.chunks_failed,
            "actions_rejected": summary.actions_rejected,
            "prompt_tokens_per_episode": round(summary.prompt_tokens / max(len(episodes), 1), 1),
            "completion_tokens_per_episode": round(
                summary.completion_tokens / max(len(episodes), 1), 1
            ),
            "seconds": round(time.perf_counter() - started, 1),
        }
    )
    for key, value in figures.items():
        print(f"{key:>30}: {value}")
    if args.json:
        print(json.dumps(figures))


def _match(
    extracted: list[tuple[str, str]],
    gold: dict[str, list[str]],
    keys: list[str],
    embedder: Any,
    threshold: float,
) -> dict[str, Any]:
    by_episode: dict[str, list[str]] = defaultdict(list)
    for key, fact in extracted:
        if fact:
            by_episode[key].append(fact)
    matched_facts = total_facts = matched_gold = total_gold = 0
    for key in keys:
        facts, truth = by_episode.get(key, []), gold.get(key, [])
        total_facts += len(facts)
        total_gold += len(truth)
        if not facts or not truth:
            continue
        sims = embedder.embed(facts) @ embedder.embed(truth).T
        matched_facts += int(np.sum(sims.max(axis=1) >= threshold))
        matched_gold += int(np.sum(sims.max(axis=0) >= threshold))
    return {
        "facts_extracted": total_facts,
        "gold_observations": total_gold,
        "precision": round(matched_facts / total_facts, 4) if total_facts else 0.0,
        "recall": round(matched_gold / total_gold, 4) if total_gold else 0.0,
    }


if __name__ == "__main__":
    main()

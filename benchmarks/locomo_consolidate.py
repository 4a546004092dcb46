"""In-process consolidation of the LoCoMo conversations with the replay model.

Ingests every session as an episode into a fresh embedded database, consolidates them with
the core stages (no Prefect, no Ray), and prints what happened and how long each stage took.
``--conversations`` and ``--sessions`` take a part of it (the first N sessions of those named).

    python -m benchmarks.locomo_consolidate [--data PATH] [--conversations conv-26 ...]
        [--sessions N] [--chunk-size 8] [--json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from benchmarks.homes import fresh_home
from benchmarks.report import print_figures
from slowwave.models.processes import unwind_on_sigterm

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--chunk-size", type=int, default=8)
    parser.add_argument("--conversations", nargs="+", default=None, metavar="SAMPLE_ID")
    parser.add_argument("--sessions", type=int, default=None, help="the first N of each")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from slowwave.models.embedding import load_embedder
    from slowwave.models.episode import Episode
    from slowwave.models.llm.replay import LoCoMoReplayModel
    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.consolidate import consolidate
    from slowwave.tasks.ingest.load import load_episodes
    from slowwave.tasks.ingest.locomo import read_locomo

    def chosen(episode: Episode) -> bool:
        session = int(episode.external_key.split(":")[2].removeprefix("session_"))
        return (args.conversations is None or episode.conversation_id in args.conversations) and (
            args.sessions is None or session <= args.sessions
        )

    episodes = [e for e in read_locomo(args.data) if chosen(e)]
    if not episodes:
        parser.error(f"no sessions of {args.conversations} in {args.data}")

    with tempfile.TemporaryDirectory(prefix="slowwave-bench-") as home:
        settings = Settings(
            home=fresh_home(home),
            replay_data=args.data,
            chunk_size=args.chunk_size,
            _env_file=None,
        )
        embedder = load_embedder(settings)
        with Database(settings) as db:
            migrate(db)
            start = time.perf_counter()
            with db.connection() as conn:
                loaded = load_episodes(conn, episodes)
            ingest_s = time.perf_counter() - start
            start = time.perf_counter()
            summary = consolidate(db, LoCoMoReplayModel(args.data), embedder, settings)
            consolidate_s = time.perf_counter() - start
    figures = {
        "episodes_ingested": loaded,
        "conversations": summary.conversations,
        "chunks": summary.chunks,
        "episodes_consolidated": summary.episodes_consolidated,
        "facts_inserted": summary.facts_inserted,
        "dedupe_merges": summary.dedupe_merges,
        "chunks_failed": summary.chunks_failed,
        "ingest_s": round(ingest_s, 2),
        "consolidate_s": round(consolidate_s, 2),
        "stage_s": summary.stage_seconds,
    }
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()

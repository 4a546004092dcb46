"""Ingest throughput and peak memory on a synthetic transcript.

Writes a JSONL transcript of N messages (default 1,000,000) across many conversations, ingests
it into a fresh embedded database, and prints messages/s and the ingesting process's peak RSS
(the goal: under 1 GiB whatever the file's size, because reading is streamed).

With ``--episode-words`` the same file is then ingested into a second fresh database whose
``episodic_memory`` lacks the stored transcript words (``search_tsv``, migration 0017, parsed
by Postgres as each episode is written, for search's episode channel), and the ratio of the two
rates says what parsing them costs.

    python -m benchmarks.ingest [--messages N] [--conversations C] [--episode-words] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.report import print_figures
from slowwave.models.processes import unwind_on_sigterm


def write_transcript(path: Path, messages: int, conversations: int) -> None:
    start = datetime(2023, 1, 1, tzinfo=UTC)
    per = max(1, messages // conversations)
    with path.open("w", encoding="utf-8") as out:
        for n in range(messages):
            conversation, index = divmod(n, per)
            at = start + timedelta(minutes=index * 7)  # a new episode every few hours of chat
            out.write(
                json.dumps(
                    {
                        "conversation_id": f"conv-{conversation:05d}",
                        "message_id": str(index),
                        "timestamp": at.isoformat(),
                        "speaker": "user" if index % 2 else "assistant",
                        "text": f"Message {index} about gardening, travel and work plans.",
                    }
                )
                + "\n"
            )


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--conversations", type=int, default=2_000)
    parser.add_argument(
        "--episode-words",
        action="store_true",
        help="also ingest without the stored transcript words, and print the ratio",
    )
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()

    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.ingest.transcripts import IngestPolicy, IngestReport, ingest

    def timed_ingest(home: Path, source: Path, *, words: bool) -> tuple[IngestReport, float]:
        settings = Settings(home=home, _env_file=None)  # type: ignore[call-arg]
        with Database(settings) as db:
            migrate(db)
            if not words:
                with db.connection() as conn:
                    conn.execute("ALTER TABLE episodic_memory DROP COLUMN search_tsv")
            start = time.perf_counter()
            report = ingest(db, source, IngestPolicy.of(settings))
            return report, time.perf_counter() - start

    with tempfile.TemporaryDirectory(prefix="slowwave-ingest-") as tmp:
        source = Path(tmp) / "transcript.jsonl"
        write_transcript(source, args.messages, args.conversations)
        size_mb = source.stat().st_size / 2**20
        baseline_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        report, seconds = timed_ingest(Path(tmp) / "home", source, words=True)
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        bare_seconds = (
            timed_ingest(Path(tmp) / "bare", source, words=False)[1] if args.episode_words else None
        )
    figures = {
        "messages": args.messages,
        "file_mb": round(size_mb, 1),
        "ingested": report.ingested,
        "episodes": report.episodes,
        "rejected": report.rejected,
        "seconds": round(seconds, 1),
        "messages_per_s": round(report.ingested / seconds),
        "peak_rss_mb": round(peak_mb),
        "rss_before_ingest_mb": round(baseline_mb),
        "goal_peak_under_1gib": peak_mb < 1024,
    }
    if bare_seconds is not None:
        figures["seconds_without_episode_words"] = round(bare_seconds, 1)
        figures["episode_words_time_ratio"] = round(seconds / bare_seconds, 2)
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()

"""What orchestration costs: the nightly flow (Prefect, Ray) against the same stages in process.

Every measurement runs in a child process of its own on a fresh embedded database loaded with
synthetic conversations (LoCoMo sessions copied under new conversation ids, answered by the
replay model), against one Prefect server started here for the whole run; this process
samples the child's memory (with its Ray workers) while it runs.

``ms/conv`` is the whole consolidation's wall time per conversation (imports, model loading,
Ray start-up and the flow's bookkeeping included); ``in stages`` is the part spent in the
stages themselves, which is what grows with the data.

1. Side by side on the same data (``--compare`` conversations): the core's ``consolidate()``
   in process, the nightly flow with the embedder in the flow's process, and the nightly flow
   with the embedder on Ray actors. Goal: the flow within 1.2x of in process.
2. Cost per conversation of the nightly flow (Prefect + Ray) at each ``--scale`` (default
   1,000 and 10,000 conversations). Goal: flat.

    python -m benchmarks.orchestration [--compare N] [--repeat R] [--scale N ...]
                                       [--sessions S] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"
VARIANTS = {
    "in-process": "core consolidate(), embedder in process",
    "prefect": "nightly flow, embedder in the flow's process",
    "prefect+ray": "nightly flow, embedder on Ray actors",
}


def synthetic_episodes(data: Path, conversations: int, sessions: int) -> Iterator[Any]:
    """``conversations`` conversations of ``sessions`` LoCoMo sessions each, cycling through the
    data (the replay model recognises the sessions by their lines); keys add a copy suffix."""
    from models.ids import new_id
    from tasks.ingest.locomo import read_locomo

    by_sample: dict[str, list[Any]] = {}
    for episode in read_locomo(data, surprise=0.5):
        by_sample.setdefault(episode.conversation_id, []).append(episode)
    samples = sorted(by_sample)
    for n in range(conversations):
        source = by_sample[samples[n % len(samples)]]
        first = (n // len(samples)) * sessions
        for k in range(sessions):
            episode = source[(first + k) % len(source)]
            yield episode.model_copy(
                update={
                    "id": new_id(),
                    "conversation_id": f"syn-{n:05d}",
                    "external_key": f"{episode.external_key}:syn-{n:05d}",
                }
            )


def child(variant: str, conversations: int, sessions: int, data: Path) -> dict[str, Any]:
    """One measurement, in this (child) process: load, then time the consolidation alone."""
    from models.settings import get_settings
    from sql.db import Database, migrate
    from tasks.ingest.load import load_episodes

    settings = get_settings()
    with Database(settings) as db:
        migrate(db)
        with db.connection() as conn:
            loaded = load_episodes(conn, synthetic_episodes(data, conversations, sessions))
        start = time.perf_counter()
        if variant == "in-process":
            from models.embedding import load_embedder
            from models.llm import load_model
            from tasks.consolidate import consolidate

            model, embedder = load_model(settings), load_embedder(settings)
            try:
                summary = consolidate(db, model, embedder, settings, kind="nightly").model_dump()
            finally:
                model.close()
                embedder.close()
        else:
            from flows.consolidate import nightly

            state = nightly(return_state=True)
            summary = dict(state.result()) if state.is_completed() else {"error": state.message}
        seconds = time.perf_counter() - start
        with db.connection() as conn:
            (facts,) = conn.execute("SELECT count(*) FROM semantic_memory").fetchone()  # type: ignore[misc]
    return {
        "variant": variant,
        "conversations": conversations,
        "episodes": loaded,
        "episodes_consolidated": summary.get("episodes_consolidated"),
        "facts": facts,
        "chunks_failed": summary.get("chunks_failed"),
        "error": summary.get("error"),
        "seconds": round(seconds, 2),
        "stage_s": summary.get("stage_seconds", {}),
        "driver_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def tree_rss_mb(process: psutil.Process) -> float:
    """RSS of a process and its descendants (Ray workers included; shared pages counted
    once per process, so an upper bound)."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total / 2**20


def measure(
    variant: str, conversations: int, args: argparse.Namespace, api_url: str
) -> dict[str, Any]:
    """Run one child on a fresh home; its figures plus the peak RSS of its process tree."""
    with tempfile.TemporaryDirectory(prefix="slowwave-orch-") as home:
        env = {k: v for k, v in os.environ.items() if not k.endswith("DATABASE_URL")}
        env.update(
            SLOWWAVE_HOME=home,
            SLOWWAVE_LLM_RUNTIME="replay",
            SLOWWAVE_REPLAY_DATA=str(args.data),
            SLOWWAVE_SHARD_CONVERSATIONS=str(args.shard),
            # every synthetic conversation is due, however few sessions it has
            SLOWWAVE_EPISODE_THRESHOLD=str(min(args.sessions, 3)),
            SLOWWAVE_CLAIM_MAX_CONVERSATIONS=str(conversations),
            SLOWWAVE_EMBEDDING_ACTORS_PER_NODE=str(args.actors if variant == "prefect+ray" else 0),
            PREFECT_API_URL=api_url,
            PREFECT_LOGGING_LEVEL="WARNING",
            HF_HUB_OFFLINE="1",
        )
        command = [sys.executable, "-m", "benchmarks.orchestration", "--child", variant]
        command += ["--conversations", str(conversations), "--sessions", str(args.sessions)]
        command += ["--data", str(args.data)]
        server_cpu = prefect_server_cpu_s()
        with tempfile.TemporaryFile() as out:
            process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
            watched, peak = psutil.Process(process.pid), 0.0
            while process.poll() is None:
                with contextlib.suppress(psutil.Error):
                    peak = max(peak, tree_rss_mb(watched))
                time.sleep(0.25)
            out.seek(0)
            text = out.read().decode(errors="replace")
        server_cpu = prefect_server_cpu_s() - server_cpu
    lines = [line for line in text.splitlines() if line.startswith('{"variant"')]
    if process.returncode != 0 or not lines:
        raise SystemExit(f"{variant} at {conversations} failed:\n{text[-4000:]}")
    figures = json.loads(lines[-1])
    return {**figures, "tree_peak_mb": round(peak), "server_cpu_s": round(server_cpu, 1)}


def prefect_server_cpu_s() -> float:
    """CPU seconds used so far by the Prefect server this process started (the test
    harness runs it as a child): the API work a flow causes is paid there."""
    total = 0.0
    for member in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "prefect.server" in " ".join(member.cmdline()):
                times = member.cpu_times()
                total += times.user + times.system
    return total


def median_seconds(rows: list[dict[str, Any]], variant: str) -> float:
    return statistics.median(r["seconds"] for r in rows if r["variant"] == variant)


def per_conversation_ms(row: dict[str, Any], seconds: float | None = None) -> float:
    return 1000 * (row["seconds"] if seconds is None else seconds) / row["conversations"]


def show(rows: list[dict[str, Any]]) -> None:
    """A table; ``ratio`` is each row's cost per conversation over the first row's."""
    print(
        f"{'variant':>12} {'convs':>6} {'episodes':>8} {'facts':>7} {'seconds':>8} "
        f"{'ms/conv':>8} {'ratio':>6} {'in stages':>9} {'driver MB':>9} {'tree MB':>8} "
        f"{'API CPU s':>9}  stages (s)"
    )
    for row in rows:
        ratio = per_conversation_ms(row) / per_conversation_ms(rows[0])
        in_stages = per_conversation_ms(row, sum(row["stage_s"].values()))
        stages = ", ".join(f"{k} {v:.1f}" for k, v in row["stage_s"].items())
        print(
            f"{row['variant']:>12} {row['conversations']:>6} {row['episodes_consolidated']:>8} "
            f"{row['facts']:>7} {row['seconds']:>8.1f} {per_conversation_ms(row):>8.1f} "
            f"{ratio:>6.2f} {in_stages:>9.1f} {row['driver_peak_mb']:>9} "
            f"{row['tree_peak_mb']:>8} {row['server_cpu_s']:>9}  {stages}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--compare", type=int, default=1_000, help="conversations, side by side")
    parser.add_argument("--repeat", type=int, default=1, help="side-by-side rounds, rotated")
    parser.add_argument("--scale", type=int, nargs="*", default=[1_000, 10_000])
    parser.add_argument("--sessions", type=int, default=1, help="sessions per conversation")
    parser.add_argument("--shard", type=int, default=500, help="SLOWWAVE_SHARD_CONVERSATIONS")
    parser.add_argument("--actors", type=int, default=2, help="embedding actors on Ray")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    parser.add_argument("--child", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--conversations", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

    if args.child:
        print(json.dumps(child(args.child, args.conversations, args.sessions, args.data)))
        return

    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        api_url = str(PREFECT_API_URL.value())
        print(f"Prefect server {api_url}; {os.cpu_count()} CPUs; replay model, MiniLM embedder")
        compared = []
        for n in range(args.repeat):
            order = list(VARIANTS)[n % len(VARIANTS) :] + list(VARIANTS)[: n % len(VARIANTS)]
            compared += [measure(v, args.compare, args, api_url) for v in order]
        if compared:
            print(f"\nSide by side, {args.compare} conversations x {args.sessions} session(s):")
            show(compared)
            base = median_seconds(compared, "in-process")
            for variant in VARIANTS:
                ratio = median_seconds(compared, variant) / base
                print(
                    f"{variant:>12}: median {median_seconds(compared, variant):.1f} s, "
                    f"{ratio:.2f}x in process  ({VARIANTS[variant]})"
                )
        scaled = [measure("prefect+ray", n, args, api_url) for n in args.scale]
        print("\nNightly flow (Prefect + Ray) by size:")
        if scaled:
            show(scaled)
    if args.json:
        print(json.dumps({"compare": compared, "scale": scaled}))


if __name__ == "__main__":
    main()

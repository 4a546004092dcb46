"""What orchestration costs: the nightly flow (Prefect, Ray) against the same stages in process.

Every measurement runs in a child process of its own on a fresh embedded database loaded with
synthetic conversations (LoCoMo sessions copied under new conversation ids, answered by the
replay model: zero model latency), against one Prefect server started here for the whole run;
this process samples the child's memory (with its Ray workers) while it runs.

``ms/conv`` is the whole consolidation's wall time per conversation (imports, model loading,
Ray start-up and the flow's bookkeeping included); ``in stages`` is the part spent in the
stages themselves (summed over shards), which is what grows with the data.

1. Side by side on the same data (``--compare`` conversations): the core's ``consolidate()``
   in process, the nightly flow with the embedder in the flow's process, and the nightly flow
   with the embedder on Ray actors. Goal: the flow within 1.2x of in process.
2. Throughput with 1, 2, 4 concurrent shards (``--shards``) on ``--compare`` conversations, on
   this machine (threads) and, with ``--cluster``, on a local Ray cluster of two nodes.
3. Cost per conversation and the driver's peak RSS of the nightly flow (embedder on Ray
   actors, so the driver holds only the run's own work) at each of ``--sizes``, one shard at a
   time (the stages' times add up to the wall time), and where the time of a conversation
   goes at the largest. Goals: cost flat within 1.2x, RSS within 1.2x.

``--variants`` picks which of the three run side by side (the ratios need in-process); empty
``--shards`` and ``--sizes`` skip parts 2 and 3.

    python -m benchmarks.orchestration [--compare N] [--repeat R] [--sizes 1000,10000,100000]
                                       [--shards 1,2,4] [--cluster] [--sessions S]
                                       [--variants in-process,prefect,prefect+ray] [--json]
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

from benchmarks.homes import fresh_home
from slowwave.models.processes import stop_process_tree, unwind_on_sigterm

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"
VARIANTS = {
    "in-process": "core consolidate(), embedder in process",
    "prefect": "nightly flow, embedder in the flow's process",
    "prefect+ray": "nightly flow, embedder on Ray actors",
}
CLUSTER = "cluster"  # the nightly flow joining a local two-node cluster (SLOWWAVE_RAY_ADDRESS)


def synthetic_episodes(data: Path, conversations: int, sessions: int) -> Iterator[Any]:
    """``conversations`` conversations of ``sessions`` LoCoMo sessions each, cycling through the
    data (the replay model recognises the sessions by their lines); keys add a copy suffix."""
    from slowwave.models.ids import new_id
    from slowwave.tasks.ingest.locomo import read_locomo

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
    from slowwave.models.settings import get_settings
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.ingest.load import load_episodes

    settings = get_settings()
    with Database(settings) as db:
        migrate(db)
        start = time.perf_counter()
        with db.connection() as conn:
            loaded = load_episodes(conn, synthetic_episodes(data, conversations, sessions))
        load_s = time.perf_counter() - start
        writes_before = database_writes(db)
        start = time.perf_counter()
        if variant == "in-process":
            from slowwave.models.embedding import load_embedder
            from slowwave.models.llm import load_model
            from slowwave.tasks.consolidate import consolidate

            model, embedder = load_model(settings), load_embedder(settings)
            try:
                summary = consolidate(db, model, embedder, settings, kind="nightly").model_dump()
            finally:
                model.close()
                embedder.close()
        else:
            from slowwave.flows.consolidate import nightly

            state = nightly(return_state=True)
            summary = dict(state.result()) if state.is_completed() else {"error": state.message}
        seconds = time.perf_counter() - start
        writes = {k: v - writes_before[k] for k, v in database_writes(db).items()}
        with db.connection() as conn:
            (facts,) = conn.execute("SELECT count(*) FROM semantic_memory").fetchone()  # type: ignore[misc]
    return {
        "variant": variant,
        "conversations": conversations,
        "load_s": round(load_s, 2),
        "episodes": loaded,
        "episodes_consolidated": summary.get("episodes_consolidated"),
        "facts": facts,
        "chunks_failed": summary.get("chunks_failed"),
        "error": summary.get("error"),
        "seconds": round(seconds, 2),
        "db_writes": writes,
        "stage_s": summary.get("stage_seconds", {}),
        "driver_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def database_writes(db: Any) -> dict[str, int]:
    """Commits and rows written so far in the database (Postgres's cumulative statistics,
    flushed by the backends within a second or so of their transactions)."""
    time.sleep(1.5)
    with db.connection() as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, numbackends "
            "FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    keys = ("commits", "rows_inserted", "rows_updated", "rows_deleted", "connections")
    return dict(zip(keys, (int(v) for v in row), strict=True))


def tree_rss_mb(process: psutil.Process) -> float:
    """RSS of a process and its descendants (Ray workers included; shared pages counted
    once per process, so an upper bound)."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total / 2**20


def measure(
    variant: str,
    conversations: int,
    args: argparse.Namespace,
    api_url: str,
    *,
    concurrency: int = 1,
    ray_address: str | None = None,
) -> dict[str, Any]:
    """Run one child on a fresh home; its figures plus the peak RSS of its process tree."""
    with tempfile.TemporaryDirectory(prefix="slowwave-orch-") as home:
        fresh_home(home)
        env = {k: v for k, v in os.environ.items() if not k.endswith("DATABASE_URL")}
        env.update(
            SLOWWAVE_HOME=home,
            SLOWWAVE_LLM_RUNTIME="replay",
            SLOWWAVE_REPLAY_DATA=str(args.data),
            SLOWWAVE_SHARD_CONVERSATIONS=str(args.shard),
            # every synthetic conversation is due, however few sessions it has
            SLOWWAVE_EPISODE_THRESHOLD=str(min(args.sessions, 3)),
            SLOWWAVE_CLAIM_MAX_CONVERSATIONS=str(conversations),
            SLOWWAVE_EMBEDDING_ACTORS_PER_NODE=str(
                args.actors if variant in ("prefect+ray", CLUSTER) else 0
            ),
            SLOWWAVE_SHARD_CONCURRENCY=str(concurrency),
            PREFECT_API_URL=api_url,
            PREFECT_LOGGING_LEVEL="WARNING",
            HF_HUB_OFFLINE="1",
        )
        if ray_address:
            env["SLOWWAVE_RAY_ADDRESS"] = ray_address
        command = [sys.executable, "-m", "benchmarks.orchestration", "--child", variant]
        command += ["--conversations", str(conversations), "--sessions", str(args.sessions)]
        command += ["--data", str(args.data)]
        server_cpu = prefect_server_cpu_s()
        with tempfile.TemporaryFile() as out:
            process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
            watched, peak = psutil.Process(process.pid), 0.0
            try:
                while process.poll() is None:
                    with contextlib.suppress(psutil.Error):
                        peak = max(peak, tree_rss_mb(watched))
                    time.sleep(0.25)
            finally:  # interrupted: the child, its server and Ray workers go too, by pid
                if process.poll() is None:
                    stop_process_tree(process, timeout_s=60)
            out.seek(0)
            text = out.read().decode(errors="replace")
        server_cpu = prefect_server_cpu_s() - server_cpu
    lines = [line for line in text.splitlines() if line.startswith('{"variant"')]
    if process.returncode != 0 or not lines:
        raise SystemExit(f"{variant} at {conversations} failed:\n{text[-4000:]}")
    figures = json.loads(lines[-1])
    if figures.get("error") or figures.get("chunks_failed"):
        raise SystemExit(f"{variant} at {conversations} did not consolidate cleanly: {figures}")
    return {
        **figures,
        "concurrency": concurrency,
        "tree_peak_mb": round(peak),
        "server_cpu_s": round(server_cpu, 1),
    }


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
    parser.add_argument(
        "--compare", type=int, default=1_000, help="conversations, side by side (0: skip)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="side-by-side rounds, rotated")
    parser.add_argument(
        "--variants",
        type=_names,
        default=list(VARIANTS),
        help=f"side by side, comma-separated (default: {','.join(VARIANTS)})",
    )
    parser.add_argument(
        "--sizes", type=_ints, default=[1_000, 10_000], help="conversations, comma-separated"
    )
    parser.add_argument(
        "--shards", type=_ints, default=[1, 2, 4], help="concurrent shards, comma-separated"
    )
    parser.add_argument("--cluster", action="store_true", help="also on a 2-node local cluster")
    parser.add_argument("--sessions", type=int, default=1, help="sessions per conversation")
    parser.add_argument("--shard", type=int, default=500, help="SLOWWAVE_SHARD_CONVERSATIONS")
    parser.add_argument("--actors", type=int, default=2, help="embedding actors on Ray")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    parser.add_argument("--child", choices=[*VARIANTS, CLUSTER], help=argparse.SUPPRESS)
    parser.add_argument("--conversations", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    unwind_on_sigterm()

    if args.child:
        print(json.dumps(child(args.child, args.conversations, args.sessions, args.data)))
        return

    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        api_url = str(PREFECT_API_URL.value())
        print(f"Prefect server {api_url}; {os.cpu_count()} CPUs; replay model, MiniLM embedder")
        compared = []
        variants = args.variants
        for n in range(args.repeat if args.compare else 0):
            order = variants[n % len(variants) :] + variants[: n % len(variants)]
            compared += [measure(v, args.compare, args, api_url) for v in order]
        if compared:
            print(f"\nSide by side, {args.compare} conversations x {args.sessions} session(s):")
            show(compared)
            for variant in variants:
                ratio = vs_in_process(compared, variant)
                shown = "in-process not run" if ratio is None else f"{ratio:.2f}x in process"
                print(
                    f"{variant:>12}: median {median_seconds(compared, variant):.1f} s, "
                    f"{shown}  ({VARIANTS[variant]})"
                )
        concurrent = [
            measure("prefect", args.compare, args, api_url, concurrency=k)
            for k in (args.shards if args.compare else [])
        ]
        if concurrent:
            print(f"\nConcurrent shards on this machine, {args.compare} conversations:")
            show(concurrent)
        clustered = []
        if args.cluster and args.compare:
            from benchmarks.local_cluster import local_ray_cluster, shared_token_env

            os.environ.update(shared_token_env())
            with local_ray_cluster(nodes=2, cpus_per_node=4) as cluster:
                clustered = [
                    measure(
                        CLUSTER,
                        args.compare,
                        args,
                        api_url,
                        concurrency=k,
                        ray_address=cluster.address,
                    )
                    for k in args.shards
                ]
            print(
                f"\nConcurrent shards on a local 2-node Ray cluster, {args.compare} conversations:"
            )
            show(clustered)
        # the embedder on actors: the driver holds only what the run itself needs
        scaled = [measure("prefect+ray", n, args, api_url) for n in args.sizes]
        if scaled:
            print("\nNightly flow (Prefect + Ray) by size, one shard at a time:")
            show(scaled)
            breakdown(scaled[-1])
    if args.json:
        print(json.dumps(summary_json(compared, concurrent, clustered, scaled)))


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _names(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = set(names) - set(VARIANTS)
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"variants are {', '.join(VARIANTS)}: not {text!r}")
    return names


def vs_in_process(rows: list[dict[str, Any]], variant: str) -> float | None:
    """The variant's median time over in-process's (None unless both ran)."""
    ran = {r["variant"] for r in rows}
    if not {variant, "in-process"} <= ran:
        return None
    return median_seconds(rows, variant) / median_seconds(rows, "in-process")


def breakdown(row: dict[str, Any]) -> None:
    """Print where a conversation's time goes (ms)."""
    print(f"\nWhere the time of a conversation goes at {row['conversations']:,} (ms):")
    for stage, ms in sorted(_parts(row).items(), key=lambda kv: -kv[1]):
        print(f"  {stage:>14} {ms:7.2f}  ({100 * ms / per_conversation_ms(row):4.1f}%)")


def throughput(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {str(r["concurrency"]): round(r["conversations"] / r["seconds"], 2) for r in rows}


def summary_json(
    compared: list[dict[str, Any]],
    concurrent: list[dict[str, Any]],
    clustered: list[dict[str, Any]],
    scaled: list[dict[str, Any]],
) -> dict[str, Any]:
    """The one line ``--json`` ends with: per size, per concurrency, and every row."""
    sizes = {
        str(r["conversations"]): {
            "per_conversation_ms": round(per_conversation_ms(r), 2),
            "driver_peak_rss_mb": r["driver_peak_mb"],
            "tree_peak_mb": r["tree_peak_mb"],
            "db_writes_per_conversation": {
                k: round(v / r["conversations"], 2)
                for k, v in r["db_writes"].items()
                if k != "connections"
            },
            "stage_ms": {
                k: round(1000 * v / r["conversations"], 3) for k, v in r["stage_s"].items()
            },
        }
        for r in scaled
    }
    out: dict[str, Any] = {
        "sizes": sizes,
        "shards": {k: {"conversations_per_s": v} for k, v in throughput(concurrent).items()},
        "cluster": {k: {"conversations_per_s": v} for k, v in throughput(clustered).items()},
        "rows": {"compare": compared, "shards": concurrent, "cluster": clustered, "sizes": scaled},
    }
    if scaled:
        out["breakdown_ms"] = {k: round(v, 3) for k, v in _parts(scaled[-1]).items()}
    ratios = {v: vs_in_process(compared, v) for v in VARIANTS}
    if compared and ratios["in-process"] is not None:
        out["vs_in_process"] = {v: round(r, 3) for v, r in ratios.items() if r is not None}
    return out


def _parts(row: dict[str, Any]) -> dict[str, float]:
    """Each stage's ms per conversation, and the rest of the wall time (start-up, the plan,
    Prefect's bookkeeping) as orchestration."""
    n = row["conversations"]
    parts = {stage: 1000 * s / n for stage, s in row["stage_s"].items()}
    parts["orchestration"] = per_conversation_ms(row) - sum(parts.values())
    return parts


if __name__ == "__main__":
    main()

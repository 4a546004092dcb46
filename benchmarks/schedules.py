"""Which schedule keeps the engine fuller: rounds (wavefront) or per-conversation chains.

Both keep a conversation's chronology (its chunk k+1 goes to the model only after chunk k's
answer is back). Rounds send chunk k of every conversation together and wait for the whole
round; chains let each conversation send its next chunk as soon as its own answer is back,
so the engine is fed continuously. Two ways to measure, same LoCoMo sessions, chunked,
temperature 0, no prefix cache (a warm cache would favour whichever schedule runs second):

``--through server`` (the question asked before chains were built): the same requests go to
one real vLLM server (the configured model, vLLM's OpenAI API) under each schedule, and its
``/metrics`` are sampled for the requests running and waiting. Shown facts are left empty so
the prompts are the same under both.

``--through consolidate`` (the product): slowwave's own ``consolidate()`` on an embedded
database, real embeddings, the vLLM engine in process. Chains are what it does; rounds are
the same engine behind a batch-only adapter, with which the same scheduler can only run a
wavefront. Predict, embed and apply happen for real between answers, so this also shows
what chains gain by overlapping them with generation. Requests in flight at the engine are
sampled at the adapter. With ``--engine replay`` the engine is LoCoMo's replay model, each
request answered on a thread as soon as it is submitted: no model time, so only what the
schedules cost around the model shows (and the benchmark runs in seconds, without vLLM).

    python -m benchmarks.schedules [--through server|consolidate] [--engine vllm|replay]
        [--conversations 7] [--sessions 8] [--chunk-size 2] [--max-tokens 128] [--repeat 1]
        [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from benchmarks.homes import fresh_home
from slowwave.models.processes import unwind_on_sigterm

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"
_GAUGE = re.compile(r"^vllm:num_requests_(running|waiting)\{[^}]*\}\s+([0-9.eE+-]+)$", re.M)

Chains = list[list[Any]]  # per conversation, its requests in order


@dataclass
class Sampler:
    """Calls ``read`` every ``interval_s`` until stopped; what it returns are the samples."""

    read: Callable[[], Any]
    interval_s: float = 0.2

    def __post_init__(self) -> None:
        self.samples: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = self.read()
            if sample is not None:
                self.samples.append(sample)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def engine_gauges(client: httpx.Client, metrics_url: str) -> tuple[float, float] | None:
    """(requests running, requests waiting) from vLLM's ``/metrics``; None if unreachable."""
    try:
        text = client.get(metrics_url).text
    except httpx.HTTPError:
        return None
    found = {"running": 0.0, "waiting": 0.0}
    for kind, value in _GAUGE.findall(text):
        found[kind] += float(value)
    return found["running"], found["waiting"]


def chunked_requests(data: Path, conversations: int, sessions: int, chunk_size: int) -> Chains:
    from slowwave.models.settings import Settings
    from slowwave.tasks.calibrate import build_request
    from slowwave.tasks.ingest.locomo import read_locomo

    flashbulb = Settings(_env_file=None).consolidation.flashbulb_surprise
    by_conversation: dict[str, list[Any]] = {}
    for episode in read_locomo(data, surprise=0.5):
        by_conversation.setdefault(episode.conversation_id, []).append(episode)
    chains: Chains = []
    for name in sorted(by_conversation)[:conversations]:
        episodes = by_conversation[name][:sessions]
        chunks = [episodes[i : i + chunk_size] for i in range(0, len(episodes), chunk_size)]
        chains.append(
            [build_request(f"{name}:{k}", [], chunk, flashbulb) for k, chunk in enumerate(chunks)]
        )
    return chains


def rounds(model: Any, chains: Chains) -> list[Any]:
    """Chunk k of every conversation together; the next round after the whole round."""
    answers: list[Any] = []
    for k in range(max(len(c) for c in chains)):
        answers += model.generate([c[k] for c in chains if k < len(c)])
    return answers


def chains_of(model: Any, chains: Chains) -> list[Any]:
    """Each conversation on its own: its next chunk as soon as its previous answer is back."""

    def one(requests: Sequence[Any]) -> list[Any]:
        answers: list[Any] = []
        for request in requests:
            answers += model.generate([request])
        return answers

    with ThreadPoolExecutor(max_workers=len(chains)) as pool:
        return [a for answers in pool.map(one, chains) for a in answers]


class Counted:
    """A runtime as a batch-only model (so the scheduler runs rounds), counting in flight."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.name = engine.name
        self.in_flight = 0
        self._lock = threading.Lock()

    def _moved(self, by: int) -> None:
        with self._lock:
            self.in_flight += by

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        self._moved(len(requests))
        try:
            answers: list[Any] = self.engine.generate(requests)
            return answers
        finally:
            self._moved(-len(requests))

    def close(self) -> None:
        return None


class ReplayEngine:
    """The replay model as a streaming engine: every request answered on a thread of its own
    as soon as it is submitted, in no model time."""

    def __init__(self, data: Path) -> None:
        from slowwave.models.llm.replay import LoCoMoReplayModel

        self.model = LoCoMoReplayModel(data)
        self.name = self.model.name
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="replay")

    def generate(self, requests: Sequence[Any]) -> list[Any]:
        return self.model.generate(requests)

    def submit(self, requests: Sequence[Any]) -> list[Any]:
        return [self._pool.submit(self._answer, r) for r in requests]

    def _answer(self, request: Any) -> Any:
        return self.model.generate([request])[0]

    def close(self) -> None:
        self._pool.shutdown()


class CountedStreaming(Counted):
    """The same runtime, streaming: the scheduler runs chains."""

    def submit(self, requests: Sequence[Any]) -> list[Any]:
        self._moved(len(requests))
        futures: list[Any] = self.engine.submit(requests)
        for future in futures:
            future.add_done_callback(lambda _: self._moved(-1))
        return futures


def through_consolidate(
    name: str, engine: Any, episodes: Sequence[Any], settings: Any, embedder: Any
) -> dict[str, Any]:
    """One schedule through ``consolidate()`` on a fresh embedded database."""
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.consolidate import consolidate
    from slowwave.tasks.ingest.load import load_episodes

    model = CountedStreaming(engine) if name == "chains" else Counted(engine)
    conversations = len({e.conversation_id for e in episodes})
    with tempfile.TemporaryDirectory(prefix="slowwave-schedules-db-") as home:
        local = settings.evolve(home=fresh_home(home), database_url=None)
        with Database(local) as db:
            migrate(db)
            with db.connection() as conn:
                load_episodes(conn, episodes)
            with Sampler(lambda: model.in_flight) as sampler:
                start = time.perf_counter()
                summary = consolidate(db, model, embedder, local)
                seconds = time.perf_counter() - start
    flying = sampler.samples
    return {
        "schedule": name,
        "chunks": summary.chunks,
        "errors": summary.chunks_failed,
        "completion_tokens": summary.completion_tokens,
        "seconds": round(seconds, 1),
        "tokens_per_s": round(summary.completion_tokens / seconds, 1),
        "mean_in_flight": round(sum(flying) / max(1, len(flying)), 2),
        "share_at_full": round(sum(f >= conversations for f in flying) / max(1, len(flying)), 3),
        "stage_seconds": summary.stage_seconds,
    }


def compare_through_consolidate(args: argparse.Namespace) -> list[dict[str, Any]]:
    from slowwave.models.embedding import load_embedder
    from slowwave.models.llm import vllm_options
    from slowwave.models.llm.vllm_engine import VLLMEngine
    from slowwave.models.settings import get_settings
    from slowwave.tasks.ingest.locomo import read_locomo

    settings = get_settings().evolve(chunk_size=args.chunk_size, episode_threshold=1)
    by_conversation: dict[str, list[Any]] = {}
    for episode in read_locomo(args.data, surprise=0.5):
        by_conversation.setdefault(episode.conversation_id, []).append(episode)
    episodes = [
        e
        for name in sorted(by_conversation)[: args.conversations]
        for e in by_conversation[name][: args.sessions]
    ]
    engine: Any
    if args.engine == "replay":
        engine = ReplayEngine(args.data)
    else:
        options = replace(vllm_options(settings), max_tokens=args.max_tokens, prefix_caching=False)
        engine = VLLMEngine(options)
    embedder = load_embedder(settings)
    try:
        warm = chunked_requests(args.data, 1, 1, 1)[0][0]
        engine.generate([warm])  # first-call costs go to neither schedule
        results = []
        for n in range(args.repeat):
            order = ["rounds", "chains"]
            for name in order if n % 2 == 0 else order[::-1]:
                results.append(through_consolidate(name, engine, episodes, settings, embedder))
                print(json.dumps(results[-1]), flush=True)
    finally:
        embedder.close()
        engine.close()
    return results


def run(
    name: str, schedule: Callable[[Any, Chains], list[Any]], model: Any, chains: Chains, url: str
) -> dict[str, Any]:
    with httpx.Client(timeout=5) as client, Sampler(lambda: engine_gauges(client, url)) as sampler:
        start = time.perf_counter()
        answers = schedule(model, chains)
        seconds = time.perf_counter() - start
    running = [r for r, _ in sampler.samples]
    waiting = [w for _, w in sampler.samples]
    tokens = sum(a.completion_tokens for a in answers)
    return {
        "schedule": name,
        "requests": len(answers),
        "errors": sum(a.error is not None for a in answers),
        "completion_tokens": tokens,
        "seconds": round(seconds, 1),
        "tokens_per_s": round(tokens / seconds, 1),
        "mean_running": round(sum(running) / max(1, len(running)), 2),
        "mean_waiting": round(sum(waiting) / max(1, len(waiting)), 2),
        "share_at_full": round(sum(r >= len(chains) for r in running) / max(1, len(running)), 3),
    }


def compare_through_server(args: argparse.Namespace) -> list[dict[str, Any]]:
    from slowwave.models.llm import vllm_options
    from slowwave.models.llm.openai import OpenAICompatibleModel
    from slowwave.models.llm.vllm_server import SERVED_NAME, running_vllm_server
    from slowwave.models.settings import get_settings

    settings = get_settings()
    chains = chunked_requests(args.data, args.conversations, args.sessions, args.chunk_size)
    options = replace(vllm_options(settings), max_tokens=args.max_tokens, prefix_caching=False)
    with (
        tempfile.TemporaryDirectory(prefix="slowwave-schedules-") as workdir,
        running_vllm_server(options, None, Path(workdir)) as base_url,
    ):
        model = OpenAICompatibleModel(
            base_url,
            SERVED_NAME,
            max_tokens=args.max_tokens,
            concurrency=len(chains),
            timeout_s=1800,
            extra_body={"repetition_penalty": settings.llm.repetition_penalty},
        )
        try:
            model.generate([chains[0][0]])  # warm-up: first-call costs go to neither
            metrics = base_url.removesuffix("/v1") + "/metrics"
            results = []
            for n in range(args.repeat):
                order = [("rounds", rounds), ("chains", chains_of)]
                for name, schedule in order if n % 2 == 0 else order[::-1]:
                    results.append(run(name, schedule, model, chains, metrics))
                    print(json.dumps(results[-1]), flush=True)
        finally:
            model.close()
    return results


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--through", choices=("server", "consolidate"), default="consolidate")
    parser.add_argument(
        "--engine",
        choices=("vllm", "replay"),
        default="vllm",
        help="replay: LoCoMo's gold facts, no model time (through consolidate only)",
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=8, help="first sessions of each")
    parser.add_argument("--chunk-size", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=1, help="pairs, in alternating order")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    if args.through == "server" and args.engine != "vllm":
        parser.error("--through server measures a vLLM server: --engine vllm")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    if args.through == "server":
        results = compare_through_server(args)
        busy = ("mean_running", "mean_waiting")
    else:
        results = compare_through_consolidate(args)
        busy = ("mean_in_flight", "errors")
    print(
        f"\n{args.through}: {args.conversations} conversations x {args.sessions} sessions in "
        f"chunks of {args.chunk_size}, max {args.max_tokens} tokens"
    )
    print(f"{'schedule':>8} {'s':>7} {'tok/s':>7} {busy[0]:>14} {busy[1]:>12} {'at full':>8}")
    for r in results:
        print(
            f"{r['schedule']:>8} {r['seconds']:>7} {r['tokens_per_s']:>7} "
            f"{r[busy[0]]:>14} {r[busy[1]]:>12} {r['share_at_full']:>8}"
        )
    by = {name: [r for r in results if r["schedule"] == name] for name in ("rounds", "chains")}
    wall = {name: sum(r["seconds"] for r in rows) for name, rows in by.items()}
    ratio = round(wall["chains"] / wall["rounds"], 2) if wall["rounds"] else None
    print(f"chains / rounds wall time: {ratio}")
    if args.json:
        print(
            json.dumps(
                {
                    "through": args.through,
                    "engine": args.engine,
                    "conversations": args.conversations,
                    "sessions": args.sessions,
                    "chunk_size": args.chunk_size,
                    "max_tokens": args.max_tokens,
                    "chains_over_rounds_wall": ratio,
                    "runs": results,
                }
            )
        )


if __name__ == "__main__":
    main()

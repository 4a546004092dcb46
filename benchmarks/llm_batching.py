"""Tokens/s of the default LLM runtime: a whole batch at once vs one prompt at a time.

Runs a vLLM engine for ``--model`` (a catalog model converted for vLLM by `slowwave models setup
--model NAME --engine vllm`, or a local model directory) in this process on N consolidation
prompts built from LoCoMo sessions, first one by one, then all together, and prints the ratio
(goal: batched at least 5x faster). ``benchmarks.engines`` compares vLLM with llama.cpp.
``--engine replay`` puts LoCoMo's replay model in the engine's place: no tokens, no vLLM, the
harness alone in seconds.

    python -m benchmarks.llm_batching [--model NAME] [--engine vllm|replay] [--prompts N]
        [--max-tokens T] [--data PATH] [--json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks.report import print_figures
from slowwave.models.processes import unwind_on_sigterm

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--engine", choices=("vllm", "replay"), default="vllm")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()

    from slowwave.models.llm import vllm_options
    from slowwave.models.settings import Settings
    from slowwave.tasks.calibrate import build_request, parse_answer
    from slowwave.tasks.ingest.locomo import read_locomo

    settings = Settings(llm_max_tokens=args.max_tokens, llm_model=args.model)
    episodes = list(read_locomo(args.data, surprise=0.5))[: args.prompts]
    for e in episodes:  # keep each prompt to a few turns so it fits the small model's context
        e.messages = e.messages[:8]
    requests = [
        build_request(f"p{i}", [], [e], settings.consolidation.flashbulb_surprise)
        for i, e in enumerate(episodes)
    ]
    start = time.perf_counter()
    engine: Any
    if args.engine == "replay":
        from slowwave.models.llm.replay import LoCoMoReplayModel

        engine = LoCoMoReplayModel(args.data)
    else:
        from slowwave.models.llm.vllm_engine import VLLMEngine

        engine = VLLMEngine(vllm_options(settings))
    startup = time.perf_counter() - start

    start = time.perf_counter()
    single = [engine.generate([r])[0] for r in requests]
    single_s = time.perf_counter() - start
    start = time.perf_counter()
    batched = engine.generate(requests)
    batched_s = time.perf_counter() - start
    engine.close()

    def tokens(answers: list[Any]) -> int:
        return sum(a.completion_tokens for a in answers)

    single_rate, batched_rate = tokens(single) / single_s, tokens(batched) / batched_s
    ratio = batched_rate / single_rate if single_rate else None  # the replay model writes none

    def valid(answers: list[Any]) -> int:
        ok = 0
        for a in answers:
            try:
                parse_answer(a.text or "")
                ok += 1
            except ValueError:
                pass
        return ok

    figures = {
        "prompts": len(requests),
        "engine_start_s": round(startup, 1),
        "one_at_a_time_tokens_per_s": round(single_rate, 1),
        "batched_tokens_per_s": round(batched_rate, 1),
        "ratio": round(ratio, 2) if ratio is not None else None,
        "valid_answers_one_at_a_time": valid(single),
        "valid_answers_batched": valid(batched),
        "goal_ratio_at_least_5": ratio is not None and ratio >= 5,
    }
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()

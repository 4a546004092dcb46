"""The CPU engines side by side: llama.cpp and vLLM on the same model and the same prompts.

Builds consolidation prompts from LoCoMo (the first ``--sessions-per-prompt`` sessions of
each conversation, one prompt per conversation, up to ``--prompts``), then for each engine
runs them one at a time through slowwave's own runtime (``load_model``), twice: once with a
16-token answer (mostly prefill) and once in full, then a decode probe (an answer the schema
forces to 80 integers, after a prompt of a few tokens: a small model may answer a real prompt
in six tokens). Reports per engine: start-up time, prefill and decode tokens/s, seconds per
chunk, and how many answers parse into the answer schema. The model must be prepared for
both (``slowwave models setup --model NAME --engine vllm`` converts it for vLLM; the GGUF
serves llama.cpp). ``--engines replay`` measures LoCoMo's replay model the same way: no
tokens, no engine to start, the harness alone in seconds.

    python -m benchmarks.engines [--model NAME] [--engines llamacpp,vllm,replay] [--prompts N]
        [--sessions-per-prompt S] [--max-tokens T] [--data PATH] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.report import print_figures
from slowwave.models.processes import unwind_on_sigterm

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--engines", default="llamacpp,vllm")
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--sessions-per-prompt", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()

    from slowwave.models.llm.base import GenerationRequest
    from slowwave.models.settings import Settings
    from slowwave.tasks.calibrate import build_request
    from slowwave.tasks.ingest.locomo import read_locomo

    by_conversation: dict[str, list[Any]] = {}
    for episode in read_locomo(args.data, surprise=0.5):
        episode = episode.model_copy(update={"summary": None})  # the transcript alone
        by_conversation.setdefault(episode.conversation_id, []).append(episode)
    requests: list[GenerationRequest] = [
        build_request(conversation, [], episodes[: args.sessions_per_prompt], 0.85)
        for conversation, episodes in list(by_conversation.items())[: args.prompts]
    ]
    base = Settings().evolve(llm_model=args.model, replay_data=args.data)
    figures: dict[str, Any] = {"model": args.model, "prompts": len(requests)}
    for engine in args.engines.split(","):
        settings = base.evolve(llm_runtime=engine)
        for key, value in _measure(settings, requests, args.max_tokens).items():
            figures[f"{engine}_{key}"] = value
    engines = args.engines.split(",")
    if len(engines) == 2:
        first, second = engines
        for key in ("prefill_tokens_per_s", "decode_tokens_per_s"):
            figures[f"{key}_{first}_over_{second}"] = round(
                figures[f"{first}_{key}"] / max(figures[f"{second}_{key}"], 1e-9), 2
            )
    print_figures(figures, as_json=args.json)


def _measure(settings: Any, requests: list[Any], max_tokens: int) -> dict[str, Any]:
    """Start-up, a 16-token answer (mostly prefill) and a full answer per prompt, one at a
    time."""
    from slowwave.models.llm import load_model
    from slowwave.tasks.calibrate import parse_answer

    started = time.perf_counter()
    model = load_model(settings.evolve(llm_max_tokens=16))
    start_s = time.perf_counter() - started
    try:
        prefill = [_timed(model, r) for r in requests]  # cut off at 16 tokens: mostly prefill
    finally:
        model.close()
    model = load_model(settings.evolve(llm_max_tokens=max_tokens))
    try:
        full = [_timed(model, r) for r in requests]
        probe_s, probe = _timed(model, DECODE_PROBE)
    finally:
        model.close()
    # decode: an answer the schema forces to a fixed length after a prompt of a few tokens (a
    # small model may answer a real prompt in six); prefill: the short runs less their decoding
    prompt_tokens = sum(a.prompt_tokens for _, a in full)
    short_s, short_tokens = sum(s for s, _ in prefill), sum(a.completion_tokens for _, a in prefill)
    decode_tokens = sum(a.completion_tokens for _, a in full)
    decode_rate = probe.completion_tokens / probe_s
    prefill_s = short_s - short_tokens / max(decode_rate, 1e-9)
    valid = 0
    for _, answer in full:
        try:
            parse_answer(answer.text or "")
            valid += 1
        except ValueError:
            continue
    return {
        "start_s": round(start_s, 1),
        "prompt_tokens_mean": round(prompt_tokens / len(full)),
        "completion_tokens_mean": round(decode_tokens / len(full)),
        "prefill_tokens_per_s": round(prompt_tokens / max(prefill_s, 1e-9), 1),
        "decode_tokens_per_s": round(decode_rate, 1),
        "seconds_per_chunk": round(statistics.mean(s for s, _ in full), 1),
        "valid_answers": f"{valid}/{len(full)}",
        "errors": [a.error for _, a in full if a.error],
    }


def _decode_probe() -> Any:
    from slowwave.models.llm.base import GenerationRequest, Purpose

    schema = {
        "type": "object",
        "properties": {
            "numbers": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 80,
                "maxItems": 80,
            }
        },
        "required": ["numbers"],
    }
    return GenerationRequest(
        "decode-probe", Purpose.consolidate, "Answer with JSON only.", "Count from 1 to 80.", schema
    )


DECODE_PROBE = _decode_probe()


def _timed(model: Any, request: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    (answer,) = model.generate([request])
    return time.perf_counter() - started, answer


if __name__ == "__main__":
    main()

"""Sentences/s of the embedding stage vs a raw SentenceTransformer.encode, same texts, one run.

The stage is ``load_embedder`` as configured (in process by default, or Ray actors with
``--actors``); the baseline is sentence-transformers' own ``encode`` on the same model. Goal:
the stage at least 0.9x the raw encode.

    python -m benchmarks.embed [--texts N] [--actors A] [--data PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from benchmarks.report import print_figures
from slowwave.models.processes import unwind_on_sigterm

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"


def sentences(path: Path, count: int) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for conversation in data:
        for by_speaker in conversation["observation"].values():
            for items in by_speaker.values():
                found += [sentence for sentence, _ in items]
    while len(found) < count:
        found += found
    return found[:count]


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--actors", type=int, default=0, help="Ray embedding actors per node")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from sentence_transformers import SentenceTransformer

    from slowwave.models.embedding import load_embedder
    from slowwave.models.embedding.sentence_transformer import resolve_model_path
    from slowwave.models.settings import Settings

    texts = sentences(args.data, args.texts)
    settings = Settings(embedding_actors_per_node=args.actors)
    stage = load_embedder(settings)
    raw = SentenceTransformer(str(resolve_model_path(settings.embedding.model)), device="cpu")
    stage.embed(texts[:64])  # warm both
    raw.encode(texts[:64], batch_size=settings.embedding.batch_size)

    timings: dict[str, list[float]] = {"stage": [], "raw": []}
    for _ in range(2):  # interleaved, so machine noise hits both alike
        start = time.perf_counter()
        stage.embed(texts)
        timings["stage"].append(time.perf_counter() - start)
        start = time.perf_counter()
        raw.encode(texts, batch_size=settings.embedding.batch_size, normalize_embeddings=True)
        timings["raw"].append(time.perf_counter() - start)
    stage.close()
    stage_rate = len(texts) / min(timings["stage"])
    raw_rate = len(texts) / min(timings["raw"])
    figures = {
        "texts": len(texts),
        "actors_per_node": args.actors,
        "stage_sentences_per_s": round(stage_rate, 1),
        "raw_encode_sentences_per_s": round(raw_rate, 1),
        "ratio": round(stage_rate / raw_rate, 3),
        "goal_at_least_0_9": stage_rate / raw_rate >= 0.9,
    }
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()

"""The real model runtimes: CPU vLLM in Ray actors, vLLM's OpenAI server, embedding actors.

These start real engines (tens of seconds each) with the small default model that
``slowwave models setup`` prepares. Where vLLM or the model is missing they skip with the
reason, unless ``SLOWWAVE_REQUIRE_VLLM=1`` (CI) turns that into a failure.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pydantic_core import from_json

from slowwave.models.consolidation import ConsolidatedFact
from slowwave.models.embedding import RayEmbedder
from slowwave.models.embedding.base import Embedder
from slowwave.models.llm import load_model, vllm_options
from slowwave.models.llm.base import ModelAnswer, StructuredModel
from slowwave.models.llm.openai import OpenAICompatibleModel
from slowwave.models.llm.vllm_server import SERVED_NAME, running_vllm_server
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.calibrate import build_request, calibration_of
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.transient import is_transient
from tests.fix_episodes import add, at, make_episode, with_settings
from tests.fix_models import Recorded

MODEL = Path(
    os.environ.get(
        "SLOWWAVE_TEST_LLM_MODEL",
        Path(__file__).resolve().parents[1] / ".slowwave/models/smollm2-135m-instruct/hf",
    )
)

pytestmark = pytest.mark.slow


def _require_vllm() -> None:
    reason = None
    if importlib.util.find_spec("vllm") is None:
        reason = "vLLM is not installed (pip install -e '.[cpu]')"
    elif not (MODEL / "config.json").is_file():
        setup = "slowwave models setup --model smollm2-135m-instruct --engine vllm"
        reason = f"no model at {MODEL} (run `{setup}`)"
    if reason is None:
        return
    if os.environ.get("SLOWWAVE_REQUIRE_VLLM") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def vllm_settings(settings: Settings) -> Settings:
    _require_vllm()
    return with_settings(
        settings, llm_runtime="vllm", llm_model=str(MODEL), llm_max_tokens=384, chunk_size=4
    )


@pytest.fixture(scope="module")
def vllm_model(vllm_settings: Settings) -> Iterator[StructuredModel]:
    model = load_model(vllm_settings)
    yield model
    model.close()


def _episodes() -> list:
    return [
        make_episode(
            "v", "v1", "Hi! I'm Dana, I teach chemistry at a high school in Leeds.", at(2024, 3, 1)
        ),
        make_episode(
            "v",
            "v2",
            "On weekends I climb at the bouldering gym with my sister Mia.",
            at(2024, 3, 8),
        ),
        make_episode(
            "v",
            "v3",
            "I'm saving up to visit Japan next spring, mostly for the food.",
            at(2024, 3, 15),
        ),
    ]


def guided_items(answer: ModelAnswer) -> list[ConsolidatedFact]:
    """The items of a guided engine's answer: the output model whole, or, where a small model
    ran on to max_tokens, the items it wrote whole (as consolidation keeps them); none where
    it ran on inside its first item, whose text must still be the start of the schema's JSON
    (an unguided model writes prose or a code fence)."""
    calibration = calibration_of(answer)
    if calibration.output is None and answer.truncated:
        from_json(answer.text or "", allow_partial=True)  # raises unless a JSON prefix
        assert (answer.text or "").startswith('{"facts":[')
        return []
    assert calibration.output is not None, f"{calibration.error}: {answer.text!r}"
    return calibration.output.facts


def test_cpu_vllm_answers_consolidation_prompts_that_parse_into_the_output_model(
    vllm_model: StructuredModel, vllm_settings: Settings
) -> None:
    episodes = _episodes()
    requests = [
        build_request(f"chunk-{i}", [], [e], vllm_settings.consolidation.flashbulb_surprise)
        for i, e in enumerate(episodes)
    ]
    answers = vllm_model.generate(requests)
    assert [a.chunk_id for a in answers] == [r.chunk_id for r in requests]
    for answer in answers:
        assert answer.error is None, answer.error
        assert answer.prompt_tokens > 100 and answer.completion_tokens > 0
        guided_items(answer)


def test_a_conversation_consolidates_end_to_end_on_cpu_vllm_with_tokens_recorded(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    vllm_model: StructuredModel,
    vllm_settings: Settings,
) -> None:
    add(conn, *_episodes())
    recorded = Recorded(vllm_model)
    summary = consolidate(db, recorded, embedder, vllm_settings)
    # the chunk's call, and a second look when its answer left a message uncovered
    assert summary.chunks == 1
    assert summary.model_calls == 1 + (summary.second_look_messages > 0)
    assert summary.prompt_tokens > 100 and summary.completion_tokens > 0
    with conn.cursor() as cur:
        chunk = cur.execute(
            "SELECT status, model, prompt_tokens, completion_tokens FROM consolidation_chunks"
        ).fetchone()
        run = cur.execute(
            "SELECT prompt_tokens, completion_tokens FROM consolidation_runs"
        ).fetchone()
        decided = cur.execute("SELECT count(*), max(event_time) FROM decision_log").fetchone()
        late_facts = cur.execute(
            "SELECT count(*) FROM semantic_memory WHERE valid_at >= '2024-03-16'"
        ).fetchone()
    assert chunk is not None and run is not None and decided is not None
    assert chunk[1] == f"vllm:{MODEL.name}" and (chunk[2], chunk[3]) == (run[0], run[1])
    answer = recorded.answers[0]  # the chunk's; a second look's, if any, comes after it
    items = guided_items(answer)
    assert chunk[0] == "applied" and summary.episodes_consolidated == 3
    # what the model proposed is in the decision log, applied or refused with a reason (two
    # reinforcements of one fact are logged once); how much a 135M model proposes is the
    # extraction benchmark's to measure, not this test's
    looked = summary.second_look_facts + summary.second_look_restated
    assert decided[0] <= len(items) + looked and (decided[0] > 0) == bool(items or looked)
    # and is dated in the episodes' event time, not today's
    assert (decided[1] is None or decided[1] <= at(2024, 3, 15)) and late_facts == (0,)


@pytest.fixture
def vllm_server(vllm_settings: Settings, tmp_path: Path) -> Iterator[str]:
    """vLLM's own OpenAI-compatible server on 127.0.0.1, stopped by pid afterwards."""
    options = replace(vllm_options(vllm_settings), max_model_len=4096)
    with running_vllm_server(options, None, tmp_path) as base_url:
        yield base_url


def test_the_openai_runtime_consolidates_against_a_real_local_vllm_server(
    vllm_server: str, vllm_settings: Settings
) -> None:
    model = OpenAICompatibleModel(
        vllm_server,
        SERVED_NAME,
        max_tokens=384,
        concurrency=4,
        extra_body={"repetition_penalty": 1.1},
    )
    requests = [
        build_request(f"c{i}", [], [e], vllm_settings.consolidation.flashbulb_surprise)
        for i, e in enumerate(_episodes())
    ]
    answers = model.generate(requests)
    for answer in answers:
        assert answer.error is None, answer.error
        assert answer.prompt_tokens > 100 and answer.completion_tokens > 0
        guided_items(answer)


def test_embedding_actors_return_the_vectors_of_a_direct_encode_and_survive_a_crash(
    settings: Settings, embedder: Embedder
) -> None:
    import ray

    texts = [f"Fact {i}: Dana climbs at the bouldering gym with Mia." for i in range(50)]
    on_ray = RayEmbedder(
        with_settings(settings, embedding_actors_per_node=2, embedding_cpus_per_actor=0.25)
    )
    try:
        remote = on_ray.embed(texts)
        ray.kill(on_ray.pool.actors[0], no_restart=False)  # as if its process had crashed
        try:  # the call that meets the crash fails with a Ray error: the flow retries it
            on_ray.embed(texts)
        except Exception as exc:
            assert is_transient(exc), exc
        deadline = time.monotonic() + 120
        while True:  # the actor is started again, with its model
            try:
                again = on_ray.embed(texts)
                break
            except Exception as exc:
                assert is_transient(exc) and time.monotonic() < deadline, exc
                time.sleep(1)
    finally:
        on_ray.close()
    assert float(np.sum(again * remote, axis=1).min()) > 0.999
    direct = embedder.embed(texts)
    cosine = np.sum(remote * direct, axis=1)
    assert remote.shape == direct.shape == (50, 384)
    assert float(cosine.min()) > 0.999

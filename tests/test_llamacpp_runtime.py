"""The llama.cpp runtime for real: the prepared default model in a llama.cpp server that
slowwave starts on 127.0.0.1 and stops by pid (llama.cpp's own server and llama-cpp-python's),
and `slowwave models serve --engine llamacpp` for the `openai` runtime.

They skip where llama.cpp or the model is missing, unless ``SLOWWAVE_REQUIRE_LLAMACPP=1`` (CI)
turns that into a failure. The native server's run where it is built (the README's CMAKE_ARGS,
or ``SLOWWAVE_LLAMACPP_SERVER_PATH``), and must with ``SLOWWAVE_REQUIRE_LLAMACPP_NATIVE=1`` (CI
builds it).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest

from slowwave.models.embedding.base import Embedder
from slowwave.models.episode import Episode
from slowwave.models.errors import RuntimeNotAvailable
from slowwave.models.llm import load_model
from slowwave.models.llm.llamacpp_runtime import (
    cpu_has_amx,
    native_server,
    repacks,
    server_command,
)
from slowwave.models.llm.openai import OpenAICompatibleModel
from slowwave.models.processes import LocalServer, free_port
from slowwave.models.settings import Settings, setting_default
from slowwave.sql.db import Database
from slowwave.tasks.calibrate import build_request, parse_answer
from slowwave.tasks.consolidate import consolidate
from tests.fix_episodes import add, at, make_episode, with_settings
from tests.fix_models import Recorded
from tests.fix_processes import run_cli

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = setting_default("llm_model")
GGUF = Path(
    os.environ.get(
        "SLOWWAVE_TEST_GGUF", ROOT / ".slowwave" / "models" / DEFAULT_MODEL / "model.gguf"
    )
)
# The tests of a server's mechanics (its slots, its cache, the same tokens from both servers,
# who starts and stops it) do not read what the answer says: they run the small model that
# `slowwave models setup --model smollm2-135m-instruct` prepares beside the default, which
# answers a chunk in a few seconds where the default takes tens on two cores. The tests of
# what consolidation writes run the default.
SMALL_GGUF = ROOT / ".slowwave" / "models" / "smollm2-135m-instruct" / "model.gguf"

pytestmark = pytest.mark.slow


def _require_llamacpp(*, native: bool = False, gguf: Path = GGUF) -> None:
    reason = None
    if importlib.util.find_spec("llama_cpp") is None:
        reason = "llama.cpp is not installed (pip install -e '.[llamacpp]')"
    elif not gguf.is_file():
        setup = "" if gguf == GGUF else " --model smollm2-135m-instruct --engine vllm"
        reason = f"no model at {gguf} (run `slowwave models setup{setup}`)"
    elif native:
        try:
            native_server(Settings(llamacpp_server="native"))
        except RuntimeNotAvailable as exc:
            reason = str(exc)
    if reason is None:
        return
    required = "SLOWWAVE_REQUIRE_LLAMACPP_NATIVE" if native else "SLOWWAVE_REQUIRE_LLAMACPP"
    if os.environ.get(required) == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def llamacpp_settings(settings: Settings) -> Settings:
    _require_llamacpp()
    return with_settings(
        settings, llm_runtime="llamacpp", llm_model=str(GGUF), llm_max_tokens=384, chunk_size=4
    )


def _episodes() -> list[Episode]:
    return [
        make_episode(
            "l", "l1", "Hi! I'm Dana, I teach chemistry at a high school in Leeds.", at(2024, 3, 1)
        ),
        make_episode(
            "l",
            "l2",
            "On weekends Dana climbs at the bouldering gym with her sister Mia.",
            at(2024, 3, 8),
        ),
        make_episode(
            "l",
            "l3",
            "Dana is saving up to visit Japan next spring, mostly for the food.",
            at(2024, 3, 15),
        ),
    ]


@pytest.mark.parametrize("server", ["native", "python"])
def test_a_conversation_consolidates_end_to_end_on_llamacpp_and_its_server_is_stopped(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    llamacpp_settings: Settings,
    server: str,
) -> None:
    _require_llamacpp(native=server == "native")
    add(conn, *_episodes())
    model = load_model(with_settings(llamacpp_settings, llamacpp_server=server))
    local = getattr(model, "server", None)
    assert isinstance(local, LocalServer) and local.process is not None
    pid = local.process.pid
    try:
        recorded = Recorded(model)
        summary = consolidate(db, recorded, embedder, llamacpp_settings)
    finally:
        model.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    (answer,) = recorded.answers
    assert answer.error is None, answer.error
    items = parse_answer(answer.text or "").facts  # the grammar-constrained answer parses
    assert items, "the model proposed nothing for three informative episodes"
    assert summary.episodes_consolidated == 3 and summary.model_calls == 1
    with conn.cursor() as cur:
        chunk = cur.execute(
            "SELECT status, model, prompt_tokens, completion_tokens FROM consolidation_chunks"
        ).fetchone()
        facts = cur.execute(
            "SELECT count(*), max(valid_at) FROM semantic_memory WHERE conversation_id = 'l'"
        ).fetchone()
    assert chunk is not None and facts is not None
    assert chunk[:2] == ("applied", f"llamacpp:{GGUF.name}")  # which model, for the audit
    assert chunk[2] > 100 and chunk[3] > 0  # the server's own token counts
    assert facts[0] > 0 and facts[1] <= at(2024, 3, 15)  # dated in event time, not today


def test_models_serve_with_llamacpp_answers_the_openai_runtime(
    llamacpp_settings: Settings, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "SLOWWAVE_HOME": str(tmp_path),
        "SLOWWAVE_LLM_MODEL": str(GGUF),
        "SLOWWAVE_LLM_MAX_MODEL_LEN": "4096",
    }
    command = [sys.executable, "-m", "slowwave", "models", "serve", "--engine", "llamacpp"]
    serve = LocalServer(
        "slowwave models serve",
        [*command, "--port", str(port)],
        env,
        tmp_path / "serve.log",
        f"http://127.0.0.1:{port}/v1/models",
        startup_timeout_s=120,
    )
    with serve:
        assert serve.process is not None
        family = [serve.process.pid] + [
            c.pid for c in psutil.Process(serve.process.pid).children(recursive=True)
        ]
        model = OpenAICompatibleModel(
            f"http://127.0.0.1:{port}/v1",
            "slowwave",
            max_tokens=256,
            strict=False,
            schema_dialect="json_object",
            timeout_s=600,
        )
        try:
            request = build_request("c1", [], _episodes()[:1], 0.85)
            (answer,) = model.generate([request])
        finally:
            model.close()
    assert answer.error is None, answer.error
    parse_answer(answer.text or "")
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in family if psutil.pid_exists(p)], "serve left processes running"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)


@pytest.fixture(autouse=True)
def _no_leftover_server() -> Iterator[None]:
    yield
    left = [
        p.pid
        for p in psutil.Process().children(recursive=True)
        if "llama_cpp.server" in " ".join(p.cmdline()) or p.name() == "llama-server"
    ]
    assert not left, f"llama.cpp servers left running: {left}"


def test_the_native_server_decodes_conversations_together_and_reports_its_prefix_cache(
    llamacpp_settings: Settings,
) -> None:
    _require_llamacpp(native=True, gguf=SMALL_GGUF)
    settings = with_settings(
        llamacpp_settings, llm_model=str(SMALL_GGUF), llamacpp_server="native", llamacpp_parallel=3
    )
    model = load_model(settings)
    base = str(model.client.base_url).removesuffix("/v1")  # type: ignore[attr-defined]
    requests = [
        build_request(f"c{i}", [], [episode], 0.85) for i, episode in enumerate(_episodes())
    ]
    busy = 0
    try:
        futures = model.submit(requests)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 600
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            slots = httpx.get(f"{base}/slots", timeout=10).json()
            busy = max(busy, sum(bool(s.get("is_processing")) for s in slots))
            time.sleep(0.05)
        answers = [f.result(timeout=1) for f in futures]
        # the same system prompt again: the slot that answered one of them has it cached
        (again,) = model.generate([build_request("again", [], _episodes()[:1], 0.85)])
    finally:
        model.close()
    assert busy >= 2, "the server never had two conversations' chunks in flight at once"
    for answer in answers:
        assert answer.error is None, answer.error
        parse_answer(answer.text or "")
    assert again.prompt_tokens > again.cached_tokens > 0


def test_both_servers_give_the_same_answer_without_a_repetition_penalty(
    llamacpp_settings: Settings,
) -> None:
    """With flash attention off (the default) and no repetition penalty, llama.cpp's own
    server answers a chunk token for token as llama-cpp-python's does: the same prompt, the
    same arithmetic, the same greedy choices. (With a penalty they part: llama.cpp's server
    counts the prompt's last tokens in the penalty's window, llama-cpp-python only the answer.)"""
    _require_llamacpp(native=True, gguf=SMALL_GGUF)
    request = build_request("c", [], _episodes(), 0.85)
    answers = {}
    for server in ("python", "native"):
        settings = with_settings(
            llamacpp_settings,
            llm_model=str(SMALL_GGUF),
            llamacpp_server=server,
            llm_repetition_penalty=1.0,
            llm_max_tokens=96,  # the first items are where a difference shows
        )
        model = load_model(settings)
        try:
            (answers[server],) = model.generate([request])
        finally:
            model.close()
    python, native = answers["python"], answers["native"]
    assert python.error is None and native.error is None, (python.error, native.error)
    assert python.text and native.text == python.text
    assert native.completion_tokens == python.completion_tokens


def test_weights_are_not_repacked_on_a_cpu_with_amx_by_either_server(tmp_path: Path) -> None:
    """llama.cpp's AMX path segfaults loading the default model (llama.cpp issue 20824): on
    such a CPU both servers start with their weights as the GGUF has them."""
    amx, plain = tmp_path / "amx", tmp_path / "plain"
    amx.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f amx_bf16 amx_tile amx_int8\n")
    plain.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n")
    auto = Settings()
    assert cpu_has_amx(amx) and not cpu_has_amx(plain)
    assert not cpu_has_amx(tmp_path / "absent")
    assert not repacks(auto, amx) and repacks(auto, plain)
    assert repacks(Settings(llamacpp_repack="on"), amx)
    assert not repacks(Settings(llamacpp_repack="off"), plain)

    native = server_command(auto, GGUF, 1234, Path("/opt/llama-server"), repack=False)
    assert "--no-repack" in native
    # and either computes without flash attention unless told to (the same answers)
    assert native[native.index("--flash-attn") + 1] == "off"
    assert "--no-repack" not in server_command(auto, GGUF, 1234, Path("/opt/llama-server"))
    python = server_command(auto, GGUF, 1234, repack=False)
    assert python[1:3] == ["-m", "slowwave.models.llm.llamacpp_python_server"]
    assert server_command(auto, GGUF, 1234)[1:3] == ["-m", "llama_cpp.server"]


def _servers_of(home: Path) -> list[int]:
    """llama.cpp servers started for a slowwave home (they inherit its SLOWWAVE_HOME)."""
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        try:
            command = " ".join(process.info["cmdline"] or [])
            if process.info["name"] != "llama-server" and "llama_cpp.server" not in command:
                continue
            if process.environ().get("SLOWWAVE_HOME") == str(home):
                found.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_a_terminal_backfill_takes_the_server_started_ahead_and_leaves_none_running(
    llamacpp_settings: Settings, tmp_path: Path
) -> None:
    """`slowwave backfill` starts llama.cpp's server and loads the embedding model while its
    temporary Prefect API starts; the flow takes both rather than starting its own."""
    _require_llamacpp(gguf=SMALL_GGUF)
    result = run_cli(
        tmp_path,
        "backfill",
        str(ROOT / "examples" / "transcripts" / "sample-chats.jsonl"),
        "--conversation",
        "kenji",
        SLOWWAVE_LLM_RUNTIME="llamacpp",
        SLOWWAVE_LLM_MODEL=str(SMALL_GGUF),
        SLOWWAVE_LLM_MAX_TOKENS="256",
        SLOWWAVE_PREFECT_PORT=str(free_port()),  # no `slowwave server` there: a temporary API
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "started ahead of the flow: done" in result.stderr
    assert "loaded ahead of the flow: done" in result.stderr
    assert "starting the language model (llamacpp" in result.stderr
    assert result.stderr.count("starting the language model") == 2  # its start and its end
    assert not _servers_of(tmp_path)

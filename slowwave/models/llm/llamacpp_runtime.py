"""The llama.cpp runtime: a llama.cpp server that slowwave starts on 127.0.0.1 for the run and
stops by pid, spoken to through the OpenAI-compatible client.

On a machine without a GPU it runs the same Q4 GGUF that vLLM's CPU build would have to
dequantise, natively and several times faster (``benchmarks/llm_batching.py``). Two servers can
answer (``SLOWWAVE_LLAMACPP_SERVER``; ``auto``, the default, takes the first where it is
installed):

- ``native``: llama.cpp's own ``llama-server`` (MIT, built from the llama.cpp source that
  llama-cpp-python's source distribution carries, as the README's setup does): grammar
  sampling in C++ (1.65x as fast per episode on two cores, at the same answers), parallel
  slots with continuous batching, and the prompt tokens its prefix cache served reported per
  answer;
- ``python``: llama-cpp-python's own server, which answers one request at a time (its app
  holds a lock), so the client sends one at a time.

Both compute without flash attention unless ``SLOWWAVE_LLAMACPP_FLASH_ATTN`` says otherwise,
so that at a repetition penalty of 1.0 they answer token for token alike.

Structured output comes from the answer schema's grammar (``schema_grammar``), the same for
both servers, with the full schema (its length bounds keep a small model's answer short).
Tokens are counted with the GGUF's own vocabulary, loaded alone (no weights) in this process.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from concurrent.futures import Future
from functools import lru_cache
from pathlib import Path
from typing import Any

from slowwave.models.errors import ModelNotPrepared, RuntimeNotAvailable
from slowwave.models.llm.base import GenerationRequest, ModelAnswer
from slowwave.models.llm.catalog import model_label
from slowwave.models.llm.openai import OpenAICompatibleModel
from slowwave.models.llm.tokens import TokenCounter
from slowwave.models.llm.weights import gguf_path
from slowwave.models.processes import LocalServer, free_port, helpers_of
from slowwave.models.settings import Settings

log = logging.getLogger(__name__)

SERVED_NAME = "slowwave"
CPUINFO = Path("/proc/cpuinfo")
# llama-cpp-python's server, by whether it repacks the weights
PYTHON_SERVER_MODULES = {
    True: "llama_cpp.server",
    False: "slowwave.models.llm.llamacpp_python_server",
}
# what the README's setup passes to the llama-cpp-python build so that it installs llama.cpp's
# own server beside the library (site-packages/bin/llama-server, its libraries in ../lib)
NATIVE_CMAKE_ARGS = (
    "-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_TOOLS_INSTALL=ON -DLLAVA_BUILD=OFF "
    "-DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DCMAKE_INSTALL_RPATH=$ORIGIN/../lib"
)
NATIVE_HINT = (
    "llama.cpp's own server (llama-server) is not installed: build llama-cpp-python with it, "
    f"CMAKE_ARGS='{NATIVE_CMAKE_ARGS}' pip install --force-reinstall --no-deps "
    "--no-binary llama-cpp-python 'llama-cpp-python==0.3.36', or set "
    "SLOWWAVE_LLAMACPP_SERVER_PATH to one, or SLOWWAVE_LLAMACPP_SERVER=python"
)
INSTALL_HINT = (
    "the llamacpp runtime needs llama.cpp: pip install -e '.[llamacpp]' (it compiles for a few "
    "minutes), or set SLOWWAVE_LLM_RUNTIME=vllm"
)


def llamacpp_gguf(settings: Settings) -> Path:
    """The verified GGUF the settings name; ``RuntimeNotAvailable`` when it cannot be used."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise RuntimeNotAvailable(INSTALL_HINT)
    try:
        return gguf_path(settings.home, settings.llm.model)
    except ModelNotPrepared as exc:
        raise RuntimeNotAvailable(str(exc)) from None


def installed_native_server() -> Path | None:
    """The ``llama-server`` a llama-cpp-python build with the README's ``CMAKE_ARGS`` installed
    beside the library, if any."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return None
    candidate = Path(spec.origin).parents[1] / "bin" / "llama-server"
    return candidate if _executable(candidate) else None


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def native_server(settings: Settings) -> Path | None:
    """The native server to run, or None for llama-cpp-python's (``SLOWWAVE_LLAMACPP_SERVER``);
    ``RuntimeNotAvailable`` when the settings ask for a native server there is not."""
    if settings.llamacpp.server == "python":
        return None
    path = settings.llamacpp.server_path
    if path is not None:
        if not _executable(path):
            raise RuntimeNotAvailable(
                f"SLOWWAVE_LLAMACPP_SERVER_PATH={path} is not an executable file"
            )
        return path
    found = installed_native_server()
    if found is None and settings.llamacpp.server == "native":
        raise RuntimeNotAvailable(NATIVE_HINT)
    return found


def cpu_has_amx(cpuinfo: Path = CPUINFO) -> bool:
    """The CPU has AMX's int8 tiles (Intel Sapphire Rapids and later), as the kernel lists
    its flags; False where it does not say."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    return any(
        line.startswith("flags") and "amx_int8" in line.split() for line in text.splitlines()
    )


def repacks(settings: Settings, cpuinfo: Path = CPUINFO) -> bool:
    """Whether the server repacks the weights at load (``SLOWWAVE_LLAMACPP_REPACK``): by
    default not on a CPU with AMX, whose llama.cpp path crashes loading the default model."""
    if settings.llamacpp.repack != "auto":
        return settings.llamacpp.repack == "on"
    return not cpu_has_amx(cpuinfo)


def server_command(
    settings: Settings,
    gguf: Path,
    port: int,
    native: Path | None = None,
    *,
    repack: bool = True,
) -> list[str]:
    """The server's command line: llama.cpp's own server when ``native`` names it (each of its
    slots with the whole context), else llama-cpp-python's; without ``repack``, the weights
    stay as the GGUF has them (``--no-repack``, or llama-cpp-python's server started through
    ``llamacpp_python_server``)."""
    threads = settings.llamacpp.threads or len(os.sched_getaffinity(0))
    if native is not None:
        slots = settings.llamacpp.parallel
        return [
            str(native),
            "--model",
            str(gguf),
            "--alias",
            SERVED_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ctx-size",
            str(settings.llm.max_model_len * slots),
            "--parallel",
            str(slots),
            "--threads",
            str(threads),
            "--threads-batch",
            str(threads),
            "--no-webui",
            "--flash-attn",
            "on" if settings.llamacpp.flash_attn else "off",
            *([] if repack else ["--no-repack"]),
        ]
    return [
        sys.executable,
        "-m",
        PYTHON_SERVER_MODULES[repack],
        "--model",
        str(gguf),
        "--model_alias",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(settings.llm.max_model_len),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--flash_attn",
        str(settings.llamacpp.flash_attn),
    ]


def llamacpp_server(
    settings: Settings, port: int | None = None, gguf: Path | None = None
) -> tuple[LocalServer, str]:
    """The server for the configured model (not started) and its ``/v1`` base URL; ``gguf``:
    the model's file when the caller has already verified it. A native server answers
    ``llamacpp_parallel`` requests at once, llama-cpp-python's one (``server_slots``)."""
    gguf = gguf or llamacpp_gguf(settings)
    native = native_server(settings)
    if native is None and settings.llamacpp.server == "auto":
        log.info(
            "llama.cpp: serving with llama-cpp-python's server, one request at a time (%s)",
            NATIVE_HINT,
        )
    repack = repacks(settings)
    if not repack and settings.llamacpp.repack == "auto":
        log.info("llama.cpp: weights not repacked on this CPU with AMX (llama.cpp issue 20824)")
    port = port or free_port()
    workdir = settings.home / "run" / "llamacpp"
    workdir.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    server = LocalServer(
        "llama.cpp server" if native is None else "llama.cpp's llama-server",
        server_command(settings, gguf, port, native, repack=repack),
        {**os.environ, "HF_HUB_OFFLINE": "1"},
        workdir / "server.log",
        f"{base}/v1/models",
        settings.llamacpp.startup_timeout_s,
        # on SIGTERM its HTTP server waits for the answer being generated (a minute on a CPU)
        # even when no one will read it (an interrupted run): it has nothing to save
        stop_grace_s=1.0,
        registry=helpers_of(settings.home),
    )
    return server, f"{base}/v1"


# llama-cpp-python's converter lets a string hold any character but a quote or a backslash,
# a raw newline too, which JSON does not allow and the answer's parser refuses (a chunk failed
# so on LongMemEval: "control character (\u0000-\u001F) found while parsing a string"); as
# JSON and llama.cpp's own converter, a string's characters here exclude U+0000 to U+001F
_ANY_CHAR = 'char ::= [^"\\\\] |'
_JSON_CHAR = 'char ::= [^"\\\\\\x00-\\x1F] |'


@lru_cache(maxsize=32)
def _gbnf(schema: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    grammar = str(json_schema_to_gbnf(schema))
    if _ANY_CHAR not in grammar:
        raise RuntimeNotAvailable(
            "llama-cpp-python's JSON-schema grammar has changed: its string characters are no "
            f"longer {_ANY_CHAR!r}"
        )
    return grammar.replace(_ANY_CHAR, _JSON_CHAR)


def schema_grammar(schema: dict[str, Any]) -> str:
    """The GBNF grammar of an answer schema: llama-cpp-python's conversion (its whitespace is
    compact; llama.cpp's own converter lets a small model pad its answer with newlines and
    indents), with a string's characters those JSON allows. Both servers are given it: the
    same grammar, the same answers."""
    return _gbnf(json.dumps(schema))


def served_natively(server: LocalServer) -> bool:
    """Whether ``server`` is llama.cpp's own (``server_command`` gives only it slots)."""
    return "--parallel" in server.command


def server_slots(server: LocalServer) -> int:
    """Requests the server answers at once: its ``--parallel``, or 1 (llama-cpp-python's)."""
    command = server.command
    return int(command[command.index("--parallel") + 1]) if served_natively(server) else 1


class GGUFTokenCounter:
    """Tokens as the GGUF's own vocabulary counts them (the vocabulary only, no weights)."""

    def __init__(self, gguf: Path) -> None:
        from llama_cpp import Llama

        self.vocab = Llama(str(gguf), vocab_only=True, verbose=False)

    def __call__(self, text: str, /) -> int:
        return len(self.vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))


class LlamaCppModel:
    """A ``StreamingModel`` backed by a llama.cpp server this object starts and stops."""

    name = "llamacpp"

    def __init__(self, settings: Settings) -> None:
        self.name = model_label("llamacpp", settings.llm.model)
        gguf = llamacpp_gguf(settings)
        self.context_tokens = settings.llm.max_model_len
        self.counter: TokenCounter = GGUFTokenCounter(gguf)
        self.server, base_url = llamacpp_server(settings, gguf=gguf)
        self.server.start()
        self.client = OpenAICompatibleModel(
            base_url,
            SERVED_NAME,
            max_tokens=settings.llm.max_tokens,
            temperature=settings.llm.temperature,
            concurrency=server_slots(self.server),  # more would only queue in the server
            timeout_s=settings.llamacpp.timeout_s,
            max_retries=1,  # a timed-out answer is still being generated: never queue a second
            extra_body=self.sampling(settings),
            strict=False,
            context_tokens=settings.llm.max_model_len,
            # either server takes the grammar (``schema_grammar``)
            schema_dialect="grammar",
            grammar_of=schema_grammar,
        )

    def __reduce__(self) -> Any:
        raise TypeError(
            "the llama.cpp runtime serves from the machine that started it and cannot be sent "
            "to a Ray worker: on a Ray cluster (SLOWWAVE_RAY_ADDRESS) use the vllm or openai "
            "runtime (`slowwave models serve --engine llamacpp` on one machine serves the "
            "openai runtime)"
        )

    @staticmethod
    def sampling(settings: Settings) -> dict[str, Any]:
        return {"repeat_penalty": settings.llm.repetition_penalty}

    def count_tokens(self, text: str, /) -> int:
        return self.counter(text)

    def submit(self, requests: Sequence[GenerationRequest]) -> list[Future[ModelAnswer]]:
        return self.client.submit(requests)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        return self.client.generate(requests)

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            self.server.stop()

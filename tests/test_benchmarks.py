"""Benchmarks cannot rot: every benchmark runs here, at a tiny size, from one test.

A module under ``benchmarks/`` with a ``main`` is a benchmark; one without is a library the
benchmarks share: ``report`` (how every benchmark prints its figures) and ``local_cluster`` (a
Ray cluster on this machine, for the orchestration benchmark and the cluster test). The test
is parametrized over the folder, so a new benchmark fails until ``TINY`` says how to run it at
a tiny size, and an entry of ``TINY`` naming no benchmark fails too. Most are marked slow: at
any size each starts Postgres of its own and loads the embedding model (and some a server or
Prefect), which alone take tens of seconds on two busy cores.

Each runs as ``python -m benchmarks.NAME ARGS --json`` in a process of its own, two at a time
(``AT_ONCE``: most of a tiny run is a process starting up, importing and loading, which two
cores overlap), in the order the tests run, with a home
of its own and no database URL (its embedded Postgres, as the other benchmark tests run them),
and must exit 0 with a JSON object on its last line: no NaN or Infinity, which a reader other
than Python's refuses. No language model is loaded and no GPU or network is used: the replay
runtime (LoCoMo's gold facts) or the model over the wire of ``tests.fix_model_server``
answers. Every temporary folder of the
run lies under the test's own (``TMPDIR``), so whatever it started and left running (a
Postgres, Ray, a Prefect or ``slowwave serve`` server) is found by its command line or its
environment, and fails the test.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.fix_locomo import LOCOMO, LONGMEMEVAL
from tests.fix_model_server import fake_model
from tests.fix_models import prepared_onnx
from tests.fix_processes import slowwave_env

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = "benchmarks/results"
TEST = "test_every_benchmark_runs_at_a_tiny_size_and_ends_with_a_json_object"
# benchmarks running at the same time (two cores: the 23 took 191 s two at a time, 261 s one
# after another, side by side here)
AT_ONCE = 2


@dataclass(frozen=True)
class Tiny:
    """How a benchmark runs in seconds: its arguments (``{data}``: the LoCoMo file,
    ``{longmemeval}``: LongMemEval's), whether it needs the model over the wire, and whether it
    takes more than a few seconds."""

    args: tuple[str, ...]
    model: bool = False
    slow: bool = True
    # what its figures must say at that size, where the benchmark checks a promise
    check: Callable[[dict[str, Any]], None] | None = None


def soak_held(figures: dict[str, Any]) -> None:
    """Load on two replicas while a run consolidates: one replica killed with SIGKILL midway,
    the other serving on; every record stored once, no 5xx, and the facts a run without load
    makes (its Postgres gone with its homes: every benchmark's leftovers are checked)."""
    shown = str(figures)
    assert figures["searches"] > 0 and figures["records"] > 0, shown
    assert figures["no_5xx"], "\n".join(figures["failures"] + figures["replica_errors"])
    assert figures["replicas_failed"] == 1, shown  # the one killed; the other kept serving
    assert figures["stored_exactly_once"], shown
    assert figures["consolidation_status"] == "completed", shown
    assert figures["facts_expected"] > 0 and figures["facts_equal_without_load"], shown


TINY: dict[str, Tiny] = {
    "apply": Tiny(("--data", "{data}", "--quick")),
    "capacity": Tiny(
        (
            "--orchestration",
            f"{RESULTS}/orchestration.json",
            "--extraction",
            f"{RESULTS}/extraction.json",
        ),
        slow=False,
    ),
    "embed": Tiny(("--data", "{data}", "--texts", "64")),
    "engines": Tiny(
        ("--data", "{data}", "--engines", "replay", "--prompts", "1", "--sessions-per-prompt", "1"),
        slow=False,
    ),
    "gray_zone": Tiny(("--data", "{data}", "--engine", "replay", "--sessions", "1")),
    "ingest": Tiny(("--sizes", "300", "--conversations", "10", "--paths", "parquet")),
    "inversion_check": Tiny(
        ("--data", "{data}", "--engine", "openai", "--pairs", "2"), model=True, slow=False
    ),
    "llm_batching": Tiny(("--data", "{data}", "--engine", "replay", "--prompts", "2"), slow=False),
    # three sessions: a conversation is due at three pending episodes (a nightly run's claim)
    "locomo_consolidate": Tiny(
        ("--data", "{data}", "--conversations", "conv-26", "--sessions", "3")
    ),
    "locomo_extraction": Tiny(
        ("--data", "{data}", "--engine", "replay", "--conversations", "conv-26", "--sessions", "1")
    ),
    # one knowledge-update question (two sessions: two nights), the model over the wire
    "longmemeval": Tiny(
        ("--data", "{longmemeval}", "--questions", "1", "--single-session", "0"), model=True
    ),
    # three questions, their sessions the haystack
    "longmemeval_recall": Tiny(
        (
            "--data",
            "{longmemeval}",
            "--questions",
            "3",
            "--rerank",
            "--set",
            "search_rerank_model={reranker}",
        )
    ),
    "locomo_recall": Tiny(("--data", "{data}", "--conversations", "conv-26", "--sessions", "3")),
    "nightly_cost": Tiny(
        ("--data", "{data}", "--engine", "replay", "--conversations", "conv-26", "--known", "2")
    ),
    "orchestration": Tiny(
        ("--data", "{data}", "--compare", "2", "--variants", "prefect", "--shards=", "--sizes=")
    ),
    "profile": Tiny(
        ("--data", "{data}", "--engine", "replay", "--conversations", "conv-26", "--sessions", "1")
    ),
    "reliability": Tiny(("--quick", "--points", "commit.before")),
    "schedules": Tiny(
        (
            "--data",
            "{data}",
            "--engine",
            "replay",
            "--conversations",
            "1",
            "--sessions",
            "2",
            "--chunk-size",
            "1",
        )
    ),
    "search_scope": Tiny(("--sizes", "50", "--others", "500", "--queries", "3"), slow=False),
    "serve": Tiny(
        (
            "--data",
            "{data}",
            "--conversations",
            "1",
            "--sessions",
            "3",
            "--questions",
            "10",
            "--seconds",
            "1",
            "--levels",
            "1,2",
            "--record-clients",
            "1",
            "--find-clients",
            "2",
        )
    ),
    "slots": Tiny(("--engine", "openai", "--scenarios", "1"), model=True),
    "soak": Tiny(
        (
            "--data",
            "{data}",
            "--seconds",
            "6",
            "--clients",
            "2",
            "--pending",
            "1",
            "--sessions",
            "3",
        ),
        check=soak_held,
    ),
    # the memory browser in Chromium (which .ci/run installs), a small home
    "ui": Tiny(("--facts", "50", "--conversations", "100", "--runs", "1")),
}


def has_main(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)


def benchmark_names() -> list[str]:
    """Every module of the folder with a ``main``, and every name of ``TINY``."""
    found = {p.stem for p in BENCHMARKS.glob("*.py") if p.stem != "__init__" and has_main(p)}
    return sorted(found | set(TINY))


def _case(name: str) -> Any:
    tiny = TINY.get(name)
    return pytest.param(name, marks=[pytest.mark.slow] if tiny is None or tiny.slow else [])


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _left_running(root: Path) -> dict[int, str]:
    """The processes whose command line names a path under ``root``, or whose ``TMPDIR`` or
    ``SLOWWAVE_HOME`` lies under it: what the benchmark started, still running."""
    mark = str(root)
    left = {}
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE or process.pid == os.getpid():
            continue
        try:
            command = " ".join(process.info["cmdline"] or [])
            environ = process.environ()
        except psutil.Error:
            continue
        homes = (environ.get("TMPDIR", ""), environ.get("SLOWWAVE_HOME", ""))
        if mark in command or any(h.startswith(mark) for h in homes):
            left[process.pid] = command[:200]
    return left


def _stop_leftovers(root: Path, timeout_s: float = 30.0) -> dict[int, str]:
    """What was still running under ``root`` once ``timeout_s`` had passed (a server stopped
    at exit may take a moment to go), then stopped by pid so that it outlives no test."""
    deadline = time.monotonic() + timeout_s
    while (left := _left_running(root)) and time.monotonic() < deadline:
        time.sleep(0.5)
    processes = []
    for pid in left:
        with contextlib.suppress(psutil.Error):
            processes.append(psutil.Process(pid))
            processes[-1].terminate()
    _, alive = psutil.wait_procs(processes, timeout=10)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return left


def _paths(args: tuple[str, ...]) -> dict[str, str]:
    """The paths ``args`` name, checked as their fixtures check them: a skip (or a failure,
    where CI requires the models) is raised in the test of the benchmark that names one."""
    from slowwave.models.embedding.catalog import MS_MARCO_MINILM

    named = {key for key in ("data", "longmemeval", "reranker") if f"{{{key}}}" in "".join(args)}
    paths = dict.fromkeys(("data", "longmemeval", "reranker"), "")
    for key, data in (("data", LOCOMO), ("longmemeval", LONGMEMEVAL)):
        if key in named:
            if not data.is_file():
                pytest.skip(f"{data.name} not found at {data} (expected ../shared beside the repo)")
            paths[key] = str(data)
    if "reranker" in named:
        paths["reranker"] = str(prepared_onnx(MS_MARCO_MINILM.name))
    return paths


@dataclass
class Ran:
    done: subprocess.CompletedProcess[str]
    left: dict[int, str]  # what it left running (then stopped)


def _run(name: str, root: Path) -> Ran:
    """One benchmark at its tiny size, in ``root``: its home and its temporary folder."""
    tiny = TINY[name]
    args = [a.format(**_paths(tiny.args)) for a in tiny.args]
    temp = root / "tmp"
    temp.mkdir()
    with ExitStack() as stack:
        extra = {"TMPDIR": str(temp)}
        if tiny.model:
            extra |= stack.enter_context(fake_model()).env()
        done = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{name}", *args, "--json"],
            cwd=ROOT,
            env=slowwave_env(root / "home", **extra),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    return Ran(done, _stop_leftovers(root))


@dataclass
class Runs:
    """The benchmarks this session's tests will check, started ``AT_ONCE`` at a time in the
    order of the tests, at the first test."""

    executor: ThreadPoolExecutor
    started: dict[str, Future[Ran]] = field(default_factory=dict)

    def of(self, name: str, request: pytest.FixtureRequest) -> Ran:
        if not self.started:
            selected = [
                item.callspec.params["name"]  # type: ignore[attr-defined]
                for item in request.session.items
                if getattr(item, "originalname", "") == TEST
            ]
            factory = request.getfixturevalue("tmp_path_factory")
            for each in [n for n in selected if n in TINY] or [name]:
                root = factory.mktemp(f"bench-{each}")
                self.started[each] = self.executor.submit(_run, each, root)
        return self.started[name].result()


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    executor = ThreadPoolExecutor(max_workers=AT_ONCE, thread_name_prefix="benchmark")
    try:
        yield Runs(executor)
    finally:  # a session stopped early (-x) starts no more; those running finish
        executor.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("name", [_case(n) for n in benchmark_names()])
@pytest.mark.slow
def test_every_benchmark_runs_at_a_tiny_size_and_ends_with_a_json_object(
    name: str, runs: Runs, request: pytest.FixtureRequest
) -> None:
    path = BENCHMARKS / f"{name}.py"
    assert path.is_file(), f"TINY names {name}, which is no module of benchmarks/"
    assert has_main(path), f"benchmarks/{name}.py has no main: a library has no TINY entry"
    assert name in TINY, f"benchmarks/{name}.py has no tiny size: add it to TINY"
    ran = runs.of(name, request)
    done, left = ran.done, ran.left
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-4000:]}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"no output:\n{done.stderr[-2000:]}"
    figures = json.loads(lines[-1], parse_constant=_not_json)
    assert isinstance(figures, dict) and figures, lines[-1][:500]
    assert not left, f"benchmarks.{name} left these running: {left}"
    tiny = TINY[name]
    if tiny.check is not None:
        tiny.check(figures)

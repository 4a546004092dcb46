"""A SIGTERM (a cancelled job, a stopped service, `timeout`) unwinds a slowwave process like
Ctrl-C, so the servers it started (the embedded Postgres, llama.cpp, vLLM) stop with it."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _unwinds(tmp_path: Path, *, prelude: str = "") -> None:
    """A child that calls ``unwind_on_sigterm`` after ``prelude`` and sleeps inside a ``try``:
    one SIGTERM makes it run its ``finally`` and exit with 143. Were it still running after a
    minute, what its kernel says of it (its signals blocked, ignored and caught, its threads)
    is the failure's message, and it is killed."""
    marker = tmp_path / "unwound"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import signal, time
                {prelude}
                from slowwave.models.processes import unwind_on_sigterm
                unwind_on_sigterm()
                try:
                    print("ready", flush=True)
                    time.sleep(60)
                finally:
                    open({str(marker)!r}, "w").write("stopped what it started")
                """
            ),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        try:
            status = child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            status_lines = Path(f"/proc/{child.pid}/status").read_text(encoding="utf-8")
            state = [
                line
                for line in status_lines.splitlines()
                if line.startswith(
                    ("State", "Threads", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
                )
            ]
            raise AssertionError(
                "still running a minute after SIGTERM: " + "; ".join(state)
            ) from None
        assert status == 128 + signal.SIGTERM
        assert marker.read_text() == "stopped what it started"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_sigterm_runs_every_finally_block_and_exits_143(tmp_path: Path) -> None:
    _unwinds(tmp_path)


def test_a_sigterm_unwinds_a_process_that_inherited_it_blocked(tmp_path: Path) -> None:
    """A blocked signal stays pending, handler or not, and a process inherits the mask of
    whatever started it: unwinding on SIGTERM unblocks it."""
    _unwinds(tmp_path, prelude="signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})")


def _calls_in_main(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            return {
                call.func.id
                for call in ast.walk(node)
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            }
    return set()


def test_every_benchmark_script_unwinds_on_sigterm() -> None:
    """A benchmark stopped with SIGTERM leaves no server of its own behind."""
    scripts = [
        path
        for path in sorted((ROOT / "benchmarks").glob("*.py"))
        if 'if __name__ == "__main__"' in path.read_text(encoding="utf-8")
    ]
    assert len(scripts) > 10
    missing = [p.name for p in scripts if "unwind_on_sigterm" not in _calls_in_main(p)]
    assert missing == []

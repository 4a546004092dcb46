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


def test_a_sigterm_runs_every_finally_block_and_exits_143(tmp_path: Path) -> None:
    marker = tmp_path / "unwound"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import time
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
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=30) == 128 + signal.SIGTERM
    assert marker.read_text() == "stopped what it started"


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

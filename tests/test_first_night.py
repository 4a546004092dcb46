"""The first-night tutorial (docs/tutorials/first-night.md), followed as written in a fresh
folder: its three terminals' commands, in order, each terminal a pseudo-terminal of its own;
the long-running ones stopped with Ctrl-C as a person stops them. Only the environment is the
test's: a free port, a test double for the model, Prefect's home in the test's folder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from slowwave.models.processes import answers, free_port
from tests.fix_model_server import fake_model
from tests.fix_terminal import Terminal

ROOT = Path(__file__).resolve().parents[1]


def operator_blocks() -> list[str]:
    page = (ROOT / "docs" / "tutorials" / "first-night.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.*?)```", page, re.S)


def _fresh_shell(folder: Path, **extra: str) -> dict[str, str]:
    """A login's environment: no slowwave or Prefect variables, the installed commands on
    PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLOWWAVE_", "PREFECT_")) and not k.endswith("DATABASE_URL")
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PREFECT_HOME"] = str(folder / ".prefect")  # ~/.prefect of this test's "user"
    return {**env, **extra}


def _stop_with_ctrl_c(terminal: Terminal, name: str) -> None:
    family = terminal.descendants()
    terminal.ctrl_c()
    status = terminal.wait(60)
    assert status == 130, f"{name}: {status}\n{terminal.output[-3000:]}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in family
    ):
        time.sleep(0.2)
    left = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], f"{name} left: {[p.cmdline() for p in left]}"


@pytest.mark.slow
def test_the_first_night_tutorial_works_as_written_in_a_fresh_folder(tmp_path: Path) -> None:
    server_block, worker_block, ask_block = operator_blocks()
    folder = tmp_path / "memory"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "transcripts" / "sample-chats.jsonl", folder / "chats.jsonl")
    port = free_port()
    with fake_model() as model:
        env = _fresh_shell(folder, SLOWWAVE_PREFECT_PORT=str(port), **model.env())
        server = Terminal(["bash", "-c", server_block], env, cwd=folder)
        worker: Terminal | None = None
        try:
            deadline = time.monotonic() + 180
            while not answers(f"http://127.0.0.1:{port}/api/health"):
                assert time.monotonic() < deadline, server.output[-3000:]
                assert server.poll() is None, server.output[-3000:]
                time.sleep(0.5)
            assert f"export PREFECT_API_URL=http://127.0.0.1:{port}/api" in server.output

            worker = Terminal(["bash", "-c", worker_block], env, cwd=folder)
            worker.wait_for("started", timeout_s=240)

            asked = subprocess.run(
                ["bash", "-c", ask_block],
                env={**env, "COLUMNS": "80"},
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert asked.returncode == 0, asked.stdout[-3000:] + asked.stderr[-3000:]
            assert "Completed" in asked.stdout + asked.stderr
            listed = asked.stdout
            assert re.search(r"backfill\s+completed", listed), listed
            assert "no quarantined episodes" in listed

            _stop_with_ctrl_c(worker, "worker")
            _stop_with_ctrl_c(server, "server")
        finally:
            for terminal in (worker, server):
                if terminal is not None:
                    terminal.close()

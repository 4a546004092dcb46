"""docs/capacity.md is computed from the committed benchmark figures, never typed by hand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_capacity_document_is_what_the_script_computes_from_the_committed_figures(
    tmp_path: Path,
) -> None:
    out = tmp_path / "capacity.md"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.capacity",
            "--orchestration",
            "benchmarks/results/orchestration.json",
            "--extraction",
            "benchmarks/results/extraction.json",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert out.read_text() == (ROOT / "docs" / "capacity.md").read_text(), (
        "regenerate docs/capacity.md with the command at its top"
    )

"""The layers hold: stages know no Ray, no vLLM and no environment; contracts are checked."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_STAGES = re.compile(
    r"^\s*(import ray\b|from ray\b|import vllm\b|from vllm\b)|os\.environ|os\.getenv", re.M
)


def test_no_stage_imports_ray_or_vllm_or_reads_the_environment() -> None:
    stages = sorted((ROOT / "slowwave" / "tasks").rglob("*.py"))
    assert len(stages) > 10
    offending = {
        str(path.relative_to(ROOT)): match.group(0).strip()
        for path in stages
        if (match := FORBIDDEN_IN_STAGES.search(path.read_text(encoding="utf-8")))
    }
    assert offending == {}


def test_the_import_contracts_hold() -> None:
    """`lint-imports` reads the contracts in pyproject.toml (the layer order)."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports"))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout


def test_a_ray_address_set_only_in_dotenv_joins_the_cluster_without_a_private_token(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text("SLOWWAVE_RAY_ADDRESS=ray://127.0.0.1:10001\n")
    probe = textwrap.dedent(
        """
        import os, sys
        sys.path.insert(0, sys.argv[1])
        for key in ("SLOWWAVE_RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"):
            os.environ.pop(key, None)
        from slowwave.models.settings import Settings
        from slowwave.models.workers.cluster import ray_module
        settings = Settings()
        ray_module(settings)
        print(settings.ray.address, os.environ.get("RAY_AUTH_MODE"))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(ROOT)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert result.stdout.split() == ["ray://127.0.0.1:10001", "None"]

"""slowwave as a user installs it: the wheel, not the checkout.

The wheel is built, installed (not editable) into a fresh virtualenv whose only other packages
are the dependencies (this environment's, through a .pth line: nothing is downloaded), beside
an application's own ``models`` package. From an empty folder outside the checkout: the schema,
a backfill of one LoCoMo conversation with the replay model, and the deployments on a Prefect
server this test starts and stops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import httpx
import pytest

import slowwave
from slowwave.models.processes import free_port, start_in_own_group, stop_process_tree
from slowwave.sql.db import Database

ROOT = Path(__file__).resolve().parents[1]
CONVERSATION = "conv-30"


def build_wheel(out: Path, project: Path = ROOT, name: str = "slowwave") -> Path:
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", str(project), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob(f"{name}-*.whl")
    return wheel


def fresh_env(root: Path, wheel: Path, *wheels: Path) -> Path:
    """A virtualenv with the wheels installed and this environment's packages as its
    dependencies (a .pth line, read after its own site-packages: the wheels' modules win; an
    editable install here is not seen there, so the client's wheel is installed beside)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "zz-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "-q", str(wheel), *map(str, wheels)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return root / "bin"


def run(bin_dir: Path, cwd: Path, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [str(bin_dir / "slowwave"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"slowwave {' '.join(args)}:\n{result.stderr[-3000:]}"
    return result.stdout


@pytest.mark.slow
def test_the_wheel_installs_beside_a_models_package_and_runs_and_deploys_from_an_empty_folder(
    db: Database, tmp_path: Path, locomo_path: Path, settings: slowwave.Settings
) -> None:
    wheel = build_wheel(tmp_path / "dist")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"slowwave", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    client = build_wheel(tmp_path / "dist", ROOT / "clients" / "python", "slowwave_client")
    bin_dir = fresh_env(tmp_path / "venv", wheel, client)
    neighbour = tmp_path / "app"
    (neighbour / "models").mkdir(parents=True)
    (neighbour / "models" / "__init__.py").write_text("WHOSE = 'the application'\n")
    work = tmp_path / "work"  # an empty folder outside the checkout
    work.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("DATABASE_URL") and not k.startswith(("SLOWWAVE_", "PREFECT_"))
    }
    env |= {
        "PYTHONPATH": str(neighbour),
        "SLOWWAVE_LLM_RUNTIME": "replay",
        "SLOWWAVE_REPLAY_DATA": str(locomo_path),
        "SLOWWAVE_GROUNDING": settings.consolidation.grounding,  # the checkout's guard too
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
    }

    both = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "import models, slowwave.models.settings, slowwave; "
            "print(models.WHOSE, slowwave.__file__, slowwave.Client.__module__)",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert both.startswith("the application ") and str(tmp_path / "venv") in both

    try:
        assert "schema current" in run(bin_dir, work, env, "db", "migrate")
        run(bin_dir, work, env, "backfill", str(locomo_path), "-c", CONVERSATION)
        facts = json.loads(run(bin_dir, work, env, "facts", "-c", CONVERSATION, "--json"))
        assert (work / ".slowwave").is_dir()  # the working folder's home, not the checkout's
        replay = {"llm_runtime": "replay", "replay_data": str(locomo_path)}
        checkout = slowwave.Settings(**{**settings.model_dump(), **replay}, _env_file=None)
        slowwave.backfill(locomo_path, conversations=[CONVERSATION], settings=checkout)
        with slowwave.Memory(checkout) as memory:
            assert len(facts) == len(memory.facts(CONVERSATION)) > 0

        port = free_port()
        api = f"http://127.0.0.1:{port}/api"
        env |= {"PREFECT_API_URL": api, "SLOWWAVE_PREFECT_PORT": str(port)}
        server = start_in_own_group(
            [str(bin_dir / "slowwave"), "server"], env, tmp_path / "server.log"
        )
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
            run(bin_dir, work, env, "deploy")
            listed = subprocess.run(
                [str(bin_dir / "python"), "-m", "prefect", "deployment", "ls"],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
        finally:
            assert stop_process_tree(server) == []
        for name in ("slowwave-nightly/nightly", "slowwave-backfill/backfill"):
            assert name in listed, listed
        for name in ("slowwave-revert/revert", "slowwave-forget/forget", "slowwave-export/export"):
            assert name in listed, listed
    finally:
        subprocess.run(
            [str(bin_dir / "slowwave"), "db", "stop"], cwd=work, env=env, timeout=120, check=False
        )

"""The Prefect UI, in a real headless browser, after a backfill in which a conversation was
quarantined: the run is shown failed (CompletedWithFailures), with its WARNING line naming
the conversation by reference. The screenshots in docs/images/ are these pages
(``SLOWWAVE_WRITE_SCREENSHOTS=1`` writes them there); without Chromium (Debian's package) and
Playwright the test is skipped."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from slowwave.models.ids import conversation_ref
from slowwave.models.processes import LocalServer, free_port
from tests.fix_browser import CHROMIUM, browser_page, keep_screenshots
from tests.fix_model_server import fake_model
from tests.fix_processes import run_cli

ROOT = Path(__file__).resolve().parents[1]
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine")


@pytest.fixture
def prefect_ui(tmp_path: Path) -> Iterator[str]:
    """A Prefect server with its UI on a free port, stopped by pid after the test."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    base = f"http://127.0.0.1:{port}"
    with LocalServer(
        "Prefect UI",
        [sys.executable, "-m", "prefect", "server", "start"],
        env,
        tmp_path / "prefect-server.log",
        f"{base}/api/health",
        180,
    ):
        yield base


@pytest.mark.slow
def test_the_prefect_ui_shows_a_run_with_a_quarantined_conversation_as_failed(
    prefect_ui: str, tmp_path: Path
) -> None:
    from prefect.client.orchestration import SyncPrefectClient

    sample = ROOT / "examples" / "transcripts" / "sample-chats.jsonl"
    with fake_model(garble=("Osaka",)) as model:
        done = run_cli(
            tmp_path / "home",
            "backfill",
            str(sample),
            PREFECT_API_URL=f"{prefect_ui}/api",
            **model.env(SLOWWAVE_MAX_ATTEMPTS="1"),
        )
    assert done.returncode == 1, done.stderr
    with SyncPrefectClient(api=f"{prefect_ui}/api") as client:
        (run,) = client.read_flow_runs()
    assert run.state is not None and run.state.name == "CompletedWithFailures"

    shots = tmp_path / "shots"
    shots.mkdir()
    with browser_page() as page:
        page.goto(f"{prefect_ui}/runs/flow-run/{run.id}")
        page.get_by_text(conversation_ref("kenji")).first.wait_for(timeout=60_000)
        page.get_by_text("CompletedWithFailures").first.wait_for(timeout=60_000)
        page.screenshot(path=shots / "prefect-run-with-failures.png")
        warning = page.get_by_text(f"conversation {conversation_ref('kenji')}").first
        warning.scroll_into_view_if_needed()
        page.screenshot(path=shots / "prefect-run-warning.png")
        page.goto(f"{prefect_ui}/runs")
        page.get_by_text("backfill sample-chats.jsonl").first.wait_for(timeout=60_000)
        page.screenshot(path=shots / "prefect-runs-list.png")
    keep_screenshots(shots, ROOT / "docs" / "images")

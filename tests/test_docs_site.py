"""The built documentation site in a real headless browser: the front page (its diagram drawn
by the Mermaid the site serves, with no network), the MCP tutorial and the settings reference
render with their navigation, and the screenshots in
``docs/images/`` are these pages (``SLOWWAVE_WRITE_SCREENSHOTS=1`` writes them there). Without
Chromium (Debian's package) and Playwright the test is skipped."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.fix_browser import CHROMIUM, browser_page, keep_screenshots
from tests.fix_docs import build_site

ROOT = Path(__file__).resolve().parents[1]
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine"),
]
PAGES = {
    "site-front-page.png": ("", "Nightly consolidation"),
    "site-mcp-tutorial.png": (
        "tutorials/agent-memory/#4-the-same-memory-over-mcp",
        "Claude Desktop",
    ),
    "site-settings-reference.png": ("reference/settings/", "SLOWWAVE_GROUNDING"),
}


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    """The site built with --strict and served on 127.0.0.1 (a free port) for the test."""
    build_site(tmp_path)
    handler = functools.partial(_Quiet, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_the_front_page_the_mcp_tutorial_and_the_settings_render_with_their_navigation(
    site: str, tmp_path: Path
) -> None:
    shots = tmp_path / "shots"
    shots.mkdir()
    with browser_page() as page:
        for name, (path, text) in PAGES.items():
            page.goto(f"{site}/{path}")
            page.locator(".md-content").get_by_text(text).first.wait_for(timeout=30_000)
            # every page carries the whole navigation: the four kinds of page
            for section in ("Tutorials", "How-to guides", "Concepts", "Reference"):
                assert page.get_by_text(section, exact=True).count() >= 1, (name, section)
            if name == "site-front-page.png":  # Mermaid, served with the site, drew it
                # (Material draws it in a closed shadow root: its source text is gone)
                page.wait_for_function(
                    "() => !document.body.innerText.includes('flowchart TD')", timeout=30_000
                )
            if name == "site-settings-reference.png":
                page.locator(".md-content").get_by_text(
                    "SLOWWAVE_GROUNDING"
                ).first.scroll_into_view_if_needed()
            page.screenshot(path=shots / name)
    keep_screenshots(shots, ROOT / "docs" / "images")

"""Debian's Chromium, driven by Playwright (which downloads no browser here), for the tests that
look at a page as a person does, and the screenshots they may keep in ``docs/``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# what Chromium must not try on a machine without a network
QUIET = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def browser_page(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A page of a headless Chromium at ``width``×``height`` (1400×900), closed with its
    browser after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=QUIET)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def keep_screenshots(shots: Path, folder: Path) -> None:
    """Every screenshot in ``shots`` holds a page (not a blank one); copied into ``folder``
    when ``SLOWWAVE_WRITE_SCREENSHOTS=1``."""
    for shot in shots.iterdir():
        assert shot.stat().st_size > 10_000, shot.name
        if os.environ.get("SLOWWAVE_WRITE_SCREENSHOTS") == "1":
            folder.mkdir(exist_ok=True)
            shutil.copy(shot, folder / shot.name)

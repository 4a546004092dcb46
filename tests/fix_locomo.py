"""The shared LoCoMo data set: opened in place, never copied; tests skip when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "locomo7.json"


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo data not found at {LOCOMO} (expected ../shared beside the repo)")
    return LOCOMO

"""The shared data sets, LoCoMo and LongMemEval: opened in place, never copied; tests skip
when one is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
LOCOMO = DATASETS / "locomo" / "locomo7.json"
LONGMEMEVAL = DATASETS / "longmemeval" / "longmemeval_oracle_dev.json"


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO.is_file():
        pytest.skip(f"LoCoMo data not found at {LOCOMO} (expected ../shared beside the repo)")
    return LOCOMO


@pytest.fixture(scope="session")
def longmemeval_path() -> Path:
    if not LONGMEMEVAL.is_file():
        pytest.skip(
            f"LongMemEval data not found at {LONGMEMEVAL} (expected ../shared beside the repo)"
        )
    return LONGMEMEVAL

"""The shared data sets, LoCoMo and LongMemEval: opened in place, never copied; tests skip
when one is absent."""

from __future__ import annotations

import json
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


def locomo_subset(
    folder: Path, *conversations: str, sessions: int | None = None, source: Path = LOCOMO
) -> Path:
    """A LoCoMo file of ``conversations`` alone (each with its first ``sessions`` sessions,
    when given), read from ``source`` and written in ``folder``."""
    kept = [c for c in json.loads(source.read_text()) if c["sample_id"] in conversations]
    assert len(kept) == len(conversations), conversations
    if sessions is not None:
        for conversation in kept:
            turns = conversation["conversation"]
            for key in [k for k in turns if k.startswith("session_")]:
                if int(key.split("_")[1]) > sessions:
                    del turns[key]
    path = folder / f"locomo-{'-'.join(conversations)}-{sessions or 'all'}.json"
    path.write_text(json.dumps(kept))
    return path


@pytest.fixture(scope="session")
def locomo_one_path(locomo_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LoCoMo's smallest conversation alone (conv-30: 19 sessions, 369 turns, a ninth of the
    seven), for a test whose point is not the data's size. The replay model reads its answers
    from the whole file as from this one."""
    return locomo_subset(tmp_path_factory.mktemp("locomo"), "conv-30")


@pytest.fixture(scope="session")
def locomo_four_path(locomo_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LoCoMo's four smallest conversations (2,080 turns, half the seven's): four shards of
    one conversation each."""
    return locomo_subset(
        tmp_path_factory.mktemp("locomo"), "conv-26", "conv-30", "conv-41", "conv-42"
    )


@pytest.fixture(scope="session")
def longmemeval_path() -> Path:
    if not LONGMEMEVAL.is_file():
        pytest.skip(
            f"LongMemEval data not found at {LONGMEMEVAL} (expected ../shared beside the repo)"
        )
    return LONGMEMEVAL

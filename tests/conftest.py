"""Shared fixtures: one embedded Postgres for the whole session, emptied between tests."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

pytest_plugins = [
    "tests.fix_db",
    "tests.fix_models",
    "tests.fix_locomo",
    "tests.fix_prefect",
    "tests.fix_cluster",
    "tests.fix_external_postgres",
]

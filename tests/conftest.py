"""Shared fixtures: one embedded Postgres for the whole session, emptied between tests."""

from __future__ import annotations

import importlib.abc
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def cores_per_worker(cores: int, workers: str | None) -> int:
    """The cores one of pytest-xdist's test processes may count as its own: its share of
    the machine's, at least one; all of them outside xdist."""
    if not workers or not workers.isdigit() or int(workers) < 1:
        return cores
    return max(1, cores // int(workers))


# Under `-n auto` each test process (and every command it starts, which inherits this
# environment) computes on its share of the cores. llama.cpp's and torch's thread pools wait
# for each other by spinning: two workers each running threads for every core took a llama.cpp
# test from 25 s alone to 100 s beside a busy neighbour on two cores, 33 s with a core each.
# A user's own setting wins (setdefault).
CORES = len(os.sched_getaffinity(0))
if (_workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT")) is not None:
    for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "SLOWWAVE_LLAMACPP_THREADS"):
        os.environ.setdefault(_threads, str(cores_per_worker(CORES, _workers)))

# slowwave's folders are its subpackages (slowwave.tasks, ...). The repository root links the
# bare names to them (flows -> slowwave/flows) and is on sys.path; importing one would load a
# second copy of a module: a second settings cache, fault points the tests do not arm,
# exceptions that do not match. The whole test session refuses them.
BARE_NAMES = frozenset({"flows", "tasks", "models", "sql"})


class OneIdentity(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] in BARE_NAMES:
            raise ImportError(f"import slowwave.{fullname}, not {fullname}: one module, one name")
        return None


sys.meta_path.insert(0, OneIdentity())

pytest_plugins = [
    "tests.fix_db",
    "tests.fix_models",
    "tests.fix_locomo",
    "tests.fix_prefect",
    "tests.fix_cluster",
    "tests.fix_external_postgres",
    "tests.fix_object_store",
]

# `-n auto` (the README's whole-suite command): one test process per core, at most
# MAX_WORKERS. Each holds its own embedded Postgres and Prefect API for the session and runs
# whole files (`--dist loadfile`: a module's servers start once); past four, the files that
# load a real model or start a cluster are what the run waits on.
MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config: object) -> int:
    return max(1, min(CORES, MAX_WORKERS))

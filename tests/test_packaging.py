"""One import name: slowwave, with its folders under it, from a checkout and from a wheel."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BARE = ("flows", "tasks", "models", "sql")


@pytest.mark.slow
def test_every_module_of_the_checkout_loads_under_slowwave_and_no_bare_name_is_loaded() -> None:
    """In a process of its own (this one refuses bare names at import): every module of every
    subpackage, then sys.modules."""
    probe = textwrap.dedent(
        f"""
        import importlib, pkgutil, sys
        import slowwave
        names = []
        for sub in {BARE!r}:
            package = importlib.import_module("slowwave." + sub)
            assert package.__file__ is not None, sub  # a package, not a stray namespace folder
            prefix = package.__name__ + "."
            names += [m.name for m in pkgutil.walk_packages(package.__path__, prefix)]
        for name in names:
            importlib.import_module(name)
        bare = sorted(n for n in sys.modules if n.partition(".")[0] in {BARE!r})
        print(len(names), bare)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    count, bare = result.stdout.split(" ", 1)
    assert int(count) > 70 and bare.strip() == "[]"


@pytest.mark.slow  # a fresh interpreter: 1.15 s alone, more beside a busy neighbour
def test_a_command_starts_without_building_the_clients_models_and_they_load_when_named() -> None:
    """The server and every `slowwave` command need only the client's errors: its schemas'
    models and its HTTP client load when a caller names them, not at each command's start."""
    probe = textwrap.dedent(
        """
        import sys
        import slowwave.cli, slowwave.errors
        started = sorted(n for n in sys.modules if n.startswith("slowwave_client"))
        assert "slowwave_client.types" not in started, started
        assert "slowwave_client.client" not in started, started
        from slowwave_client import DEFAULT_BASE_URL, AsyncClient, Client, types
        import slowwave_client
        assert Client.__module__ == "slowwave_client.client" and types.SearchAnswer
        assert {"Client", "types"} <= set(dir(slowwave_client))
        assert slowwave.errors.SlowwaveError is slowwave_client.SlowwaveError
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]

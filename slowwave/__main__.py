"""The ``slowwave`` command (and ``python -m slowwave``): the process's defaults first, then the
command line (``slowwave.cli``).

The defaults are the command's, set before anything imports Prefect (it reads its settings
once), never by importing ``slowwave.cli``: a program that imports it keeps its environment.
Prefect's server telemetry call hangs for minutes where DNS has no answer, which stalls the
ephemeral API server; models load from local files only. A variable already set wins.
"""

from __future__ import annotations

import os

DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def main() -> None:
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
    from slowwave.cli import app

    app()


if __name__ == "__main__":
    main()

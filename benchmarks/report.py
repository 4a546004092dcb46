"""How every benchmark reports: one figure a line, then, with ``--json``, one line of JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def print_figures(figures: Mapping[str, Any], *, as_json: bool) -> None:
    width = max((len(k) for k in figures), default=0)
    for key, value in figures.items():
        print(f"{key:>{width}}: {value}")
    if as_json:
        print(json.dumps(figures))

"""The rejects report: every line that was not ingested, with file, line and reason.

Written as JSONL beside the source (``<source>.rejects.jsonl``), or under the slowwave home
when the source's folder is read-only. Streamed: a file of a million bad lines costs no memory.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Self


@dataclass(frozen=True)
class Reject:
    source: str
    line: int
    reason: str
    excerpt: str = ""


def report_path(source: Path, home: Path) -> Path:
    beside = source.with_name(source.name + ".rejects.jsonl")
    if os.access(source.parent, os.W_OK):
        return beside
    return home / "rejects" / beside.name


class RejectsReport:
    """Collects rejects into a JSONL file and keeps the first few for display; with no path,
    keeps them all (a request's messages, answered with their rejects)."""

    def __init__(self, path: Path | None, *, keep: int = 20) -> None:
        self.path = path
        self.count = 0
        self.first: list[Reject] = []
        self._keep = keep
        self._file: IO[str] | None = None

    def add(self, reject: Reject) -> None:
        if self.path is None:
            self.count += 1
            self.first.append(reject)
            return
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", encoding="utf-8")
        self._file.write(json.dumps(asdict(reject), ensure_ascii=False) + "\n")
        self.count += 1
        if len(self.first) < self._keep:
            self.first.append(reject)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        elif self.path is not None and self.path.exists():
            self.path.unlink()  # a clean re-ingest leaves no stale report behind

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

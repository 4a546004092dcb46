"""The schema as ordered migrations, and the set-based statements the stages run.

Statements live in ``statements/NAME.sql`` and are loaded by name, so a reader finds the SQL a
stage runs in one step and the Python around it stays free of long string literals.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One schema migration file: ``NNNN_name.sql``."""

    version: int
    name: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@cache
def migrations() -> tuple[Migration, ...]:
    """All migrations shipped with this version of slowwave, in version order."""
    found = []
    for entry in resources.files(__package__).joinpath("migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(
                Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8"))
            )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"duplicate migration versions: {versions}")
    return tuple(found)


@cache
def statement(name: str) -> str:
    """The text of ``statements/{name}.sql``."""
    path = resources.files(__package__).joinpath("statements", f"{name}.sql")
    return path.read_text(encoding="utf-8")


def statements_dir() -> Path:
    """The folder of the statement files (for tests that check every one)."""
    return Path(str(resources.files(__package__).joinpath("statements")))

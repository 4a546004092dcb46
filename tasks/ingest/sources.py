"""Where a source's files are: one file, a folder (every transcript file under it, at any
depth), or a glob (``chats/2023-*.parquet``, ``lake/**/*.csv``), in name order.

A folder holds the rejects reports of earlier runs (``*.rejects.jsonl``) beside its files:
they are never read back as a source.
"""

from __future__ import annotations

import glob
import hashlib
import os
from pathlib import Path

from slowwave.models.errors import SlowwaveError

# what a folder or a glob is read for: LoCoMo's .json documents only as a file of their own
SUFFIXES = frozenset({".jsonl", ".ndjson", ".parquet", ".pq", ".csv", ".tsv"})
REJECTS_SUFFIX = ".rejects.jsonl"
GLOB_CHARS = frozenset("*?[")


class EmptySource(SlowwaveError, FileNotFoundError):
    """A folder or glob with no transcript file in it."""


def source_files(source: str) -> list[Path]:
    """The files ``source`` names: itself, a folder's transcript files, or a glob's."""
    path = Path(source)
    if path.is_file():
        return [path]
    if path.is_dir():
        found = [p for p in sorted(path.rglob("*")) if _transcript(p)]
        if not found:
            raise EmptySource(f"no transcript file in {source} ({', '.join(sorted(SUFFIXES))})")
        return found
    if GLOB_CHARS & set(source):
        found = [Path(p) for p in sorted(glob.glob(source, recursive=True))]
        found = [p for p in found if p.is_file() and not p.name.endswith(REJECTS_SUFFIX)]
        if not found:
            raise EmptySource(f"no file matches {source}")
        return found
    raise FileNotFoundError(f"no such file or folder: {source}")


def _transcript(path: Path) -> bool:
    return (
        path.is_file()
        and path.suffix.lower() in SUFFIXES
        and not path.name.endswith(REJECTS_SUFFIX)
    )


def sources_report_path(source: str, home: Path) -> Path:
    """The one rejects report of a folder or a glob: beside the folder when it can be written
    there, else under the slowwave home, named after the source's folder (before any glob)
    and a digest of the whole source."""
    folder = Path(source.rstrip("/") or "/")
    if folder.is_dir() and os.access(folder.parent, os.W_OK):
        return folder.with_name(folder.name + REJECTS_SUFFIX)
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    parts = Path(source).parts
    fixed = next((i for i, part in enumerate(parts) if GLOB_CHARS & set(part)), len(parts))
    name = parts[fixed - 1].strip("/") if fixed else ""
    return home / "rejects" / f"{name or 'source'}-{digest}{REJECTS_SUFFIX}"

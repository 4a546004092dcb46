"""A source's format: told by its suffix, or given, and checked before the first file lands
(a LoCoMo document read as JSONL would be one reject per line, and nothing ingested)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from slowwave.models.errors import SourceError
from slowwave.tasks.ingest.sources import RemoteFile, SourceFile, source_files

Format = Literal["jsonl", "parquet", "csv", "locomo"]


def detect_format(path: SourceFile) -> Format:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix == ".json":
        return "locomo"
    raise SourceError(f"cannot tell the format of {path}; pass --format jsonl|parquet|csv|locomo")


def check_sources(source: str, fmt: Format | None) -> dict[SourceFile, Format]:
    """The source's files, in name order, each checked to be of its format, before the first
    lands (``check_source``)."""
    return {path: check_source(path, fmt) for path in source_files(source)}


def check_source(path: SourceFile, fmt: Format | None) -> Format:
    """The source's format, checked before anything starts: the file is there, and its first
    line is what the format says (a LoCoMo document read as JSONL would be one reject per
    line, and nothing ingested). An object store's file is taken by its suffix."""
    if isinstance(path, RemoteFile):
        fmt = fmt or detect_format(path)
        if fmt == "locomo":
            raise SourceError(f"{path}: a LoCoMo document is read from a local file")
        return fmt
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if not path.is_file():
        raise SourceError(f"{path} is not a file: ingest takes one transcript file")
    fmt = fmt or detect_format(path)
    if fmt in ("parquet", "csv"):
        return fmt
    with path.open("rb") as source:
        first = next((line.strip() for line in source if line.strip()), b"")
    try:
        line = json.loads(first)
    except ValueError:
        line = None
    # a first line that is no message: a LoCoMo document (refused), or a bad line (a reject)
    whole = _document(path) if not isinstance(line, dict) and first[:1] in (b"[", b"{") else None
    if fmt == "jsonl" and (_locomo(line) or _locomo(whole)):
        raise SourceError(f"{path} is a LoCoMo JSON document: pass --format locomo")
    if fmt == "locomo" and isinstance(line, dict) and "text" in line:
        raise SourceError(f"{path} holds a message per line: pass --format jsonl")
    return fmt


# A file whose first line is no message is read whole to tell a JSON document from JSONL
# with a bad first line, up to this size (LoCoMo's files are a few MB).
DOCUMENT_MAX_BYTES = 256 * 1024 * 1024


def _document(path: Path) -> Any:
    if path.stat().st_size > DOCUMENT_MAX_BYTES:
        return None
    try:
        return json.loads(path.read_bytes())
    except ValueError:
        return None


def _locomo(value: Any) -> bool:
    """A LoCoMo document, or one of its samples: conversations under ``conversation``."""
    if isinstance(value, list) and value:
        value = value[0]
    return isinstance(value, dict) and "conversation" in value and "text" not in value

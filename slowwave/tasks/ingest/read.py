"""Streaming readers for the canonical transcript schema (``models.transcript``).

JSONL is read line by line (bytes, then UTF-8, then JSON, then the schema) so every problem
is reported with its line number; Parquet and CSV are read by ``columnar``. Both yield batches
of valid rows and rejects, so memory stays flat whatever the file's size.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from pydantic import ValidationError

from slowwave.models.transcript import TranscriptMessage
from slowwave.tasks.ingest.rejects import Reject
from slowwave.tasks.ingest.sources import SourceFile


class Row(NamedTuple):
    """A valid message of a source, as it is staged for segmentation (``COLUMNS``' order)."""

    line: int
    conversation_id: str
    message_id: str
    at: datetime
    speaker: str
    text: str
    session_id: str | None
    surprise: float | None = None


COLUMNS = (
    ("line", "int8"),
    ("conversation_id", "text"),
    ("message_id", "text"),
    ("at", "timestamptz"),
    ("speaker", "text"),
    ("text", "text"),
    ("session_id", "text"),
    ("surprise", "float4"),
)


@dataclass
class Batch:
    rows: list[Row] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    read: int = 0
    bytes_read: int = 0
    # a columnar source's valid rows: an Arrow table in ``COLUMNS``' order, instead of rows
    table: Any = None


def _excerpt(raw: Any) -> str:
    text = raw if isinstance(raw, str) else repr(raw)
    return text[:200]


def _reason(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "row"
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def validate(
    record: Any, line: int, source: str, max_chars: int
) -> tuple[Row | None, Reject | None]:
    """One record → a staged row, or a reject saying why not."""
    if not isinstance(record, dict):
        return None, Reject(source, line, "not a JSON object", _excerpt(record))
    if "speaker" not in record and "role" in record:
        record = {**record, "speaker": record["role"]}
    try:
        message = TranscriptMessage.model_validate(record)
    except ValidationError as exc:
        return None, Reject(source, line, _reason(exc), _excerpt(record))
    if len(message.text) > max_chars:
        reason = f"text: {len(message.text)} characters, more than the limit of {max_chars}"
        return None, Reject(source, line, reason, message.text[:200])
    row = Row(
        line=line,
        conversation_id=message.conversation_id,
        message_id=message.message_id,
        at=message.timestamp,
        speaker=message.speaker,
        text=message.text,
        session_id=message.session_id,
        surprise=message.surprise,
    )
    return row, None


def read_jsonl(
    path: SourceFile, batch_rows: int, max_chars: int, mapping: Mapping[str, str] | None = None
) -> Iterator[Batch]:
    """The file's batches, line by line; ``mapping``: {canonical field: the source's key}."""
    source = str(path)
    renamed = {column: field for field, column in (mapping or {}).items()}
    batch = Batch()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            batch.read += 1
            batch.bytes_read += len(raw)
            row, reject = _parse_line(raw, number, source, max_chars, renamed)
            if row is not None:
                batch.rows.append(row)
            elif reject is not None:
                batch.rejects.append(reject)
            else:
                batch.read -= 1  # a blank line is not a message
            if batch.read >= batch_rows:
                yield batch
                batch = Batch()
    if batch.read or batch.rejects:
        yield batch


def _parse_line(
    raw: bytes, number: int, source: str, max_chars: int, renamed: Mapping[str, str]
) -> tuple[Row | None, Reject | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, Reject(source, number, f"invalid UTF-8 at byte {exc.start}", repr(raw[:200]))
    if not text.strip():
        return None, None
    try:
        record = json.loads(text)
    except ValueError as exc:
        return None, Reject(source, number, f"malformed JSON: {exc}", text[:200])
    if renamed and isinstance(record, dict):
        # a mapped field is read from its column only, as in a columnar file
        taken = set(renamed.values())
        record = {
            renamed.get(key, key): value
            for key, value in record.items()
            if key in renamed or key not in taken
        }
    return validate(record, number, source, max_chars)

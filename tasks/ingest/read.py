"""Streaming readers for the canonical transcript schema (``models.transcript``).

JSONL is read line by line (bytes, then UTF-8, then JSON, then the schema) so every problem
is reported with its line number; Parquet is read in record batches with pyarrow. Both yield
batches of valid rows and rejects, so memory stays flat whatever the file's size.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from slowwave.models.transcript import TranscriptMessage
from slowwave.tasks.ingest.rejects import Reject


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


def read_jsonl(path: Path, batch_rows: int, max_chars: int) -> Iterator[Batch]:
    source = str(path)
    batch = Batch()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            batch.read += 1
            batch.bytes_read += len(raw)
            row, reject = _parse_line(raw, number, source, max_chars)
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
    raw: bytes, number: int, source: str, max_chars: int
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
    return validate(record, number, source, max_chars)


def read_parquet(path: Path, batch_rows: int, max_chars: int) -> Iterator[Batch]:
    import pyarrow.parquet as pq

    source = str(path)
    parquet = pq.ParquetFile(path)
    schema = parquet.schema_arrow
    zoneless = [
        f.name
        for f in schema
        if f.name == "timestamp"
        and str(f.type).startswith("timestamp")
        and "tz=" not in str(f.type)
    ]
    number = 0
    for record_batch in parquet.iter_batches(batch_size=batch_rows):
        batch = Batch(bytes_read=record_batch.nbytes)
        for record in record_batch.to_pylist():
            number += 1
            batch.read += 1
            if zoneless:
                reason = "timestamp: the Parquet column has no time zone"
                batch.rejects.append(Reject(source, number, reason, _excerpt(record)))
                continue
            row, reject = validate(record, number, source, max_chars)
            if row is not None:
                batch.rows.append(row)
            elif reject is not None:
                batch.rejects.append(reject)
        yield batch


READERS: dict[str, Callable[[Path, int, int], Iterator[Batch]]] = {
    "jsonl": read_jsonl,
    "parquet": read_parquet,
}

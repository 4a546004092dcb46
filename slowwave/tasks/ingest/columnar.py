"""Columnar sources, Parquet and CSV, checked with polars.

A file is read in batches of ``batch_rows``, so memory stays flat whatever its size: a
Parquet file by pyarrow's reader, one record batch at a time, a CSV file by polars' lazy scan
(every column as text). Each batch is validated as whole columns, with the reasons the JSONL path
gives for the same fault (``read.validate``): a missing or blank field, a NUL, an invalid
UTF-8 sequence (CSV), a control character in a conversation id, an over-long text, an
unparsable or zoneless time, a surprise outside 0 to 1. Every error of a row is named, joined
by "; " as pydantic does. The valid rows leave as one Arrow table in staging's column order,
for binary COPY (``sql.copy.copy_arrow``); only rejects become Python objects.

Rows are numbered from 1 (the first data row of a CSV file is row 1, below its header).
A column mapping (``--map text=body,speaker=author``) names the source's column for each
canonical field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from slowwave.models.errors import MappingError
from slowwave.models.tenant import DEFAULT_TENANT, conversation_keys
from slowwave.tasks.ingest.read import COLUMNS, Batch
from slowwave.tasks.ingest.rejects import Reject

if TYPE_CHECKING:
    import polars as pl

ColumnarFormat = Literal["parquet", "csv"]

FIELDS = ("conversation_id", "message_id", "timestamp", "speaker", "text", "session_id", "surprise")
REQUIRED = ("conversation_id", "message_id", "timestamp", "speaker", "text")
# the fields pydantic's schema types as text: (field, may be null, an integer id is text)
TEXT_FIELDS = (
    ("conversation_id", False, False),
    ("message_id", False, True),
    ("speaker", False, False),
    ("text", False, False),
    ("session_id", True, True),
)
NUL = "contains a NUL character, which Postgres text cannot hold"
# the row number's column while a file is read: no source's column is called that
ROW = "__slowwave_row"
# blank as Python's str.strip() sees it (Rust's whitespace leaves out U+001C to U+001F)
BLANK = r"^[\s\x1c-\x1f]*$"
# what CSV's lossy decoding puts where the bytes were not UTF-8
REPLACEMENT = "\ufffd"


def parse_mapping(text: str | None) -> dict[str, str]:
    """``text=body,speaker=author`` → {canonical field: source column}."""
    mapping: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        field, sep, column = part.partition("=")
        field, column = field.strip(), column.strip()
        if not sep or not column:
            raise MappingError(f"--map takes FIELD=COLUMN pairs, not {part.strip()!r}")
        if field not in FIELDS:
            raise MappingError(f"--map: unknown field {field!r}; one of {', '.join(FIELDS)}")
        if field in mapping:
            raise MappingError(f"--map names {field!r} twice")
        mapping[field] = column
    return mapping


@dataclass(frozen=True)
class ColumnarSource:
    """One columnar file (a local path or an object-store URL) and how to read it."""

    path: str
    format: ColumnarFormat
    mapping: Mapping[str, str]
    storage_options: Mapping[str, str] | None = None

    def scan(self) -> pl.LazyFrame:
        """A CSV file, scanned lazily with every column as text (Parquet: ``read_columnar``)."""
        import polars as pl

        options = dict(self.storage_options) if self.storage_options else None
        # glob=False: a file's name is its name, brackets and all (sources expands globs)
        frame = pl.scan_csv(
            self.path,
            separator="\t" if self.path.lower().endswith(".tsv") else ",",
            infer_schema=False,  # every column as text: validation says what is wrong
            encoding="utf8-lossy",
            empty_string_is_null=False,
            raise_if_empty=False,
            row_index_name=ROW,
            row_index_offset=1,
            storage_options=options,
            glob=False,
        )
        return self.canonical(frame)

    def canonical(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        """The canonical fields, renamed from the mapping's columns (``role`` stands in for
        ``speaker`` as in JSONL); a missing required column stops the file before a row."""
        import polars as pl

        names = set(frame.collect_schema().names())
        if names <= {ROW}:  # an empty file: no header, no rows
            return pl.LazyFrame(schema={ROW: pl.UInt32, **dict.fromkeys(FIELDS, pl.String)})
        chosen = {field: self.mapping.get(field, field) for field in FIELDS}
        if "speaker" not in self.mapping and "speaker" not in names and "role" in names:
            chosen["speaker"] = "role"
        for field, column in self.mapping.items():
            if column not in names:
                raise MappingError(f"{self.path}: --map {field}={column}: no column {column!r}")
        missing = [f for f in REQUIRED if chosen[f] not in names]
        if missing:
            raise MappingError(
                f"{self.path}: no column for {', '.join(missing)} (columns: "
                f"{', '.join(sorted(names - {ROW}))}); name them with --map FIELD=COLUMN"
            )
        return frame.select(
            pl.col(ROW),
            *(
                pl.col(column).alias(field) if column in names else pl.lit(None).alias(field)
                for field, column in chosen.items()
            ),
        )


def read_columnar(
    source: ColumnarSource, batch_rows: int, max_chars: int, size: int = 0
) -> Iterator[Batch]:
    """The file's batches: valid rows as an Arrow table in staging's order, and rejects.
    Each batch counts its share of the file's ``size`` in bytes as read: a Parquet batch by
    its rows (the footer says how many), a CSV batch by its text."""
    if source.format == "parquet":
        yield from _parquet_batches(source, batch_rows, max_chars, size)
        return
    for batch in source.scan().collect_batches(chunk_size=batch_rows):
        yield validate_frame(batch, source.path, max_chars, textual=True)


def _parquet_batches(
    source: ColumnarSource, batch_rows: int, max_chars: int, size: int
) -> Iterator[Batch]:
    """A Parquet file's record batches as pyarrow's reader hands them out, one at a time, each
    checked with polars. polars' own streaming scan held several row groups at once: its peak
    memory grew 3.3× from a 1M-message file to a 10M one; this reader's stays flat."""
    import polars as pl
    import pyarrow.parquet as pq

    from slowwave.tasks.ingest.sources import remote, remote_input

    opened = remote_input(source.path) if remote(source.path) else source.path
    # no pre-buffering: it read several row groups ahead (156 MB at 10M messages, not 132)
    reader = pq.ParquetFile(opened, pre_buffer=False)
    empty = pl.from_arrow(reader.schema_arrow.empty_table())
    assert isinstance(empty, pl.DataFrame)
    source.canonical(empty.lazy().with_row_index(ROW, offset=1)).collect_schema()  # its names
    rows, first = reader.metadata.num_rows, 1
    for record_batch in reader.iter_batches(batch_size=batch_rows):
        frame = pl.from_arrow(record_batch)
        assert isinstance(frame, pl.DataFrame)
        frame = frame.with_row_index(ROW, offset=first).with_columns(
            pl.col(pl.Categorical).cast(pl.String)  # a dictionary-encoded column: its text
        )
        first += frame.height
        checked = validate_frame(
            source.canonical(frame.lazy()).collect(), source.path, max_chars, textual=False
        )
        checked.bytes_read = size * frame.height // max(rows, 1)
        yield checked


def validate_frame(frame: pl.DataFrame, source: str, max_chars: int, *, textual: bool) -> Batch:
    """One batch's rows checked as whole columns; ``textual``: a CSV's, every column text."""
    import polars as pl

    schema = frame.schema
    checked = frame.with_columns(
        _parsed(schema["timestamp"]).alias("_parsed"),
        _surprise(schema["surprise"], textual).alias("_surprise"),
    ).with_columns(_timestamp().alias("_at"))
    reasons = [
        _text_reason(name, schema[name], nullable, integer_ok, textual)
        for name, nullable, integer_ok in TEXT_FIELDS
    ]
    reasons.insert(2, _timestamp_reason(schema["timestamp"]))
    reasons.append(_surprise_reason(schema["surprise"], textual))
    too_long = pl.col("text").str.len_chars() if schema["text"] == pl.String else pl.lit(0)
    checked = checked.with_columns(
        pl.concat_str(reasons, separator="; ", ignore_nulls=True).alias("_reason")
    ).with_columns(
        pl.when(pl.col("_reason").fill_null("") == "")
        .then(
            pl.when(too_long > max_chars).then(
                pl.format("text: {} characters, more than the limit of {}", too_long, max_chars)
            )
        )
        .otherwise(pl.col("_reason"))
        .alias("_reason")
    )
    bad = checked.filter(pl.col("_reason").is_not_null())
    good = checked.filter(pl.col("_reason").is_null())
    batch = Batch(read=frame.height, bytes_read=int(frame.estimated_size()))
    shown = [_shown(name, schema[name]) for name in FIELDS]
    for record in bad.select(ROW, "_reason", *shown).iter_rows(named=True):
        line, reason = record.pop(ROW), record.pop("_reason")
        batch.rejects.append(Reject(source, int(line), reason, _excerpt(record)))
    session = _as_text("session_id", schema["session_id"])
    if textual:  # an empty CSV field is no session: CSV cannot tell "" from none
        session = session.replace("", None)
    batch.table = good.select(
        pl.col(ROW).cast(pl.Int64).alias("line"),
        *(_as_text(name, schema[name]) for name in ("conversation_id", "message_id")),
        pl.col("_at").alias("at"),
        *(_as_text(name, schema[name]) for name in ("speaker", "text")),
        session,
        pl.col("_surprise").cast(pl.Float32).alias("surprise"),
    ).to_arrow()
    assert tuple(batch.table.column_names) == tuple(name for name, _ in COLUMNS)
    return batch


def staged_table(
    table: Any, window: tuple[datetime | None, datetime | None], tenant: str
) -> tuple[Any, int]:
    """The batch's valid rows inside the event-time ``window``, their conversations keyed to
    ``tenant`` (``models.tenant``), and how many fell outside the window."""
    import pyarrow as pa
    import pyarrow.compute as pc

    since, until = window
    at = table["at"]
    kept = table
    if since is not None or until is not None:
        mask = pa.array([True] * table.num_rows, pa.bool_())
        if since is not None:
            mask = pc.and_(mask, pc.greater_equal(at, pa.scalar(since, at.type)))
        if until is not None:
            mask = pc.and_(mask, pc.less(at, pa.scalar(until, at.type)))
        kept = table.filter(mask)
    if tenant != DEFAULT_TENANT:
        keys = conversation_keys(kept["conversation_id"], tenant)
        kept = kept.set_column(1, "conversation_id", keys)
    return kept, table.num_rows - kept.num_rows


def _shown(name: str, dtype: pl.DataType) -> pl.Expr:
    """A field as a reject's excerpt shows it: as text (a time Python cannot hold included),
    or its type where it has no text form (a list, a struct)."""
    import polars as pl

    if dtype == pl.String or dtype == pl.Null:
        return pl.col(name)
    if dtype.is_numeric() or dtype.is_temporal() or dtype == pl.Boolean:
        return pl.col(name).cast(pl.String)
    return pl.lit(f"({dtype})").alias(name)


def _excerpt(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, default=str)[:200]


def _python_type(dtype: pl.DataType) -> str:
    """The Python type pydantic would name for a value of this column."""
    import polars as pl

    if dtype.is_integer():
        return "int"
    if dtype == pl.String:
        return "str"
    if dtype.is_float():
        return "float"
    if dtype.is_temporal():
        return "datetime"
    return "bool" if str(dtype) == "Boolean" else type(dtype).__name__.lower()


def _as_text(name: str, dtype: pl.DataType) -> pl.Expr:
    """A text field's column as staged: text, or null where its type never validates (its
    rows are all rejects by then)."""
    import polars as pl

    if dtype == pl.String or dtype.is_integer():
        return pl.col(name).cast(pl.String)
    return pl.lit(None, dtype=pl.String).alias(name)


def _text_reason(
    name: str, dtype: pl.DataType, nullable: bool, integer_ok: bool, textual: bool
) -> pl.Expr:
    """Why the column's value is not storable text, or null."""
    import polars as pl

    column = pl.col(name)
    missing = "Input should be a valid string" if integer_ok else "must be a string, not NoneType"
    if dtype == pl.Null:
        return pl.lit(None if nullable else f"{name}: {missing}", dtype=pl.String)
    if not (dtype == pl.String or (integer_ok and dtype.is_integer())):
        wrong = (
            "Input should be a valid string"
            if integer_ok
            else f"must be a string, not {_python_type(dtype)}"
        )
        return (
            pl.when(column.is_null())
            .then(pl.lit(None if nullable else f"{name}: {missing}", dtype=pl.String))
            .otherwise(pl.lit(f"{name}: {wrong}"))
        )
    text = column.cast(pl.String)
    chain: Any = pl.when(column.is_null()).then(
        pl.lit(None if nullable else f"{name}: {missing}", dtype=pl.String)
    )
    chain = chain.when(text.str.contains("\x00", literal=True)).then(pl.lit(f"{name}: {NUL}"))
    if textual:  # only CSV's lossy decoding puts it there
        chain = chain.when(text.str.contains(REPLACEMENT, literal=True)).then(
            pl.lit(f"{name}: is not valid UTF-8")
        )
    if not nullable:
        if name != "text":  # the schema's min_length speaks first, as pydantic checks it first
            chain = chain.when(text == "").then(
                pl.lit(f"{name}: String should have at least 1 character")
            )
        chain = chain.when(text.str.contains(BLANK)).then(pl.lit(f"{name}: is empty"))
    if name == "conversation_id":
        chain = chain.when(text.str.contains(r"[\x00-\x1f\x7f]")).then(
            pl.lit(f"{name}: contains a control character")
        )
    return chain.otherwise(pl.lit(None, dtype=pl.String))


ISO_WITH_ZONE = "%Y-%m-%dT%H:%M:%S%.f%#z"
ISO_WITHOUT_ZONE = "%Y-%m-%dT%H:%M:%S%.f"


def _iso(column: pl.Expr) -> pl.Expr:
    """An ISO 8601 time with either separator between date and time."""
    return column.str.strip_chars().str.replace(r"^(\d{4}-\d{2}-\d{2})[ t]", "${1}T")


def _parsed(dtype: pl.DataType) -> pl.Expr:
    """The column as a UTC timestamp, whatever its year; null where it is none."""
    import polars as pl

    column = pl.col("timestamp")
    utc = pl.Datetime("us", "UTC")
    if isinstance(dtype, pl.Datetime) and dtype.time_zone is not None:
        return column.dt.convert_time_zone("UTC").cast(utc)
    if dtype == pl.String:
        return _iso(column).str.to_datetime(ISO_WITH_ZONE, time_zone="UTC", strict=False).cast(utc)
    return pl.lit(None, dtype=utc)


def _timestamp() -> pl.Expr:
    """The time as staged (from the column ``_parsed``): null outside years 1 to 9999 too
    (what Python and so the JSONL path take; Arrow reaches further than Postgres does)."""
    import polars as pl

    at = pl.col("_parsed")
    return pl.when(at.dt.year().is_between(1, 9999)).then(at)


def _timestamp_reason(dtype: pl.DataType) -> pl.Expr:
    import polars as pl

    column = pl.col("timestamp")
    if isinstance(dtype, pl.Datetime) and dtype.time_zone is None:
        return pl.lit("timestamp: the Parquet column has no time zone")
    zoneless = pl.lit(False)
    if dtype == pl.String:
        zoneless = _iso(column).str.to_datetime(ISO_WITHOUT_ZONE, strict=False).is_not_null()
    return (
        pl.when(pl.col("_at").is_not_null())
        .then(pl.lit(None, dtype=pl.String))
        .when(column.is_null())
        .then(pl.lit("timestamp: Input should be a valid datetime"))
        .when(zoneless)
        .then(pl.lit("timestamp: Input should have timezone info"))
        .when(pl.col("_parsed").is_not_null())
        .then(pl.lit("timestamp: outside the years 1 to 9999"))
        .otherwise(pl.lit("timestamp: Input should be a valid datetime with a time zone"))
    )


def _surprise(dtype: pl.DataType, textual: bool) -> pl.Expr:
    """The surprise as a number: from a number column, or from CSV's text; null otherwise."""
    import polars as pl

    column = pl.col("surprise")
    if textual and dtype == pl.String:
        column = pl.when(column.str.strip_chars() == "").then(None).otherwise(column)
        return column.cast(pl.Float64, strict=False)
    if dtype.is_numeric():
        return column.cast(pl.Float64)
    return pl.lit(None, dtype=pl.Float64)


def _surprise_reason(dtype: pl.DataType, textual: bool) -> pl.Expr:
    import polars as pl

    given = pl.col("surprise").is_not_null()
    if textual and dtype == pl.String:
        given = given & (pl.col("surprise").str.strip_chars() != "")
    value = pl.col("_surprise")
    return (
        pl.when(given & value.is_null())
        .then(pl.lit(f"surprise: must be a number from 0 to 1, not {_python_type(dtype)}"))
        .when(value.is_nan() | value.is_infinite())
        .then(pl.lit("surprise: Input should be a finite number"))
        .when(value > 1)
        .then(pl.lit("surprise: Input should be less than or equal to 1"))
        .when(value < 0)
        .then(pl.lit("surprise: Input should be greater than or equal to 0"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )

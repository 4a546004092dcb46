"""Ingest throughput and peak memory on synthetic transcripts, every path side by side.

The same N messages (``--sizes``, default 1M and 10M, across many conversations) are written
as JSONL and as Parquet, then each is ingested into a fresh embedded database by:

- ``jsonl``: the JSONL path, line by line (``read.read_jsonl``);
- ``parquet_before``: the Parquet path before columnar validation, record batches read with
  pyarrow and validated row by row in Python, and a source's groups of conversations written
  one at a time (kept here, as it was, to measure against);
- ``parquet``: the columnar path (``columnar.read_columnar``): polars scans, whole-column
  validation, Arrow batches to binary COPY, groups written on ``SLOWWAVE_INGEST_CONNECTIONS``
  connections at once;
- ``parquet_pyarrow``: the same checks written with ``pyarrow.compute`` alone, then the same
  staging and segmenting: the columnar engine polars was chosen against;
- ``floor``: the same rows COPYed straight into the staging table, no validation and no
  segmentation: what the database alone costs.

and, without a database, the two engines' reading and checking alone (``read_polars``,
``read_pyarrow``): where the engines differ, undiluted by the database's share.

Each path runs in a process of its own, so its peak RSS is its own: the driver's memory must
stay flat from the smaller size to the larger (streamed reading). Timings on a shared machine
vary from run to run; the ratios, measured in one run, are what to compare.

No path parses the transcripts' words for search: an episode's are parsed when a chunk holding
it is applied (migration 0023), so they cost an ingest nothing.

``--against DIR`` also runs the Parquet file through the ``ingest`` of the checkout in DIR (a
worktree of an older commit: its own reader, statements and schema), in a child process
whose working directory is DIR: the columnar path against the code as it was, not only
against its old reader on today's statements.

    python -m benchmarks.ingest [--sizes 1000000,10000000] [--conversations C]
        [--against DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.report import print_figures
from slowwave.models.processes import unwind_on_sigterm

PATHS = ("jsonl", "parquet_before", "parquet", "parquet_pyarrow", "floor")
# the columnar engines alone on the Parquet file: read and checked, no database
ENGINES = ("read_polars", "read_pyarrow")
# the first size's figures, repeated at the top of the JSON line
FIRST_SIZE_KEYS = (
    "jsonl_messages_per_s",
    "parquet_messages_per_s",
    "parquet_before_messages_per_s",
    "floor_messages_per_s",
    "driver_peak_rss_mb",
)


def write_sources(folder: Path, messages: int, conversations: int) -> tuple[Path, Path]:
    """The same messages as JSONL and as Parquet (a zoned timestamp column), written in slices
    of a million, so that even 10M messages need little memory."""
    import polars as pl
    import pyarrow.parquet as pq

    jsonl, parquet = folder / f"{messages}.jsonl", folder / f"{messages}.parquet"
    per = max(1, messages // conversations)
    index = pl.col("n") % per
    writer = None
    with jsonl.open("wb") as out:
        for start in range(0, messages, SLICE):
            frame = pl.DataFrame(
                {"n": pl.int_range(start, min(start + SLICE, messages), eager=True)}
            ).select(
                conversation_id=pl.format("conv-{}", (pl.col("n") // per).cast(pl.String)),
                message_id=index.cast(pl.String),
                # a new episode every few hours of chat
                timestamp=pl.datetime(2023, 1, 1, time_zone="UTC") + pl.duration(minutes=index * 7),
                speaker=pl.when(index % 2 == 1).then(pl.lit("user")).otherwise(pl.lit("assistant")),
                text=pl.format("Message {} about gardening, travel and work plans.", index),
            )
            table = frame.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(parquet, table.schema)
            writer.write_table(table)
            frame.with_columns(
                pl.col("timestamp").dt.strftime("%Y-%m-%dT%H:%M:%S+00:00")
            ).write_ndjson(out)
    if writer is not None:
        writer.close()
    return jsonl, parquet


SLICE = 1_000_000


def peak_rss_mb() -> int:
    """This process's own peak resident memory since it started: the kernel's high-water mark
    of its address space (``VmHWM``). Not ``getrusage``'s ``ru_maxrss``, which a child keeps
    from the parent it was forked from, across exec: every path then showed the driver's
    memory at the moment it was started, which grows with the sources it wrote."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    raise RuntimeError("no VmHWM in /proc/self/status")


def read_parquet_before(path: Path, batch_rows: int, max_chars: int) -> Iterator[Any]:
    """The Parquet reader as it was: pyarrow record batches, each row validated in Python."""
    import pyarrow.parquet as pq

    from slowwave.tasks.ingest.read import Batch, validate

    source = str(path)
    number = 0
    for record_batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows):
        batch = Batch(bytes_read=record_batch.nbytes)
        for record in record_batch.to_pylist():
            number += 1
            batch.read += 1
            row, reject = validate(record, number, source, max_chars)
            if row is not None:
                batch.rows.append(row)
            elif reject is not None:
                batch.rejects.append(reject)
        yield batch


def read_parquet_pyarrow(path: Path, batch_rows: int, max_chars: int) -> Iterator[Any]:
    """The columnar path's checks written with pyarrow alone (``pyarrow.compute``): the
    engine polars is measured against. It covers what this benchmark's files hold (text
    columns and a zoned time column), with the reasons the shipped path gives."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from slowwave.tasks.ingest.columnar import BLANK, NUL, TEXT_FIELDS
    from slowwave.tasks.ingest.read import Batch
    from slowwave.tasks.ingest.rejects import Reject

    def reason(name: str, nullable: bool, integer_ok: bool, column: Any) -> Any:
        missing = (
            "Input should be a valid string" if integer_ok else "must be a string, not NoneType"
        )
        cases = [(pc.is_null(column), None if nullable else f"{name}: {missing}")]
        cases.append((pc.match_substring(column, "\x00"), f"{name}: {NUL}"))
        if not nullable:
            if name != "text":
                cases.append(
                    (pc.equal(column, ""), f"{name}: String should have at least 1 character")
                )
            cases.append((pc.match_substring_regex(column, BLANK), f"{name}: is empty"))
        if name == "conversation_id":
            cases.append(
                (
                    pc.match_substring_regex(column, "[\\x00-\\x1f\\x7f]"),
                    f"{name}: contains a control character",
                )
            )
        conditions = pc.make_struct(
            *[pc.fill_null(c, False) for c, _ in cases],
            field_names=[str(i) for i in range(len(cases))],
        )
        values = [pa.scalar(v, pa.string()) for _, v in cases]
        return pc.case_when(conditions, *values, pa.scalar(None, pa.string()))

    source, first = str(path), 1
    for record_batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows):
        n = record_batch.num_rows
        line = pa.array(range(first, first + n), pa.int64())
        first += n
        columns = {
            name: record_batch.column(name)
            if name in record_batch.schema.names
            else pa.nulls(n, pa.string())
            for name, _, _ in TEXT_FIELDS
        }
        at = pc.cast(record_batch.column("timestamp"), pa.timestamp("us", "UTC"))
        reasons = [
            reason(name, nullable, integer_ok, columns[name])
            for name, nullable, integer_ok in TEXT_FIELDS
        ]
        reasons.insert(
            2,
            pc.if_else(
                pc.is_null(at),
                pa.scalar("timestamp: Input should be a valid datetime"),
                pa.scalar(None, pa.string()),
            ),
        )
        joined = pa.nulls(n, pa.string())
        for each in reasons:  # "; " between those given (null_handling="skip" drops rows)
            joined = pc.coalesce(pc.binary_join_element_wise(joined, each, "; "), joined, each)
        length = pc.utf8_length(columns["text"])
        too_long = pc.binary_join_element_wise(
            pa.scalar("text: "),
            pc.cast(length, pa.string()),
            pa.scalar(f" characters, more than the limit of {max_chars}"),
            "",
        )
        joined = pc.coalesce(
            joined,
            pc.if_else(pc.greater(length, max_chars), too_long, pa.scalar(None, pa.string())),
        )
        good = pc.is_null(joined)
        batch = Batch(read=n, bytes_read=record_batch.nbytes)
        bad = pc.invert(good)
        for row, why in zip(
            pc.filter(line, bad).to_pylist(), pc.filter(joined, bad).to_pylist(), strict=True
        ):
            batch.rejects.append(Reject(source, row, why))
        batch.table = pa.table(
            {
                "line": pc.filter(line, good),
                "conversation_id": pc.filter(columns["conversation_id"], good),
                "message_id": pc.filter(columns["message_id"], good),
                "at": pc.filter(at, good),
                "speaker": pc.filter(columns["speaker"], good),
                "text": pc.filter(columns["text"], good),
                "session_id": pc.filter(columns["session_id"], good),
                "surprise": pa.nulls(int(pc.sum(good).as_py() or 0), pa.float32()),
            }
        )
        yield batch


def read_only(how: str, source: Path) -> dict[str, Any]:
    """One engine's read and checks of the Parquet file, no database: seconds, rows kept,
    peak RSS."""
    from slowwave.models.settings import Settings
    from slowwave.tasks.ingest.columnar import ColumnarSource, read_columnar

    settings = Settings(_env_file=None)
    rows, start = 0, time.perf_counter()
    if how == "read_polars":
        batches = read_columnar(
            ColumnarSource(str(source), "parquet", {}),
            settings.ingest.batch_rows,
            settings.ingest.max_message_chars,
        )
    else:
        batches = read_parquet_pyarrow(
            source, settings.ingest.batch_rows, settings.ingest.max_message_chars
        )
    for batch in batches:
        rows += batch.table.num_rows if batch.table is not None else 0
    return {
        "seconds": round(time.perf_counter() - start, 2),
        "ingested": rows,
        "peak_rss_mb": peak_rss_mb(),
    }


def measure(how: str, source: Path, home: Path) -> dict[str, Any]:
    """One path over one file in a fresh database (this process's own): seconds, messages
    ingested, and this process's peak RSS."""
    from slowwave import sql
    from slowwave.models.settings import Settings
    from slowwave.sql.copy import copy_arrow
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.ingest.policy import IngestPolicy
    from slowwave.tasks.ingest.read import COLUMNS
    from slowwave.tasks.ingest.rejects import RejectsReport
    from slowwave.tasks.ingest.report import IngestReport
    from slowwave.tasks.ingest.segment import stage_and_segment
    from slowwave.tasks.ingest.transcripts import ingest

    settings = Settings(home=home, _env_file=None)
    policy = IngestPolicy.of(settings)
    with Database(settings) as db:
        migrate(db)
        start = time.perf_counter()
        if how in ("jsonl", "parquet"):
            ingested = ingest(db, source, policy).ingested
        elif how in ("parquet_before", "parquet_pyarrow"):
            report = IngestReport(source=str(source), format="parquet")
            read = read_parquet_before if how == "parquet_before" else read_parquet_pyarrow
            batches = read(source, policy.ingest.batch_rows, policy.ingest.max_message_chars)
            # as it was, a group of conversations at a time; the other engine as the path is
            at_once = db if how == "parquet_pyarrow" else None
            with RejectsReport(None) as rejects, db.connection() as conn:
                stage_and_segment(
                    conn,
                    batches,
                    str(source),
                    policy,
                    report,
                    rejects,
                    None,
                    (None, None),
                    db=at_once,
                )
            ingested = report.ingested
        else:  # floor
            import pyarrow as pa
            import pyarrow.parquet as pq

            ingested = 0
            with db.connection() as conn, conn.transaction():
                conn.execute(sql.statement("ingest_stage"))
                for number, batch in enumerate(
                    pq.ParquetFile(source).iter_batches(batch_size=policy.ingest.batch_rows)
                ):
                    first = number * policy.ingest.batch_rows + 1
                    table = pa.table(
                        {
                            "line": pa.array(range(first, first + batch.num_rows), pa.int64()),
                            "conversation_id": batch["conversation_id"],
                            "message_id": batch["message_id"],
                            "at": batch["timestamp"],
                            "speaker": batch["speaker"],
                            "text": batch["text"],
                            "session_id": pa.nulls(batch.num_rows, pa.string()),
                            "surprise": pa.nulls(batch.num_rows, pa.float32()),
                        }
                    )
                    copy_arrow(conn, "slowwave_ingest", COLUMNS, table)
                    ingested += batch.num_rows
        seconds = time.perf_counter() - start
    return {
        "seconds": round(seconds, 2),
        "ingested": ingested,
        "peak_rss_mb": peak_rss_mb(),
    }


def measured(how: str, source: Path, home: Path) -> dict[str, Any]:
    """``measure`` in a child process: its peak RSS is the path's own."""
    command = [sys.executable, "-m", "benchmarks.ingest", "--measure", how, str(source), str(home)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{how} on {source.name} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ``ingest`` of another checkout (its own reader, statements and schema) over the Parquet file,
# in a fresh database: run with that checkout as the working directory, so that its modules are
# the ones imported, in the layout it has
AGAINST = """
import json, resource, sys, time
from pathlib import Path
if Path("slowwave/tasks/ingest/policy.py").is_file():
    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.ingest.policy import IngestPolicy
    from slowwave.tasks.ingest.transcripts import ingest
elif Path("slowwave/tasks").is_dir():  # before ingest's policy had a module of its own
    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.ingest.transcripts import IngestPolicy, ingest
else:  # before the stages moved under the slowwave package
    from models.settings import Settings
    from sql.db import Database, migrate
    from tasks.ingest.transcripts import IngestPolicy, ingest
source, home = Path(sys.argv[1]), Path(sys.argv[2])
settings = Settings(home=home, _env_file=None)
with Database(settings) as db:
    migrate(db)
    start = time.perf_counter()
    report = ingest(db, source, IngestPolicy.of(settings))
    seconds = time.perf_counter() - start
print(json.dumps({"seconds": round(seconds, 2), "ingested": report.ingested,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "code": sys.modules[ingest.__module__].__file__}))
"""


def measured_against(checkout: Path, source: Path, home: Path) -> dict[str, Any]:
    """The Parquet file through ``checkout``'s own ingest, in a child process."""
    command = [sys.executable, "-c", AGAINST, str(source), str(home)]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}'s ingest of {source.name} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(result["code"]).resolve().is_relative_to(checkout.resolve()):
        raise SystemExit(f"{checkout}'s ingest was not the one imported: {result['code']}")
    return result


def _ratio(rate: dict[str, int], a: str, b: str) -> float | None:
    return round(rate[a] / rate[b], 2) if a in rate and b in rate else None


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="1000000,10000000",
        help="message counts, comma-separated (default: 1M and 10M)",
    )
    parser.add_argument("--conversations", type=int, default=2_000)
    parser.add_argument(
        "--paths",
        default=",".join(PATHS + ENGINES),
        help="which paths to run, comma-separated (default: all; the figures need them all)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="also ingest the Parquet file with another checkout's own code (for example a "
        "worktree of an older commit), side by side: parquet_vs_against",
    )
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    parser.add_argument(
        "--measure", nargs=3, metavar=("PATH", "SOURCE", "HOME"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.measure:
        how, source, home = args.measure
        if how in ENGINES:
            print(json.dumps(read_only(how, Path(source))))
            return
        print(json.dumps(measure(how, Path(source), Path(home))))
        return

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    chosen = set(args.paths.split(","))
    figures: dict[str, Any] = {"sizes": sizes, "by_size": {}}
    with tempfile.TemporaryDirectory(prefix="slowwave-ingest-") as tmp:
        for size in sizes:
            jsonl, parquet = write_sources(Path(tmp), size, args.conversations)
            runs = {
                how: measured(
                    how, jsonl if how == "jsonl" else parquet, Path(tmp) / f"{how}-{size}"
                )
                for how in PATHS + ENGINES
                if how in chosen
            }
            if args.against is not None:
                home = Path(tmp) / f"against-{size}"
                runs["against"] = measured_against(args.against, parquet, home)
            rate = {how: round(r["ingested"] / max(r["seconds"], 0.01)) for how, r in runs.items()}

            figures["by_size"][str(size)] = {
                "messages": size,
                "jsonl_mb": round(jsonl.stat().st_size / 2**20, 1),
                "parquet_mb": round(parquet.stat().st_size / 2**20, 1),
                "jsonl_messages_per_s": rate.get("jsonl"),
                "parquet_before_messages_per_s": rate.get("parquet_before"),
                "parquet_messages_per_s": rate.get("parquet"),
                "floor_messages_per_s": rate.get("floor"),
                "parquet_pyarrow_messages_per_s": rate.get("parquet_pyarrow"),
                "engine_polars_messages_per_s": rate.get("read_polars"),
                "engine_pyarrow_messages_per_s": rate.get("read_pyarrow"),
                "engine_polars_vs_pyarrow": _ratio(rate, "read_polars", "read_pyarrow"),
                "parquet_vs_before": _ratio(rate, "parquet", "parquet_before"),
                "parquet_against_messages_per_s": rate.get("against"),
                "parquet_vs_against": _ratio(rate, "parquet", "against"),
                "floor_vs_parquet": _ratio(rate, "floor", "parquet"),
                "driver_peak_rss_mb": runs.get("parquet", {}).get("peak_rss_mb"),
                "peak_rss_mb_by_path": {how: r["peak_rss_mb"] for how, r in runs.items()},
                "seconds_by_path": {how: r["seconds"] for how, r in runs.items()},
                "ingested_by_path": {how: r["ingested"] for how, r in runs.items()},
            }
            jsonl.unlink()
            parquet.unlink()
    by_size = figures["by_size"]
    first = by_size[str(sizes[0])]
    for key in FIRST_SIZE_KEYS:
        figures[key] = first[key]
    peaks = [s["driver_peak_rss_mb"] for s in by_size.values()]
    if len(sizes) > 1 and peaks[0] and peaks[-1]:
        figures["driver_peak_rss_ratio"] = round(peaks[-1] / peaks[0], 2)
        figures["goal_flat_memory"] = figures["driver_peak_rss_ratio"] <= 1.2
    speedups = [s["parquet_vs_before"] for s in by_size.values()]
    if all(speedups):
        figures["goal_parquet_3x_before"] = all(x >= 3 for x in speedups)
    against = [s["parquet_vs_against"] for s in by_size.values()]
    if args.against is not None and all(against):
        figures["against"] = str(args.against)
        figures["goal_parquet_3x_against"] = all(x >= 3 for x in against)
    floors = [s["floor_vs_parquet"] for s in by_size.values()]
    if all(floors):
        figures["goal_within_2x_of_floor"] = all(x <= 2 for x in floors)
    print_figures(figures, as_json=args.json)


if __name__ == "__main__":
    main()

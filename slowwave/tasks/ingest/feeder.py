"""A source read once and written on several connections at once: its rows split by
conversation, each share fed to a writer of its own as the batches are read."""

from __future__ import annotations

import queue
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from contextlib import ExitStack, suppress

import psycopg

from slowwave.sql.db import Database
from slowwave.tasks.ingest.policy import Progress
from slowwave.tasks.ingest.read import Batch
from slowwave.tasks.ingest.rejects import RejectsReport
from slowwave.tasks.ingest.report import IngestReport

# a writer's share written on its connection: what it ingested, and what it rejected
ShareWriter = Callable[[psycopg.Connection, Iterator[Batch]], tuple[IngestReport, RejectsReport]]

# what a writer is fed after its last share: the source is read, its rows staged
_DONE = Batch()
# a writer told to give its source up (the reader failed or was interrupted): its staging
# transaction rolls back
_ABANDON = Batch()


class _Abandoned(Exception):
    pass


def feed_writers(
    db: Database,
    conn: psycopg.Connection,
    batches: Iterable[Batch],
    at_once: int,
    report: IngestReport,
    rejects: RejectsReport,
    progress: Progress | None,
    write: ShareWriter,
) -> None:
    """The source's conversations split by a hash of their id over ``at_once`` connections
    (``conn`` and more of ``db``'s), each a writer of its own: its share fed to it as the
    batches are read, and written by ``write`` (``tasks.ingest.segment.stage_and_segment``
    stages and segments it). No conversation is ever on two writers: their locks, tails and
    message ids never meet. The reader counts what it read and rejected, each writer what it
    wrote, into ``report`` and ``rejects``. The first failure, or an interrupt, stops every
    writer: what is under way is cancelled and rolled back."""
    feeds: list[queue.Queue[Batch]] = [queue.Queue(maxsize=2) for _ in range(at_once)]
    counting = threading.Lock()
    working: list[psycopg.Connection] = []

    def writer_of(part: int) -> None:
        with ExitStack() as stack:
            own = conn if part == 0 else stack.enter_context(db.connection())
            with counting:
                working.append(own)
            try:
                mine, found = write(own, _fed(feeds[part]))
                with counting:
                    report.add(mine)
                    for reject in found.first:
                        rejects.add(reject)
            finally:
                with counting:  # back to the pool: never cancelled for another's sake
                    working.remove(own)

    with ThreadPoolExecutor(at_once, thread_name_prefix="slowwave-ingest") as pool:
        writers = [pool.submit(writer_of, part) for part in range(at_once)]
        try:
            for batch in batches:
                with counting:
                    report.read += batch.read
                    for reject in batch.rejects:
                        rejects.add(reject)
                for feed, share in zip(feeds, _split(batch, at_once), strict=True):
                    _feed(feed, share, writers)
                if progress is not None:
                    progress(batch.bytes_read)
            for feed in feeds:
                _feed(feed, _DONE, writers)
            for writer in as_completed(writers):
                writer.result()
        except BaseException:
            with counting:
                for own in working:
                    own.cancel_safe()
            for feed in feeds:  # a writer waiting for rows gives its source up
                with suppress(queue.Empty):
                    while True:
                        feed.get_nowait()
                feed.put_nowait(_ABANDON)
            wait(writers)
            raise


def _feed(feed: queue.Queue[Batch], share: Batch, writers: list[Future[None]]) -> None:
    """A writer's next share of rows (or ``_DONE``), waiting while it is busy with earlier
    ones; a writer that failed meanwhile raises its error here."""
    while True:
        try:
            feed.put(share, timeout=0.2)
            return
        except queue.Full:
            for writer in writers:
                if writer.done():
                    writer.result()


def _fed(feed: queue.Queue[Batch]) -> Iterator[Batch]:
    """A writer's shares, as the reader feeds them."""
    while (batch := feed.get()) is not _DONE:
        if batch is _ABANDON:
            raise _Abandoned
        yield batch


def _split(batch: Batch, parts: int) -> list[Batch]:
    """A batch's valid rows, by conversation, into ``parts`` shares (the read count, rejects
    and bytes stay with the reader)."""
    shares = [Batch() for _ in range(parts)]
    for row in batch.rows:
        shares[zlib.crc32(row.conversation_id.encode()) % parts].rows.append(row)
    if batch.table is not None:
        import polars as pl
        import pyarrow.compute as pc

        part = (pl.Series(batch.table["conversation_id"]).hash(seed=0) % parts).to_arrow()
        for index, share in enumerate(shares):
            share.table = batch.table.filter(pc.equal(part, index))
    return shares

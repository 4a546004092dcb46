"""What is written about conversations: messages recorded, transcripts ingested, and runs that
consolidate them (here, in this process: the Prefect flows drive the same run)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from slowwave.models.chat import as_transcript
from slowwave.models.errors import NoFacts, ProfileNotWritten, TooManyMessages
from slowwave.models.ids import new_id
from slowwave.models.keys import Scope
from slowwave.models.llm import load_model
from slowwave.models.llm.base import StructuredModel
from slowwave.models.run import RunRequest, RunSummary
from slowwave.models.settings import Settings
from slowwave.service.answers import Recorded, Rejected, RunStarted
from slowwave.service.caller import Caller
from slowwave.service.core import ServiceCore, run_asked
from slowwave.tasks.claim import close_open
from slowwave.tasks.consolidate import consolidate as consolidate_run
from slowwave.tasks.history import list_facts
from slowwave.tasks.ingest.formats import Format, check_sources
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.record import record
from slowwave.tasks.ingest.report import IngestReport
from slowwave.tasks.ingest.sources import SourceFile
from slowwave.tasks.ingest.summarize import SummaryReport, summarize_missing
from slowwave.tasks.ingest.transcripts import ingest
from slowwave.tasks.profile import Profile, read_profile, refresh_profiles


class Writes(ServiceCore):
    def record(
        self,
        caller: Caller,
        conversation_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        allow_forgotten: bool = False,
    ) -> Recorded:
        """Record messages of a conversation (each with ``message_id``, ``timestamp``,
        ``speaker``, ``text``, optionally ``session_id``) through the path ``slowwave ingest``
        takes: validated, idempotent (a message id recorded before is skipped), segmented into
        episodes in event time, in one transaction; a forgotten conversation is refused unless
        ``allow_forgotten``. Every message refused is in the answer, with its reason.

        Messages may come as chat APIs send them (``{"role", "content"}``), with no id and no
        time: ``models.chat`` fills in what is absent (an id derived from the message and its
        position, so a retry adds nothing; the server's clock)."""
        caller.needs(Scope.write)
        caller.key(conversation_id)  # refused before anything is read
        limit = self.settings.serve.max_messages
        if len(messages) > limit:
            raise TooManyMessages(
                f"{len(messages)} messages in one request: send at most {limit} "
                "(SLOWWAVE_SERVE_MAX_MESSAGES)"
            )
        policy = IngestPolicy.of(
            self.settings, allow_forgotten=allow_forgotten, tenant=caller.tenant
        )
        lines = as_transcript(conversation_id, messages, datetime.now(UTC))
        with self.reaching():
            report = record(self.db, conversation_id, lines, policy)
        return recorded(conversation_id, lines, report)

    @staticmethod
    def check_source(source: str | Path, format: Format | None = None) -> dict[SourceFile, Format]:
        """The files of ``source`` and their formats, each checked (there, and of its format)
        without a database: a surface can refuse a mistaken source before it opens one, and
        give the answer to ``ingest`` (``checked``), which then does not list it again."""
        return check_sources(str(source), format)

    def ingest(
        self,
        caller: Caller,
        source: str | Path,
        *,
        format: Format | None = None,
        mapping: Mapping[str, str] | None = None,
        allow_forgotten: bool = False,
        since: datetime | None = None,
        until: datetime | None = None,
        progress: Callable[[int], None] | None = None,
        checked: Mapping[SourceFile, Format] | None = None,
    ) -> IngestReport:
        """Transcripts into the caller's tenant's episodes: validated, idempotent, in event
        time; every line refused is in the report, with its reason. ``source``: a file (JSONL,
        Parquet, CSV, LoCoMo), a folder, a glob or an ``s3://`` URL; ``mapping``: the source's
        column for a field (``{"text": "body"}``); only the messages from ``since`` to before
        ``until``; ``progress`` is told the bytes read as they are; ``checked``: what
        ``check_source`` answered for it."""
        caller.needs(Scope.admin)
        policy = IngestPolicy.of(
            self.settings, allow_forgotten=allow_forgotten, tenant=caller.tenant
        )
        with self.reaching():
            return ingest(
                self.db,
                str(source),
                policy,
                fmt=format,
                since=since,
                until=until,
                mapping=mapping,
                progress=progress,
                checked=checked,
            )

    def consolidate(
        self,
        caller: Caller,
        *,
        conversations: Sequence[str] | None = None,
        kind: str = "manual",
        model: StructuredModel | None = None,
        summaries: SummaryReport | None = None,
    ) -> RunSummary:
        """A whole run here: everything due (with ``conversations``, ids or references: every
        pending episode of those of the caller's tenant), exactly once, recorded like any run.
        ``model`` defaults to the settings' (loaded, and closed after); ``summaries``: what
        writing the episodes' summaries before it cost, counted in the run's calls and tokens."""
        caller.needs(Scope.admin)
        keys = self.conversation_keys(caller, conversations) if conversations is not None else None
        with self.model(model) as lent:
            return consolidate_run(
                self.db,
                lent,
                self.embedder,
                self.settings,
                kind=kind,
                conversations=keys,
                summaries=summaries,
            )

    @contextmanager
    def model(self, model: StructuredModel | None = None) -> Iterator[StructuredModel]:
        """``model``, or the settings' loaded for the block and closed after it (a lent one is
        the lender's to close)."""
        if model is not None:
            yield model
            return
        loaded = load_model(self.settings)
        try:
            yield loaded
        finally:
            loaded.close()

    def summarize(
        self,
        caller: Caller,
        conversations: Sequence[str] | None = None,
        *,
        model: StructuredModel,
    ) -> SummaryReport:
        """A summary for each pending episode that has none and whose transcript is longer
        than ``SLOWWAVE_SUMMARY_MIN_CHARS`` (of ``conversations``, ids or references, when
        given), in batches: what a backfill writes before it consolidates."""
        caller.needs(Scope.admin)
        keys = self.conversation_keys(caller, conversations) if conversations is not None else None
        with self.connection() as conn:
            return summarize_missing(
                conn, model, conversations=keys, min_chars=self.settings.ingest.summary_min_chars
            )

    def consolidate_now(self, caller: Caller, conversation_id: str) -> RunStarted:
        """Consolidate one conversation's pending episodes now, whatever the triggers say: a
        run the caller's key asked for. Its open episode (its last message younger than the
        segmentation gap) is closed at this moment and consolidated with the rest; a message
        recorded afterwards starts a new episode. In a server it starts at once and the answer
        carries its id (``run_state`` follows it): a flow run of the nightly deployment where a
        Prefect API is configured (the server's ``launcher``), else in the server's own worker,
        one run at a time. In one process it runs before the call returns."""
        caller.needs(Scope.write)
        key = caller.key(conversation_id)
        with self.connection() as conn:
            self.require(conn, key, conversation_id)
            # what was said up to now, the open episode included: a message recorded after this
            # starts the next episode (the run closes again as it starts, for one queued behind)
            close_open(conn, [key], self.settings.ingest.segment_gap_s)
        request = RunRequest(new_id(), caller.tenant)
        if self.background:
            self.queued[request.run_id] = caller.tenant
        if self.launcher is not None:
            flow_run_id = self.launcher(request, key)
            return RunStarted(
                run_id=request.run_id,
                conversation_id=conversation_id,
                started_in="prefect",
                flow_run_id=flow_run_id,
            )
        if self.background:
            self.asked.submit(request, key)
            where: Literal["server", "here"] = "server"
        else:
            run_asked(self.db, self.settings, self.embedder, request, key)
            where = "here"
        return RunStarted(run_id=request.run_id, conversation_id=conversation_id, started_in=where)

    def refresh_profile(
        self, caller: Caller, conversation_id: str, *, model: StructuredModel | None = None
    ) -> Profile:
        """Write the conversation's profile now, from its active facts, with ``model`` (the
        settings' by default: loaded, and closed after), whatever ``SLOWWAVE_PROFILES`` says;
        the profile written. A conversation with no active fact has none to write
        (``Conflict``); an answer that is no profile keeps the old one, marked stale
        (``MalformedAnswer``)."""
        caller.needs(Scope.admin)
        key = caller.key(conversation_id)
        with self.connection() as conn:
            if not list_facts(conn, key):  # active ones
                self.require(conn, key, conversation_id)
                raise NoFacts(
                    f"conversation {conversation_id!r} has no active facts: a profile is "
                    "written from them"
                )
        with self.model(model) as lent, self.connection() as conn:
            report = refresh_profiles(conn, lent, [key], self.settings.consolidation)
            profile = read_profile(conn, key)
        if report.failed or profile is None:
            raise ProfileNotWritten(
                f"the model did not write a profile of {conversation_id!r}: the stored one "
                "(if any) is kept, marked stale"
            )
        return profile.model_copy(update={"conversation_id": conversation_id})

    def backfill(
        self,
        caller: Caller,
        source: str | Path,
        *,
        format: Format | None = None,
        mapping: Mapping[str, str] | None = None,
        conversations: Sequence[str] | None = None,
        allow_forgotten: bool = False,
        since: datetime | None = None,
        until: datetime | None = None,
        model: StructuredModel | None = None,
    ) -> RunSummary:
        """Ingest ``source`` (its messages from ``since`` to before ``until``), write the
        summaries of the episodes that have none (``SLOWWAVE_SUMMARIZE_ON_INGEST``), then
        consolidate every pending episode (of ``conversations``, when given) in a run of kind
        ``backfill``: what the backfill flow does, step for step."""
        self.ingest(
            caller,
            source,
            format=format,
            mapping=mapping,
            allow_forgotten=allow_forgotten,
            since=since,
            until=until,
        )
        with self.model(model) as lent:
            written = (
                self.summarize(caller, conversations, model=lent)
                if summaries_wanted(self.settings)
                else None
            )
            return self.consolidate(
                caller, conversations=conversations, kind="backfill", model=lent, summaries=written
            )


def summaries_wanted(settings: Settings) -> bool:
    """Whether a backfill writes episode summaries before it consolidates: asked for, and a
    model that writes them (the replay model only replays facts)."""
    return settings.ingest.summarize_on_ingest and settings.llm.runtime != "replay"


def recorded(
    conversation_id: str, messages: Sequence[Mapping[str, Any]], report: IngestReport
) -> Recorded:
    rejected = [
        Rejected(
            index=r.line - 1,
            message_id=_message_id(messages[r.line - 1]) if 0 < r.line <= len(messages) else None,
            reason=r.reason,
        )
        for r in report.first_rejects
    ]
    valid = report.read - report.rejected - report.out_of_range
    return Recorded(
        conversation_id=conversation_id,
        received=len(messages),
        recorded=report.ingested,
        already_recorded=max(valid - report.ingested, 0),
        rejected=rejected,
        episodes_new=report.episodes,
        episodes_grown=report.grown,
    )


def _message_id(message: Any) -> str | None:
    if isinstance(message, Mapping):
        value = message.get("message_id")
        return str(value)[:200] if isinstance(value, str | int) else None
    return None


__all__ = ["Writes", "recorded", "summaries_wanted"]

"""What changes history or the server: forget, revert, undelete, runs, quarantine, exports and
keys."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from slowwave.models.errors import (
    ExportError,
    Forbidden,
    InvalidLimit,
    InvalidRequest,
    NoExportTarget,
    ReasonRequired,
    UnknownConversation,
    UnknownId,
)
from slowwave.models.keys import ApiKey, Scope
from slowwave.models.tenant import DEFAULT_TENANT, conversation_of, tenant_of
from slowwave.service.answers import Forgotten, PurgeState, Undeleted
from slowwave.service.caller import Caller
from slowwave.service.core import ServiceCore
from slowwave.tasks.export import ExportReport, drop_target
from slowwave.tasks.export import export as export_to
from slowwave.tasks.forget import (
    ForgetReport,
    conversation_by_ref,
    forget_conversation,
    forget_fact,
)
from slowwave.tasks.history import fact_history, undelete
from slowwave.tasks.keys import create_key, list_keys, revoke_key
from slowwave.tasks.quarantine import QuarantinedEpisode, list_quarantined, release
from slowwave.tasks.revert import RevertReport, RunRow, check_revertable, list_runs, revert_run
from slowwave.tasks.runs import mark_crashed, show_run

MAX_RUNS = 1000


class Admin(ServiceCore):
    def forget(
        self,
        caller: Caller,
        *,
        reason: str,
        conversation_id: str | None = None,
        conversation_ref: str | None = None,
        fact_id: UUID | str | None = None,
        purge: bool = True,
        any_tenant: bool = False,
    ) -> Forgotten:
        """Hard-delete a conversation of the caller's tenant (or one fact: its id, or short
        id) for a privacy request, whatever runs beside it, and leave a tombstone without
        content. ``purge`` (the default everywhere) rewrites the tables and moves the
        write-ahead log on, so no byte of it stays in the database's files: before the answer
        in one process, right after it in a server (``purge: queued``; the conversation's
        status says when). ``any_tenant``: a fact of whichever tenant (the default tenant's
        admins only, as for runs: the forget deployment names a fact by its id alone), or
        the conversation ``conversation_ref`` names (``c:…`` or the SHA-256 of its id, as a
        flow's parameters carry it; of whichever tenant with ``any_tenant``)."""
        caller.needs(Scope.admin)
        one_target(conversation_id or conversation_ref, fact_id)
        if conversation_id is not None and conversation_ref is not None:
            raise InvalidRequest("name a conversation by its id or by its reference, not both")
        if not reason.strip():
            raise ReasonRequired("a forget needs a reason: the tombstone keeps it")
        if any_tenant:
            self._operator(caller)
        inline = purge and self.purger is None
        key = caller.key(conversation_id) if conversation_id is not None else None
        with self.connection() as conn:
            if fact_id is not None:
                fact_id = self.resolve(conn, "fact", fact_id)
            if conversation_ref is not None:
                key = conversation_by_ref(conn, conversation_ref)
                if not any_tenant and tenant_of(key) != caller.tenant:
                    raise UnknownConversation(f"no conversation {conversation_ref!r}")
        with self.reaching():
            if key is not None:
                report = forget_conversation(
                    self.db,
                    key,
                    home=self.settings.home,
                    by=caller.name,
                    reason=reason,
                    purge=inline,
                )
            else:
                assert isinstance(fact_id, UUID)
                report = forget_fact(
                    self.db,
                    fact_id,
                    by=caller.name,
                    reason=reason,
                    purge=inline,
                    tenant=None if any_tenant else caller.tenant,
                )
        state: PurgeState = "skipped"
        if purge and self.purger is not None:
            self.purger.queue()
            state = "queued"
        elif inline:
            state = "done" if report.purged else "incomplete"
        return forgotten(report, state)

    def revert(
        self, caller: Caller, run_id: UUID | str, *, reason: str, cascade: bool = False
    ) -> RevertReport:
        """Undo everything one run (its id, or short id) applied, in one transaction (with
        ``cascade``, the runs built on it first, newest first). A run spans every tenant: the
        operator's, or an admin key of the default tenant."""
        self._operator(caller)
        with self.connection() as conn:
            run = self.resolve(conn, "run", run_id)
            return revert_run(conn, run, by=caller.name, reason=reason, cascade=cascade)

    def revertable(
        self, caller: Caller, run_id: UUID | str, *, reason: str, cascade: bool = False
    ) -> UUID:
        """The run ``run_id`` (an id, or short id) names, if ``revert`` would take it as asked;
        what it refuses is refused here, before a flow is started for it."""
        self._operator(caller)
        if not reason.strip():
            raise ReasonRequired("a revert needs a reason (--reason)")
        with self.connection() as conn, conn.transaction():
            run = self.resolve(conn, "run", run_id)
            check_revertable(conn, run, cascade=cascade)
        return run

    def undelete(self, caller: Caller, fact_id: UUID | str, *, reason: str) -> Undeleted:
        """Make an invalidated fact of the caller's tenant (its id, or short id) hold again;
        a successor that replaced it is ended where it began. Recorded in the decision log
        with who asked and why."""
        caller.needs(Scope.admin)
        with self.connection() as conn:
            fact = self.resolve(conn, "fact", fact_id)
            fact_history(conn, fact, tenant=caller.tenant)  # another tenant's is no fact
            ended = undelete(conn, fact, by=caller.name, reason=reason)
        return Undeleted(fact_id=fact, successors_ended=ended)

    def runs(self, caller: Caller, limit: int = 20) -> list[RunRow]:
        """The latest runs, newest first, with what each committed (a run spans every
        tenant). Runs whose process died are marked crashed first, as the next run would: a
        run killed with SIGKILL is not listed running forever."""
        self._operator(caller)
        if not 1 <= limit <= MAX_RUNS:
            raise InvalidLimit(f"limit must be from 1 to {MAX_RUNS}")
        with self.connection() as conn:
            mark_crashed(conn, self.settings.consolidation.claim_lease_s)
            return list_runs(conn, limit)

    def run(self, caller: Caller, run_id: UUID | str) -> dict[str, Any]:
        """One run (its id, or short id): its status, what it committed and the process that
        ran it; a run whose process died is marked crashed first, as for ``runs``."""
        self._operator(caller)
        with self.connection() as conn:
            mark_crashed(conn, self.settings.consolidation.claim_lease_s)
            run = self.resolve(conn, "run", run_id)
            shown = show_run(conn, run)
        if shown is None:  # a whole id is taken as given; a reverted run's row may be gone
            raise UnknownId(f"no run {run}")
        return shown

    def quarantined(
        self, caller: Caller, conversations: Sequence[str] | None = None
    ) -> list[QuarantinedEpisode]:
        """The tenant's quarantined episodes (of ``conversations``), oldest first, named as
        the tenant knows them."""
        caller.needs(Scope.admin)
        keys = [caller.key(c) for c in conversations] if conversations else None
        with self.connection() as conn:
            for conversation, key in zip(conversations or [], keys or [], strict=True):
                self.require(conn, key, conversation)
            episodes = list_quarantined(conn, conversations=keys, tenant=caller.tenant)
        return [
            e.model_copy(
                update={
                    "conversation_id": conversation_of(e.conversation_id),
                    "external_key": conversation_of(e.external_key),
                }
            )
            for e in episodes
        ]

    def release(
        self,
        caller: Caller,
        *,
        reason: str,
        conversations: Sequence[str] | None = None,
        episodes: Sequence[UUID | str] | None = None,
    ) -> dict[str, int]:
        """Release quarantined episodes of the tenant (of ``conversations``, or the
        ``episodes`` named by id or short id; every one when neither is given) back to
        pending, their attempts reset: how many per conversation."""
        caller.needs(Scope.write)
        if not reason.strip():
            raise ReasonRequired("a release needs a reason (who asked, and why)")
        keys = [caller.key(c) for c in conversations] if conversations else None
        with self.connection() as conn:
            for conversation, key in zip(conversations or [], keys or [], strict=True):
                self.require(conn, key, conversation)
            named = [self.resolve(conn, "episode", e) for e in episodes] if episodes else None
            if keys is None:  # the tenant's: an episode named of another tenant is left alone
                keys = sorted(
                    {e.conversation_id for e in list_quarantined(conn, tenant=caller.tenant)}
                )
                if not keys:
                    return {}
            released = release(conn, reason, conversations=keys, episodes=named)
        return {conversation_of(k): n for k, n in released.items()}

    def export(
        self,
        caller: Caller,
        to: str | Path | None = None,
        *,
        what: str | Sequence[str] | None = None,
        since: date | datetime | str | None = None,
    ) -> ExportReport:
        """Bring the Parquet export at ``to`` (a folder or ``s3://bucket/prefix``; default
        ``SLOWWAVE_EXPORT_TO``) up to date: the partitions (tenant and day) of ``what``
        (facts, versions, decisions, runs; episodes when named; default
        ``SLOWWAVE_EXPORT_WHAT``) whose rows changed since it was last written, from ``since``
        on (a day, a time or a run's id) when given. From then on a forget reaches it."""
        self._operator(caller)
        target = self._export_target(to)
        if isinstance(since, datetime):
            since = since.isoformat()
        with self.reaching():
            return export_to(self.db, target, what=what or self.settings.export.what, since=since)

    def drop_export(self, caller: Caller, to: str | Path | None = None) -> str:
        """Stop reaching the export at ``to`` (default ``SLOWWAVE_EXPORT_TO``): a forget no
        longer rewrites it; its files stay as they are. Where it was (``ExportError`` when
        none is registered there)."""
        self._operator(caller)
        target = self._export_target(to)
        with self.reaching():
            if not drop_target(self.db, target):
                raise ExportError(f"no export registered at {target}")
        return str(target)

    def _export_target(self, to: str | Path | None) -> str | Path:
        target = to or self.settings.export.to
        if not target:
            raise NoExportTarget("name where to export: --to DIR|URL, or set SLOWWAVE_EXPORT_TO")
        return target

    def keys(self, caller: Caller, *, every_tenant: bool = False) -> list[ApiKey]:
        """The tenant's keys (``every_tenant``: every key; the operator's, or an admin key of
        the default tenant), newest first, named by their first characters."""
        caller.needs(Scope.admin)
        if every_tenant:
            self._operator(caller)
        with self.connection() as conn:
            return list_keys(conn, None if every_tenant else caller.tenant)

    def create_key(
        self, caller: Caller, scope: Scope, name: str = "", conversation_id: str | None = None
    ) -> tuple[str, ApiKey]:
        """A new key of the caller's tenant: the key (shown once) and its record;
        ``conversation_id``, the conversation its calls that name none are about."""
        caller.needs(Scope.admin)
        with self.connection() as conn:
            return create_key(
                conn,
                caller.tenant,
                scope,
                by=caller.name,
                name=name,
                conversation_id=conversation_id,
            )

    def revoke_key(self, caller: Caller, name: str, *, any_tenant: bool = False) -> ApiKey:
        """Revoke the tenant's key that ``name`` (its id, or its first characters) names
        (``any_tenant``: a key of whichever tenant, as for ``keys``): every request with it is
        refused from then on."""
        caller.needs(Scope.admin)
        if any_tenant:
            self._operator(caller)
        with self.connection() as conn:
            return revoke_key(conn, name, tenant=None if any_tenant else caller.tenant)

    @staticmethod
    def _operator(caller: Caller) -> None:
        caller.needs(Scope.admin)
        if caller.tenant != DEFAULT_TENANT:
            raise Forbidden("runs span every tenant: use a key of the default tenant")


def one_target(conversation: str | None, fact: UUID | str | None) -> None:
    """A forget names a conversation or a fact, one of them (``InvalidRequest``)."""
    if (conversation is None) == (fact is None):
        raise InvalidRequest("name a conversation or a fact to forget, one of them")


def forgotten(report: ForgetReport, purge: PurgeState) -> Forgotten:
    return Forgotten(
        kind=report.kind,
        target_sha256=report.target_sha256,
        rows=report.rows,
        reject_lines=report.reject_lines,
        purge=purge,
        purge_note=report.purge_note,
        export_files=report.export_files,
        # the operator's export paths and their errors are the server's log's, not a tenant's
        export_notes=len(report.export_notes),
    )


__all__ = ["Admin", "forgotten", "one_target"]

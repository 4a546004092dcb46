"""Flows for the operations that change history: revert a run, forget a conversation or a
fact. They run from the Prefect UI (or ``slowwave runs revert`` / ``slowwave forget``) and show
there like the nightly runs, each with a summary artifact. A forget's run name and artifact
carry the SHA-256 of what was forgotten, never the id itself; the forget deployment is told
which conversation by its reference (``c:`` and a prefix of the id's SHA-256, as slowwave's
artifacts show it), so that Prefect, which keeps every flow run's parameters, never holds the
id (``slowwave forget --conversation ID`` runs outside Prefect)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from uuid import UUID

from prefect import flow
from prefect.artifacts import create_table_artifact
from prefect.runtime import flow_run

from slowwave.service import Caller, Service
from slowwave.tasks.forget import digest


def _table(report: dict[str, Any], key: str, description: str) -> None:
    """The report as a measure/value table; a forget's rows per table flattened in."""
    flat = {k: v for k, v in report.items() if k != "rows"} | (report.get("rows") or {})
    create_table_artifact(
        table=[{"measure": k, "value": str(v)} for k, v in flat.items()],
        key=key,
        description=description,
    )


def revert_run_name() -> str:
    """``revert 0197…``: the run it reverts."""
    return f"revert {str(flow_run.get_parameters().get('run_id', ''))[:13]}"


@flow(name="slowwave-revert", flow_run_name=revert_run_name, log_prints=True)
def revert(run_id: str, reason: str, by: str = "prefect", cascade: bool = False) -> dict[str, Any]:
    """Undo everything one run applied (and, with ``cascade``, the runs built on it)."""
    with Service.open() as service:
        report = service.revert(
            Caller.operator(by=by), UUID(run_id), reason=reason, cascade=cascade
        )
    print(
        f"reverted {len(report.runs)} run(s): {report.facts_removed} facts removed, "
        f"{report.facts_restored} restored, {report.episodes_pending} episodes pending again"
    )
    result = {**asdict(report), "runs": [str(r) for r in report.runs]}
    _table(result, "slowwave-revert", f"revert of run `{run_id}`: {reason}")
    return result


def forget_run_name() -> str:
    """``forget conversation c:3f2a…`` (the reference it was given) or ``forget fact 3f2a…``
    (the SHA-256 of the fact's id)."""
    parameters = flow_run.get_parameters()
    if parameters.get("conversation"):
        return f"forget conversation {str(parameters['conversation'])[:14]}"
    return f"forget fact {digest(str(parameters.get('fact_id') or ''))[:12]}"


@flow(name="slowwave-forget", flow_run_name=forget_run_name, log_prints=True)
def forget(
    reason: str,
    conversation: str | None = None,
    fact_id: str | None = None,
    by: str = "prefect",
    purge: bool = True,
) -> dict[str, Any]:
    """Hard-delete a conversation or a fact for a privacy request; leave a tombstone.
    ``conversation``: its reference (``c:3f2a9b0c1d2e``, as the run artifacts show it) or the
    SHA-256 of its id, never the id."""
    with Service.open() as service:  # a reference names one conversation, of whichever tenant
        report = service.forget(
            Caller.operator(by=by),
            conversation_ref=conversation,
            fact_id=fact_id,
            reason=reason,
            purge=purge,
            any_tenant=True,
        )
    result = report.model_dump(mode="json")
    print(f"{report.kind}: {sum(report.rows.values())} rows removed, purge: {report.purge}")
    _table(result, "slowwave-forget", f"{report.kind} {report.target_sha256[:12]}")
    return result

"""spending: the billed tokens a run may spend, in all (``SLOWWAVE_RUN_TOKEN_BUDGET``) and for
each tenant's conversations (``SLOWWAVE_TENANT_TOKEN_BUDGET``), and the model calls it may make
(``SLOWWAVE_RUN_CALL_BUDGET``, ``SLOWWAVE_TENANT_CALL_BUDGET``): whichever is reached first.

Billed tokens are every prompt and answer token of the run's chunks: their own call, the
second look's, the change check's, the gray zone's, a failed answer's. Before a conversation's
next chunk is opened, the run's recorded chunks are summed (``run_spending``: every shard's,
wherever it runs); once the run, or the conversation's tenant, has spent its budget, the
conversation opens no new chunk. Chunks in flight finish and are applied, so a run spends at
most its budget plus the chunks in flight when it was reached (one per conversation a shard
works on at once). What is left stays pending with the reason (``episodes_over_budget``: "over
the run's token budget") for the next run; one tenant's spending never stops another's
conversations.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from slowwave import sql
from slowwave.models.settings import ConsolidationSettings
from slowwave.models.tenant import split_key
from slowwave.sql.db import Database


def over_budget(
    db: Database, run_id: UUID, budgets: ConsolidationSettings, conversations: Sequence[str]
) -> set[str]:
    """Of ``conversations`` (stored keys), those that may open no new chunk: all of them once
    the run has spent its ``run_token_budget`` or made its ``run_call_budget``, those of a
    tenant that has spent its ``tenant_token_budget`` or made its ``tenant_call_budget``."""
    run_tokens, run_calls = budgets.run_token_budget, budgets.run_call_budget
    tenant_tokens, tenant_calls = budgets.tenant_token_budget, budgets.tenant_call_budget
    unlimited = all(b is None for b in (run_tokens, run_calls, tenant_tokens, tenant_calls))
    if unlimited or not conversations:
        return set()
    with db.connection() as conn:
        rows = conn.execute(sql.statement("run_spending"), {"run": run_id}).fetchall()
    tokens = {tenant: int(t) for tenant, t, _ in rows}
    calls = {tenant: int(c) for tenant, _, c in rows}
    if _reached(sum(tokens.values()), run_tokens) or _reached(sum(calls.values()), run_calls):
        return set(conversations)
    return {
        c
        for c in conversations
        if _reached(tokens.get(split_key(c)[0], 0), tenant_tokens)
        or _reached(calls.get(split_key(c)[0], 0), tenant_calls)
    }


def _reached(spent: int, budget: int | None) -> bool:
    return budget is not None and spent >= budget

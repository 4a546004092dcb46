"""spending: the billed tokens a run may spend, in all (``SLOWWAVE_RUN_TOKEN_BUDGET``) and for
each tenant's conversations (``SLOWWAVE_TENANT_TOKEN_BUDGET``).

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
from dataclasses import dataclass
from uuid import UUID

from slowwave import sql
from slowwave.models.settings import Settings
from slowwave.models.tenant import split_key
from slowwave.sql.db import Database


@dataclass(frozen=True)
class SpendingPolicy:
    """The budgets of a run, billed tokens; None: no budget."""

    run_tokens: int | None = None
    tenant_tokens: int | None = None

    @classmethod
    def of(cls, settings: Settings) -> SpendingPolicy:
        return cls(
            settings.consolidation.run_token_budget, settings.consolidation.tenant_token_budget
        )

    @property
    def limited(self) -> bool:
        return self.run_tokens is not None or self.tenant_tokens is not None


def over_budget(
    db: Database, run_id: UUID, policy: SpendingPolicy, conversations: Sequence[str]
) -> set[str]:
    """Of ``conversations`` (stored keys), those that may open no new chunk: all of them once
    the run has spent ``run_tokens``, those of a tenant that has spent ``tenant_tokens``."""
    if not policy.limited or not conversations:
        return set()
    with db.connection() as conn:
        spent = {
            tenant: int(tokens)
            for tenant, tokens in conn.execute(sql.statement("run_spending"), {"run": run_id})
        }
    if policy.run_tokens is not None and sum(spent.values()) >= policy.run_tokens:
        return set(conversations)
    if policy.tenant_tokens is None:
        return set()
    limit = policy.tenant_tokens
    return {c for c in conversations if spent.get(split_key(c)[0], 0) >= limit}

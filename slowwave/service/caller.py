"""Who asks: a key's tenant and scope, or the operator's (the CLI, the Python API, a flow)."""

from __future__ import annotations

from dataclasses import dataclass

from slowwave.models.errors import Forbidden
from slowwave.models.keys import ApiKey, Scope
from slowwave.models.tenant import DEFAULT_TENANT, check_tenant, conversation_key


@dataclass(frozen=True)
class Caller:
    """A key's tenant and scope (or the operator's, who holds every scope), and how the caller
    is named in what it does: a key by its first characters, never the key."""

    tenant: str
    scope: Scope
    name: str
    conversation_id: str | None = None  # the key's own, for calls that name none

    @classmethod
    def of(cls, key: ApiKey) -> Caller:
        return cls(key.tenant, key.scope, f"key {key.prefix}… ({key.tenant})", key.conversation_id)

    @classmethod
    def operator(cls, tenant: str = DEFAULT_TENANT, by: str | None = None) -> Caller:
        """Whoever runs slowwave on its own database: every scope, in ``tenant``."""
        return cls(check_tenant(tenant), Scope.admin, by or "the operator")

    def needs(self, scope: Scope) -> None:
        if not self.scope.allows(scope):
            raise Forbidden(f"this key's scope is {self.scope.value}: it needs {scope.value}")

    def key(self, conversation_id: str) -> str:
        """The stored key of the caller's conversation (``InvalidConversationId`` if the id
        cannot be stored): another tenant's conversation of the same id is another key."""
        return conversation_key(conversation_id, self.tenant)


__all__ = ["Caller"]

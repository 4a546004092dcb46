"""Tenants: whose conversations these are.

A conversation is identified by (tenant, conversation id). slowwave stores one text key for
it, the *conversation key*, in every table, statement, lock and tombstone that names a
conversation: the id itself in the default tenant (so that data recorded before tenants
existed belongs to the default tenant, unchanged), and ``tenant`` + U+001F + id in any other.
A conversation id holds no control character (``models.transcript``) and a tenant name no
U+001F, so the key is one-to-one: two tenants may both have a conversation "dana", and the
claims, locks, searches, forgets, tombstones and reverts that follow one never reach the other.

In SQL, ``slowwave_tenant(key)`` and ``slowwave_conversation(key)`` split a key (migration
0020).
"""

from __future__ import annotations

import re
from typing import Any

from slowwave.models.errors import InvalidConversationId, InvalidTenant

DEFAULT_TENANT = "default"
SEPARATOR = "\x1f"  # ASCII's unit separator: a field separator no conversation id can hold
_TENANT = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_tenant(name: str) -> str:
    """A tenant's name: 1 to 63 of a-z, 0-9, ``_`` and ``-``, starting with a letter or digit."""
    if not _TENANT.fullmatch(name):
        raise InvalidTenant(
            f"tenant {name[:80]!r}: use 1 to 63 characters of a-z, 0-9, '_' and '-', "
            "starting with a letter or a digit"
        )
    return name


def conversation_problem(conversation_id: str) -> str | None:
    """Why ``conversation_id`` cannot name a conversation (None when it can)."""
    if not conversation_id.strip():
        return "is empty"
    if _CONTROL.search(conversation_id):
        return "contains a control character"
    return None


def conversation_key(conversation_id: str, tenant: str = DEFAULT_TENANT) -> str:
    """The stored key of ``tenant``'s conversation ``conversation_id``."""
    problem = conversation_problem(conversation_id)
    if problem is not None:
        raise InvalidConversationId(f"conversation id {conversation_id[:80]!r} {problem}")
    if tenant == DEFAULT_TENANT:
        return conversation_id
    return check_tenant(tenant) + SEPARATOR + conversation_id


def conversation_keys(ids: Any, tenant: str = DEFAULT_TENANT) -> Any:
    """``conversation_key`` over an Arrow column of ids, already checked (a columnar
    source's, ``tasks.ingest.columnar``)."""
    if tenant == DEFAULT_TENANT:
        return ids
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(check_tenant(tenant), ids, SEPARATOR)


def split_key(key: str) -> tuple[str, str]:
    """(tenant, conversation id) of a stored key."""
    tenant, separator, conversation_id = key.partition(SEPARATOR)
    if not separator:
        return DEFAULT_TENANT, key
    return tenant, conversation_id


def conversation_of(key: str) -> str:
    """The conversation id of a stored key, as its tenant knows it."""
    return split_key(key)[1]


def tenant_of(key: str) -> str:
    return split_key(key)[0]


def shown(key: str) -> str:
    """A key as a person reads it: the id in the default tenant, ``tenant/id`` elsewhere."""
    tenant, conversation_id = split_key(key)
    return conversation_id if tenant == DEFAULT_TENANT else f"{tenant}/{conversation_id}"

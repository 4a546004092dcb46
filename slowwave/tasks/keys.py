"""keys: make, list, revoke and check the API keys of ``slowwave serve`` (``models.keys``)."""

from __future__ import annotations

from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from slowwave import sql
from slowwave.models.errors import UnknownKey
from slowwave.models.ids import new_id
from slowwave.models.keys import SHOWN_CHARS, ApiKey, Scope, key_digest, looks_like_key, new_key
from slowwave.models.tenant import check_tenant, conversation_key


def create_key(
    conn: psycopg.Connection,
    tenant: str,
    scope: Scope,
    *,
    by: str,
    name: str = "",
    conversation_id: str | None = None,
) -> tuple[str, ApiKey]:
    """A new key of ``tenant`` with ``scope``: (the key, shown this once; what is kept).
    ``conversation_id``: the conversation its calls that name none are about."""
    if conversation_id is not None:
        conversation_key(conversation_id, tenant)  # an id that cannot be stored is refused
    key = new_key()
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            sql.statement("keys_create"),
            {
                "id": new_id(),
                "tenant": check_tenant(tenant),
                "scope": Scope(scope).value,
                "prefix": key[:SHOWN_CHARS],
                "digest": key_digest(key),
                "name": name,
                "conversation_id": conversation_id,
                "by": by,
            },
        ).fetchone()
    assert row is not None
    return key, ApiKey.model_validate(row)


def list_keys(conn: psycopg.Connection, tenant: str | None = None) -> list[ApiKey]:
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(sql.statement("keys_list"), {"tenant": tenant}).fetchall()
    return [ApiKey.model_validate(r) for r in rows]


def revoke_key(conn: psycopg.Connection, name: str, *, tenant: str | None = None) -> ApiKey:
    """Revoke the key whose id is ``name``, the key ``name`` is, or the key whose prefix starts
    with ``name`` (7 characters at least); from then on it is refused."""
    name = name.strip()
    try:
        UUID(name)
    except ValueError:
        if len(name) < 7:
            raise UnknownKey(
                f"name the key by its id or at least 7 characters of its prefix, not {name!r}"
            ) from None
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            sql.statement("keys_revoke"),
            {"name": name, "digest": key_digest(name), "tenant": tenant},
        ).fetchall()
        if len(rows) > 1:
            raise UnknownKey(f"{name!r} names {len(rows)} keys: give more of its prefix")
    if not rows:
        raise UnknownKey(f"no key {name!r} (see `slowwave keys list`)")
    return ApiKey.model_validate(rows[0])


def authenticate(conn: psycopg.Connection, key: str) -> ApiKey | None:
    """The live key ``key`` is, or None (unknown, revoked, or not a key at all)."""
    if not looks_like_key(key):
        return None
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(
            sql.statement("keys_authenticate"), {"digest": key_digest(key)}
        ).fetchone()
    return ApiKey.model_validate(row) if row is not None else None

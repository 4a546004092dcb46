"""API keys: what a key may do, and how it is made and checked (only its SHA-256 is kept).

A key is ``sw_`` and 43 characters of URL-safe base64 (32 random bytes). It is shown once, when
it is made; the database keeps its SHA-256 (a key this random needs no slow hash: guessing one
is as hard as guessing the bytes) and its first characters, which name it in listings.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from pydantic import BaseModel, Field

KEY_PREFIX = "sw_"
SHOWN_CHARS = 10  # "sw_" and 7 characters: how a listing names a key


class Scope(StrEnum):
    """What a key may do; each scope includes the ones before it."""

    read = "read"  # search, context, facts, history, profile, status
    write = "write"  # and record messages
    admin = "admin"  # and forget conversations, list runs, quarantine and keys

    def allows(self, needed: Scope) -> bool:
        order = list(Scope)
        return order.index(self) >= order.index(needed)


class ApiKey(BaseModel):
    """A key as slowwave keeps it: never the key itself."""

    id: UUID
    tenant: str
    scope: Scope
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    name: str = ""
    conversation_id: str | None = Field(
        default=None,
        description="The conversation a call with no conversation of its own is about.",
    )
    created_at: datetime
    created_by: str
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def looks_like_key(text: str) -> bool:
    return text.startswith(KEY_PREFIX) and 20 <= len(text) <= 200 and text.isascii()

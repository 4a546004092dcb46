"""Time-ordered ids (UUID v7) for every row slowwave creates: index-friendly, sortable."""

from __future__ import annotations

import uuid

import uuid6


def new_id() -> uuid.UUID:
    return uuid.UUID(int=uuid6.uuid7().int)

"""Ids: time-ordered UUID v7 for every row slowwave creates; chunk ids derived from content."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence

import uuid6

from slowwave.models.tenant import conversation_key


def new_id() -> uuid.UUID:
    return uuid.UUID(int=uuid6.uuid7().int)


_CHUNK_NAMESPACE = uuid.UUID("5e1f0a7e-c0de-4c4b-9a11-5c0a1e5ca1e5")


def chunk_id(run_id: uuid.UUID, parts: Iterable[str]) -> uuid.UUID:
    """The id of a run's chunk, derived from what it holds: a retried chunk keeps the id of
    its first try, so its recorded outcome can be read back instead of guessed."""
    return uuid.uuid5(_CHUNK_NAMESPACE, f"{run_id}|{'|'.join(parts)}")


def digest(value: str) -> str:
    """The SHA-256 of ``value``, hex: a tombstone's target (``slowwave_digest`` in SQL)."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def conversation_ref(conversation_id: str) -> str:
    """How slowwave names a conversation wherever it must not keep the id in clear (Prefect's
    store: artifacts, log lines, run names): ``c:`` and the first 12 hex digits of the id's
    SHA-256. slowwave's own listings (``slowwave quarantine list``) show the id beside it while
    the conversation exists; a forget removes every row it could be mapped back by."""
    return f"c:{digest(conversation_id)[:12]}"


def conversation_refs(conversations: Sequence[str], tenant: str) -> list[str]:
    """The tenant's conversations as a flow's parameters carry them: by reference (``c:…``, as
    given or made from the id), never by id, since Prefect keeps every flow run's parameters
    and a forget cannot reach them there."""
    return [
        c if c.startswith("c:") else conversation_ref(conversation_key(c, tenant))
        for c in conversations
    ]


# A short id is the start of an id's last group (its random part; a UUID v7's first groups are
# its time, shared by every row made in the same minute), at least this long, longer where
# another id of its kind starts the same way (``slowwave.tasks.ids``).
SHORT_MIN = 7
SHORT_MAX = 12
_HEX = frozenset("0123456789abcdef")


def short_key(id_: uuid.UUID) -> str:
    """An id's last group: what short ids are prefixes of."""
    return str(id_)[-SHORT_MAX:]


def parse_id(text: str) -> uuid.UUID | str:
    """A typed id: a whole UUID, or a short id (4 to 12 hex digits, the start of the last
    group), returned lower-cased for ``tasks.ids.resolve``."""
    try:
        return uuid.UUID(text)
    except ValueError:
        pass
    short = text.strip().lower()
    if not 4 <= len(short) <= SHORT_MAX or not set(short) <= _HEX:
        raise ValueError(
            f"{text!r} is not an id: a whole UUID, or the 4 to {SHORT_MAX} first hex digits "
            "of its last group as the tables print it"
        )
    return short

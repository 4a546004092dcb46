"""Short ids, as the tables print them and as commands take them: the shortest start of an
id's last group (at least ``SHORT_MIN`` digits) that no other id of its kind shares."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Literal

import psycopg

from slowwave import sql
from slowwave.models.errors import AmbiguousId, UnknownId
from slowwave.models.ids import SHORT_MAX, SHORT_MIN, parse_id, short_key

IdKind = Literal["run", "fact", "episode"]


def _starting_with(
    conn: psycopg.Connection, kind: IdKind, prefixes: Iterable[str], limit: int
) -> dict[str, list[uuid.UUID]]:
    found: dict[str, list[uuid.UUID]] = defaultdict(list)
    rows = conn.execute(
        sql.statement("short_ids"),
        {"prefixes": sorted(set(prefixes)), "kind": kind, "limit": limit},
    ).fetchall()
    for prefix, id_ in rows:
        found[prefix].append(id_)
    return found


def shorten(
    conn: psycopg.Connection, kind: IdKind, ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, str]:
    """Each id's short form: the shortest start of its last group, ``SHORT_MIN`` digits or
    more, that names it alone among the ids of ``kind`` now in the database."""
    pending = {id_: SHORT_MIN for id_ in set(ids)}
    short: dict[uuid.UUID, str] = {}
    while pending:
        prefixes = {id_: short_key(id_)[:n] for id_, n in pending.items()}
        found = _starting_with(conn, kind, prefixes.values(), limit=2)
        for id_, prefix in prefixes.items():
            n = pending.pop(id_)
            if len(found.get(prefix, [])) <= 1 or n >= SHORT_MAX:
                short[id_] = prefix
            else:
                pending[id_] = n + 1
    return short


def resolve(conn: psycopg.Connection, kind: IdKind, text: str) -> uuid.UUID:
    """The id ``text`` names: a whole UUID as it is, a short id when exactly one id of
    ``kind`` starts with it; refused with the candidates when several do."""
    try:
        parsed = parse_id(text)
    except ValueError as exc:
        raise UnknownId(str(exc)) from None
    if isinstance(parsed, uuid.UUID):
        return parsed
    candidates = _starting_with(conn, kind, [parsed], limit=6).get(parsed, [])
    if not candidates:
        raise UnknownId(f"no {kind} id ends in a group starting with {parsed!r}")
    if len(candidates) > 1:
        shown = ", ".join(str(c) for c in candidates[:5])
        more = " and more" if len(candidates) > 5 else ""
        raise AmbiguousId(
            f"{text!r} names more than one {kind}: {shown}{more}; type more of its digits"
        )
    return candidates[0]

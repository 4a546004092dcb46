"""LoCoMo files → episodes: a session is an episode, its date-time the episode's time; a
LoCoMo document ingested whole (``ingest_locomo``).

LoCoMo times (``1:56 pm on 8 May, 2023``) carry no zone; they are read in the zone given
(UTC by default). The session summary becomes the episode summary; a turn becomes a message
as ``models.locomo`` says.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
from pydantic import ValidationError

from slowwave.models.episode import Episode
from slowwave.models.ids import conversation_ref, new_id
from slowwave.models.locomo import locomo_key, locomo_message
from slowwave.models.tenant import DEFAULT_TENANT
from slowwave.tasks.ingest.load import FORGOTTEN, load_episodes_counted
from slowwave.tasks.ingest.policy import IngestPolicy, Window, within
from slowwave.tasks.ingest.rejects import Reject, RejectsReport
from slowwave.tasks.ingest.report import IngestReport

_SESSION = re.compile(r"^session_(\d+)$")


def parse_locomo_time(value: str, zone: tzinfo) -> datetime:
    """``'1:56 pm on 8 May, 2023'`` → an aware datetime in ``zone``."""
    naive = datetime.strptime(" ".join(value.split()), "%I:%M %p on %d %B, %Y")
    return naive.replace(tzinfo=zone)


def read_locomo(
    path: Path,
    *,
    surprise: float | None = None,
    zone: tzinfo | None = None,
    on_error: Callable[[Reject], None] | None = None,
) -> Iterator[Episode]:
    """Every session of every conversation in ``path``, in file order.

    A malformed conversation or session is passed to ``on_error`` (and skipped) when given,
    raised otherwise.
    """
    zone = zone or ZoneInfo("UTC")
    for index, conversation in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        try:
            sample_id = str(conversation["sample_id"])
            sessions = conversation["conversation"]
            summaries = conversation.get("session_summary", {})
            numbers = sorted(
                int(m.group(1)) for key in sessions if (m := _SESSION.match(key)) is not None
            )
        except (KeyError, TypeError, AttributeError) as exc:
            _fail(on_error, path, f"conversation #{index}: missing or malformed {exc}")
            continue
        for number in numbers:
            try:
                turns = sessions[f"session_{number}"]
                when = parse_locomo_time(sessions[f"session_{number}_date_time"], zone)
                episode = Episode(
                    id=new_id(),
                    conversation_id=sample_id,
                    external_key=locomo_key(sample_id, number),
                    messages=[locomo_message(t) for t in turns],
                    summary=summaries.get(f"session_{number}_summary"),
                    surprise=surprise,
                    start_at=when,
                    end_at=when,
                )
            except (KeyError, TypeError, ValueError) as exc:
                reason = f"{sample_id} session_{number}: {type(exc).__name__}: {exc}"
                _fail(on_error, path, reason)
                continue
            yield episode


def _fail(on_error: Callable[[Reject], None] | None, path: Path, reason: str) -> None:
    if on_error is None:
        raise ValueError(reason)
    on_error(Reject(str(path), 0, reason))


def ingest_locomo(
    conn: psycopg.Connection,
    path: Path,
    policy: IngestPolicy,
    report: IngestReport,
    rejects: RejectsReport,
    window: Window,
) -> None:
    """A LoCoMo document's sessions as episodes of the policy's tenant, those that end within
    ``window``; a file that is no LoCoMo document is one reject."""
    try:
        read = read_locomo(path, on_error=rejects.add)
        episodes = list(read)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        rejects.add(Reject(str(path), 0, f"not a LoCoMo JSON file: {exc}"))
        return
    except ValidationError as exc:  # pragma: no cover - read_locomo reports per session
        rejects.add(Reject(str(path), 0, f"invalid LoCoMo data: {exc}"))
        return
    messages = sum(len(e.messages) for e in episodes)
    kept = [e for e in episodes if within(e.end_at, window)]
    if policy.tenant != DEFAULT_TENANT:
        kept = [e.in_tenant(policy.tenant) for e in kept]
    report.read += messages
    report.out_of_range += messages - sum(len(e.messages) for e in kept)
    made, ingested = load_episodes_counted(
        conn,
        kept,
        allow_forgotten=policy.allow_forgotten,
        on_refused=lambda conversation, messages: rejects.add(
            Reject(
                str(path),
                0,
                f"{messages} message(s) of {conversation_ref(conversation)}: {FORGOTTEN}",
            )
        ),
    )
    report.episodes += made
    report.ingested += ingested

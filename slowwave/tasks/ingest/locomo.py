"""LoCoMo files → episodes: a session is an episode, its date-time the episode's time.

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

from slowwave.models.episode import Episode
from slowwave.models.ids import new_id
from slowwave.models.locomo import locomo_key, locomo_message
from slowwave.tasks.ingest.rejects import Reject

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

"""What ingest takes from the settings (``IngestPolicy``), and the event-time window a source
is read within."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from slowwave.models.settings import IngestSettings, Settings
from slowwave.models.tenant import DEFAULT_TENANT, check_tenant

# messages kept: from the first (``since``) up to, not including, the second (``until``)
Window = tuple[datetime | None, datetime | None]
# bytes of the source read since the last call
Progress = Callable[[int], None]


@dataclass(frozen=True)
class IngestPolicy:
    """One ingest's view of the settings: the ingest group itself (batches, limits,
    segmentation), where reports go, and what this call says of itself."""

    ingest: IngestSettings
    home: Path
    # a forgotten conversation's messages are refused unless the operator says otherwise
    allow_forgotten: bool = False
    # whose conversations the source's are (``models.tenant``)
    tenant: str = DEFAULT_TENANT
    # connections a file's conversations are shared out over (``stage_and_segment``), taken
    # from the pool: at most one fewer than it has, so that one stays for the rest
    connections: int = 1

    @classmethod
    def of(
        cls, settings: Settings, *, allow_forgotten: bool = False, tenant: str = DEFAULT_TENANT
    ) -> IngestPolicy:
        return cls(
            ingest=settings.ingest,
            home=settings.home,
            allow_forgotten=allow_forgotten,
            tenant=check_tenant(tenant),
            connections=max(
                1, min(settings.ingest.connections, settings.database.pool_max_size - 1)
            ),
        )


def within(at: datetime, window: Window) -> bool:
    """Whether a message (or a LoCoMo session) at ``at`` is kept."""
    since, until = window
    return (since is None or at >= since) and (until is None or at < until)

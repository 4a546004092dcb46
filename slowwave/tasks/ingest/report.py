"""What one ingest did: messages read, ingested and rejected, episodes made and grown."""

from __future__ import annotations

from dataclasses import dataclass, field

from slowwave.tasks.ingest.rejects import Reject, RejectsReport


@dataclass
class IngestReport:
    """What one ingest did."""

    source: str
    format: str
    read: int = 0
    ingested: int = 0
    rejected: int = 0
    episodes: int = 0
    # episodes that went on with this source's messages (a conversation's latest, still open)
    grown: int = 0
    out_of_range: int = 0
    rejects_path: str | None = None
    first_rejects: list[Reject] = field(default_factory=list)

    def add(self, other: IngestReport) -> None:
        """What ``other`` wrote, counted here too (its reads and rejects are counted apart)."""
        self.ingested += other.ingested
        self.episodes += other.episodes
        self.grown += other.grown
        self.out_of_range += other.out_of_range

    def count_rejects(self, rejects: RejectsReport) -> None:
        """What the rejects report holds: how many, the first few, and where (when any)."""
        self.rejected = rejects.count
        self.first_rejects = rejects.first
        self.rejects_path = str(rejects.path) if rejects.count else None

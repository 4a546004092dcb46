"""A fact's versions, as ``slowwave facts history`` shows them (seed 002's lineage)."""

from __future__ import annotations

from uuid import UUID

from pydantic import AwareDatetime, Field, computed_field

from slowwave.models.fact import Fact


class FactVersion(Fact):
    """One version of a fact: what it said, when it held (event time), when slowwave learned
    it (system time) and from what."""

    version: int | None = Field(
        default=None, description="1 for the first version, counting forward (in a history)."
    )
    created_at: AwareDatetime = Field(description="System time: when it was written.")
    created_by_run_id: UUID | None = Field(description="The run that wrote it.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def action(self) -> str:
        """`update` when it superseded a version, else `new`."""
        return "update" if self.supersedes_id is not None else "new"

"""The canonical transcript schema: one message per row, from JSONL or Parquet.

| field | type | required | meaning |
|---|---|---|---|
| `conversation_id` | string | yes | the conversation the message belongs to |
| `message_id` | string (or integer) | yes | unique within its conversation |
| `timestamp` | ISO 8601 string with a zone, or a zoned Parquet timestamp | yes | when |
| `speaker` (or `role`) | string | yes | who said it |
| `text` | string, not empty | yes | what was said |
| `session_id` | string (or integer) | no | a session boundary given by the source |
| `surprise` | number, 0 to 1 | no | how unexpected; an episode's is its messages' highest |
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from slowwave.models.tenant import conversation_problem


class TranscriptMessage(BaseModel):
    """One valid message of a transcript."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, strict=False)

    conversation_id: str = Field(min_length=1, description="The conversation it belongs to.")
    message_id: str = Field(min_length=1, description="Unique within the conversation.")
    timestamp: AwareDatetime = Field(description="When it was said; a zone is required.")
    speaker: str = Field(min_length=1, description="Who said it (`role` is read too).")
    text: str = Field(description="What was said; not empty.")
    session_id: str | None = Field(default=None, description="Session given by the source.")
    surprise: float | None = Field(
        default=None,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="How unexpected the message was, 0 to 1; an episode's is its messages' "
        "highest (none given: computed at consolidation).",
    )

    @field_validator("conversation_id", "speaker", "text", mode="before")
    @classmethod
    def _must_be_text(cls, value: object) -> object:
        if not isinstance(value, str):
            raise ValueError(f"must be a string, not {type(value).__name__}")
        return value

    @field_validator("conversation_id", "message_id", "speaker", "text", "session_id")
    @classmethod
    def _storable(cls, value: str | None) -> str | None:
        """Postgres text holds neither NUL characters nor lone UTF-16 surrogates (which JSON
        can escape): such a line is rejected with the reason, not left to abort the batch."""
        if value is None:
            return None
        if "\x00" in value:
            raise ValueError("contains a NUL character, which Postgres text cannot hold")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"is not valid Unicode: a lone surrogate at position {exc.start}"
            ) from None
        return value

    @field_validator("conversation_id", "message_id", "speaker", "text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty")
        return value

    @field_validator("conversation_id")
    @classmethod
    def _conversation(cls, value: str) -> str:
        """A conversation id is part of a stored key (``models.tenant``): no control
        characters."""
        problem = conversation_problem(value)
        if problem is not None and problem != "is empty":
            raise ValueError(problem)
        return value

    @field_validator("message_id", "session_id", mode="before")
    @classmethod
    def _id_text(cls, value: object) -> object:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError(f"must be a string or an integer, not {type(value).__name__}")
        return str(value)

    @field_validator("surprise", mode="before")
    @classmethod
    def _surprise_number(cls, value: object) -> object:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"must be a number from 0 to 1, not {type(value).__name__}")
        return value

    @field_validator("timestamp", mode="before")
    @classmethod
    def _timestamp_text(cls, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise ValueError("must be an ISO 8601 string with a zone, not a number")
        return value

"""What a route depends on: the service, and who calls (from the request's bearer key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from slowwave.server.auth import Authenticator
from slowwave.service import Caller, Service


async def _service(request: Request) -> Service:  # no I/O: no thread for it
    service: Service = request.app.state.service
    return service


def _caller(request: Request) -> Caller:
    auth: Authenticator = request.app.state.auth
    return auth.caller(request.headers.get("authorization"))


ServiceDep = Annotated[Service, Depends(_service)]
Who = Annotated[Caller, Depends(_caller)]

# What a conversation id may be (``models.tenant``): 1 to 500 characters, not only blanks, no
# control character.
CONVERSATION_ID_PATTERN = r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"
ConversationId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=500,
        pattern=CONVERSATION_ID_PATTERN,
        description="The conversation, as your agent names it (no control characters).",
    ),
]

__all__ = ["CONVERSATION_ID_PATTERN", "ConversationId", "ServiceDep", "Who"]

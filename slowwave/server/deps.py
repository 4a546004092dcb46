"""What a route depends on: the service, who calls (from the request's bearer key), and the
rules its path and query strings follow, stated in the OpenAPI document as the server keeps them."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from slowwave.server.auth import Authenticator
from slowwave.service import Caller, Service

# Declares the bearer key in the document (a generated client sends it); the key itself is read
# from the header by ``Authenticator``, whose 401 is the one answer to a missing or bad key.
_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="key",
    description="A key from `slowwave keys create` (or POST /v1/keys), as `Bearer <key>`.",
)


async def _service(request: Request) -> Service:  # no I/O: no thread for it
    service: Service = request.app.state.service
    return service


def _caller(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)]
) -> Caller:
    auth: Authenticator = request.app.state.auth
    return auth.caller(request.headers.get("authorization"))


ServiceDep = Annotated[Service, Depends(_service)]
Who = Annotated[Caller, Depends(_caller)]

# Python's whitespace (``str.isspace``, what ``str.strip`` takes away) that is not a control
# character, spelled out: a pattern's ``\s`` is another set in ECMAScript (JSON Schema's
# dialect, which has U+FEFF and lacks U+0085) than in Python or in pydantic's Rust regex.
_SPACES = r" \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_CONTROLS = r"\x00-\x1f\x7f"

# What a conversation id may be (``models.tenant.conversation_problem``): no control character,
# and not only whitespace (1 to 500 characters, as the path parameter says).
CONVERSATION_ID_PATTERN = rf"^[^{_CONTROLS}]*[^{_CONTROLS}{_SPACES}][^{_CONTROLS}]*$"
# A query or a reason: not only whitespace (the service refuses a blank one), no NUL (the
# guard refuses one in any path or query string, as Postgres text cannot hold it).
TEXT_PATTERN = rf"^[^\x00]*[^\x00\t\n\x0b\x0c\r\x1c-\x1f{_SPACES}][^\x00]*$"
# Any other string of a path or query: no NUL.
NO_NUL_PATTERN = r"^[^\x00]*$"

ConversationId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=500,
        pattern=CONVERSATION_ID_PATTERN,
        description="The conversation, as your agent names it (no control characters, not only "
        "whitespace).",
    ),
]

__all__ = [
    "CONVERSATION_ID_PATTERN",
    "NO_NUL_PATTERN",
    "TEXT_PATTERN",
    "ConversationId",
    "ServiceDep",
    "Who",
]

"""The memory browser: ``/ui``, server-rendered pages over the service, behind the same keys.

A person signs in with a key; the browser then holds a session cookie (a random token, of which
the database keeps only the SHA-256; ``HttpOnly``, ``SameSite=Strict``, ``Secure`` over TLS),
never the key: no key is put in a URL, a page or a log. The key's tenant and scope decide what
is shown and allowed, as on the API; an admin key of the default tenant sees every tenant
(``?tenant=``), any other key naming another tenant sees what a conversation that does not
exist shows. Every form that changes something carries the session's form token, checked
before anything is done. A server without keys (``--no-auth``, loopback only) signs the
operator in on the first visit.

Plain HTML and one stylesheet: no script is needed, every control is a link or a form, so the
pages work with a keyboard and a screen reader and render at once on a slow laptop or a phone.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode
from uuid import UUID

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.staticfiles import StaticFiles

from slowwave.models.category import Category
from slowwave.models.errors import (
    Forbidden,
    NotFound,
    RateLimited,
    SlowwaveError,
    Unauthorized,
)
from slowwave.models.keys import Scope
from slowwave.server.auth import Authenticator
from slowwave.service import Caller, Service
from slowwave.service.admin import one_target
from slowwave.service.reads import moment

HERE = Path(__file__).resolve().parent
COOKIE = "slowwave_session"
SESSION_S = 8 * 3600
PAGE = 50

templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(at: datetime | None, with_time: bool = True) -> str:
    if at is None:
        return "—"
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M") if with_time else at.strftime("%Y-%m-%d")


templates.filters["when"] = _when
templates.filters["day"] = lambda at: _when(at, with_time=False)
templates.filters["q"] = lambda text: quote(str(text), safe="")


class Page:
    """What every page knows: who is signed in, the session's form token, the request."""

    def __init__(self, request: Request, caller: Caller, form_token: str) -> None:
        self.request = request
        self.caller = caller
        self.form_token = form_token

    @property
    def service(self) -> Service:
        service: Service = self.request.app.state.service
        return service

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        body = templates.get_template(template).render(
            caller=self.caller,
            form_token=self.form_token,
            every_tenant=self.service.reads_every_tenant(self.caller),
            url=self.url,
            **values,
        )
        return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS)

    @staticmethod
    def url(path: str, **params: Any) -> str:
        kept = {k: v for k, v in params.items() if v not in (None, "", False)}
        return path + ("?" + urlencode(kept) if kept else "")

    def check_form(self, token: str) -> None:
        if not hmac.compare_digest(token.encode(), self.form_token.encode()):
            raise Forbidden("this form is stale or was not sent by this page: reload and retry")


SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
}


def _safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of the browser's own, never another site."""
    if target and re.fullmatch(r"/ui(/[^\s\\]*)?(\?[^\s\\]*)?", target) and "//" not in target:
        return target
    return "/ui"


def _set_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=SESSION_S,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _auth(request: Request) -> Authenticator:
    auth: Authenticator = request.app.state.auth
    return auth


class Detour(Exception):
    """Where a page sends its reader instead of showing itself (the sign-in form, the same page
    with a new session): raised by ``signed_in``, answered by ``PageRoute``."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.headers.get("location", ""))
        self.response = response


def signed_in(request: Request) -> Page:
    """The page's signed-in caller (a dependency of every page), or a ``Detour``: to the
    sign-in form (no session, an ended one, a revoked key), or the same page with the
    operator's new session on a server without keys."""
    auth = _auth(request)
    service: Service = request.app.state.service
    token = request.cookies.get(COOKIE, "")
    session = service.session(token) if token else None
    if session is not None and (session.caller_key is not None or not auth.enabled):
        if session.caller_key is not None:
            if not auth.enabled:
                raise Detour(_to_sign_in(request))  # a keyed session on an open server
            auth.pace(session.caller_key)
        page = Page(request, session.caller(), session.form_token)
        request.state.page = page  # for the error page of what the handler raises
        return page
    if not auth.enabled:  # loopback without keys: the operator, signed in at once
        token, _ = service.sign_in(None, SESSION_S)
        response = RedirectResponse(str(request.url.path) + _query(request), status_code=303)
        _set_cookie(request, response, token)
        raise Detour(response)
    raise Detour(_to_sign_in(request))


# a page's first parameter: who is signed in (FastAPI's dependency, before the handler runs)
SignedIn = Annotated[Page, Depends(signed_in)]


def _query(request: Request) -> str:
    return "?" + request.url.query if request.url.query else ""


def _to_sign_in(request: Request) -> Response:
    target = str(request.url.path) + _query(request)
    response = RedirectResponse("/ui/login?" + urlencode({"next": target}), status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


class PageRoute(APIRoute):
    """The browser's routes: what a page raises is a page too. A ``Detour`` is its redirect,
    ``RateLimited`` the slow-down page (429), any other slowwave error the error page of its
    status, rendered for whoever is signed in (FastAPI's custom route class, where the API's
    errors are JSON)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def run(request: Request) -> Response:
            try:
                return await handle(request)
            except Detour as detour:
                return detour.response
            except RateLimited as exc:
                return _slow_down(exc)
            except SlowwaveError as exc:
                who: Page | None = getattr(request.state, "page", None)
                if who is None:
                    raise
                return who.render("error.html", status=exc.status, error=exc)

        return run


def _slow_down(exc: RateLimited) -> HTMLResponse:
    return HTMLResponse(
        templates.get_template("slow.html").render(error=exc),
        status_code=429,
        headers={"Retry-After": str(max(1, round(exc.retry_after_s or 1)))},
    )


def not_found_page(who: Page, conversation_id: str) -> HTMLResponse:
    """What a conversation that does not exist shows (also for another tenant's)."""
    return who.render(
        "error.html",
        status=404,
        error=NotFound(f"no conversation {conversation_id!r}: nothing was recorded under that id"),
    )


# the pages, each a handler of its own (FastAPI's module-level router)
ui = APIRouter(prefix="/ui", include_in_schema=False, route_class=PageRoute)


@ui.get("/login")
def login_form(request: Request, next: str | None = None) -> Response:
    if not _auth(request).enabled:
        return RedirectResponse(_safe_next(next), status_code=303)
    body = templates.get_template("login.html").render(next=_safe_next(next), error=None)
    return HTMLResponse(body, headers=SECURITY_HEADERS)


@ui.post("/login")
def login(
    request: Request, key: Annotated[str, Form()], next: Annotated[str, Form()] = "/ui"
) -> Response:
    auth = _auth(request)
    service: Service = request.app.state.service
    if not auth.enabled:
        return RedirectResponse(_safe_next(next), status_code=303)
    try:  # the same check, and the same rate (too fast: PageRoute's 429), as a bearer key's
        found = auth.key(key)
        auth.pace(found)
    except Unauthorized:
        body = templates.get_template("login.html").render(
            next=_safe_next(next), error="This key is not valid (unknown or revoked)."
        )
        return HTMLResponse(body, status_code=401, headers=SECURITY_HEADERS)
    token, _ = service.sign_in(found, SESSION_S)
    response = RedirectResponse(_safe_next(next), status_code=303)
    _set_cookie(request, response, token)
    return response


@ui.post("/logout")
def logout(request: Request, form_token: Annotated[str, Form()]) -> Response:
    token = request.cookies.get(COOKIE, "")
    service: Service = request.app.state.service
    session = service.session(token) if token else None
    if session is not None and hmac.compare_digest(form_token, session.form_token):
        service.sign_out(token)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@ui.get("")
def conversations(
    who: SignedIn,
    q: Annotated[str, Query(max_length=200)] = "",
    after: Annotated[str | None, Query(max_length=600)] = None,
    tenant: Annotated[str | None, Query(max_length=63)] = None,
    all: bool = False,
) -> Response:
    listed = who.service.conversations(
        who.caller,
        prefix=q.strip(),
        after=after,
        limit=PAGE,
        tenant=tenant or None,
        every_tenant=all,
    )
    return who.render(
        "conversations.html", page=listed, q=q, tenant=tenant or "", all=all, after=after
    )


@ui.get("/conversations/{conversation_id}")
def conversation(
    who: SignedIn,
    conversation_id: str,
    tenant: Annotated[str | None, Query(max_length=63)] = None,
    as_of: Annotated[str | None, Query(max_length=40)] = None,
    query: Annotated[str, Query(max_length=2000)] = "",
) -> Response:
    try:
        caller = who.service.as_tenant(who.caller, tenant or None)
    except Forbidden:
        return not_found_page(who, conversation_id)
    at = _as_of(as_of)
    try:
        status = who.service.status(caller, conversation_id)
        facts = who.service.facts(caller, conversation_id, as_of=at, everything=at is None)
        answer = (
            who.service.search(caller, query, conversation_id, 10, memories=5, as_of=at)
            if query.strip()
            else None
        )
    except NotFound:
        return not_found_page(who, conversation_id)
    shown = [f for f in facts if at is not None or f.invalid_at is None]
    ended = [f for f in facts if at is None and f.invalid_at is not None]
    by_category = {c.value: [f for f in shown if f.category == c] for c in Category}
    return who.render(
        "conversation.html",
        conversation_id=conversation_id,
        tenant=caller.tenant if caller.tenant != who.caller.tenant else "",
        glance=status,
        by_category={c: fs for c, fs in by_category.items() if fs},
        ended=ended,
        as_of=as_of or "",
        at=at,
        query=query,
        answer=answer,
        can_forget=caller.scope.allows(Scope.admin),
    )


@ui.get("/facts/{fact_id}")
def fact(
    who: SignedIn, fact_id: str, tenant: Annotated[str | None, Query(max_length=63)] = None
) -> Response:
    try:
        caller = who.service.as_tenant(who.caller, tenant or None)
        story = who.service.fact_story(caller, fact_id)
    except (Forbidden, NotFound):
        return who.render("error.html", status=404, error=NotFound(f"no fact {fact_id}"))
    latest = story.versions[-1]
    words = _words(" ".join(v.fact for v in story.versions))
    return who.render(
        "fact.html",
        story=story,
        latest=latest,
        tenant=caller.tenant if caller.tenant != who.caller.tenant else "",
        highlighted=lambda text: len(_words(text) & words) >= 2,
        can_forget=caller.scope.allows(Scope.admin),
    )


@ui.get("/runs")
def runs(who: SignedIn) -> Response:
    listed = who.service.runs(who.caller, 50)
    return who.render("runs.html", runs=listed, prefect=_prefect_ui())


@ui.get("/runs/{run_id}/revert")
def revert_form(who: SignedIn, run_id: UUID) -> Response:
    return who.render("revert.html", run=who.service.run(who.caller, run_id), done=None)


@ui.post("/runs/{run_id}/revert")
def revert(
    who: SignedIn,
    run_id: UUID,
    form_token: Annotated[str, Form()],
    reason: Annotated[str, Form(min_length=1, max_length=2000)],
) -> Response:
    who.check_form(form_token)
    shown = who.service.run(who.caller, run_id)
    done = who.service.revert(who.caller, run_id, reason=reason)
    return who.render("revert.html", run=shown, done=done)


@ui.get("/quarantine")
def quarantine(
    who: SignedIn, tenant: Annotated[str | None, Query(max_length=63)] = None
) -> Response:
    caller = who.service.as_tenant(who.caller, tenant or None)
    held = who.service.quarantined(caller)
    return who.render(
        "quarantine.html",
        held=held,
        tenant=caller.tenant if caller.tenant != who.caller.tenant else "",
        released=None,
        can_release=caller.scope.allows(Scope.write),
    )


@ui.post("/quarantine/release")
def release(
    who: SignedIn,
    form_token: Annotated[str, Form()],
    episode: Annotated[list[UUID], Form()],
    reason: Annotated[str, Form(min_length=1, max_length=2000)],
    tenant: Annotated[str, Form(max_length=63)] = "",
) -> Response:
    who.check_form(form_token)
    caller = who.service.as_tenant(who.caller, tenant or None)
    released = who.service.release(caller, reason=reason, episodes=episode)
    return who.render(
        "quarantine.html",
        held=who.service.quarantined(caller),
        tenant=tenant,
        released=released,
        can_release=caller.scope.allows(Scope.write),
    )


@ui.get("/forget")
def forget_form(
    who: SignedIn,
    conversation: Annotated[str | None, Query(max_length=500)] = None,
    fact: Annotated[str | None, Query(max_length=64)] = None,
    tenant: Annotated[str | None, Query(max_length=63)] = None,
) -> Response:
    caller = who.service.as_tenant(who.caller, tenant or None)
    caller.needs(Scope.admin)
    what = _forget_target(who, caller, conversation, fact)
    return who.render(
        "forget.html",
        what=what,
        conversation=conversation or "",
        fact=fact or "",
        tenant=tenant or "",
        forgotten=None,
    )


@ui.post("/forget")
def forget(
    who: SignedIn,
    form_token: Annotated[str, Form()],
    reason: Annotated[str, Form(min_length=1, max_length=2000)],
    confirm: Annotated[str, Form(max_length=600)],
    conversation: Annotated[str, Form(max_length=500)] = "",
    fact: Annotated[str, Form(max_length=64)] = "",
    tenant: Annotated[str, Form(max_length=63)] = "",
) -> Response:
    who.check_form(form_token)
    caller = who.service.as_tenant(who.caller, tenant or None)
    caller.needs(Scope.admin)
    what = _forget_target(who, caller, conversation or None, fact or None)
    if confirm.strip() != (conversation or fact):
        return who.render(
            "forget.html",
            status=422,
            what=what,
            conversation=conversation,
            fact=fact,
            tenant=tenant,
            forgotten=None,
            mismatch=True,
        )
    forgotten = who.service.forget(
        caller,
        reason=reason,
        conversation_id=conversation or None,
        fact_id=fact or None,
    )
    return who.render(
        "forget.html",
        what=what,
        conversation=conversation,
        fact=fact,
        tenant=tenant,
        forgotten=forgotten,
    )


def router() -> APIRouter:
    """The browser's pages, for the server to include under ``/ui``."""
    return ui


def _forget_target(
    who: Page, caller: Caller, conversation: str | None, fact: str | None
) -> dict[str, Any]:
    """What a forget would remove, said before it is done."""
    one_target(conversation, fact)
    if conversation is not None:
        status = who.service.status(caller, conversation)
        return {"kind": "conversation", "name": conversation, "status": status}
    assert fact is not None
    story = who.service.fact_story(caller, fact)
    return {"kind": "fact", "name": fact, "versions": story.versions}


def _as_of(text: str | None) -> datetime | None:
    """The as-of control's value, read as every other surface reads an as-of (a bare date is
    its first moment, UTC)."""
    return moment(text) if text else None


_WORD = re.compile(r"[a-z0-9]{4,}")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _prefect_ui() -> str | None:
    """The Prefect UI's address, where a Prefect API is configured (its flow runs are there)."""
    import os

    api = os.environ.get("PREFECT_API_URL", "").rstrip("/")
    return api.removesuffix("/api") if api else None


def static_files() -> StaticFiles:
    return StaticFiles(directory=HERE / "static")


__all__ = ["COOKIE", "router", "static_files"]

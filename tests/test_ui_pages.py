"""The memory browser's pages over the wire, in process (no browser): who is signed in is a
dependency of every page, and what a page raises is a page too (a redirect, an error page of
its status). ``tests/test_ui.py`` drives the same pages in Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from uuid import uuid4

import psycopg
import pytest
from fastapi.testclient import TestClient

from slowwave.models.embedding.base import Embedder
from slowwave.models.keys import Scope
from slowwave.models.settings import Settings
from slowwave.server.app import create_app
from slowwave.server.ui import COOKIE
from slowwave.sql.db import Database
from slowwave.tasks.keys import create_key

pytestmark = pytest.mark.slow  # a server's lifespan each: its service, its embedder warmed


@contextmanager
def browser(settings: Settings, embedder: Embedder, *, auth: bool) -> Iterator[TestClient]:
    app = create_app(settings, auth=auth, embedder=embedder, mcp=False)
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        yield client


def test_on_a_server_without_keys_the_operator_is_signed_in_at_the_first_page(
    db: Database, settings: Settings, embedder: Embedder
) -> None:
    with browser(settings, embedder, auth=False) as client:
        first = client.get("/ui/runs?x=1")
        assert first.status_code == 303 and first.headers["location"] == "/ui/runs?x=1"
        assert COOKIE in first.cookies  # the session: the client sends it from now on
        shown = client.get("/ui/runs")
        assert shown.status_code == 200 and "<h1" in shown.text
        assert shown.headers["X-Frame-Options"] == "DENY"


def test_a_page_with_no_session_sends_its_reader_to_sign_in_and_back(
    db: Database, settings: Settings, embedder: Embedder
) -> None:
    with browser(settings, embedder, auth=True) as client:
        sent = client.get("/ui/runs")
        assert sent.status_code == 303
        assert sent.headers["location"] == "/ui/login?next=%2Fui%2Fruns"
        assert client.get("/ui/login").status_code == 200


def test_an_error_a_page_raises_is_a_page_of_its_status(
    db: Database, settings: Settings, embedder: Embedder
) -> None:
    with browser(settings, embedder, auth=False) as client:
        client.get("/ui")  # signed in
        missing = client.get(f"/ui/runs/{uuid4()}/revert")
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("text/html")
        assert "<title>not_found · slowwave</title>" in missing.text  # the page, not JSON
        stale = client.post(f"/ui/runs/{uuid4()}/revert", data={"form_token": "x", "reason": "r"})
        assert stale.status_code == 403 and "this form is stale" in stale.text


def test_signing_in_faster_than_the_keys_rate_shows_the_slow_down_page(
    db: Database, conn: psycopg.Connection, settings: Settings, embedder: Embedder
) -> None:
    key, _ = create_key(conn, "acme", Scope.read, by="test")
    paced = settings.evolve(
        serve_rate_per_s=0.01, serve_rate_burst=1
    )  # one at once, then one a 100 s
    with browser(paced, embedder, auth=True) as client:
        first = client.post("/ui/login", data={"key": key, "next": "/ui/runs"})
        assert first.status_code == 303 and first.headers["location"] == "/ui/runs"
        again = client.post("/ui/login", data={"key": key, "next": "/ui/runs"})
        assert again.status_code == 429  # the bearer key's rate, read by the page route
        assert again.headers["content-type"].startswith("text/html")
        assert 1 <= int(again.headers["Retry-After"]) <= 100
        assert "slow down" in again.text and COOKIE not in again.cookies

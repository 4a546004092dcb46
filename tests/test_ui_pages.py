"""The memory browser's pages over the wire, in process (no browser): who is signed in is a
dependency of every page, and what a page raises is a page too (a redirect, an error page of
its status). ``tests/test_ui.py`` drives the same pages in Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from slowwave.models.embedding.base import Embedder
from slowwave.models.settings import Settings
from slowwave.server.app import create_app
from slowwave.server.ui import COOKIE
from slowwave.sql.db import Database

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
